"""Happens-before checking of buffers shared between streams.

Kernels on one stream run in order; kernels on different streams run in any
order unless an event, `wait_stream` or a host synchronize orders them. This
module keeps the vector clocks that say which work is ordered before which and
raises `StreamRaceError` when a buffer is used on a stream that is not ordered
after the buffer's conflicting uses. See Note [Stream sanitizer] in checker.py
for the model; clock.py has the stream keys and vector clocks.

It is on for `sim` devices unless `JAXSTREAM_STREAM_CHECK=0` turns it off (to
time them) and, since it costs a lock per kernel, on
`cuda` devices only with `JAXSTREAM_STREAM_CHECK=1`. Every function is a no-op
for a stream of a device it is off for, and for `stream=None` (the cpu), so
callers need not test `enabled_for` themselves.

What the op dispatcher and the engine call:

    enabled_for(device) -> bool
    on_kernel(stream, *, op, reads=(), writes=(), allocs=()) -> None
        one kernel on `stream` in the model: checks every access, then records it.
        `allocs` are buffers the kernel creates (a write with no history).
    launch(stream, *, op, reads=(), writes=(), allocs=()) -> None
        a kernel jaxstream launches: `on_kernel`, after the device's runtime
        checks that the stream's device is current (Note [Device guards]) and
        charges `allocs` to the device's memory, which may raise
        OutOfMemoryError (Note [Sim device memory] in devices/memory.py).
        `host_read` is a launch too, and so is `on_op`, whose caller (the op
        dispatcher) has entered the device's guard itself.
    check_read(buffer, stream, op) / check_write(buffer, stream, op)
        a kernel with a single access.
    host_read(buffer, stream, op)
        the host reads `buffer` (`numpy()`, `item()`): a read on `stream`,
        then the host waits for `stream`.
    record_stream(buffer, stream)
        keeps `buffer` alive until the work queued on `stream` so far is done
        (`Tensor.record_stream` calls it when the tensor is deallocated).
    forget(buffer)
        drops a buffer's history (it is also dropped when the buffer dies).

What `jaxstream.streams` calls (users go through `Stream` and `Event`):

    snapshot(stream) -> VectorClock | None     an event is recorded on `stream`
    wait(stream, clock)                        `stream` waits for an event
    host_wait(clock)                           the host waits for a stream/event
    host_wait_device(device)                   the host waits for every stream of a device

Introspection for tests and debugging: `clock_of(stream)`, `host_clock()`,
`tracked_buffers()`, `tracked_streams()`, `clock_entries()`, `pending_holds()`,
`release_completed()`. The clocks of streams that are gone are dropped (Note
[Retiring streams] in stream_clocks.py), so the last two stay bounded in a
program that makes a stream per step.

A buffer is any array; views resolve to the array that owns the memory, so a
write through a view conflicts with a read of its base. Arrays are tracked by
weak reference, so the sanitizer never keeps one alive on its own.
"""

from __future__ import annotations

from collections.abc import Iterable

from jaxstream.devices import STREAM_CHECK_ENV, Device, device
from jaxstream.devices.tracing import inside_trace

from .checker import Checker
from .clock import XLA_STREAM_ID, StreamKey, StreamLike, VectorClock, stream_key
from .races import StreamRaceError, storage_owner

CHECK_ENV = STREAM_CHECK_ENV

__all__ = [
    "CHECK_ENV",
    "StreamKey",
    "StreamLike",
    "StreamRaceError",
    "VectorClock",
    "XLA_STREAM_ID",
    "check_read",
    "check_write",
    "clock_entries",
    "clock_of",
    "deallocated",
    "enabled_for",
    "forget",
    "host_clock",
    "host_read",
    "host_wait",
    "host_wait_device",
    "launch",
    "on_kernel",
    "on_op",
    "pending_holds",
    "record_stream",
    "release_completed",
    "snapshot",
    "storage_owner",
    "stream_key",
    "tracked_buffers",
    "tracked_streams",
    "wait",
]

_checker = Checker()


def enabled_for(device_spec: Device | str | None) -> bool:
    """Whether accesses on this device are checked: on `sim` unless the env flag is 0, on
    `cuda` if it is 1."""
    return device(device_spec).kind.sanitized()


def _checked(stream: StreamLike | None) -> bool:
    return stream is not None and enabled_for(stream.device) and not inside_trace()


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
        stream,
        op,
        [storage_owner(b) for b in reads],
        [storage_owner(b) for b in writes],
        [storage_owner(b) for b in allocs],
    )


def _check_device(stream: StreamLike, op: str) -> None:
    """The runtime's check that `stream`'s device is current (Note [Device guards])."""
    dev = stream.device
    dev.kind.check_current(dev.index, "launching %r on %r", op, stream)


