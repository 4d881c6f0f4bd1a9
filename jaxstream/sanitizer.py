"""Happens-before checking of buffers shared between streams.

Kernels on one stream run in order; kernels on different streams run in any
order unless an event, `wait_stream` or a host synchronize orders them. This
module keeps the vector clocks that say which work is ordered before which and
raises `StreamRaceError` when a buffer is used on a stream that is not ordered
after the buffer's conflicting uses. See Note [Stream sanitizer] for the model.

It is always on for `sim` devices and, since it costs a lock per kernel, on
`cuda` devices only with `JAXSTREAM_STREAM_CHECK=1`. Every function is a no-op
for a stream of a device it is off for, and for `stream=None` (the cpu), so
callers need not test `enabled_for` themselves.

What the op dispatcher and the engine call:

    enabled_for(device) -> bool
    on_kernel(stream, *, op, reads=(), writes=(), allocs=()) -> None
        one kernel launched on `stream`: checks every access, then records it.
        `allocs` are buffers the kernel creates (a write with no history).
    check_read(buffer, stream, op) / check_write(buffer, stream, op)
        a kernel with a single access.
    host_read(buffer, stream, op)
        the host reads `buffer` (`numpy()`, `item()`): a read on `stream`,
        then the host waits for `stream`.
    record_stream(buffer, stream)
        keeps `buffer` alive until the work queued on `stream` so far is done.
    forget(buffer)
        drops a buffer's history (it is also dropped when the buffer dies).

What `jaxstream.streams` calls (users go through `Stream` and `Event`):

    snapshot(stream) -> VectorClock | None     an event is recorded on `stream`
    wait(stream, clock)                        `stream` waits for an event
    host_wait(clock)                           the host waits for a stream/event

Introspection for tests and debugging: `clock_of(stream)`, `host_clock()`,
`tracked_buffers()`, `pending_holds()`, `release_completed()`.

A buffer is any array; views resolve to the array that owns the memory, so a
write through a view conflicts with a read of its base. Arrays are tracked by
weak reference, so the sanitizer never keeps one alive on its own.
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, Protocol

from jaxstream.devices import Device, device

CHECK_ENV = "JAXSTREAM_STREAM_CHECK"

# Note [Stream sanitizer]
# ~~~~~~~~~~~~~~~~~~~~~~~
# A race is two uses of one buffer, at least one a write, with nothing that
# orders them. We decide "ordered" with vector clocks, identically for `sim`
# and `cuda` streams:
#
# - Each stream `s` has a clock `V[s]`, a map from stream to tick. Launching a
#   kernel on `s` adds one to `V[s][s]`; that tick names the kernel. `V[s][o]`
#   is the last kernel of stream `o` that everything queued on `s` from now on
#   is guaranteed to run after.
# - Each buffer (its storage, not a view) remembers its last write as
#   (stream, tick, op) and every read since that write, one per stream (a later
#   read on a stream supersedes an earlier one, since a stream runs in order).
#   Creating a buffer counts as its first write.
# - A kernel on `s` may read a buffer when `V[s][w.stream] >= w.tick` for the
#   buffer's last write `w`, and may write it when that holds for the last
#   write and for every read since. Otherwise it is a read-after-write,
#   write-after-write or write-after-read race. The checks of a kernel all pass
#   before any of its accesses are recorded, so a kernel that raises leaves no
#   trace.
# - Recording an event on `s` takes a snapshot of `V[s]`. A stream that waits
#   for the event takes the element-wise max of its clock and the snapshot;
#   `wait_stream(o)` is exactly a record on `o` followed by that wait. The max
#   is what makes ordering transitive: s1 -> s2 -> s3 leaves s1's tick in
#   `V[s3]`.
# - The host has a clock too. Synchronizing a stream (or an event, or a query
#   that reports completion) merges that stream's clock into the host's. Every
#   stream operation is issued by the host, so it first merges the host's
#   clock into the stream's: after `s1.synchronize()`, new work on any stream
#   is ordered after everything that was queued on `s1`. A host read such as
#   `numpy()` is a read on the caller's current stream followed by a
#   synchronize of that stream. All host threads share this one clock: the
#   engine hands work between threads through queues the sanitizer cannot
#   see, and a clock per thread would report those hand-offs as races.
# - `record_stream(buffer, s)` holds a strong reference to the buffer until
#   the work queued on `s` at the time of the call is known to be complete.
#   For `sim` that is when the host's clock reaches `V[s][s]` as it was at the
#   call (a synchronize or a completed query of `s`, or of an event recorded
#   on `s` later); another stream waiting on `s` is not enough, since only
#   the host frees memory. For `cuda` it is when a CuPy event recorded on `s`
#   at the call has completed. `cuda` holds are kept even when the checks are
#   off, since the memory is really in use.
# - One lock guards all of this and is held only for the dictionary updates.
#   Buffers are tracked by weak reference; a dying buffer's reference queues
#   its entry for removal, and the queue is drained under the lock, so garbage
#   collection never runs sanitizer code while the lock is held.


class StreamLike(Protocol):
    """What the sanitizer needs from a stream (`jaxstream.streams.Stream` is one)."""

    @property
    def device(self) -> Device: ...

    @property
    def id(self) -> int: ...

    def record_event(self) -> Any: ...


class StreamKey(NamedTuple):
    """A stream's identity in clocks: streams are numbered per device."""

    device: Device
    id: int

    def __str__(self) -> str:
        return f"Stream({self.device}, id={self.id})"


