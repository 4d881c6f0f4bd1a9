"""The current device of each thread, as in CUDA, and how device arguments resolve.

jaxstream keeps its own record (`thread_state.device`, None until chosen) and
makes the device's runtime agree (`DeviceKind.make_current`), so that a runtime
call issued without an explicit guard acts on the device the user chose. The
current stream of each device (`thread_state.streams`) is kept here too, and
managed by jaxstream/streams.py; a snapshot of both carries a caller's streams
to another thread (`thread_streams`, `using_thread_streams`).
"""

from __future__ import annotations

import sys
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


class StreamBlock:
    """`js.stream(s)` and `issuing(s)`: within the block `s`'s device is the runtime's
    current one and, where `enters_stream`, `s` is this thread's current stream of that
    device, its native stream entered, and the device this thread's current one; XLA's
    stream, which cannot be entered, gets its device only.

    A class rather than a generator: the engine enters one for every node with a stream
    (Note [Streaming backward] in autograd/input_buffer.py). The device's guard is entered
    only where the device is not current already; leaving the block puts back the device
    the runtime had, as the guard would (Note [Device guards]).
    """

    __slots__ = ("_stream", "_device", "_native", "_enters", "_saved", "_guard")

    def __init__(self, s: Any, dev: Device, native: Any, enters_stream: bool) -> None:
        self._stream, self._device, self._native, self._enters = s, dev, native, enters_stream

    def __enter__(self) -> Any:
        dev = self._device
        kind, index = dev.kind, dev.index
        guard = self._guard = None if kind.is_current(index) else kind.guard(index)
        if guard is not None:
            guard.__enter__()
        if self._enters:
            native = self._native
            if native is not None:
                try:
                    native.__enter__()
                except BaseException:
                    self._leave_device(*sys.exc_info())
                    raise
            state = thread_state
            current = state.streams
            self._saved = (state.device, current.get(dev))
            state.device = dev
            current[dev] = self._stream
        return self._stream

    def __exit__(self, *exc: object) -> None:
        dev = self._device
        try:
            if self._enters:
                state = thread_state
                state.device, previous = self._saved
                if previous is None:
                    state.streams.pop(dev, None)
                else:
                    state.streams[dev] = previous
                if self._native is not None:
                    self._native.__exit__(*exc)
        finally:
            if self._guard is not None or not dev.kind.is_current(dev.index):
                self._leave_device(*exc)

    def _leave_device(self, *exc: object) -> None:
        """Put back the runtime's current device as the block found it."""
        guard = self._guard
        if guard is not None:
            guard.__exit__(*exc)
        else:
            self._device.kind.make_current(self._device.index)


# Note [A lane of plain nodes]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A backward node with a stream runs under it (Note [Streaming backward] in
# autograd/input_buffer.py), and a block entered and left per node costs more on a chain of
# small nodes than the rest of what the engine does for each. On a chain every node has the
# stream of the one before, so a worker keeps the block of its last plain node entered (its
# `StreamLane`) and runs the next node on the same stream within it, once it has checked
# that the thread is still as the block made it: the device current in the runtime and, for
# a stream the block entered, the thread's current device and stream. A node that changed
# them (which its own block would have undone on leaving) ends the lane: the block is left,
# which puts back what it found, and a new one entered. Only a stream without a native
# stream gets a lane (sim's, and XLA's, which is never entered): which native stream is
# current in its runtime (CuPy's) cannot be checked without asking the runtime, so a node
# on a CuPy stream enters a block of its own. The worker leaves its lane when it turns to
# another task and when its loop ends; a node with optional steps enters its own block
# within the lane, which leaves the thread as it found it.


class StreamLane:
    """The stream block a worker keeps entered across its plain nodes on one stream (Note
    [A lane of plain nodes])."""

    __slots__ = ("_block",)

    def __init__(self) -> None:
        self._block: StreamBlock | None = None

    def holds(self, s: Any) -> bool:
        """Whether the lane's block is `s`'s and the thread still as the block made it."""
        block = self._block
        if block is None or block._stream is not s:
            return False
        dev = block._device
        if not dev.kind.is_current(dev.index):
            return False
        if not block._enters:
            return True
        state = thread_state
        return state.device is dev and state.streams.get(dev) is s

    def enter(self, block: StreamBlock) -> bool:
        """Leave the lane's block and enter `block` as the lane's, where it can be one (its
        stream has no native stream); whether it is."""
        self.leave()
        if block._enters and block._native is not None:
            return False
        block.__enter__()
        self._block = block
        return True

    def leave(self) -> None:
        block, self._block = self._block, None
        if block is not None:
            block.__exit__(None, None, None)


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
