"""The checker: buffer histories, stream clocks and `record_stream` holds, under one lock.

`jaxstream.sanitizer` holds the one `Checker` and decides which streams reach it; the
clocks, and the forgetting of dead streams' clocks, are in stream_clocks.py.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections import deque
from typing import Any, NamedTuple

from .clock import StreamKey, StreamLike, VectorClock, merge_into, stream_key
from .races import (
    Access,
    HostHold,
    StreamRaceError,
    address_of,
    describe,
    race,
    reuse_race,
)
from .stream_clocks import StreamClocks

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
# - Memory is reused: an allocator hands a freed buffer's address to a new
#   buffer. A buffer used on a stream other than the one that made it is
#   remembered when it dies, by (device, address); a new buffer at that
#   address on the stream that made it (which an allocator hands freed memory
#   back to, as PyTorch's caching allocator does) is a write, checked against
#   the dead buffer's last uses exactly as above: "allocate on A, use on B,
#   drop, reallocate on A" without B ordered before A is a write-after-read
#   race on the reused memory.
# - `record_stream(buffer, s)` holds a strong reference to the buffer until
#   the work queued on `s` at the time of the call is known to be complete.
#   `Tensor.record_stream(s)` calls it when the tensor is deallocated, so that
#   (as in PyTorch) the hold covers the work queued on `s` up to then. A new
#   buffer at a held buffer's address (an allocator that ignored the hold) is
#   a race unless its stream is ordered after that work.
#   For `sim` that is when the host's clock reaches `V[s][s]` as it was at the
#   call (a synchronize or a completed query of `s`, or of an event recorded
#   on `s` later); another stream waiting on `s` is not enough, since only
#   the host frees memory. For `cuda` it is when a CuPy event recorded on `s`
#   at the call has completed. `cuda` holds are kept even when the checks are
#   off, since the memory is really in use. Which of the two holds a stream
#   gets is its device kind's answer (`DeviceKind.completion_event`).
# - The engine's own syncs are ordinary stream operations, checked like a
#   user's (Note [Streaming backward] in autograd/input_buffer.py): the seed
#   and each gradient moved into an input buffer order the consumer's stream
#   after the producer's, and a gradient that crosses streams is recorded on
#   the consumer's (a `record_stream` hold, as above), since the producer's
#   next allocation may otherwise reuse its memory while the consumer still
#   reads it; at the end the caller's streams wait for the leaves'. With those,
#   a correctly synchronized program's backward raises nothing.
# - The clock of a stream that is gone (collected, and synchronized with the
#   host) is dropped with its entries in the other clocks, so that a program
#   that makes a stream per step keeps a bounded number of them; a stream
#   without a clock reads as ordered before everything. See Note [Retiring
#   streams] in stream_clocks.py for why that changes no answer.
# - Inside a trace (`js.compile`, `to_jax`) nothing is checked or recorded: the
#   arrays are tracers, no buffers, and one XLA program is ordered by its data
#   flow (Note [XLA's stream] in devices/xla.py).
# - One lock guards all of this and is held only for the dictionary updates.
#   Buffers are tracked by weak reference; a dying buffer's reference queues
#   its entry for removal, and the queue is drained under the lock, so garbage
#   collection never runs sanitizer code while the lock is held.


class _BufferRef(weakref.ref):
    """A weak reference that knows which table entry it belongs to."""

    __slots__ = ("key",)


class _BufferState:
    __slots__ = ("ref", "label", "last_write", "reads", "address", "home")

    def __init__(self, ref: _BufferRef, label: str) -> None:
        self.ref = ref
        self.label = label
        self.last_write: Access | None = None
        self.reads: dict[StreamKey, Access] = {}
        # (device, data address), kept once the buffer is used on a second stream,
        # and the stream that made it, whose allocations may reuse its memory.
        self.address: tuple | None = None
        self.home: StreamKey | None = None

    def accesses(self) -> list[Access]:
        write = self.last_write
        return list(self.reads.values()) if write is None else [write, *self.reads.values()]

    def record_write(self, access: Access) -> None:
        self.last_write = access
        self.reads.clear()


class _EventHold(NamedTuple):
    """A `cuda` buffer kept alive until a CuPy event completes."""

    buffer: object
    native_event: Any


class Checker:
    """The clocks, buffer histories and lifetime holds, under one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clocks = StreamClocks()
        self._buffers: dict[int, _BufferState] = {}
        self._dead: deque[_BufferRef] = deque()
        self._labels = itertools.count(1)
        self._host_holds: list[HostHold] = []
        self._event_holds: list[_EventHold] = []
        self._freed: dict[tuple, _BufferState] = {}
        # (buffer, stream, native event or None) from `defer_hold`, appended without the lock.
        self._deferred: deque[tuple] = deque()

    # Everything below whose name starts with `_` expects the lock to be held.

    def _forget_dead(self) -> None:
        while self._dead:
            ref = self._dead.popleft()
            state = self._buffers.get(ref.key)
            if state is not None and state.ref is ref:
                del self._buffers[ref.key]
                if state.address is not None:
                    state.label = f"the memory of {state.label} (deallocated, then reused)"
                    self._freed[state.address] = state

    def _note_cross_stream(self, state: _BufferState, key: StreamKey) -> None:
        """Remember the address of a buffer used on a second stream (Note [Stream sanitizer])."""
        write = state.last_write
        if state.address is None and write is not None and write.stream != key:
            owner = state.ref()
            if owner is not None:
                state.address = address_of(owner, key.device)

    def _check_reuse(self, owner: object, clock: dict, key: StreamKey, op: str) -> None:
        """A new buffer at a dead or held buffer's address must be ordered after its uses."""
        address = address_of(owner, key.device)
        if address is None:
            return
        dead = self._freed.pop(address, None)
        if dead is not None and dead.home == key:
            # An allocator hands a freed block back to the stream that made it (as
            # PyTorch's caching allocator does), in that stream's order only.
            try:
                self._check_write(dead, clock, key, op)
            except StreamRaceError:
                self._freed[address] = dead
                raise
        for hold in self._host_holds:
            if hold.address == address and not self._clocks.ordered(clock, hold.stream, hold.tick):
                if hold.buffer is not owner:
                    raise reuse_race(hold, describe(owner, 0), op, key)

    def _take_deferred(self) -> None:
        """Turn deferred deallocations into holds, from the clocks as they are now: no stream
        op ran since the deallocation, since each one calls this first."""
        while self._deferred:
            buffer, key, event = self._deferred.popleft()
            if event is not None:
                self._event_holds.append(_EventHold(buffer, event))
                continue
            tick = self._clocks.clocks.get(key, {}).get(key, 0)
            if self._clocks.host.get(key, 0) < tick:
                address = address_of(buffer, key.device)
                self._host_holds.append(HostHold(buffer, key, tick, address))

    def _stream_clock(self, key: StreamKey, stream: StreamLike | None = None) -> dict:
        """`V[key]`, first ordered after what the host knows (the host issues every stream op)."""
        self._take_deferred()
        return self._clocks.of(key, stream)

    def _new_state(self, owner: object) -> _BufferState:
        try:
            ref = _BufferRef(owner, self._dead.append)
        except TypeError:
            raise TypeError(
                f"the stream sanitizer tracks buffers by weak reference, and "
                f"{type(owner).__name__} objects do not support one; pass the array itself"
            ) from None
        ref.key = id(owner)
        state = _BufferState(ref, describe(owner, next(self._labels)))
        self._buffers[ref.key] = state
        return state

    def _state(self, owner: object) -> _BufferState:
        state = self._buffers.get(id(owner))
        if state is None or state.ref() is not owner:
            state = self._new_state(owner)
        return state

    def _check_last_write(
        self, state: _BufferState, clock: dict[StreamKey, int], key: StreamKey, op: str,
        kind: str
    ) -> None:
        """Raises a `kind` race unless the buffer's last write is ordered before `clock`."""
        write = state.last_write
        if write is not None and clock.get(write.stream, 0) < write.tick and (
            write.stream in self._clocks.clocks  # else retired: Note [Retiring streams]
        ):
            raise race(kind, state.label, op, key, write)

    def _check_write(
        self, state: _BufferState, clock: dict[StreamKey, int], key: StreamKey, op: str
    ) -> None:
        self._check_last_write(state, clock, key, op, "write-after-write")
        for read in state.reads.values():
            if clock.get(read.stream, 0) < read.tick and read.stream in self._clocks.clocks:
                raise race("write-after-read", state.label, op, key, read)

    def kernel(
        self,
        stream: StreamLike,
        op: str,
        reads: list[object],
        writes: list[object],
        allocs: list[object],
    ) -> None:
        created = {id(owner) for owner in allocs}
        written = {id(owner) for owner in writes} | created
        key = stream_key(stream)
        with self._lock:
            self._forget_dead()
            clock = self._stream_clock(key, stream)
            read_states = [self._state(o) for o in reads if id(o) not in written]
            write_states = [self._state(o) for o in writes if id(o) not in created]
            for state in read_states:
                self._check_last_write(state, clock, key, op, "read-after-write")
            for state in write_states:
                self._check_write(state, clock, key, op)
            if allocs and (self._freed or self._host_holds):
                for owner in allocs:
                    self._check_reuse(owner, clock, key, op)
            tick = clock[key] = clock.get(key, 0) + 1
            access = Access(key, tick, op)
            for state in read_states:
                self._note_cross_stream(state, key)
                state.reads[key] = access
            for state in write_states:
                self._note_cross_stream(state, key)
                state.record_write(access)
            for owner in allocs:
                state = self._new_state(owner)
                state.home = key
                state.record_write(access)

    def forget(self, owner: object) -> None:
        with self._lock:
            state = self._buffers.get(id(owner))
            if state is not None and state.ref() is owner:
                del self._buffers[id(owner)]

    def device_clock(self, dev: object) -> VectorClock:
        """What every stream of `dev` has queued so far, as one clock (a device-wide sync)."""
        with self._lock:
            ticks: dict[StreamKey, int] = {}
            for key in [k for k in self._clocks.clocks if k.device == dev]:
                merge_into(ticks, self._stream_clock(key))
            return VectorClock(ticks)

    def snapshot(self, stream: StreamLike) -> VectorClock:
        with self._lock:
            return VectorClock(self._stream_clock(stream_key(stream), stream))

    def wait(self, stream: StreamLike, clock: VectorClock) -> None:
        with self._lock:
            self._clocks.merge(self._stream_clock(stream_key(stream), stream), clock)

    def host_wait(self, clock: VectorClock | None) -> None:
        if clock is not None:
            with self._lock:
                self._take_deferred()
                self._clocks.host_wait(clock)
                host, ordered = self._clocks.host, self._clocks.ordered
                self._freed = {
                    address: state
                    for address, state in self._freed.items()
                    if not all(ordered(host, a.stream, a.tick) for a in state.accesses())
                }
        self.release_completed()

    def host_clock(self) -> VectorClock:
        with self._lock:
            return VectorClock(self._clocks.host)

    def defer_hold(self, buffer: object, key: StreamKey, native_event: Any) -> None:
        """Hold `buffer` until `native_event` completes or, without one, until the host's
        clock reaches `key`'s tick as it is now. Takes no lock (see `_take_deferred`)."""
        self._deferred.append((buffer, key, native_event))

    def release_completed(self) -> int:
        """Drop the holds whose work is known complete; returns how many were dropped.

        The buffers are released after the lock is let go, so their finalizers
        never run under it; CuPy events are queried outside it too.
        """
        with self._lock:
            self._take_deferred()
            host, ordered = self._clocks.host, self._clocks.ordered
            released: list[object] = [
                hold for hold in self._host_holds if ordered(host, hold.stream, hold.tick)
            ]
            if released:
                self._host_holds = [
                    hold for hold in self._host_holds
                    if not ordered(host, hold.stream, hold.tick)
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
            self._take_deferred()
            return len(self._host_holds) + len(self._event_holds)

    def tracked_buffers(self) -> int:
        with self._lock:
            self._forget_dead()
            return len(self._buffers)

    def tracked_streams(self) -> int:
        with self._lock:
            return self._clocks.count()

    def clock_entries(self) -> int:
        with self._lock:
            return self._clocks.entries()