def stream_key(stream: StreamLike) -> StreamKey:
    return StreamKey(stream.device, stream.id)


def _key_of(stream_or_key: StreamLike | StreamKey) -> StreamKey:
    if isinstance(stream_or_key, StreamKey):
        return stream_or_key
    return stream_key(stream_or_key)


class VectorClock:
    """An immutable snapshot of a clock: for each stream, the last tick known to be ordered before.

    A stream that never appears reads as tick 0 (nothing of it is ordered before).
    Index with a stream or a `StreamKey`.
    """

    __slots__ = ("_ticks",)

    def __init__(self, ticks: Mapping[StreamKey, int] | None = None) -> None:
        self._ticks = {key: tick for key, tick in (ticks or {}).items() if tick > 0}

    def __getitem__(self, stream: StreamLike | StreamKey) -> int:
        return self._ticks.get(_key_of(stream), 0)

    def items(self) -> Iterable[tuple[StreamKey, int]]:
        return self._ticks.items()

    def merged(self, other: VectorClock) -> VectorClock:
        """The element-wise max: what is ordered before either clock."""
        ticks = dict(self._ticks)
        _merge_into(ticks, other._ticks)
        return VectorClock(ticks)

    def __le__(self, other: VectorClock) -> bool:
        """Whether everything ordered before `self` is ordered before `other` too."""
        return all(other._ticks.get(key, 0) >= tick for key, tick in self._ticks.items())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VectorClock) and self._ticks == other._ticks

    def __hash__(self) -> int:
        return hash(frozenset(self._ticks.items()))

    def __repr__(self) -> str:
        inner = ", ".join(f"{key}: {tick}" for key, tick in sorted(self._ticks.items(), key=str))
        return f"VectorClock({{{inner}}})"


def _merge_into(target: dict[StreamKey, int], source: Mapping[StreamKey, int]) -> None:
    for key, tick in source.items():
        if target.get(key, 0) < tick:
            target[key] = tick


