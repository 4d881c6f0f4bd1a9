"""Array backends: which namespace runs an array's kernels, and where it lives.

Every op is written once against the array API (`xp`); a backend adds only what
the standard lacks: device lookup, scatter-add (the backward of indexing),
random numbers, DLPack import and host export.
"""

from __future__ import annotations

import threading
from typing import Any

from .base import Backend

# Threads may ask for a backend first at the same time; there must be one object per name.
_LOCK = threading.Lock()
_BY_NAME: dict[str, Backend] = {}
_BY_TYPE: dict[type, Backend] = {}

BACKEND_NAMES = ("numpy", "jax", "cupy")


def get_backend(name: str) -> Backend:
    """The backend called `name`, importing its array library on first use."""
    backend = _BY_NAME.get(name)
    if backend is not None:
        return backend
    if name == "numpy":
        from .numpy import NumpyBackend as cls
    elif name == "jax":
        from .jax import JaxBackend as cls
    elif name == "cupy":
        from .cupy import CupyBackend as cls
    else:
        raise ValueError(f"unknown backend {name!r}; expected one of {', '.join(BACKEND_NAMES)}")
    with _LOCK:
        backend = _BY_NAME.get(name)
        if backend is None:
            backend = _BY_NAME[name] = cls()
    return backend


def _library_of(array_type: type) -> str | None:
    root = array_type.__module__.split(".", 1)[0]
    if root == "numpy":
        return "numpy"
    if root in ("jax", "jaxlib"):
        return "jax"
    if root in ("cupy", "cupyx"):
        return "cupy"
    return None


def backend_of(array: Any) -> Backend | None:
    """The backend whose array type `array` is, or None for anything else."""
    array_type = type(array)
    backend = _BY_TYPE.get(array_type)
    if backend is None:
        name = _library_of(array_type)
        if name is None:
            return None
        backend = get_backend(name)
        if not backend.is_array(array):
            return None
        _BY_TYPE[array_type] = backend
    return backend


__all__ = ["Backend", "BACKEND_NAMES", "backend_of", "get_backend"]
