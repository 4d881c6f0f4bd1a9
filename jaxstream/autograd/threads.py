"""The engine's threads: one per accelerator device index, a reentrant pool, fork handling.

Note [Device threads]
~~~~~~~~~~~~~~~~~~~~~
Each accelerator device index (`sim:N` and `cuda:N` share index N) has one
ready queue, shared by all graph tasks, and one daemon thread that serves it
forever; both are made the first time a node is routed there. A node goes to
the queue of the first accelerator device among the gradients in its input
buffer, or to its graph task's CPU queue (the caller's) when they are all on
the cpu. With multithreading disabled (captured when the backward starts, and
inherited by nested backwards) every node goes to the CPU queue. A graph with
no accelerator node (`GraphTask.caller_only`) never leaves the caller's thread:
its counters are updated without a lock, and its nodes wait in a queue of its
own (`TaskQueue`, no lock, no wait) rather than in the caller's shared one.
That changes no order: the nodes of the deepest task on a thread run before any
other there (Note [Ready queue order]), and a caller-only task always has a
ready node until it completes, so the thread's shared queue is not looked at
until then anyway. Only the task uses its queue: a backward nested in one of
its nodes gets the thread's shared queue (on a pool thread, that thread's own),
as device threads may push there. `EngineThreads.queue_for` is the one place
that decides which queue a node or a wake-up goes to.

When a task completes on a thread other than its owner's, that thread pushes a
wake-up task (no node) to the owner's queue, so the owner stops waiting and
returns the result or raises the error. Warnings that a node issues on a thread
other than the one that called backward are held on the task and issued again
on the caller's thread when the backward returns (`capture_worker_warnings`).

Each device thread makes its index the current device of every accelerator
kind that has it (`set_worker_device`, as engine.cpp's `set_device`), so work
it runs outside a node's stream lands on its own device; a pool thread does the
same for the device of the queue it serves.

Worker threads are daemons: interpreter exit never waits for them, and an
atexit hook asks them to stop, waiting at most `config.autograd_shutdown_wait_s`
seconds and naming in a warning any thread that did not stop (one stuck in a
node, say). A process forked after they started has none of them; a backward
there raises instead of waiting forever.

Note [A worker never dies]
~~~~~~~~~~~~~~~~~~~~~~~~~~
A device thread serves a queue that every later backward on its device index
relies on, so losing it would hang them all. Whatever a node raises (any
BaseException) is caught around that node and delivered to its graph task's
caller (engine.py, `thread_main`), and the error handler itself cannot raise.
Should anything still end the thread's loop other than a shutdown task (an
asynchronous exception, a bug), the thread warns and, before it exits, starts
a fresh thread that serves the same queue with the tasks already in it
(`_serve_device`): the queue is never left registered without a thread.

Note [Reentrant backward]
~~~~~~~~~~~~~~~~~~~~~~~~~
A nested graph task gets `reentrant_depth = total_depth + 1`, so its nodes sort
before the outer task's (Note [Ready queue order]). Below
`max_reentrant_depth` nested calls on a thread, the thread runs the nested
task's loop itself until that task completes, then returns to the outer loop;
tasks of the outer graph popped meanwhile are simply run (graph tasks do not
form a stack). At the limit it hands the nested task to a pool thread
(`ReentrantPool`), which takes over the same ready queue, and blocks until
the pool thread has finished the task and left its loop (not merely until the
task is done: the blocked thread serves the same queue, and would otherwise
take the wake-up meant for the pool thread, leaving that thread waiting in the
queue for good). The pool thread starts its own count at zero, so a chain of
any depth costs one pool thread per `max_reentrant_depth` levels and never
more Python frames per thread than the limit allows. Idle pool threads park
and are reused; all but `POOL_THREADS_KEPT` of them exit once idle for
`config.autograd_pool_idle_s` seconds, so that a deep chain (a depth of 10,000
left 243 of them) does not keep its threads for the life of the process. A
thread decides to exit under the pool's lock, where `submit` counts the idle
threads, so a task is never left waiting for a thread that is leaving.
"""

