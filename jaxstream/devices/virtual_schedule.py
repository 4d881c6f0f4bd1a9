"""The event-by-event simulation behind virtual time (Note [Virtual time] in virtual_time.py).

Each stream is a FIFO queue of items: kernels, markers (an event record, or the
point a host sync waits for) and waits (for another stream's marker). Every item
has a `ready` time, the host's clock when it was issued: the device cannot see
it earlier. The simulation advances from one change to the next (a kernel
starts, ends its launch latency or ends; an item becomes ready), and in between
the kernels of one device's engine share it as processors share time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field


@dataclass(eq=False)
class Kernel:
    """One kernel on `stream`; `pool` is the part of the device it shares with others.

    `latency` is the launch latency (it fills nothing), `work` its time alone on
    the device after that, and `occupancy` the fraction of its pool it fills.
    `start` and `end` are set when the simulation reaches them.
    """

    name: str
    stream: Hashable
    pool: Hashable
    ready: float
    latency: float
    work: float
    occupancy: float
    details: dict = field(default_factory=dict)
    start: float | None = None
    end: float | None = None
    latency_left: float = 0.0
    work_left: float = 0.0


@dataclass(eq=False)
class Marker:
    """A point in a stream: `time` is when the stream reached it (None until then)."""

    ready: float
    time: float | None = None


@dataclass(eq=False)
class Wait:
    """The stream goes on only once `marker` (on any stream) has been reached."""

    ready: float
    marker: Marker


Item = Kernel | Marker | Wait


class Schedule:
    """The streams' queues and the kernels running now, at virtual time `now` (seconds)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.kernels: list[Kernel] = []
        self._queues: dict[Hashable, deque[Item]] = {}
        self._running: dict[Hashable, Kernel] = {}

    def push(self, stream: Hashable, item: Item) -> None:
        """Queue `item` at the end of `stream`."""
        self._queues.setdefault(stream, deque()).append(item)
        if isinstance(item, Kernel):
            item.latency_left, item.work_left = item.latency, item.work
            self.kernels.append(item)

    def run_until(self, marker: Marker) -> float:
        """Simulate until `marker` is reached; returns its time."""
        self._start_ready()
        while marker.time is None:
            if not self._advance():
                raise RuntimeError(
                    "virtual time: a stream waits for a point no stream will reach "
                    "(a bug in the virtual clock's bookkeeping)"
                )
            self._start_ready()
        return marker.time

    def run_all(self) -> float:
        """Simulate until every queued item is done; returns the time then."""
        self._start_ready()
        while self._advance():
            self._start_ready()
        return self.now

    def _start_ready(self) -> None:
        """Take every item that can go at `now` off the head of its idle stream."""
        progress = True
        while progress:
            progress = False
            for stream, queue in self._queues.items():
                while queue and stream not in self._running and queue[0].ready <= self.now:
                    item = queue[0]
                    if isinstance(item, Wait) and item.marker.time is None:
                        break
                    queue.popleft()
                    if isinstance(item, Marker):
                        item.time = self.now
                        progress = True
                    elif isinstance(item, Kernel):
                        item.start = self.now
                        self._running[stream] = item

    def _rates(self) -> dict[Hashable, float]:
        """Per pool, the speed of its kernels past their latency: 1, or 1 / the occupancy sum."""
        demand: dict[Hashable, float] = {}
        for kernel in self._running.values():
            if kernel.latency_left <= 0.0:
                demand[kernel.pool] = demand.get(kernel.pool, 0.0) + kernel.occupancy
        return {pool: 1.0 / max(1.0, total) for pool, total in demand.items()}

    def _phase_end(self, kernel: Kernel, rates: dict[Hashable, float]) -> float:
        """When `kernel`'s current phase (latency, then work) ends at today's rates."""
        if kernel.latency_left > 0.0:
            return self.now + kernel.latency_left
        return self.now + kernel.work_left / rates[kernel.pool]

    def _advance(self) -> bool:
        """Move `now` to the next change; False when nothing is left to happen.

        The kernels whose phase ends then end it exactly, so rounding never leaves
        a sliver of work that no later step could finish.
        """
        rates = self._rates()
        ends = {stream: self._phase_end(k, rates) for stream, k in self._running.items()}
        issues = [
            queue[0].ready
            for stream, queue in self._queues.items()
            if queue and stream not in self._running and queue[0].ready > self.now
        ]
        then = min([*ends.values(), *issues], default=None)
        if then is None:
            return False
        elapsed = then - self.now
        for stream, kernel in list(self._running.items()):
            if kernel.latency_left > 0.0:
                kernel.latency_left = 0.0 if ends[stream] <= then else kernel.latency_left - elapsed
            elif ends[stream] <= then:
                kernel.end = then
                del self._running[stream]
            else:
                kernel.work_left -= elapsed * rates[kernel.pool]
        self.now = then
        return True
