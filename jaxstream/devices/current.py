"""The current device of each thread, as in CUDA, and how device arguments resolve.

jaxstream keeps its own record (`thread_state.device`, None until chosen) and
makes the device's runtime agree (`DeviceKind.make_current`), so that a runtime
call issued without an explicit guard acts on the device the user chose. The
current stream of each device (`thread_state.streams`) is kept here too, and
managed by jaxstream/streams.py; a snapshot of both carries a caller's streams
to another thread (`thread_streams`, `using_thread_streams`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
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


def enter_native(stack: ExitStack, s: Any) -> None:
    """Make the stream `s` the native current stream, under its device's guard, until `stack`
    exits (XLA's stream cannot be entered: its device only)."""
    stack.enter_context(s.device.kind.guard(s.device.index))
    if s.native is not None and not s.is_xla:
        stack.enter_context(s.native)


ThreadStreams = tuple[Device | None, dict[Device, Any]]


def thread_streams() -> ThreadStreams:
    """A snapshot of this thread's current device and streams, for `using_thread_streams`."""
    return thread_state.device, dict(thread_state.streams)


@contextmanager
def using_thread_streams(snapshot: ThreadStreams) -> Iterator[None]:
    """Within the block, this thread's current device and streams are those of `snapshot`.

    A device absent from the snapshot has its default stream current. This is
    how another thread acts "on the caller's current streams".
    """
    state = thread_state
    saved = (state.device, state.streams)
    device_now, current = snapshot
    with ExitStack() as native:
        for s in current.values():
            enter_native(native, s)
        if device_now is not None:
            native.enter_context(device_now.kind.guard(device_now.index))
        state.device = device_now
        state.streams = dict(current)
        try:
            yield
        finally:
            state.device, state.streams = saved