from __future__ import annotations

import threading
import warnings
from collections import deque
from collections.abc import Callable
from time import monotonic
from typing import TYPE_CHECKING

from .. import amp, config, streams
from ..devices import KINDS, Device
from .exec_state import exec_state
from .grad_mode import state as grad_state
from .ready_queue import CPU_DEVICE, NO_DEVICE, ReadyQueue

if TYPE_CHECKING:
    from .graph_task import GraphTask

# What a thread runs: the engine's worker loop, until the graph task (None: shutdown) is done.
WorkerLoop = Callable[["GraphTask | None"], None]

# How many idle reentrant pool threads stay parked for good (Note [Reentrant backward]).
POOL_THREADS_KEPT = 2


class WorkerState(threading.local):
    """Which device this thread works for, its ready queue and reentrant depth."""

    worker_device = NO_DEVICE
    current_depth = 0
    total_depth = 0
    ready_queue: ReadyQueue | None = None
    warning_sink: list | None = None


worker = WorkerState()


def capture_worker_warnings() -> None:
    """Route warnings issued on an engine thread for another thread's backward to its task.

    Installed once, when the engine starts its first thread. It wraps the
    function every warning passes through after the filters have let it out,
    so `catch_warnings` blocks on the caller's thread still see the warning
    when the task replays it there. See Note [Device threads].
    """
    show = warnings._showwarnmsg
    if getattr(show, "engine_capture", False):
        return

    def showwarnmsg(message: warnings.WarningMessage) -> None:
        sink = worker.warning_sink
        if sink is None:
            show(message)
        else:
            sink.append(message)

    showwarnmsg.engine_capture = True  # type: ignore[attr-defined]
    warnings._showwarnmsg = showwarnmsg


def set_worker_device(index: int) -> None:
    """Make device `index` current on this thread for every accelerator kind that has it.

    See Note [Device threads]. The cpu (`CPU_DEVICE`) has nothing to set. A
    runtime that refuses is reported, not raised: the thread must serve its
    queue anyway, and each node still runs under its own stream and device.
    """
    if index < 0:
        return
    for kind in KINDS.values():
        if kind.has_streams and index < kind.device_count():
            try:
                streams.set_device(Device(kind.name, index))
            except Exception as exc:  # noqa: BLE001  (reported; Note [A worker never dies])
                warnings.warn(
                    f"the autograd engine could not make {kind.name}:{index} current on "
                    f"{threading.current_thread().name}: {exc!r}",
                    RuntimeWarning,
                    stacklevel=1,
                )


def new_thread(target: Callable[[], None], role: str) -> threading.Thread:
    """A daemon thread of the engine (the caller starts it). See Note [Device threads]."""
    capture_worker_warnings()
    return threading.Thread(target=target, name=f"jaxstream autograd {role}", daemon=True)


class ThreadState:
    """The thread state the engine's loop switches per task, as it found it on entry, so
    that it can put it back on exit (Note [Per-task thread state] in engine.py)."""

    __slots__ = ("graph_task", "grad_enabled", "autocast", "checkpoint_valid", "sink", "thread")

    @classmethod
    def of_thread(cls) -> ThreadState:
        state = cls()
        state.graph_task = exec_state.graph_task
        state.grad_enabled = grad_state.grad_enabled
        state.autocast = amp.current_dtype()
        state.checkpoint_valid = exec_state.checkpoint_valid
        state.sink = worker.warning_sink
        state.thread = threading.get_ident()
        return state

    def enter(self, graph_task: GraphTask) -> None:
        """Give the thread `graph_task`'s state, whose nodes it runs next."""
        own = graph_task.owner_thread == self.thread
        worker.warning_sink = None if own else graph_task.warnings
        exec_state.graph_task = graph_task
        exec_state.checkpoint_valid = self.checkpoint_valid and not graph_task.exec_info
        amp.set_current_dtype(graph_task.autocast_dtype)

    def restore(self) -> None:
        exec_state.graph_task = self.graph_task
        exec_state.checkpoint_valid = self.checkpoint_valid
        grad_state.grad_enabled = self.grad_enabled
        amp.set_current_dtype(self.autocast)
        worker.warning_sink = self.sink


