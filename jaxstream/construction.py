"""How data becomes a tensor's array: on which backend, with which dtype, on which device.

`Tensor(data)` and `js.tensor(data)` wrap what `backend_array` returns; the
copy protocol (copying.py) rebuilds unpickled tensors with it too. Arrays are
taken as they are (no copy); Python data takes PyTorch's dtypes (dtypes.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import sanitizer
from .backends import Backend, backend_of, get_backend
from .devices import Device, virtual_time
from .devices import device as to_device
from .dtypes import python_dtype
from .streams import current_stream

_ACCEPTED = (
    "expected an array (NumPy, JAX, CuPy or any DLPack producer), a Python number or bool, "
    "or a nested list of them"
)


def backend_array(
    data: Any,
    *,
    device: str | Device | None = None,
    dtype: Any = None,
    backend: str | None = None,
    shared_from: Device | None = None,
) -> tuple[Any, Backend, Device]:
    """`data` as `(array, backend, device)`, the three fields a new tensor wraps.

    The backend is the array's own, else `backend` (default "numpy").
    `shared_from` is the device of the tensor `data` was taken from, if any: the
    array is then not a new allocation there.
    """
    source = backend_of(data)
    if backend is not None:
        target = get_backend(backend)
    else:
        target = source if source is not None else get_backend("numpy")
    array = target.normalize(_as_backend_array(data, source, target, dtype))
    wanted = None if device is None else to_device(device)
    return array, target, _placed_on(array, target, wanted, shared_from)


def _as_backend_array(data: Any, source: Backend | None, target: Backend, dtype: Any) -> Any:
    """`data` as an array of `target`: itself, a DLPack import, or a conversion."""
    if source is target:
        return data if dtype is None else target.asarray(data, dtype)
    # A foreign producer (or an array between two non-NumPy backends) crosses by DLPack.
    if source is None:
        crosses = hasattr(data, "__dlpack__")
        if not crosses:
            return _from_host_data(data, target, dtype)
    else:
        crosses = get_backend("numpy") not in (source, target)
    if not crosses:
        return target.asarray(data, dtype)
    array = target.from_dlpack(data)
    return array if dtype is None else target.asarray(array, dtype)


def _from_host_data(data: Any, target: Backend, dtype: Any) -> Any:
    """Python numbers and (nested) lists, or any object NumPy reads, as an array of `target`.

    Python data takes PyTorch's dtypes (`dtypes.python_dtype`: floats the default
    dtype); an object with a dtype of its own (`__array__`) keeps it.
    """
    try:
        host = np.asarray(data)
    except ValueError as err:
        raise ValueError(f"tensor: cannot make a tensor of a ragged nested list ({err})") from None
    if host.dtype.kind not in "biufc":
        raise TypeError(
            f"tensor: cannot make a tensor from {type(data).__name__} {data!r:.60}; "
            f"{_ACCEPTED}"
        )
    if dtype is None and isinstance(data, int | float | complex | list | tuple):
        dtype = python_dtype(host.dtype.kind, target)
    return target.asarray(host, dtype)


def _placed_on(array: Any, target: Backend, wanted: Device | None,
               shared_from: Device | None) -> Device:
    """The device a new tensor of `array` is on: the array's own, or a sim device asked for.

    A sim device's memory is host memory (`kind.host_memory`), so a host array can
    be tagged with one; the sanitizer then sees the tensor allocated on that
    device's current stream.
    """
    dev = target.device_of(array)
    if wanted is None or wanted == dev:
        return dev
    if not (wanted.is_accelerator and wanted.kind.host_memory):
        raise RuntimeError(
            f"a {target.name} array lives on {dev}, not on {wanted}; move it with its own "
            "library, or create the tensor and call .to(device)"
        )
    if shared_from != wanted:
        stream = current_stream(wanted)
        sanitizer.on_kernel(stream, op="tensor", allocs=(array,))
        virtual_time.on_copy(stream, array)  # Note [Virtual time]
    return wanted
