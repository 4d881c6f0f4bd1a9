"""Streams and events: the order in which accelerator work runs.

A stream is a queue of kernels on one accelerator. Kernels on one stream run in
the order they were queued; kernels on different streams are unordered unless
an event, `wait_stream` or a host synchronize orders them. `sim` streams are
host objects: a `sim` kernel runs synchronously on the host, so what a `sim`
stream carries is the ordering, which the stream sanitizer checks. `cuda`
streams and events wrap CuPy ones. What differs between them comes from the
device's kind (`Device.kind`, jaxstream/devices/kind.py).

The current device and the current stream of each device are per thread, as in
CUDA: a new thread starts on each device's default stream. `with stream(s):`
makes `s` the current stream of its device and `s.device` the current device,
for this thread, until the block ends; for `cuda` it also makes the CuPy stream
and device current (the kind's device guard), since CuPy's current stream is
per thread too.

The `cpu` device has no streams: `current_stream("cpu")` and
`default_stream("cpu")` return None (the stream an op on the cpu records), while
`Stream("cpu")` and `set_device("cpu")` raise ValueError.

Each runtime call for a stream is issued under its device's guard (Note
[Device guards] in devices/kind.py); JAX's kernels run on XLA's own stream of
each device, `xla_stream(device)` (Note [XLA's stream] in devices/xla.py); every
operation that orders streams is reported to the sanitizer (Note [Stream
sanitizer] in sanitizer/checker.py). A stream argument that is not a `Stream`
is refused with a ValueError (`as_stream`).
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, NamedTuple

from jaxstream import device_events, instrumentation, sanitizer
from jaxstream.devices import Device, cuda_device_count, sim
from jaxstream.devices import current as _current
from jaxstream.devices.current import (
    DeviceSpec,
    StreamBlock,
    ThreadStreams,
    current_device,
    set_device,
    thread_streams,
    using_thread_streams,
)

__all__ = [
    "Event",
    "ThreadStreams",
    "as_stream",
    "Stream",
    "cuda_device_count",
    "current_device",
    "current_stream",
    "default_stream",
    "issuing",
    "set_device",
    "sim",
    "stream",
    "stream_for",
    "stream_with_handle",
    "thread_streams",
    "using_thread_streams",
    "xla_stream",
]

_registry_lock = threading.Lock()
_stream_ids: dict[Device, itertools.count] = {}
_default_streams: dict[Device, Stream] = {}
_xla_streams: dict[Device, Stream] = {}
_by_handle: weakref.WeakValueDictionary[tuple[Device, int], Stream] = (
    weakref.WeakValueDictionary()
)
"""(device, native handle) -> the stream: how a DLPack `stream=` integer is known."""
_event_ids = itertools.count(1)


def _next_stream_id(dev: Device) -> int:
    with _registry_lock:
        return next(_stream_ids.setdefault(dev, itertools.count(1)))


class Stream:
    """A queue of kernels on one accelerator device.

    `Stream(device=None, priority=0)` makes a new stream on `device` (the
    current device by default). Streams are numbered per device; the default
    stream of each device is number 0. Two Stream objects are equal when they
    are the same stream. `priority` is recorded on `sim` and passed to CUDA on
    `cuda` (lower numbers run first).
    """

    __slots__ = ("_device", "_priority", "_id", "_native", "__weakref__")

    def __init__(self, device: DeviceSpec = None, priority: int = 0) -> None:
        dev = _current.accelerator(device, "a Stream")
        if not isinstance(priority, int):
            raise TypeError(f"a stream priority is an int, got {type(priority).__name__}")
        native = dev.kind.new_native_stream(dev.index, priority)
        self._setup(dev, priority, _next_stream_id(dev), native)

    def _setup(self, dev: Device, priority: int, stream_id: int, native: Any) -> None:
        self._device = dev
        self._priority = priority
        self._id = stream_id
        self._native = native
        handle = getattr(native, "ptr", None)
        if handle:
            _by_handle[dev, handle] = self

    @classmethod
    def _special(cls, dev: Device, stream_id: int, native: Any) -> Stream:
        """The default stream (id 0) or XLA's stream (id -1) of `dev`."""
        special = cls.__new__(cls)
        special._setup(dev, 0, stream_id, native)
        return special

    @property
    def device(self) -> Device:
        return self._device

    @property
    def priority(self) -> int:
        return self._priority

    @property
    def id(self) -> int:
        """The stream's number on its device; 0 is the default stream, -1 XLA's."""
        return self._id

    @property
    def is_xla(self) -> bool:
        """Whether this is XLA's stream (`xla_stream`): it can be waited on, not entered."""
        return self._id == sanitizer.XLA_STREAM_ID

    @property
    def native(self) -> Any:
        """The CuPy stream of a `cuda` stream; None for `sim`."""
        return self._native

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and self._id == other._id and self._device == other._device

    def __hash__(self) -> int:
        return hash((self._device, self._id))

    def __repr__(self) -> str:
        return str(sanitizer.StreamKey(self._device, self._id))

    @contextmanager
    def _issue(self, what: str) -> Iterator[None]:
        """A runtime call on this stream, under its device's guard (Note [Device guards])."""
        kind, index = self._device.kind, self._device.index
        with kind.guard(index):
            kind.check_current(index, "%s on %r", what, self)
            yield

    def wait_event(self, event: Event) -> None:
        """Make work queued on this stream from now on run after `event`.

        Returns at once for a `cuda` stream. An event never recorded counts as
        reached. See Note [Stream sanitizer].
        """
        if not isinstance(event, Event):
            raise ValueError(f"wait_event: expected a js.Event, got {type(event).__name__}")
        if event._recording is not None:
            instrumentation.current().stream_op(
                "wait_event", self, {"event": event}, self._wait_event, event
            )

    def _wait_event(self, event: Event) -> None:
        recording = event._recording
        native_event = event.native
        with self._issue("wait_event"):
            if native_event is not None:
                if self._native is not None and not getattr(native_event, "host_only", False):
                    self._native.wait_event(native_event)
                else:
                    # The host runs a sim stream's kernels, and XLA's stream cannot be
                    # told to wait: the host itself waits (Note [XLA's stream]).
                    native_event.synchronize()
                    sanitizer.host_wait(recording.clock)
        device_events.waited(self, event, recording.clock)  # Note [The watchers' bus]

    def wait_stream(self, other: Stream) -> None:
        """Make work queued here from now on run after everything queued on `other` so far."""
        as_stream(other, "wait_stream")
        if other != self:
            instrumentation.current().stream_op(
                "wait_stream", self, {"other": other}, self._wait_stream, other
            )

    def _wait_stream(self, other: Stream) -> None:
        self.wait_event(other.record_event())

    def record_event(self, event: Event | None = None) -> Event:
        """Record `event` (a new one by default) at this point of the stream, and return it."""
        if event is None:
            event = Event()
        event.record(self)
        return event

    def synchronize(self) -> None:
        """Block the host until everything queued on this stream so far is done."""
        with self._issue("synchronize"):
            clock = sanitizer.snapshot(self)
            if self._native is not None:
                self._native.synchronize()
        device_events.host_waited(self, clock)  # Note [The watchers' bus]

    def query(self) -> bool:
        """Whether everything queued so far is done (always, on `sim`).

        A True answer orders the host after that work, like a synchronize.
        """
        with self._issue("query"):
            clock = sanitizer.snapshot(self)
            done = True if self._native is None else bool(self._native.done)
        if done:
            device_events.host_waited(self, clock)  # Note [The watchers' bus]
        return done