class ReentrantPool:
    """Threads that take over a ready queue whose thread blocks in a deep reentrant backward.

    See Note [Reentrant backward].
    """

    def __init__(self, loop: WorkerLoop) -> None:
        self._loop = loop
        self._cond = threading.Condition()
        self._tasks: deque[tuple[GraphTask, threading.Event]] = deque()
        self._idle = 0
        self._closing = False
        self._threads: list[threading.Thread] = []

    def submit(self, graph_task: GraphTask) -> threading.Event:
        """Queue `graph_task` for a pool thread; the event is set once that thread lets go."""
        with self._cond:
            if self._closing:
                raise RuntimeError("the autograd engine is shutting down")
            start = self._idle <= len(self._tasks)
            released = threading.Event()
            self._tasks.append((graph_task, released))
            if start:
                thread = new_thread(self._serve, "reentrant backward")
                self._threads = [*self._live(), thread]
                thread.start()
            self._cond.notify()
        return released

    def _next_task(self) -> tuple[GraphTask, threading.Event] | None:
        """The next task; None at shutdown, or when this thread retires (idle too long, and
        more than `POOL_THREADS_KEPT` idle), which it does here, under the lock."""
        with self._cond:
            self._idle += 1
            while not self._tasks and not self._closing:
                if not self._cond.wait(config.autograd_pool_idle_s) and (
                    not self._tasks and self._idle > POOL_THREADS_KEPT
                ):
                    self._idle -= 1
                    return None
            self._idle -= 1
            return self._tasks.popleft() if self._tasks else None

    def _serve(self) -> None:
        # A caller-only task brings its own queue, which only it may use: backwards nested
        # in its nodes wait in this thread's own shared queue (Note [Device threads]).
        own_queue = ReadyQueue()
        while (task := self._next_task()) is not None:
            graph_task, released = task
            worker.worker_device = graph_task.owner
            set_worker_device(graph_task.owner)
            worker.ready_queue = own_queue if graph_task.caller_only else graph_task.cpu_ready_queue
            worker.total_depth = graph_task.reentrant_depth
            worker.current_depth = 0
            try:
                self._loop(graph_task)
            finally:
                worker.worker_device = NO_DEVICE
                worker.ready_queue = None
                released.set()

    def _live(self) -> list[threading.Thread]:
        return [t for t in self._threads if t.is_alive()]

    def started(self) -> list[threading.Thread]:
        """The pool's threads still alive (the retired ones are forgotten)."""
        with self._cond:
            self._threads = self._live()
            return list(self._threads)

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()


