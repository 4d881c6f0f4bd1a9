"""JAX functions as jaxstream ops (`jax_function`), jaxstream code as JAX functions (`to_jax`).

One idea per module:

- `exchange`: tensors' arrays as JAX arrays and back, zero-copy where the memory allows;
- `arguments`: a Tensor handed to JAX itself, refused with the conversion to use;
- `tracing`: whether jaxstream runs inside a JAX trace, where tensors hold tracers;
- `autocast`: the jaxpr interpreter that casts the operands of matmuls and convolutions;
- `statics`: static arguments, hashed into the compilation caches;
- `signature`: the static description of a `jax_function` call and of its outputs;
- `checks`: what a `jax_function` call accepts and returns, with errors that say what to do;
- `backward`: the backward program of a node, gradients kept on their input's sharding;
- `node`: one `jax_function` call as an autograd node, and `backward_trace`;
- `function`: `jax_function`, its programs compiled and cached per signature;
- `native`: what `to_jax`'s native mode refuses, backwards JAX's own AD would skip;
- `bridge`: `to_jax`, the bridge the other way, differentiated by the engine or by JAX.
"""

from . import arguments  # noqa: F401  (registers Tensor's refusal with JAX)
from .autocast import autocast_function
from .bridge import to_jax
from .function import JaxFunction, jax_function
from .node import backward_trace

__all__ = ["JaxFunction", "autocast_function", "backward_trace", "jax_function", "to_jax"]
