"""Ready queues: where node tasks wait for the thread that runs them.

Note [Ready queue order]
~~~~~~~~~~~~~~~~~~~~~~~~
A ready queue is a heap: shutdown tasks first, then wake-up tasks (no node),
then the task of the deepest reentrant backward, then the highest
`sequence_nr` (the node created last in the forward pass runs first).
AccumulateGrad nodes carry the largest sequence number, so a leaf's gradient is
written as soon as it is complete.

Note [Failed tasks leave the queues]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A node task of a graph task that has failed must not run: its gradients are
garbage and its caller has been given the error. PyTorch's ready queue moves
such tasks (whose graph task has expired) to the front, where the worker pops
and skips them. Here the engine removes them outright when the task fails
(`drop_tasks_of`, on every queue the task may have used), so they neither run
nor hold their gradients nor delay other tasks, and `push` refuses a node of a
failed task. The check in `push` and the removal both happen under the queue's
lock and after the task's exception is set, so no node task of a failed graph
task is left behind in a queue. Wake-ups of the failed task are kept: its
owner must still wake up to raise the error. A worker that pops a node task of
a failed task anyway (the task failed between pop and run) skips it.
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

    def push(self, graph_task: GraphTask, fn: Node | None, inputs: list) -> None:
        """Queue `fn` with its input gradients (no `fn`: wake the task's owner up)."""
        if fn is None:
            key = _WAKEUP_KEY
        else:
            key = -((graph_task.reentrant_depth << 64) | fn.sequence_nr)
        graph_task.add_outstanding()
        lock = self._lock
        lock.acquire()  # not `with`: this runs twice per node, and `with` costs twice as much
        try:
            if fn is not None and graph_task.exception is not None:
                return  # Note [Failed tasks leave the queues]
            heapq.heappush(self._heap, (key, next(_entry_ids), graph_task, fn, inputs))
            if self._waiters:
                self._not_empty.notify()
        finally:
            lock.release()

    def push_shutdown(self) -> None:
        with self._lock:
            heapq.heappush(self._heap, (_SHUTDOWN_KEY, next(_entry_ids), None, None, None))
            if self._waiters:
                self._not_empty.notify()

    def pop(self) -> tuple:
        lock = self._lock
        lock.acquire()  # as in `push`
        try:
            if self._heap:  # the common case: a task is waiting
                return heapq.heappop(self._heap)
            while not self._heap:
                self._waiters += 1
                try:
                    self._not_empty.wait()
                finally:
                    self._waiters -= 1
            return heapq.heappop(self._heap)
        finally:
            lock.release()

    def drop_tasks_of(self, graph_task: GraphTask) -> None:
        """Remove the node tasks of a failed graph task (Note [Failed tasks leave the queues])."""
        with self._lock:
            heap = [e for e in self._heap if e[2] is not graph_task or e[3] is None]
            if len(heap) != len(self._heap):
                heapq.heapify(heap)
                self._heap = heap

    def nodes_of(self, graph_task: GraphTask) -> list[Node]:
        """The nodes of `graph_task` waiting here (for scheduler queries)."""
        with self._lock:
            return [e[3] for e in self._heap if e[2] is graph_task and e[3] is not None]

    def __len__(self) -> int:
        return len(self._heap)


class TaskQueue:
    """The ready queue of one graph task that never leaves its caller's thread
    (`GraphTask.caller_only`): the same order as `ReadyQueue`, without a lock or a wait.

    No other thread pushes to it and the thread running the task pops only while
    the task has work, so a lock would only cost (Note [Device threads] in threads.py).
    """

    __slots__ = ("_heap",)

    def __init__(self) -> None:
        self._heap: list = []

    def push(self, graph_task: GraphTask, fn: Node | None, inputs: list) -> None:
        if fn is not None and graph_task.exception is not None:
            return  # Note [Failed tasks leave the queues]
        graph_task.outstanding_tasks += 1  # one thread: no lock (`add_outstanding` takes one)
        # The key `ReadyQueue.push` makes (Note [Ready queue order]).
        key = _WAKEUP_KEY if fn is None else -((graph_task.reentrant_depth << 64) | fn.sequence_nr)
        heapq.heappush(self._heap, (key, next(_entry_ids), graph_task, fn, inputs))

    def pop(self) -> tuple:
        return heapq.heappop(self._heap)

    def drop_tasks_of(self, graph_task: GraphTask) -> None:
        self._heap = [e for e in self._heap if e[3] is None]
        heapq.heapify(self._heap)

    def nodes_of(self, graph_task: GraphTask) -> list[Node]:
        return [e[3] for e in self._heap if e[3] is not None]

    def __len__(self) -> int:
        return len(self._heap)

