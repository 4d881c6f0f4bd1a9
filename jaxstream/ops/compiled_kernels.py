"""The JAX backend's kernels, each called as a cached `jax.jit` (Note [Compiled kernels on JAX]).

Note [Compiled kernels on JAX]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
On the JAX backend `dispatch.apply` runs an op's kernel through `run`, which
calls a `jax.jit` of `kernel(jnp, ..., **params)` instead of the kernel itself.
A jitted function's call takes JAX's C++ fast path (the signature is looked up
and the executable run without Python), where `jnp`'s functions go through
their Python wrappers, type promotion and `lax` binding on every call: on tiny
arrays that wrapper work is most of an op's cost.

* The cache key is the op and its params: `(op, (name, type, value), ...)`,
  or the op itself when it has none.
  The params become statics of the jitted function (they are axes, shapes,
  dtypes, flags and strings, which the kernels read in Python); the type is in
  the key so that `1`, `1.0` and `True` never share an executable.
* The positional arguments (arrays, and the Python scalars standing for
  tensors) are the jitted function's arguments, never statics: JAX gives a
  Python scalar argument a weak type, so `float32 * 2.0` stays float32 and
  `int32 * 2.5` becomes the default float, exactly as eager `jnp` promotes,
  and a new scalar value reuses the executable.
* `compile_key` is the one rule for what is not compiled: a kernel that takes
  the backend object (`backend_kernel`), an op whose params are per-call data
  (`per_call_params`: an index or a region, where one executable per value
  would be compiled for each new slice of a loop and never reused), and params
  that are not hashable, which cannot be statics.
* A key is compiled the first time it is seen, so that one call gives the same
  bits every time (XLA may round a compiled kernel differently from the eager
  ops by an ulp). The table keeps at most `CACHE_LIMIT` keys, dropping the
  oldest, so that it stays bounded whatever the params.
* A kernel that cannot be traced for its key (it reads values on the host)
  runs eagerly, and its key is marked eager for good. An error of the
  compiled call is never shown: the eager call runs again and raises its own
  error, so that messages are the same on both paths.
* Under a JAX trace (`to_jax`, tracers as the arrays) a jitted kernel is a
  nested `jit`, which JAX inlines into the outer program.
* A node's backward is one compiled call as well, keyed on the same rule
  (Note [Compiled backward on JAX] in compiled_backward.py).

jax.jit's own cache then holds one executable per input signature (shapes,
dtypes, weak types), as `jnp`'s internally jitted functions do.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from functools import partial
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp

if TYPE_CHECKING:
    from .opdef import OpDef

CACHE_LIMIT = 4096
"""The most keys `_kernels` holds; past it the oldest is dropped."""

_EAGER = "eager"
_kernels: dict[Hashable, Callable | str] = {}
"""Key -> the jitted kernel, or `_EAGER` for a key whose kernel cannot be traced."""


def compile_key(op: OpDef, params: dict) -> Hashable | None:
    """The cache key of `op` with `params`, or None where the kernel must run eagerly:
    the one rule for what is not compiled."""
    if op.backend_kernel or op.per_call_params:
        return None
    if not params:
        return op
    key = (op, *[(name, type(value), value) for name, value in params.items()])
    try:
        hash(key)
    except TypeError:
        return None
    return key


def run(op: OpDef, backend: Any, arrays: list, params: dict) -> Any:
    """`op`'s kernel on `arrays` (JAX arrays, tracers or Python scalars), compiled where
    it can be (Note [Compiled kernels on JAX])."""
    key = compile_key(op, params)
    if key is None:
        return _eager(op, backend, arrays, params)
    kernel = _kernels.get(key)
    if kernel is None:
        kernel = _compile(key, op, params)
    if kernel is _EAGER:
        return _eager(op, backend, arrays, params)
    try:
        return kernel(*arrays)
    except Exception:
        out = _eager(op, backend, arrays, params)  # raises the eager path's own error
        _kernels[key] = _EAGER
        return out


def _compile(key: Hashable, op: OpDef, params: dict) -> Callable:
    """The jitted kernel of `key`, cached (the oldest key dropped past `CACHE_LIMIT`)."""
    if len(_kernels) >= CACHE_LIMIT:
        del _kernels[next(iter(_kernels))]
    kernel = _kernels[key] = jax.jit(partial(op.kernel, jnp, **params))
    return kernel


def _eager(op: OpDef, backend: Any, arrays: list, params: dict) -> Any:
    return (op.bound.get(backend) or op.bind(backend))(*arrays, **params)


def cache_size() -> int:
    """How many op/param keys the table holds (compiled or eager)."""
    return len(_kernels)


def clear_cache() -> None:
    """Forget every compiled kernel (their executables are freed with them)."""
    _kernels.clear()