class EngineThreads:
    """The device threads and the reentrant pool of one engine, which serve `loop`."""

    def __init__(self, loop: WorkerLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._device_queues: dict[int, ReadyQueue] = {}
        self._device_threads: dict[int, threading.Thread] = {}
        self._pool = ReentrantPool(loop)
        self._threads_at_fork = False
        self.forked_child = False

    def queue_for(self, graph_task: GraphTask, device_index: int) -> ReadyQueue:
        """The queue that runs `graph_task`'s work for `device_index` (Note [Device threads]).

        `device_index` is an input buffer's device, or the task's owner for a wake-up.
        """
        if device_index == CPU_DEVICE or graph_task.caller_only or not graph_task.multithreaded:
            return graph_task.cpu_ready_queue
        queue = self._device_queues.get(device_index)
        return queue if queue is not None else self._start_device(device_index)

    def _start_device(self, index: int) -> ReadyQueue:
        with self._lock:
            queue = self._device_queues.get(index)
            if queue is None:
                queue = ReadyQueue()
                self._start_thread(index, queue)
                self._device_queues[index] = queue
        return queue

    def _start_thread(self, index: int, queue: ReadyQueue) -> None:
        """Start the thread that serves `queue` for device `index` (hold `_lock`)."""
        thread = new_thread(lambda: self._serve_device(index, queue), f"device {index}")
        self._device_threads[index] = thread
        thread.start()

    def _serve_device(self, index: int, queue: ReadyQueue) -> None:
        worker.worker_device = index
        worker.ready_queue = queue
        try:
            set_worker_device(index)
            self._loop(None)
        except BaseException as exc:  # noqa: BLE001  (Note [A worker never dies])
            self._replace(index, queue, exc)

    def _replace(self, index: int, queue: ReadyQueue, exc: BaseException) -> None:
        """Hand `queue` to a fresh thread, unless it was shut down (Note [A worker never dies])."""
        with self._lock:
            if self._device_queues.get(index) is not queue:
                return
            warnings.warn(
                f"the autograd engine's thread for device {index} stopped on {exc!r} outside "
                "any node; a fresh thread now serves its queue",
                RuntimeWarning,
                stacklevel=1,
            )
            self._start_thread(index, queue)

    def queues_of(self, graph_task: GraphTask) -> list[ReadyQueue]:
        """Every queue that may hold node tasks of `graph_task`."""
        with self._lock:
            return [graph_task.cpu_ready_queue, *self._device_queues.values()]

    def hand_off(self, graph_task: GraphTask) -> None:
        """Give a reentrant task to a pool thread; return once that thread has let go of it.

        See Note [Reentrant backward].
        """
        self._pool.submit(graph_task).wait()

    def alive(self) -> list[threading.Thread]:
        """The live threads started here (device workers and reentrant pool threads)."""
        with self._lock:
            started = [*self._device_threads.values(), *self._pool.started()]
        return [t for t in started if t.is_alive()]

    def _forget(self) -> tuple[list[ReadyQueue], list[threading.Thread], ReentrantPool]:
        with self._lock:
            state = (
                list(self._device_queues.values()),
                [*self._device_threads.values(), *self._pool.started()],
                self._pool,
            )
            self._device_queues = {}
            self._device_threads = {}
            self._pool = ReentrantPool(self._loop)
        return state

    def shutdown(self, timeout: float | None = None) -> bool:
        """Stop every thread; whether they all ended within `timeout` seconds.

        `timeout` defaults to `config.autograd_shutdown_wait_s`; a warning names
        the threads still running then (Note [Device threads]). Call it only
        when no backward is running. Threads start again, lazily, when a later
        backward needs them.
        """
        if timeout is None:
            timeout = config.autograd_shutdown_wait_s
        queues, threads, pool = self._forget()
        for queue in queues:
            queue.push_shutdown()
        pool.close()
        deadline = monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - monotonic()))
        stuck = [t.name for t in threads if t.is_alive()]
        if stuck:
            warnings.warn(
                f"the autograd engine's threads {', '.join(stuck)} did not stop within "
                f"{timeout} s (busy in a node or a final callback?); they are left running "
                "as daemons. Raise js.config.autograd_shutdown_wait_s to wait longer.",
                RuntimeWarning,
                stacklevel=2,
            )
        return not stuck

    def before_fork(self) -> None:
        self._threads_at_fork = bool(self.alive())

    def after_fork_in_child(self) -> None:
        """The child has none of the parent's threads: forget them (Note [Device threads])."""
        self.forked_child = self.forked_child or self._threads_at_fork
        self._lock = threading.Lock()
        self._device_queues = {}
        self._device_threads = {}
        self._pool = ReentrantPool(self._loop)
        worker.ready_queue = None