class _Recording(NamedTuple):
    """Where an event was last recorded, and the sanitizer's clock there (None if unchecked)."""

    stream: Stream
    clock: sanitizer.VectorClock | None


class Event:
    """A point in a stream that other streams and the host can wait for.

    An event belongs to the device of the first stream it is recorded on;
    recording it again moves it to a later point. Events compare by identity.
    """

    __slots__ = ("_id", "_recording", "_native", "__weakref__")

    def __init__(self) -> None:
        self._id = next(_event_ids)
        self._recording: _Recording | None = None
        self._native: Any = None

    @property
    def id(self) -> int:
        return self._id

    @property
    def device(self) -> Device | None:
        """The device it was recorded on; None before its first record."""
        return None if self._recording is None else self._recording.stream.device

    @property
    def stream(self) -> Stream | None:
        """The stream it was last recorded on."""
        return None if self._recording is None else self._recording.stream

    @property
    def native(self) -> Any:
        """The CuPy event of an event recorded on `cuda`; None otherwise."""
        return self._native

    def __repr__(self) -> str:
        where = "not recorded" if self._recording is None else f"on {self._recording.stream}"
        return f"Event(id={self._id}, {where})"

    def record(self, stream: Stream | None = None) -> None:
        """Mark the current end of `stream` (the current stream by default).

        See Note [Stream sanitizer].
        """
        target = as_stream(stream, "Event.record", none_ok=True) or _current_accelerator_stream()
        if self._recording is not None and self._recording.stream.device != target.device:
            raise ValueError(
                f"{self!r} belongs to {self._recording.stream.device} and cannot be "
                f"recorded on {target}; use a new Event for {target.device}"
            )
        instrumentation.current().stream_op(
            "record_event", target, {"event": self}, self._record_on, target
        )

    def _record_on(self, target: Stream) -> None:
        with target._issue("record_event"):
            # The snapshot comes first: the event then covers at least what it claims to.
            clock = sanitizer.snapshot(target)
            native = target.native
            if native is None:
                self._native = None
            elif target.is_xla:
                self._native = native.record_event()  # Note [XLA's stream]
            else:
                if self._native is None or getattr(self._native, "host_only", False):
                    dev = target.device
                    self._native = dev.kind.new_native_event(dev.index)
                self._native.record(native)
        self._recording = _Recording(target, clock)
        device_events.recorded(target, self)  # Note [The watchers' bus]

    def wait(self, stream: Stream | None = None) -> None:
        """Make `stream` (the current stream by default) wait for this event."""
        target = as_stream(stream, "Event.wait", none_ok=True) or _current_accelerator_stream()
        target.wait_event(self)

    def synchronize(self) -> None:
        """Block the host until the work before this event is done."""
        recording = self._recording
        if recording is None:
            return
        if self._native is not None:
            self._native.synchronize()
        device_events.host_waited_event(self, recording.clock)  # Note [The watchers' bus]

    def query(self) -> bool:
        """Whether the work before this event is done; a True answer orders the host after it."""
        recording = self._recording
        if recording is None:
            return True
        done = True if self._native is None else bool(self._native.done)
        if done:
            device_events.host_waited_event(self, recording.clock)  # Note [The watchers' bus]
        return done


