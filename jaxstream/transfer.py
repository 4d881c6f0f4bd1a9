"""Moving an array between backends and devices, ordered on the streams involved.

`Tensor.to(device)`, `to(backend=)` and their gradients (ops/functional.py's
`convert`) come here. A move reads the array on the stream its kernels run on
at the source (`stream_for`: XLA's for JAX arrays, else the current stream),
orders the target's stream after that one with an event, and makes the new
array on the target's stream; each step is issued under its device's guard
(Note [Device guards] in devices/kind.py). The data goes by the shortest path
the backends offer: DLPack (zero-copy) within one device's memory, a device
copy within one backend, else through the host.
"""

from __future__ import annotations

from typing import Any

from . import device_events
from .backends import Backend, backend_for_device, get_backend
from .devices import Device
from .devices import device as to_device
from .streams import Stream, issuing, stream_for


def target_of(backend: Backend, device: Device, new_device: Any, new_backend: str | None
              ) -> tuple[Backend, Device]:
    """Where `to(new_device, backend=new_backend)` of an array on (`backend`, `device`) goes.

    A device that the array's backend cannot hold (a GPU for NumPy, the host for
    CuPy) takes the backend that holds arrays there, as PyTorch's `to("cuda")`
    needs no backend; a backend asked for keeps the device if it can hold it.
    """
    target_device = device if new_device is None else to_device(new_device)
    if new_backend is not None:
        target = get_backend(new_backend)
        if new_device is None and target.placement_problem(target_device) is not None:
            target_device = target.default_device()
    elif backend.placement_problem(target_device) is not None:
        target = backend_for_device(target_device)
    else:
        target = backend
    if target_device.is_accelerator:
        target_device.kind.check_exists(target_device)
    problem = target.placement_problem(target_device)
    if problem is not None:
        raise RuntimeError(f"cannot move to {target_device} on the {target.name} backend: "
                           f"{problem}")
    return target, target_device


def move(array: Any, source_backend: Backend, source: Device, backend: Backend,
         device: Device) -> Any:
    """`array` of (`source_backend`, `source`) as an array of (`backend`, `device`)."""
    src_stream = stream_for(source, source_backend)
    dst_stream = stream_for(device, backend)
    if src_stream is not None:
        with issuing(src_stream):
            if dst_stream is None:  # Note [The watchers' bus]
                device_events.host_read(src_stream, array, "to")
            else:
                device_events.launched(src_stream, "to", (array,))
        if dst_stream is not None and dst_stream != src_stream:
            dst_stream.wait_stream(src_stream)
    # The copy runs on the stream jaxstream can make current: the target's, unless
    # that is XLA's; DLPack's `stream=` then orders the library on the other side.
    with issuing(_enterable(dst_stream) or _enterable(src_stream)):
        data = backend.normalize(_copy(array, source_backend, source, backend, device))
    if dst_stream is not None:
        with issuing(dst_stream):
            device_events.copied(dst_stream, "to", data)
    return data


def _enterable(s: Stream | None) -> Stream | None:
    return None if s is None or s.is_xla else s


def _copy(array: Any, source_backend: Backend, source: Device, backend: Backend,
          device: Device) -> Any:
    if source == device:
        try:
            return backend.placed(backend.from_dlpack(array), device)
        except (TypeError, ValueError, RuntimeError, BufferError):
            pass
    elif source_backend is backend:
        moved = backend.to_device(array, device)
        if moved is not None:
            return moved
    return backend.from_host(source_backend.to_host(array), device)
