"""The current device of each thread, as in CUDA, and how device arguments resolve.

jaxstream keeps its own record (`thread_state.device`, None until chosen) and
makes the device's runtime agree (`DeviceKind.make_current`), so that a runtime
call issued without an explicit guard acts on the device the user chose. The
current stream of each device (`thread_state.streams`) is kept here too, and
managed by jaxstream/streams.py.
"""

from __future__ import annotations

import threading
from typing import Any

from . import Device, cuda_device_count, device

DeviceSpec = Device | str | int | None


class _ThreadState(threading.local):
    """Per thread: the current device (None until chosen) and current stream per device."""

    def __init__(self) -> None:
        self.device: Device | None = None
        self.streams: dict[Device, Any] = {}


thread_state = _ThreadState()


def current_device() -> Device:
    """This thread's current accelerator.

    Chosen by `set_device` or a `stream` block; otherwise cuda:0 where a GPU is
    seen (by CuPy or JAX), else sim:0.
    """
    chosen = thread_state.device
    if chosen is not None:
        return chosen
    return Device("cuda", 0) if cuda_device_count() > 0 else Device("sim", 0)


def resolve(spec: DeviceSpec) -> Device:
    """None is the current device; an int is an index of the current device's type."""
    if spec is None:
        return current_device()
    if isinstance(spec, int):
        return Device(current_device().type, spec)
    return device(spec)


def accelerator(spec: DeviceSpec, what: str) -> Device:
    """`spec` resolved, or a ValueError naming `what` if it is the cpu or does not exist."""
    dev = resolve(spec)
    if not dev.is_accelerator:
        raise ValueError(
            f"{what} needs an accelerator (sim or cuda); the cpu has no streams, "
            f"its work runs on the calling thread in order"
        )
    dev.kind.check_exists(dev)
    return dev


def set_device(spec: Device | str | int) -> None:
    """Make `spec` this thread's current device, in jaxstream and in its runtime."""
    dev = accelerator(spec, "set_device")
    dev.kind.make_current(dev.index)
    thread_state.device = dev
