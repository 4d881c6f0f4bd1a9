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
* `compile_key` is the one rule for what is not compiled: an op with no kernel
  of its own (a move, `to`, whose backward moves its gradient to another
  device and backend, which one program on one device cannot), a kernel that takes
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
* Numbers reach a compiled call as cached arrays (Note [Numbers as cached
  arrays]).

jax.jit's own cache then holds one executable per input signature (shapes,
dtypes, weak types), as `jnp`'s internally jitted functions do.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from functools import partial
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
from jax.sharding import SingleDeviceSharding

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
    if op.kernel is None or op.backend_kernel or op.per_call_params:
        return None
    if not params:
        return op
    key = (op, *[(name, type(value), value) for name, value in params.items()])
    try:
        hash(key)
    except TypeError:
        return None
    return key


def run(op: OpDef, backend: Any, arrays: list, params: dict, numbers: bool) -> Any:
    """`op`'s kernel on `arrays` (JAX arrays, tracers or Python scalars), compiled where
    it can be (Note [Compiled kernels on JAX]); `numbers` says whether `arrays` may hold
    Python numbers."""
    key = compile_key(op, params)
    if key is None:
        return _eager(op, backend, arrays, params)
    kernel = _kernels.get(key)
    if kernel is None:
        kernel = _compile(key, op, params)
    if kernel is _EAGER:
        return _eager(op, backend, arrays, params)
    try:
        return kernel(*(as_arrays(arrays) if numbers else arrays))
    except Exception:
        out = _eager(op, backend, arrays, params)  # raises the eager path's own error
        _kernels[key] = _EAGER
        return out


def _compile(key: Hashable, op: OpDef, params: dict) -> Callable:
    """The jitted kernel of `key`, cached (the oldest key dropped past `CACHE_LIMIT`)."""
    if len(_kernels) >= CACHE_LIMIT:
        del _kernels[next(iter(_kernels))]
    # keep_unused: an array read for its shape alone (fill_'s) still places the result.
    kernel = _kernels[key] = jax.jit(partial(op.kernel, jnp, **params), keep_unused=True)
    return kernel


def _eager(op: OpDef, backend: Any, arrays: list, params: dict) -> Any:
    return (op.bound.get(backend) or op.bind(backend))(*arrays, **params)


# Note [Numbers as cached arrays]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A jitted call given a Python number converts it to a weakly typed 0-d array on every call,
# in JAX's dispatch: on the cpu, `y * 1.0001` on a (4,) float32 array took 6.2 us a call
# given the number and 4.5 us given a 0-d array made once. So a compiled call, forward or
# backward, gets the array JAX would make of each number, made once and kept in `_numbers`
# (at most `CACHE_LIMIT`: a full table starts over). It is placed as the call's first array is:
# on its device, committed to it or not as that array is, so that the result is placed as it
# was with the number; and it is made in the 64-bit mode of the call, which decides its
# dtype. The kernel sees the same weakly typed value either way, so its result and
# promotion are the same bits. Kept as they are: 0.0 and -0.0 (equal as keys, not as
# values), NaN (never equal to a key), an int the default integer cannot hold (the call
# raises its own error), bools, the numbers of a call whose first array spans several
# devices (sharded, or of several processes), and those of a call under a JAX trace, where
# a number is a literal of the program being built.


def as_arrays(arrays: list) -> list:
    """`arrays` with each Python float and int a cached array placed as the first array is
    (Note [Numbers as cached arrays]), or `arrays` itself where no number can be."""
    device = committed = None
    for a in arrays:
        if a is None or type(a) in _NUMBER_TYPES:
            continue
        if isinstance(a, jax.core.Tracer):
            return arrays
        if device is None:
            sharding = getattr(a, "sharding", None)
            if type(sharding) is not SingleDeviceSharding:
                return arrays
            device, committed = sharding._device, a.committed  # a device hashes in C++
    if device is None:
        return arrays
    wide = jax.config.jax_enable_x64
    out = []
    for a in arrays:  # one loop, no call per number: this runs for every op on a number
        kind = type(a)
        if (kind is float or kind is int) and a and a == a:  # not ±0.0 or NaN: see the Note
            key = (kind, a, wide, device, committed)
            array = _numbers.get(key)
            out.append(_new_number(key) if array is None else array)
        else:
            out.append(a)
    return out


def _new_number(key: tuple) -> Any:
    """The array of a number not cached yet, or the number itself where JAX refuses it."""
    _, value, _, device, committed = key
    try:
        if committed:
            array = jax.device_put(value, device)
        else:
            with jax.default_device(device):
                array = jax.device_put(value)
    except OverflowError:
        return value
    if len(_numbers) >= CACHE_LIMIT:
        _numbers.clear()  # one call, safe against a backward on another thread
    _numbers[key] = array
    return array


_NUMBER_TYPES = (float, int, bool, complex)
_numbers: dict[tuple, Any] = {}
"""(type, value, 64-bit mode, device, committed) -> the array a compiled call gets for that
number."""


def cache_size() -> int:
    """How many op/param keys the table holds (compiled or eager)."""
    return len(_kernels)


def clear_cache() -> None:
    """Forget every compiled kernel (their executables are freed with them) and number."""
    _kernels.clear()
    _numbers.clear()