def as_stream(value: Any, what: str, *, none_ok: bool = False) -> Stream | None:
    """`value` if it is a Stream (or None where `none_ok`), else a ValueError naming what is."""
    if isinstance(value, Stream) or (value is None and none_ok):
        return value
    expected = "a js.Stream or None" if none_ok else "a js.Stream"
    raise ValueError(
        f"{what}: expected {expected}, got {type(value).__name__} {value!r:.60}; take one "
        f"with js.current_stream(device) or make one with js.Stream(device)"
    )


def stream_with_handle(dev: Device, handle: int) -> Stream | None:
    """The stream of `dev` whose native handle is `handle` (a DLPack `stream=`), if known."""
    return _by_handle.get((dev, handle))


def default_stream(device: DeviceSpec = None) -> Stream | None:
    """The default stream of `device` (the current device by default); None for the cpu."""
    dev = _current.resolve(device)
    if not dev.is_accelerator:
        return None
    dev.kind.check_exists(dev)
    with _registry_lock:
        default = _default_streams.get(dev)
        if default is None:
            native = dev.kind.default_native_stream(dev.index)
            default = _default_streams[dev] = Stream._special(dev, 0, native)
    return default


def xla_stream(device: DeviceSpec = None) -> Stream:
    """XLA's own stream of an accelerator, on which JAX's kernels run there.

    It cannot be entered (XLA chooses it), but it can be waited on and recorded,
    and the sanitizer models it like any other stream: an op on JAX arrays of
    the device runs on it (Note [XLA's stream] in jaxstream/devices/xla.py).
    """
    dev = _current.accelerator(device, "xla_stream")
    with _registry_lock:
        xla = _xla_streams.get(dev)
        if xla is None:
            native = dev.kind.xla_native_stream(dev.index)
            xla = _xla_streams[dev] = Stream._special(dev, sanitizer.XLA_STREAM_ID, native)
    return xla


def stream_for(dev: Device, backend: Any) -> Stream | None:
    """The stream a kernel of `backend` on `dev` runs on: None on the cpu, XLA's for JAX,
    else this thread's current stream of `dev`.

    Every op on an accelerator asks, for a device its tensors are on: the streams made
    already are read without a lock or a check of the device (Note [An op on an accelerator] in
    ops/dispatch.py).
    """
    if not dev.is_accelerator:
        return None
    if backend.runs_on_xla:
        return _xla_streams.get(dev) or xla_stream(dev)
    return (
        _current.thread_state.streams.get(dev) or _default_streams.get(dev) or current_stream(dev)
    )


def current_stream(device: DeviceSpec = None) -> Stream | None:
    """This thread's current stream on `device` (default: the current device); None for the cpu."""
    dev = _current.resolve(device)
    if not dev.is_accelerator:
        return None
    dev.kind.check_exists(dev)
    current = _current.thread_state.streams.get(dev)
    return current if current is not None else default_stream(dev)


def _current_accelerator_stream() -> Stream:
    current = current_stream(current_device())
    assert current is not None, "the current device is always an accelerator"
    return current


def issuing(s: Stream | None) -> AbstractContextManager:
    """Issue work for `s`: within the block `s` is current (XLA's stream: its device only).

    How library code launches on a stream it did not choose itself, such as
    `stream_for`'s; see Note [Device guards] in jaxstream/devices/kind.py.
    """
    if s is None:
        return nullcontext()
    # Not `s.is_xla`: the engine issues every node with a stream through here.
    return StreamBlock(s, s._device, s._native, s._id != sanitizer.XLA_STREAM_ID)


def stream(s: Stream | None) -> AbstractContextManager[Stream | None]:
    """Within the block, `s` is this thread's current stream of its device, and its device current.

    `stream(None)` changes nothing. XLA's stream (`xla_stream`) cannot be entered.
    """
    if as_stream(s, "js.stream", none_ok=True) is None:
        return nullcontext()
    if s.is_xla:
        raise ValueError(
            f"{s!r} is XLA's stream and cannot be entered: XLA chooses it for JAX's "
            "kernels. Wait on it or record it instead (s.wait_stream(js.xla_stream(d)))"
        )
    return StreamBlock(s, s._device, s._native, True)