class StreamRaceError(RuntimeError):
    """Two uses of a buffer on different streams, at least one a write, with no ordering.

    Attributes: `kind` ("read-after-write", "write-after-read" or
    "write-after-write"), `buffer` (a label), `op` and `stream` (the use that
    raised), `prior_op` and `prior_stream` (the earlier use it conflicts with).
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str = "",
        buffer: str = "",
        op: str = "",
        stream: StreamKey | None = None,
        prior_op: str = "",
        prior_stream: StreamKey | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.buffer = buffer
        self.op = op
        self.stream = stream
        self.prior_op = prior_op
        self.prior_stream = prior_stream


class _Access(NamedTuple):
    stream: StreamKey
    tick: int
    op: str


class _BufferRef(weakref.ref):
    """A weak reference that knows which table entry it belongs to."""

    __slots__ = ("key",)


class _BufferState:
    __slots__ = ("ref", "label", "last_write", "reads")

    def __init__(self, ref: _BufferRef, label: str) -> None:
        self.ref = ref
        self.label = label
        self.last_write: _Access | None = None
        self.reads: dict[StreamKey, _Access] = {}

    def record_write(self, access: _Access) -> None:
        self.last_write = access
        self.reads.clear()


class _HostHold(NamedTuple):
    """A `sim` buffer kept alive until the host's clock reaches `tick` of `stream`."""

    buffer: object
    stream: StreamKey
    tick: int


class _EventHold(NamedTuple):
    """A `cuda` buffer kept alive until a CuPy event completes."""

    buffer: object
    native_event: Any


def _storage_owner(buffer: object) -> object:
    """The array that owns `buffer`'s memory: a view resolves to the array it views."""
    owner = buffer
    while True:
        base = getattr(owner, "base", None)
        if base is None or not (hasattr(base, "shape") and hasattr(base, "dtype")):
            return owner
        owner = base


def _describe(owner: object, number: int) -> str:
    shape = getattr(owner, "shape", None)
    dtype = getattr(owner, "dtype", None)
    if shape is not None and dtype is not None:
        return f"buffer #{number} ({dtype}[{', '.join(str(n) for n in shape)}])"
    return f"buffer #{number} ({type(owner).__name__})"


def _race(
    kind: str, state: _BufferState, op: str, stream: StreamKey, prior: _Access
) -> StreamRaceError:
    verb = "writes" if kind.startswith("write") else "reads"
    prior_use = "a read" if kind == "write-after-read" else "its last write"
    message = (
        f"{kind} race on {state.label}: op {op!r} {verb} it on {stream}, but {prior_use}, "
        f"by op {prior.op!r} on {prior.stream}, is not ordered before that stream. "
        f"Order the streams first: {stream}.wait_stream({prior.stream}), or "
        f"e = {prior.stream}.record_event() then {stream}.wait_event(e), "
        f"or synchronize {prior.stream} before launching."
    )
    return StreamRaceError(
        message,
        kind=kind,
        buffer=state.label,
        op=op,
        stream=stream,
        prior_op=prior.op,
        prior_stream=prior.stream,
    )


