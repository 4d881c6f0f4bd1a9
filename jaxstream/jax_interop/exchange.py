"""Tensors' arrays as JAX arrays and back, zero-copy where the memory allows."""

from __future__ import annotations

import threading
import weakref
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

# XLA's CPU client adopts a host buffer without copying only at this alignment.
_XLA_CPU_ALIGNMENT = 64


class _HostViews:
    """Remembers which JAX array a read-only NumPy output views, to pass it back copy-free.

    NumPy cannot export a read-only array over the DLPack version JAX reads, so
    without this an output fed into the next `jax_function` would be copied.
    """

    def __init__(self) -> None:
        self._sources: dict[int, tuple[weakref.ref, jax.Array]] = {}
        self._lock = threading.Lock()

    def remember(self, view: np.ndarray, source: jax.Array) -> None:
        key = id(view)
        with self._lock:
            self._sources[key] = (weakref.ref(view, lambda _: self._forget(key)), source)

    def _forget(self, key: int) -> None:
        with self._lock:
            self._sources.pop(key, None)

    def lookup(self, view: np.ndarray) -> jax.Array | None:
        entry = self._sources.get(id(view))
        if entry is None or entry[0]() is not view:
            return None
        return entry[1]


_host_views = _HostViews()


def _to_jax(value: Any) -> Any:
    """A JAX array for a tensor's array or a constant, zero-copy where the memory allows.

    NumPy arrays are adopted through DLPack when C-contiguous, writeable and
    aligned for XLA; others (strided views, unaligned or read-only buffers) are
    copied into a contiguous JAX array first. Python scalars stay scalars (JAX types them weakly).
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
    return jax.device_put(array, jax.devices("cpu")[0])


def _from_jax(array: jax.Array, backend: str) -> Any:
    """`array` as an array of `backend`, sharing its memory (read-only for NumPy)."""
    if backend == "jax":
        return array
    if backend == "numpy":
        view = np.from_dlpack(array)
        _host_views.remember(view, array)
        return view
    if backend == "cupy":
        import cupy

        return cupy.from_dlpack(array)
    raise ValueError(f"jax_function: cannot return arrays to the {backend!r} backend")


def _tensor_class() -> type:
    from ..tensor import Tensor

    return Tensor


def _wrap(array: jax.Array, backend: str) -> Any:
    from ..tensor import tensor

    return tensor(_from_jax(array, backend))
