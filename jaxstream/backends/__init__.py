"""Array backends: which namespace runs an array's kernels, and where it lives.

Every op is written once against the array API (`xp`); a backend adds only what
the standard lacks: device lookup, scatter-add (the backward of indexing),
random numbers, DLPack import and host export.

All three backend modules are imported here; CuPy itself is imported only when
the cupy backend is first asked for (`CupyBackend()`), since it is optional.
"""

from __future__ import annotations

import threading
from typing import Any

from ..devices import CUPY_MISSING, Device, jax_gpus
from .base import Backend
from .cupy import CupyBackend
from .jax import JaxBackend
from .numpy import NumpyBackend

_CLASSES: dict[str, type[Backend]] = {
    cls.name: cls for cls in (NumpyBackend, JaxBackend, CupyBackend)
}
BACKEND_NAMES = tuple(_CLASSES)

# Threads may ask for a backend first at the same time; there must be one object per name.
_LOCK = threading.Lock()
_BY_NAME: dict[str, Backend] = {}
_BY_TYPE: dict[type, Backend] = {}


def get_backend(name: str) -> Backend:
    """The backend called `name`, made on first use (the cupy one imports CuPy then)."""
    backend = _BY_NAME.get(name)
    if backend is not None:
        return backend
    cls = _CLASSES.get(name)
    if cls is None:
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


# DLPack's device types (DLDeviceType): host memory, and CUDA device memory.
_DLPACK_CPU, _DLPACK_CUDA = 1, 2


def backend_for_device(device: Device) -> Backend:
    """The backend that holds arrays on `device` when none is asked for.

    NumPy for host memory; on a GPU, CuPy where it is installed, else JAX on
    its GPUs; else an error that names what is missing.
    """
    if device.kind.host_memory:
        return get_backend("numpy")
    device.kind.check_exists(device)
    try:
        return get_backend("cupy")
    except RuntimeError:
        if device.index < len(jax_gpus()):
            return get_backend("jax")
        raise RuntimeError(f"no backend holds arrays on {device}: {CUPY_MISSING}") from None


def in_host_memory(obj: Any) -> bool:
    """Whether the DLPack producer `obj`'s memory is the host's (NumPy, a JAX cpu array, a
    torch cpu tensor), by its `__dlpack_device__()`."""
    return int(obj.__dlpack_device__()[0]) == _DLPACK_CPU


def backend_for_dlpack(obj: Any) -> Backend:
    """The backend that imports the DLPack producer `obj`, by its `__dlpack_device__()`.

    CPU memory goes to NumPy, CUDA memory to CuPy or JAX on GPUs.
    """
    if in_host_memory(obj):
        return get_backend("numpy")
    device_type, index = obj.__dlpack_device__()[:2]
    if int(device_type) == _DLPACK_CUDA:
        return backend_for_device(Device("cuda", int(index)))
    raise BufferError(
        f"cannot import a {type(obj).__name__} from DLPack device type {int(device_type)}: "
        "jaxstream reads CPU memory (NumPy, JAX) and CUDA memory (CuPy, JAX on GPUs)"
    )


__all__ = [
    "Backend",
    "BACKEND_NAMES",
    "backend_for_device",
    "backend_for_dlpack",
    "in_host_memory",
    "backend_of",
    "get_backend",
]