def launch(
    stream: StreamLike | None,
    *,
    op: str,
    reads: Iterable[object] = (),
    writes: Iterable[object] = (),
    allocs: Iterable[object] = (),
) -> None:
    """A kernel jaxstream launches on `stream`, under its device's guard, its new buffers
    charged to the device's memory (Note [Sim device memory]); then `on_kernel`."""
    if stream is None:
        return
    _check_device(stream, op)
    if inside_trace():  # tracers are no buffers: Note [Stream sanitizer] in checker.py
        return
    if allocs:
        allocs = [storage_owner(b) for b in allocs]
        stream.device.kind.allocate(stream.device.index, allocs, op)
    on_kernel(stream, op=op, reads=reads, writes=writes, allocs=allocs)


def on_op(stream: StreamLike, op: str, reads: list, out: object, checked: bool) -> None:
    """One op's kernel launched on `stream`, under its device's guard (the op dispatcher
    launches so): it read `reads` and produced `out`; `checked` says whether the checks are
    on for the device, as the caller read it, once (Note [Reading a switch on every op]).
    The caller (Note [The watchers' bus] in device_events.py) calls it only where the checks
    are on or the device counts its memory.

    The memory of `out` is charged to the device (Note [Sim device memory]), which counts
    a buffer once: an output that views an input's memory charges that memory again, which
    counts nothing new. The checks, where they are on, see the reads and the new buffer.
    """
    if inside_trace():
        return
    dev = stream.device
    kind = dev.kind
    # `storage_owner` called only for views: every op on a sim device comes here.
    owner = out if getattr(out, "base", None) is None else storage_owner(out)
    if kind.counts_memory:
        kind.allocate(dev.index, (owner,), op)
    if checked:
        reads = [storage_owner(b) for b in reads]
        allocs = [] if any(read is owner for read in reads) else [owner]
        _checker.kernel(stream, op, reads, [], allocs)


def check_read(buffer: object, stream: StreamLike | None, op: str) -> None:
    """A kernel on `stream` that reads `buffer`."""
    on_kernel(stream, op=op, reads=(buffer,))


def check_write(buffer: object, stream: StreamLike | None, op: str) -> None:
    """A kernel on `stream` that writes `buffer`."""
    on_kernel(stream, op=op, writes=(buffer,))


def host_read(buffer: object, stream: StreamLike | None, op: str) -> None:
    """The host reads `buffer` (a device-to-host copy): a read on `stream`, then a synchronize."""
    if stream is None:
        return
    _check_device(stream, op)
    if not _checked(stream):
        return
    check_read(buffer, stream, op)
    host_wait(snapshot(stream))


def forget(buffer: object) -> None:
    """Drop the history of `buffer`'s storage, as if it had never been used."""
    _checker.forget(storage_owner(buffer))


def snapshot(stream: StreamLike) -> VectorClock | None:
    """The clock an event recorded on `stream` now carries; None where checks are off."""
    if not _checked(stream):
        return None
    return _checker.snapshot(stream)


def wait(stream: StreamLike, clock: VectorClock | None) -> None:
    """`stream` waits for an event carrying `clock`: its clock becomes the element-wise max."""
    if clock is None or not _checked(stream):
        return
    _checker.wait(stream, clock)


def host_wait(clock: VectorClock | None) -> None:
    """The host waited for a stream or event carrying `clock`; completed holds are released."""
    _checker.host_wait(clock)


def record_stream(buffer: object, stream: StreamLike | None) -> None:
    """Keep `buffer` alive until the work queued on `stream` so far is known to be complete.

    See Note [Stream sanitizer]; `Tensor.record_stream` calls `deallocated` instead.
    """
    if stream is None:
        return
    deallocated(buffer, stream)
    _checker.release_completed()


def deallocated(buffer: object, stream: StreamLike) -> None:
    """`buffer` was deallocated with `stream` recorded: hold it for `stream`'s work so far.

    Takes no lock, so that a finalizer can call it (Note [record_stream at
    deallocation] in conversions.py): the hold is made from the snapshot on the
    sanitizer's next call, before any later work is queued.
    """
    event = stream.device.kind.completion_event(stream)
    _checker.defer_hold(storage_owner(buffer), stream_key(stream), event)


def host_wait_device(dev: Device) -> None:
    """The host waits for every stream of `dev` (`js.synchronize`)."""
    if enabled_for(dev):
        _checker.host_wait(_checker.device_clock(dev))


def clock_of(stream: StreamLike) -> VectorClock:
    """A snapshot of `stream`'s clock (for tests and debugging)."""
    return _checker.snapshot(stream)


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


def tracked_streams() -> int:
    """How many streams have a clock: the live ones, and dead ones not yet synchronized."""
    return _checker.tracked_streams()


def clock_entries() -> int:
    """How many entries the streams' clocks and the host's hold together (what a merge walks)."""
    return _checker.clock_entries()
