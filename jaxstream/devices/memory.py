"""The memory of sim devices: the bytes each one's live buffers hold, an optional limit,
and `OutOfMemoryError`, raised where a GPU's allocator would fail.

Note [Sim device memory]
~~~~~~~~~~~~~~~~~~~~~~~~
A sim device's arrays are host arrays, so nothing on it runs out by itself; yet what a
program does when a GPU runs out mid-backward (the error, the engine afterwards) must be
testable on a laptop. So each sim device counts the bytes of the live buffers made on it:
every buffer a launch reports as new (`allocs` of `sanitizer.launch`, a fresh output of
`sanitizer.on_op`) is charged to its device when the launch is issued, through
`DeviceKind.allocate`, and given back when the buffer dies. With a limit set
(`js.sim.set_memory_limit`), a charge that would pass it raises `OutOfMemoryError` before
the launch is recorded anywhere, as CUDA's allocator fails the call that asked: the values
were computed on the host already, and the buffer is dropped unseen. In a backward the error
reaches the caller with the failing node's name, and the worker thread lives on (Note [A
worker never dies] in autograd/threads.py). A buffer a `record_stream` hold keeps alive
stays charged, as a caching allocator's block stays reserved until its stream is done.
Every op on a sim device charges its output, so a charge costs little: a plain weak
reference to the buffer, queued without a lock on a device without a limit. The queue is
folded into the count, under the lock, by everything that reads it: `memory_allocated`,
and a charge on a device with a limit, which may raise. Folding drops the buffers that
died meanwhile (never counted) and those charged already (the owner of a view's memory is
not counted twice), and counts each other one with a weak reference whose callback queues
its death, to be given back at the next read; so a read costs what changed since the last
one, and the buffers that live no longer than a few ops, most of them, never cost a
callback. Until a read, the queue keeps itself short: once it has doubled, the charges of
dead buffers are dropped from it, which keeps it within twice the live buffers at a cost
per charge that does not grow with them. A buffer that dies while the lock is held (in a
collection that a charge set off) only queues its death, and never waits for the lock. The
`cuda` kind charges nothing: CuPy's memory pool counts its own, and its `set_limit` makes
it raise CuPy's OutOfMemoryError.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Iterable


class OutOfMemoryError(RuntimeError):
    """An allocation on a device would pass its memory limit (the sim twin of CUDA's).

    Attributes: `device` (its name), `requested` (the bytes asked for), `limit` and
    `in_use` (the bytes of live buffers on the device when it was asked).
    """

    def __init__(self, device: str, op: str, requested: int, limit: int, in_use: int) -> None:
        super().__init__(
            f"{device} is out of memory: {op!r} tried to allocate {requested:,} bytes, with "
            f"{in_use:,} of the device's {limit:,}-byte limit in use ({limit - in_use:,} "
            f"free). Free tensors that are no longer needed (del them; a backward without "
            f"retain_graph frees its saved tensors), let the streams holding record_stream "
            f"memory finish (js.synchronize({device!r})), or raise the limit with "
            f"js.sim.set_memory_limit({device!r}, n_bytes) (None removes it)."
        )
        self.device = device
        self.requested = requested
        self.limit = limit
        self.in_use = in_use


QUEUE_FLOOR = 1024
"""The fewest queued charges at which a charge drops those of dead buffers from the queue."""


class _Charge(weakref.ref):
    """A counted buffer's charge: the weak reference that gives its bytes back when it dies."""

    __slots__ = ("key", "index", "nbytes")


class SimMemory:
    """Live bytes and limits of the sim devices, by device index (Note [Sim device memory])."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._limits: dict[int, int] = {}
        self._in_use: dict[int, int] = {}
        self._charges: dict[int, _Charge] = {}  # by id of the counted buffer
        self._dead: deque[_Charge] = deque()
        # A weak reference to a buffer and its device index, appended without the lock; its
        # bytes are read when it is folded in, if it is still alive (JAX computes them).
        self._queued: deque[tuple[weakref.ref, int]] = deque()
        self._compact_at = QUEUE_FLOOR

    def set_limit(self, index: int, limit: int | None) -> None:
        with self._lock:
            if limit is None:
                self._limits.pop(index, None)
            else:
                self._limits[index] = limit

    def limit(self, index: int) -> int | None:
        return self._limits.get(index)

    def in_use(self, index: int) -> int:
        with self._lock:
            self._fold()
            return self._in_use.get(index, 0)

    def allocate(self, index: int, buffers: Iterable[object], op: str) -> None:
        """Charge the new `buffers` of `op` to device `index`, or raise OutOfMemoryError
        charging none of them if together they would pass its limit."""
        if index not in self._limits:  # every op on a sim device comes here
            queued = self._queued
            for buffer in buffers:
                queued.append((weakref.ref(buffer), index))
            if len(queued) >= self._compact_at:
                with self._lock:
                    self._compact()
            return
        with self._lock:
            self._fold()
            fresh = {id(b): b for b in buffers if not self._charged(b)}
            requested = sum(buffer.nbytes for buffer in fresh.values())
            in_use = self._in_use.get(index, 0)
            limit = self._limits.get(index)
            if limit is not None and in_use + requested > limit:
                raise OutOfMemoryError(f"sim:{index}", op, requested, limit, in_use)
            for buffer in fresh.values():
                self._charge(buffer, index)

    def _charged(self, buffer: object) -> bool:
        """Whether `buffer` is counted; a charge under its id whose buffer died, its death
        not given back yet, is given back here. Expects the lock held."""
        charge = self._charges.get(id(buffer))
        if charge is None:
            return False
        if charge() is buffer:
            return True
        self._give_back(charge)
        return False

    def _charge(self, buffer: object, index: int) -> None:
        """Count live `buffer`, which has no charge; expects the lock held."""
        charge = _Charge(buffer, self._dead.append)
        charge.key, charge.index, charge.nbytes = id(buffer), index, buffer.nbytes
        self._charges[charge.key] = charge
        self._in_use[index] = self._in_use.get(index, 0) + charge.nbytes

    def _give_back(self, charge: _Charge) -> None:
        if self._charges.get(charge.key) is charge:
            del self._charges[charge.key]
            self._in_use[charge.index] -= charge.nbytes

    def _fold(self) -> None:
        """Give back the counted buffers that died, and count the queued charges of live
        buffers not counted yet; expects the lock held."""
        while self._dead:
            self._give_back(self._dead.popleft())
        queued = self._queued
        while queued:
            ref, index = queued.popleft()
            buffer = ref()
            if buffer is not None and not self._charged(buffer):
                self._charge(buffer, index)
            del buffer
        self._compact_at = QUEUE_FLOOR

    def _compact(self) -> None:
        """Drop the queued charges of dead buffers; expects the lock held. Those queued
        meanwhile, without the lock, stay."""
        queued = self._queued
        kept = []
        for _ in range(len(queued)):
            charge = queued.popleft()
            if charge[0]() is not None:
                kept.append(charge)
        queued.extend(kept)
        self._compact_at = max(QUEUE_FLOOR, 2 * len(queued))
