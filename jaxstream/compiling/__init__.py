"""`js.compile`: a whole define-by-run step (forward, backward, update) as one XLA program.

One idea per module:

- `discovery`: what a function reads (tensors, arrays, Python structure) and the cache key;
- `traced_entries`: dicts whose named numbers are inputs, not keys (parameter groups);
- `values`: values crossing the program's boundary, as static plans and returned arrays;
- `effects`: what a trace leaves on outside tensors and objects, applied after each call;
- `compiled`: `compile` and `Compiled`, one jitted program per key.
"""

from .compiled import Compiled, compile  # noqa: A004

__all__ = ["Compiled", "compile"]
