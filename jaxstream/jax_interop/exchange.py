"""Tensors' arrays as JAX arrays and back, zero-copy where the memory allows."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..backends import Backend, get_backend
from ..devices import Device
from ..devices.xla import host_device
from ..tensor import Tensor, tensor

# XLA's CPU client adopts a host buffer without copying only at this alignment.
_XLA_CPU_ALIGNMENT = 64

HOST_CONSTANTS = bool | int | float | complex | np.ndarray | np.generic
"""Python numbers and NumPy values: constants JAX converts itself, accepted in both directions."""


def is_tensor(value: Any) -> bool:
    """The pytree leaf test of every flattening here, so that a Tensor stays one leaf."""
    return isinstance(value, Tensor)


class _HostViews:
    """Remembers which JAX array a read-only NumPy output views, to pass it back copy-free.

    NumPy cannot export a read-only array over the DLPack version JAX reads, so
    without this an output fed into the next `jax_function` would be copied.
    """

    def __init__(self) -> None:
        self._sources: dict[int, tuple[weakref.ref, jax.Array]] = {}
        self._lock = threading.Lock()

    def remember(self, view: np.ndarray, source: jax.Array) -> None:
        """Note that `view` views `source`, until `view` is collected."""
        key = id(view)
        with self._lock:
            self._sources[key] = (weakref.ref(view, lambda _: self._forget(key)), source)

    def _forget(self, key: int) -> None:
        with self._lock:
            self._sources.pop(key, None)

    def lookup(self, view: np.ndarray) -> jax.Array | None:
        """The JAX array `view` was made from, if it is still the remembered one."""
        entry = self._sources.get(id(view))
        if entry is None or entry[0]() is not view:
            return None
        return entry[1]


_host_views = _HostViews()


def as_jax_array(value: Any) -> Any:
    """A JAX array for a tensor's array or a constant, zero-copy where the memory allows.

    Every value entering a JAX program goes through here, so that one place decides
    when a copy is made. NumPy arrays are adopted through DLPack when C-contiguous,
    writeable and aligned for XLA; others (strided views, unaligned or read-only
    buffers) are copied into a contiguous JAX array first. Python scalars stay
    scalars (JAX types them weakly).
    """
    if isinstance(value, jax.Array | bool | int | float | complex):
        return value
    if isinstance(value, np.ndarray | np.generic):
        return _numpy_to_jax(np.asarray(value))
    if hasattr(value, "__dlpack__"):
        if not getattr(getattr(value, "flags", None), "c_contiguous", True):
            value = value.copy()
        return jax.dlpack.from_dlpack(value)
    return jnp.asarray(value)


# Below this size a jitted call copies a NumPy argument faster than DLPack adopts it
# (adoption costs tens of microseconds whatever the size; the copy, a few for small arrays).
_ADOPT_FROM_BYTES = 1 << 20


def jit_argument(value: Any) -> Any:
    """A tensor's array as an argument of a jitted call: a small NumPy array as it is (the
    call copies it), anything else through `as_jax_array` (zero-copy where it can)."""
    if type(value) is np.ndarray and value.nbytes < _ADOPT_FROM_BYTES:
        return value
    return as_jax_array(value)


def _numpy_to_jax(array: np.ndarray) -> jax.Array:
    source = _host_views.lookup(array)
    if source is not None:
        return source
    adoptable = (
        array.flags.c_contiguous
        and array.flags.writeable
        and array.ctypes.data % _XLA_CPU_ALIGNMENT == 0
        and jax.dlpack.is_supported_dtype(array.dtype)
    )
    if adoptable:
        return jax.dlpack.from_dlpack(array)
    # Committed to the CPU like an adopted buffer, so that both kinds of input hit
    # the same compiled program (JAX keys its caches on committedness).
    return jax.device_put(array, host_device())


def _numpy_view(array: jax.Array) -> np.ndarray:
    """A read-only NumPy view of `array`, remembered so that it re-enters JAX copy-free.

    `np.asarray` shares a CPU array's buffer as DLPack does, at a third of the cost.
    """
    view = np.asarray(array)
    _host_views.remember(view, array)
    return view


# The backends that take a JAX array other than by their own `from_dlpack`: JAX
# keeps it as it is, NumPy's view is remembered (see `_HostViews`).
_FROM_JAX: dict[Backend, Callable[[jax.Array], Any]] = {
    get_backend("jax"): lambda array: array,
    get_backend("numpy"): _numpy_view,
}


def tensor_from_jax(array: jax.Array, backend: Backend, device: Device | None = None) -> Tensor:
    """A JAX result as a tensor of the caller's `backend`, sharing its memory.

    Results go back to the backend their inputs came from (read-only for NumPy),
    and to `device`, their inputs' device: a sim device's memory is the host's,
    which JAX computed in, so the result is only tagged with it.
    """
    return tensor(array_from_jax(array, backend), device=device)


def array_from_jax(array: jax.Array, backend: Backend) -> Any:
    """A JAX result as an array of `backend`, sharing its memory (read-only for NumPy)."""
    return _FROM_JAX.get(backend, backend.from_dlpack)(array)
