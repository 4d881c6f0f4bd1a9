"""Ready queues: where node tasks wait for the thread that runs them.

Note [Ready queue order]
~~~~~~~~~~~~~~~~~~~~~~~~
A ready queue is a heap: shutdown tasks first, then wake-up tasks (no node),
then the task of the deepest reentrant backward, then the highest
`sequence_nr` (the node created last in the forward pass runs first).
AccumulateGrad nodes carry the largest sequence number, so a leaf's gradient is
written as soon as it is complete.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .graph_task import GraphTask
    from .node import Node

# Which queue a thread serves: none yet, the caller's CPU queue, or a device index >= 0.
NO_DEVICE = -2
CPU_DEVICE = -1

_SHUTDOWN_KEY = -(1 << 200)
_WAKEUP_KEY = -(1 << 199)
_entry_ids = itertools.count()


class ReadyQueue:
    """A heap of node tasks `(key, entry id, graph task, node, input grads)`.

    Ordered as Note [Ready queue order] says; a wake-up task has no node, a
    shutdown task has no graph task.
    """

    __slots__ = ("_heap", "_lock", "_not_empty", "_waiters")

    def __init__(self) -> None:
        self._heap: list = []
        self._lock = threading.Lock()
        self._not_empty = threading.Condition(self._lock)
        self._waiters = 0

    def push(self, graph_task: GraphTask, fn: Node | None, inputs: list,
             increment_outstanding: bool = True) -> None:
        """Queue `fn` with its input gradients (no `fn`: wake the task's owner up)."""
        if fn is None:
            key = _WAKEUP_KEY
        else:
            key = -((graph_task.reentrant_depth << 64) | fn.sequence_nr)
        if increment_outstanding:
            graph_task.add_outstanding()
        with self._lock:
            heapq.heappush(self._heap, (key, next(_entry_ids), graph_task, fn, inputs))
            if self._waiters:
                self._not_empty.notify()

    def push_shutdown(self) -> None:
        with self._lock:
            heapq.heappush(self._heap, (_SHUTDOWN_KEY, next(_entry_ids), None, None, None))
            if self._waiters:
                self._not_empty.notify()

    def pop(self) -> tuple:
        with self._lock:
            while not self._heap:
                self._waiters += 1
                try:
                    self._not_empty.wait()
                finally:
                    self._waiters -= 1
            return heapq.heappop(self._heap)

    def drop_tasks_of(self, graph_task: GraphTask) -> None:
        """Forget the queued tasks of a graph task that failed (their grads are garbage)."""
        with self._lock:
            self._heap = [e for e in self._heap if e[2] is not graph_task]
            heapq.heapify(self._heap)

    def __len__(self) -> int:
        return len(self._heap)