class _Checker:
    """The clocks, buffer histories and lifetime holds, under one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clocks: dict[StreamKey, dict[StreamKey, int]] = {}
        self._host: dict[StreamKey, int] = {}
        self._buffers: dict[int, _BufferState] = {}
        self._dead: deque[_BufferRef] = deque()
        self._labels = itertools.count(1)
        self._host_holds: list[_HostHold] = []
        self._event_holds: list[_EventHold] = []

    # Everything below whose name starts with `_` expects the lock to be held.

    def _forget_dead(self) -> None:
        while self._dead:
            ref = self._dead.popleft()
            state = self._buffers.get(ref.key)
            if state is not None and state.ref is ref:
                del self._buffers[ref.key]

    def _stream_clock(self, key: StreamKey) -> dict[StreamKey, int]:
        """`V[key]`, first ordered after what the host knows (the host issues every stream op)."""
        clock = self._clocks.setdefault(key, {})
        _merge_into(clock, self._host)
        return clock

    def _new_state(self, owner: object) -> _BufferState:
        try:
            ref = _BufferRef(owner, self._dead.append)
        except TypeError:
            raise TypeError(
                f"the stream sanitizer tracks buffers by weak reference, and "
                f"{type(owner).__name__} objects do not support one; pass the array itself"
            ) from None
        ref.key = id(owner)
        state = _BufferState(ref, _describe(owner, next(self._labels)))
        self._buffers[ref.key] = state
        return state

    def _state(self, owner: object) -> _BufferState:
        state = self._buffers.get(id(owner))
        if state is None or state.ref() is not owner:
            state = self._new_state(owner)
        return state

    @staticmethod
    def _check_last_write(
        state: _BufferState, clock: dict[StreamKey, int], key: StreamKey, op: str, kind: str
    ) -> None:
        """Raises a `kind` race unless the buffer's last write is ordered before `clock`."""
        write = state.last_write
        if write is not None and clock.get(write.stream, 0) < write.tick:
            raise _race(kind, state, op, key, write)

    @staticmethod
    def _check_write(
        state: _BufferState, clock: dict[StreamKey, int], key: StreamKey, op: str
    ) -> None:
        _Checker._check_last_write(state, clock, key, op, "write-after-write")
        for read in state.reads.values():
            if clock.get(read.stream, 0) < read.tick:
                raise _race("write-after-read", state, op, key, read)

    def kernel(
        self,
        key: StreamKey,
        op: str,
        reads: list[object],
        writes: list[object],
        allocs: list[object],
    ) -> None:
        created = {id(owner) for owner in allocs}
        written = {id(owner) for owner in writes} | created
        with self._lock:
            self._forget_dead()
            clock = self._stream_clock(key)
            read_states = [self._state(o) for o in reads if id(o) not in written]
            write_states = [self._state(o) for o in writes if id(o) not in created]
            for state in read_states:
                self._check_last_write(state, clock, key, op, "read-after-write")
            for state in write_states:
                self._check_write(state, clock, key, op)
            tick = clock[key] = clock.get(key, 0) + 1
            access = _Access(key, tick, op)
            for state in read_states:
                state.reads[key] = access
            for state in write_states:
                state.record_write(access)
            for owner in allocs:
                self._new_state(owner).record_write(access)

    def forget(self, owner: object) -> None:
        with self._lock:
            state = self._buffers.get(id(owner))
            if state is not None and state.ref() is owner:
                del self._buffers[id(owner)]

    def snapshot(self, key: StreamKey) -> VectorClock:
        with self._lock:
            return VectorClock(self._stream_clock(key))

    def wait(self, key: StreamKey, clock: VectorClock) -> None:
        with self._lock:
            _merge_into(self._stream_clock(key), clock._ticks)

    def host_wait(self, clock: VectorClock | None) -> None:
        if clock is not None:
            with self._lock:
                _merge_into(self._host, clock._ticks)
        self.release_completed()

    def host_clock(self) -> VectorClock:
        with self._lock:
            return VectorClock(self._host)

    def hold_until_host_sees(self, buffer: object, key: StreamKey) -> None:
        with self._lock:
            tick = self._clocks.get(key, {}).get(key, 0)
            if self._host.get(key, 0) < tick:
                self._host_holds.append(_HostHold(buffer, key, tick))

    def hold_until_event(self, buffer: object, native_event: Any) -> None:
        with self._lock:
            self._event_holds.append(_EventHold(buffer, native_event))

    def release_completed(self) -> int:
        """Drop the holds whose work is known complete; returns how many were dropped.

        The buffers are released after the lock is let go, so their finalizers
        never run under it; CuPy events are queried outside it too.
        """
        with self._lock:
            released: list[object] = [
                hold for hold in self._host_holds if self._host.get(hold.stream, 0) >= hold.tick
            ]
            if released:
                self._host_holds = [
                    hold for hold in self._host_holds if self._host.get(hold.stream, 0) < hold.tick
                ]
            event_holds = list(self._event_holds)
        finished = [hold for hold in event_holds if hold.native_event.done]
        if finished:
            finished_ids = {id(hold) for hold in finished}
            with self._lock:
                self._event_holds = [
                    hold for hold in self._event_holds if id(hold) not in finished_ids
                ]
            released.extend(finished)
        return len(released)

    def pending_holds(self) -> int:
        with self._lock:
            return len(self._host_holds) + len(self._event_holds)

    def tracked_buffers(self) -> int:
        with self._lock:
            self._forget_dead()
            return len(self._buffers)


