"""`js.synchronize(device)`: the host waits for all work queued on a device.

The device-wide counterpart of `Stream.synchronize`, as `torch.cuda.synchronize`:
every stream of the device (XLA's included) is waited for, and the stream
sanitizer and an open virtual clock order the host after all of them. A program
that ends its use of side streams this way may free and reuse their buffers
(Note [Stream sanitizer] in sanitizer/checker.py).
"""

from __future__ import annotations

from . import device_events
from .devices.current import DeviceSpec, accelerator


def synchronize(device: DeviceSpec = None) -> None:
    """Block the host until every stream of `device` (the current device by default) is done."""
    dev = accelerator(device, "synchronize")
    with dev.kind.guard(dev.index):
        dev.kind.synchronize(dev.index)
    device_events.device_waited(dev)  # Note [The watchers' bus]
