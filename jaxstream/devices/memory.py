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
A buffer is given back by a weak reference whose callback only queues it; the queue is
drained under the lock, so a buffer that dies while the lock is held (in a collection that
an allocation set off) never waits for it. The `cuda` kind charges nothing: CuPy's memory
pool counts its own, and its `set_limit` makes it raise CuPy's OutOfMemoryError.
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


class _Charge(weakref.ref):
    """A live buffer's charge: the weak reference that gives its bytes back when it dies."""

    __slots__ = ("key", "index", "nbytes")


class SimMemory:
    """Live bytes and limits of the sim devices, by device index (Note [Sim device memory])."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._limits: dict[int, int] = {}
        self._in_use: dict[int, int] = {}
        self._charges: dict[int, _Charge] = {}  # by id of the live buffer
        self._dead: deque[_Charge] = deque()

    def _give_back_dead(self) -> None:
        """Return the bytes of the buffers that died since; expects the lock held."""
        while self._dead:
            charge = self._dead.popleft()
            if self._charges.get(charge.key) is charge:
                del self._charges[charge.key]
                self._in_use[charge.index] -= charge.nbytes

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
            self._give_back_dead()
            return self._in_use.get(index, 0)

    def allocate(self, index: int, buffers: Iterable[object], op: str) -> None:
        """Charge the new `buffers` of `op` to device `index`, or raise OutOfMemoryError
        charging none of them if together they would pass its limit."""
        charges = self._charges
        with self._lock:
            if self._dead:
                self._give_back_dead()
            fresh: dict[int, object] = {}
            requested = 0
            for buffer in buffers:
                charge = charges.get(id(buffer))
                if id(buffer) not in fresh and (
                    charge is None or not self._still_charged(charge, buffer)
                ):
                    fresh[id(buffer)] = buffer
                    requested += buffer.nbytes
            in_use = self._in_use.get(index, 0) + requested
            limit = self._limits.get(index)
            if limit is not None and in_use > limit:
                raise OutOfMemoryError(f"sim:{index}", op, requested, limit, in_use - requested)
            self._in_use[index] = in_use
            for key, buffer in fresh.items():
                charge = _Charge(buffer, self._dead.append)
                charge.key, charge.index, charge.nbytes = key, index, buffer.nbytes
                charges[key] = charge

    def _still_charged(self, charge: _Charge, buffer: object) -> bool:
        """Whether `charge`, found under `buffer`'s id, is `buffer`'s; if not, its buffer died
        during this call, its callback not drained yet, and it is given back here."""
        if charge() is buffer:
            return True
        del self._charges[charge.key]
        self._in_use[charge.index] -= charge.nbytes
        return False