_checker = _Checker()


def enabled_for(device_spec: Device | str | None) -> bool:
    """Whether accesses on this device are checked: always on `sim`, on `cuda` with the env flag."""
    dev = device(device_spec)
    if dev.type == "sim":
        return True
    if dev.type == "cuda":
        return os.environ.get(CHECK_ENV) == "1"
    return False


def _checked(stream: StreamLike | None) -> bool:
    return stream is not None and enabled_for(stream.device)


def on_kernel(
    stream: StreamLike | None,
    *,
    op: str,
    reads: Iterable[object] = (),
    writes: Iterable[object] = (),
    allocs: Iterable[object] = (),
) -> None:
    """Check, then record, one kernel launched on `stream`.

    Raises StreamRaceError, recording nothing, if any access is unordered with
    a conflicting earlier one. A buffer both read and written counts as written.
    See Note [Stream sanitizer].
    """
    if not _checked(stream):
        return
    _checker.kernel(
        stream_key(stream),
        op,
        [_storage_owner(b) for b in reads],
        [_storage_owner(b) for b in writes],
        [_storage_owner(b) for b in allocs],
    )


def check_read(buffer: object, stream: StreamLike | None, op: str) -> None:
    """A kernel on `stream` that reads `buffer`."""
    on_kernel(stream, op=op, reads=(buffer,))


def check_write(buffer: object, stream: StreamLike | None, op: str) -> None:
    """A kernel on `stream` that writes `buffer`."""
    on_kernel(stream, op=op, writes=(buffer,))


def host_read(buffer: object, stream: StreamLike | None, op: str) -> None:
    """The host reads `buffer` (a device-to-host copy): a read on `stream`, then a synchronize."""
    if not _checked(stream):
        return
    check_read(buffer, stream, op)
    host_wait(snapshot(stream))


def forget(buffer: object) -> None:
    """Drop the history of `buffer`'s storage, as if it had never been used."""
    _checker.forget(_storage_owner(buffer))


def snapshot(stream: StreamLike) -> VectorClock | None:
    """The clock an event recorded on `stream` now carries; None where checks are off."""
    if not _checked(stream):
        return None
    return _checker.snapshot(stream_key(stream))


def wait(stream: StreamLike, clock: VectorClock | None) -> None:
    """`stream` waits for an event carrying `clock`: its clock becomes the element-wise max."""
    if clock is None or not _checked(stream):
        return
    _checker.wait(stream_key(stream), clock)


def host_wait(clock: VectorClock | None) -> None:
    """The host waited for a stream or event carrying `clock`; completed holds are released."""
    _checker.host_wait(clock)


def record_stream(buffer: object, stream: StreamLike | None) -> None:
    """Keep `buffer` alive until the work queued on `stream` so far is known to be complete.

    Use it when a buffer made on one stream is used on another and its owner
    may drop it before that stream is done. See Note [Stream sanitizer].
    """
    if stream is None:
        return
    if stream.device.type == "cuda":
        _checker.hold_until_event(buffer, stream.record_event().native)
    else:
        _checker.hold_until_host_sees(buffer, stream_key(stream))
    _checker.release_completed()


def clock_of(stream: StreamLike) -> VectorClock:
    """A snapshot of `stream`'s clock (for tests and debugging)."""
    return _checker.snapshot(stream_key(stream))


def host_clock() -> VectorClock:
    """A snapshot of the host's clock (for tests and debugging)."""
    return _checker.host_clock()


def release_completed() -> int:
    """Release the `record_stream` holds whose work is known complete; returns how many."""
    return _checker.release_completed()


def pending_holds() -> int:
    """How many `record_stream` holds are still keeping a buffer alive."""
    return _checker.pending_holds()


def tracked_buffers() -> int:
    """How many live buffers have a history."""
    return _checker.tracked_buffers()
