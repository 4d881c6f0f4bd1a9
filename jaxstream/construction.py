"""How data becomes a tensor's array: on which backend, with which dtype, on which device.

`Tensor(data)` and `js.tensor(data)` wrap what `backend_array` returns; the
copy protocol (copying.py) rebuilds unpickled tensors with it too. Arrays are
taken as they are (no copy); Python data takes PyTorch's dtypes (dtypes.py).
A foreign DLPack producer goes to the backend its memory belongs to
(`backend_for_dlpack`). An array asked for on another device is made there,
under that device's guard (Note [Device guards] in devices/kind.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import numpy as np

from . import device_events
from .backends import (
    Backend,
    backend_for_device,
    backend_for_dlpack,
    backend_of,
    get_backend,
    in_host_memory,
)
from .devices import CPU, Device
from .devices import device as to_device
from .devices.tracing import inside_trace
from .dtypes import data_dtype, python_dtype
from .streams import issuing, stream_for

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

    The backend is the array's own, else `backend` (default `unplaced_backend()`: NumPy,
    or JAX inside a trace). Host data with no `device` goes to that backend's default place:
    the cpu, or CuPy's current GPU (Note [New tensors with no device]).
    `shared_from` is the device of the tensor `data` was taken from, if any: the
    array is then not a new allocation there.
    """
    source = backend_of(data)
    wanted = None if device is None else to_device(device)
    target = _target_backend(data, source, backend, wanted)
    if wanted is None and not _has_a_device(data, source):
        wanted = unplaced_device(target)
    if wanted is None or not (wanted.is_accelerator or target.places_arrays):
        array = target.normalize(_as_backend_array(data, source, target, dtype))
        return array, target, _placed_on(array, target, wanted, shared_from)
    if wanted.is_accelerator:
        wanted.kind.check_exists(wanted)
    with issuing(stream_for(wanted, target)):
        with target.making_on(wanted):
            array = _as_backend_array(data, source, target, dtype)
        # Outside `making_on`, which changes where the backend would run the array's ops.
        array = target.normalize(target.placed(array, wanted))
        return array, target, _placed_on(array, target, wanted, shared_from)


# Note [New tensors inside a trace]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Data without a backend of its own (Python numbers and lists, and what the factories make
# without `backend=`: zeros, arange, randn, ...) becomes a NumPy array, except inside a trace
# (`to_jax`, `js.compile`), where it becomes a JAX array: there every tensor the function
# is given holds a JAX tracer, and a NumPy tensor could not meet them (mixing backends is an
# error). This is PyTorch's habit that a factory's tensor joins the computation it is made
# in. An explicit `backend=` is obeyed, and a NumPy array stays NumPy: it has a backend.
def unplaced_backend() -> Backend:
    """The backend of new data with none of its own (Note [New tensors inside a trace])."""
    return get_backend("jax" if inside_trace() else "numpy")


# Note [New tensors with no device]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Host data (Python data, a NumPy array) and what a factory makes, given no `device=`, go
# where PyTorch puts a tensor made with no device: the default place. That is the cpu for
# a backend that holds arrays there (NumPy; JAX too, never JAX's own default device, which
# on a GPU machine is the GPU: Note [JAX devices of jaxstream devices] in devices/xla.py);
# a backend that cannot (CuPy) makes them on its current device, as CuPy itself does
# (`Backend.default_device`). An array with a device of its own stays there.
def unplaced_device(target: Backend) -> Device:
    """Where a new array of `target` goes when no device is named
    (Note [New tensors with no device])."""
    return target.default_device()


def made_on(target: Backend, wanted: Device) -> AbstractContextManager:
    """A context in which `target`'s new arrays are made on `wanted`: where the backend
    puts new arrays and, on an accelerator, under its device guard, on the stream its
    kernels run on there."""
    if wanted.is_accelerator:
        return _issuing_on(target, wanted)
    return target.making_on(wanted)


@contextmanager
def _issuing_on(target: Backend, wanted: Device) -> Iterator[None]:
    wanted.kind.check_exists(wanted)
    with issuing(stream_for(wanted, target)), target.making_on(wanted):
        yield


def _has_a_device(data: Any, source: Backend | None) -> bool:
    """Whether `data` lives on a device of its own (a JAX or CuPy array, a GPU producer),
    rather than on the host with none chosen (Python data, NumPy), which goes to the target
    backend's default place (Note [New tensors with no device])."""
    if source is not None:
        return source.places_arrays
    return hasattr(data, "__dlpack_device__")


def _target_backend(
    data: Any, source: Backend | None, backend: str | None, wanted: Device | None
) -> Backend:
    """The backend asked for; else the array's own, a DLPack producer's, or NumPy's,
    unless that one cannot hold arrays on the device asked for."""
    if backend is not None:
        return asked_backend(backend, wanted)
    if source is not None:
        target = source
    elif hasattr(data, "__dlpack_device__"):
        target = backend_for_dlpack(data)
    else:
        target = unplaced_backend()
    if wanted is None or target.placement_problem(wanted) is None:
        return target
    return backend_for_device(wanted)


def asked_backend(backend: str, wanted: Device | None) -> Backend:
    """The backend named `backend`, refused where it cannot hold arrays on `wanted`: a
    tensor of another backend in its place would be a silent surprise."""
    target = get_backend(backend)
    problem = None if wanted is None else target.placement_problem(wanted)
    if problem is not None:
        raise RuntimeError(f"cannot make a {backend} tensor on {wanted}: {problem}")
    return target


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
        if source is not None and source.placement_problem(CPU) is not None:
            # Off a GPU by its own library's copy: CuPy refuses NumPy's implicit conversion.
            return target.asarray(source.host_copy(data), dtype)
        return target.asarray(data, dtype)
    if target.placement_problem(CPU) is not None and in_host_memory(data):
        # CuPy imports no host memory by DLPack: it is copied in, as CuPy's error advises.
        return target.asarray(np.from_dlpack(data), dtype)
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
        kind = host.dtype.kind
        # Python ints are int64, or int32 where they fit (Note [64-bit integer data on JAX])
        dtype = data_dtype(host.dtype, host, target) if kind in "iu" else python_dtype(kind, target)
    return target.asarray(host, dtype)


def _placed_on(array: Any, target: Backend, wanted: Device | None,
               shared_from: Device | None) -> Device:
    """The device a new tensor of `array` is on: the array's own, or the device asked for.

    A sim device's memory is host memory (`kind.host_memory`), so a host array can
    be tagged with one. An array made on the device asked for (CuPy's, JAX's on a GPU)
    was written there by a kernel on the stream its kernels run on (`stream_for`), as
    PyTorch's factories and copies are. Either way the sanitizer sees the tensor
    allocated on that stream, launched under that device's guard, unless it shares the
    memory of a tensor there.
    """
    dev = target.device_of(array)
    if wanted is None:
        return dev
    if wanted == dev:
        if dev.is_accelerator and shared_from != dev:
            device_events.launched(stream_for(dev, target), "tensor", allocs=(array,))
        return dev
    if not target.tags(array, wanted):
        raise RuntimeError(
            f"a {target.name} array on {dev} cannot be tagged with {wanted}: its memory "
            f"is not host memory; move it with .to({str(wanted)!r})"
        )
    if shared_from != wanted:
        device_events.copied(stream_for(wanted, target), "tensor", array)
    return wanted
