"""The autograd engine: graph tasks, ready queues and the worker loop.

The structure follows PyTorch's engine: `execute` builds a `GraphTask`
(dependency counts, `exec_info`, not-ready input buffers), pushes the root into
a `ReadyQueue`, and `thread_main` pops node tasks and runs `evaluate_function`
until the task's outstanding count reaches zero; then post-processing runs the
final callbacks and the caller gets the captured gradients.

Note [Ready queue order]
~~~~~~~~~~~~~~~~~~~~~~~~
A ready queue is a heap: shutdown tasks first, then wake-up tasks (no node),
then the task of the deepest reentrant backward, then the highest
`sequence_nr` (the node created last in the forward pass runs first).
AccumulateGrad nodes carry the largest sequence number, so a leaf's gradient is
written as soon as it is complete.

Note [CPU work runs on the caller]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The thread that calls backward drives the graph task: it becomes a worker for
its own CPU ready queue (`worker_device = CPU_DEVICE`) until the task completes.
A backward called from inside a node (reentrant) finds `worker_device` already
set: it runs the nested task on the same thread and the same queue, one level
deeper (see Note [Reentrant backward]).

Note [Device threads]
~~~~~~~~~~~~~~~~~~~~~
Each accelerator device index (`sim:N` and `cuda:N` share index N) has one
ready queue, shared by all graph tasks, and one daemon thread that serves it
forever; both are made the first time a node is routed there. A node goes to
the queue of the first accelerator device among the gradients in its input
buffer, or to its graph task's CPU queue (the caller's) when they are all on
the cpu. With multithreading disabled (captured when the backward starts, and
inherited by nested backwards) every node goes to the CPU queue. A graph with
no accelerator node (`GraphTask.caller_only`) never leaves the caller's queue,
so its counters are updated without a lock.

Shared GraphTask state (dependencies, not_ready, captured_vars, leaf_streams,
the outstanding count, the exception) changes only under the task's locks.
When a task completes on a thread other than its owner's, that thread pushes a
wake-up task (no node) to the owner's queue, so the owner stops waiting and
returns the result or raises the error. Warnings that a node issues on a thread
other than the one that called backward are held on the task and issued again
on the caller's thread when the backward returns (`_capture_worker_warnings`).

Worker threads are daemons: interpreter exit never waits for them, and an
atexit hook asks them to stop. A process forked after they started has none
of them; a backward there raises instead of waiting forever.

Note [Reentrant backward]
~~~~~~~~~~~~~~~~~~~~~~~~~
A nested graph task gets `reentrant_depth = total_depth + 1`, so its nodes sort
before the outer task's (Note [Ready queue order]). Below
`max_reentrant_depth` nested calls on a thread, the thread runs the nested
task's loop itself until that task completes, then returns to the outer loop;
tasks of the outer graph popped meanwhile are simply run (graph tasks do not
form a stack). At the limit it hands the nested task to a pool thread
(`_ReentrantPool`), which takes over the same ready queue, and blocks until
the task is done. The pool thread starts its own count at zero, so a chain of
any depth costs one pool thread per `max_reentrant_depth` levels and never
more Python frames per thread than the limit allows. Idle pool threads park
and are reused.

Note [Streaming backward]
~~~~~~~~~~~~~~~~~~~~~~~~~
A node with a stream (its forward's) runs under that stream, on whichever
thread runs it, so every kernel of its backward lands there. Moving a gradient
into a consumer's input buffer orders the consumer's stream after the
producer's (an event recorded on one, waited on by the other) and sums there;
the seed gradient is ordered into the root's stream the same way. The task
remembers the streams of the leaves it accumulated and of the nodes whose
gradients `grad()` captured. At the end, the caller's current streams, taken
when the backward started, wait for each of them, and the final callbacks run
under the caller's streams: the gradients can be used on the caller's current
stream afterwards, as after any other op, and on no other stream unsynced.

Note [Hook order]
~~~~~~~~~~~~~~~~~
For each node: tensor pre-hooks (registered on the tensors whose gradient is
this node's input), then the retains_grad hooks (always last among tensor
hooks; they move to a tensor's new grad_fn after an in-place op), then node
pre-hooks, then the node, then node post-hooks. A node that is only captured by
`grad(inputs=...)` and not needed runs its tensor pre-hooks (so hooks on the
tensors passed as `inputs=` fire) but not its node pre-hooks.
"""

from __future__ import annotations

import atexit
import heapq
import itertools
import os
import threading
import warnings
from collections import deque
from collections.abc import Callable
from time import monotonic as _monotonic
from typing import Any

from .. import amp, profiler, streams
from ..tensor import Tensor
from . import anomaly
from .grad_mode import state as grad_state
from .graph import GraphRoot, InputMetadata, Node, exec_state

NO_DEVICE = -2
CPU_DEVICE = -1

_SHUTDOWN_KEY = -(1 << 200)
_WAKEUP_KEY = -(1 << 199)
_graph_task_ids = itertools.count()
_entry_ids = itertools.count()


class ExecInfo:
    """Whether a node must run (`needed`) and which grad() outputs it captures."""

    __slots__ = ("needed", "captures")

    def __init__(self) -> None:
        self.needed = False
        self.captures: list[tuple[int, int]] | None = None

    def should_execute(self) -> bool:
        return self.needed or self.captures is not None


class ReadyQueue:
    """A heap of node tasks, ordered as Note [Ready queue order] says."""

    __slots__ = ("_heap", "_lock", "_not_empty", "_waiters")

    def __init__(self) -> None:
        self._heap: list = []
        self._lock = threading.Lock()
        self._not_empty = threading.Condition(self._lock)
        self._waiters = 0

    def push(self, graph_task: GraphTask, fn: Node | None, inputs: list,
             increment_outstanding: bool = True) -> None:
        if fn is None:
            key = _WAKEUP_KEY
        else:
            key = -((graph_task.reentrant_depth << 64) | fn.sequence_nr)
        if increment_outstanding:
            if graph_task.caller_only:
                graph_task.outstanding_tasks += 1
            else:
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


class GraphTask:
    """The state of one backward call: what to run, what is pending, what to return."""

    def __init__(self, keep_graph: bool, create_graph: bool, reentrant_depth: int,
                 cpu_ready_queue: ReadyQueue, graph_roots: list, multithreaded: bool) -> None:
        self.id = next(_graph_task_ids)
        self.keep_graph = keep_graph
        self.create_graph = create_graph
        # Like grad mode, the caller's autocast state holds on every thread that runs a node.
        self.autocast_dtype = amp.current_dtype()
        self.reentrant_depth = reentrant_depth
        self.cpu_ready_queue = cpu_ready_queue
        self.graph_roots = graph_roots
        self.exec_info: dict[Node, ExecInfo] = {}
        self.captured_vars: list = []
        self.dependencies: dict[Node, int] = {}
        self.nodes_in_graph: set[Node] = set()
        self.not_ready: dict[Node, list] = {}
        self.outstanding_tasks = 0
        self.owner = NO_DEVICE
        self.owner_thread = threading.get_ident()
        self.multithreaded = multithreaded
        # True once compute_dependencies finds no accelerator node: then only the
        # calling thread touches this task, and its counters need no lock.
        self.caller_only = False
        self.lock = threading.Lock()
        self._count_lock = threading.Lock()
        self.exception: BaseException | None = None
        self.completed_flag = False
        self.done = threading.Event()
        self.final_callbacks: list[Callable[[], None]] = []
        self.leaf_streams: set = set()
        self.caller_streams = streams.thread_streams()
        self.warnings: list[warnings.WarningMessage] = []

    def add_outstanding(self) -> None:
        with self._count_lock:
            self.outstanding_tasks += 1

    def finish_one(self) -> bool:
        """Count one popped task as done; whether the graph task is now complete."""
        if self.caller_only:
            self.outstanding_tasks -= 1
            return self.outstanding_tasks <= 0 or self.exception is not None
        with self._count_lock:
            self.outstanding_tasks -= 1
            return self.outstanding_tasks <= 0 or self.exception is not None

    def replay_warnings(self) -> None:
        """Issue, on this (the calling) thread, the warnings that workers held for it."""
        held, self.warnings = self.warnings, []
        for message in held:
            warnings._showwarnmsg(message)

    # -------------------------------------------------------------- exec_info
    def init_to_execute(self, graph_root: Node, outputs: list, accumulate_grad: bool,
                        min_topo_nr: int) -> None:
        """Mark the nodes on a path from the root to an output edge (`needed`) and
        where each `grad()` result is captured; prune by topological number."""
        exec_info = self.exec_info
        for output_idx, (fn, input_nr) in enumerate(outputs):
            info = exec_info.get(fn)
            if info is None:
                info = exec_info[fn] = ExecInfo()
            if accumulate_grad:
                info.needed = True
            else:
                if info.captures is None:
                    info.captures = []
                info.captures.append((input_nr, output_idx))
        if not accumulate_grad:
            self.captured_vars = [None] * len(outputs)

        def should_execute(fn: Node) -> bool:
            info = exec_info.get(fn)
            return info is not None and (info.needed or info.captures is not None)

        if graph_root not in exec_info:
            exec_info[graph_root] = ExecInfo()
        seen: set[Node] = set()
        stack = [(graph_root, iter(graph_root.next_edges))]
        while stack:
            fn, children = stack[-1]
            child = None
            for next_fn, _ in children:
                if next_fn is None:
                    continue
                if next_fn in seen:
                    if should_execute(next_fn):
                        exec_info.setdefault(fn, ExecInfo()).needed = True
                    continue
                seen.add(next_fn)
                if next_fn.topological_nr < min_topo_nr:
                    continue
                child = next_fn
                break
            if child is not None:
                stack.append((child, iter(child.next_edges)))
                continue
            stack.pop()
            if stack and should_execute(fn):
                exec_info.setdefault(stack[-1][0], ExecInfo()).needed = True

    # -------------------------------------------------------------- completion
    def set_exception(self, exc: BaseException, fn: Node | None) -> None:
        with self.lock:
            if self.exception is None:
                self.exception = exc
                if anomaly.state.enabled and fn is not None:
                    anomaly.warn_forward_trace(fn)
        self._mark_done()

    def _mark_done(self) -> None:
        self.completed_flag = True
        self.done.set()

    def mark_as_completed_and_run_post_processing(self) -> None:
        with self.lock:
            if self.completed_flag:
                return
            self.completed_flag = True
        try:
            self.exec_post_processing()
        except BaseException as exc:  # noqa: BLE001  (any error belongs to the caller)
            if self.exception is None:
                self.exception = exc
        self.done.set()

    def exec_post_processing(self) -> None:
        if self.not_ready:
            names = ", ".join(sorted({fn.name() for fn in self.not_ready}))
            raise RuntimeError(f"could not compute gradients for some functions ({names})")
        previous = exec_state.graph_task
        exec_state.graph_task = self
        grad_mode = grad_state.grad_enabled
        grad_state.grad_enabled = self.create_graph
        try:
            # See Note [Streaming backward]
            with streams.using_thread_streams(self.caller_streams):
                for leaf_stream in self.leaf_streams:
                    caller_stream = streams.current_stream(leaf_stream.device)
                    if caller_stream != leaf_stream:
                        caller_stream.wait_stream(leaf_stream)
                i = 0
                while i < len(self.final_callbacks):
                    if profiler.active:
                        profiler.run_callback(self, self.final_callbacks[i])
                    else:
                        self.final_callbacks[i]()
                    i += 1
        finally:
            exec_state.graph_task = previous
            grad_state.grad_enabled = grad_mode


class _WorkerState(threading.local):
    """Which device this thread works for, its ready queue and reentrant depth."""

    worker_device = NO_DEVICE
    current_depth = 0
    total_depth = 0
    ready_queue: ReadyQueue | None = None
    warning_sink: list | None = None


worker = _WorkerState()


def _capture_worker_warnings() -> None:
    """Route warnings issued on an engine thread for another thread's backward to its task.

    Installed once, when the engine starts its first thread. It wraps the
    function every warning passes through after the filters have let it out,
    so `catch_warnings` blocks on the caller's thread still see the warning
    when the task replays it there. See Note [Device threads].
    """
    show = warnings._showwarnmsg
    if getattr(show, "_engine_capture", False):
        return

    def showwarnmsg(message: warnings.WarningMessage) -> None:
        sink = worker.warning_sink
        if sink is None:
            show(message)
        else:
            sink.append(message)

    showwarnmsg._engine_capture = True  # type: ignore[attr-defined]
    warnings._showwarnmsg = showwarnmsg


def _call_tensor_pre_hooks(fn: Node, inputs: list) -> list:
    hooks = fn._tensor_pre_hooks
    if hooks:
        for output_nr, hook in list(hooks.values()):
            grad = inputs[output_nr]
            if grad is None:
                continue
            if profiler.active:
                result = profiler.call_hook("tensor_pre", fn, hook, grad)
            else:
                result = hook(grad)
            if result is not None:
                inputs[output_nr] = _checked_hook_result(fn, output_nr, hook, grad, result)
    retains = fn._retains_grad_hooks
    if retains:
        for output_nr, hook in list(retains.items()):
            if profiler.active:
                profiler.call_hook("retains_grad", fn, hook, inputs[output_nr])
            else:
                hook(inputs[output_nr])
    return inputs


def _checked_hook_result(fn: Node, output_nr: int, hook: Callable, grad: Any, result: Any) -> Any:
    name = getattr(hook, "__name__", repr(hook))
    if not isinstance(result, Tensor):
        raise TypeError(
            f"hook '{name}' on the gradient of output {output_nr} of {fn.name()} returned a "
            f"{type(result).__name__}; a tensor hook must return a Tensor or None"
        )
    if result.shape != grad.shape or result.dtype != grad.dtype:
        raise RuntimeError(
            f"hook '{name}' on the gradient of output {output_nr} of {fn.name()} changed it "
            f"from shape {grad.shape}, dtype {grad.dtype} to shape {result.shape}, dtype "
            f"{result.dtype}; a hook must return a gradient of the same shape and dtype"
        )
    return result


def _call_pre_hooks(fn: Node, inputs: list) -> list:
    for hook in list(fn._pre_hooks.values()):
        if profiler.active:
            result = profiler.call_hook("pre", fn, hook, tuple(inputs))
        else:
            result = hook(tuple(inputs))
        if result is not None:
            inputs = _checked_node_hook_result(fn, "pre hook", hook, inputs, result)
    return inputs


def _call_post_hooks(fn: Node, outputs: list, inputs: list) -> list:
    for hook in list(fn._post_hooks.values()):
        if profiler.active:
            result = profiler.call_hook("post", fn, hook, tuple(outputs), tuple(inputs))
        else:
            result = hook(tuple(outputs), tuple(inputs))
        if result is not None:
            outputs = _checked_node_hook_result(fn, "post hook", hook, outputs, result)
    return outputs


def _checked_node_hook_result(fn: Node, kind: str, hook: Callable, old: list, new: Any) -> list:
    new = list(new) if isinstance(new, tuple | list) else [new]
    if len(new) != len(old):
        name = getattr(hook, "__name__", repr(hook))
        raise RuntimeError(
            f"{kind} '{name}' of {fn.name()} returned {len(new)} gradients, expected {len(old)}"
        )
    return new


def validate_outputs(edges: tuple | list, grads: list, fn: Node | None) -> list:
    """Check the gradients a node returned against the inputs they flow into.

    A broadcast gradient is summed back to the input's shape and a gradient of
    another floating dtype is cast, as PyTorch does; anything else is an error
    naming the node.
    """
    where = f"Function {fn.name()} returned an" if fn is not None else "got an"
    if len(grads) != len(edges):
        raise RuntimeError(
            f"{where} invalid number of gradients - expected {len(edges)}, but got {len(grads)}"
        )
    for i, grad in enumerate(grads):
        next_fn, input_nr = edges[i]
        if next_fn is None or grad is None:
            continue
        meta: InputMetadata = next_fn.input_metadata[input_nr]
        if type(grad) is not Tensor:
            raise TypeError(
                f"{where} invalid gradient at index {i} - expected a Tensor, got "
                f"{type(grad).__name__}"
            )
        shape = grad._data.shape
        if shape != meta.shape:
            if not meta.is_expandable_to(shape):
                raise RuntimeError(
                    f"{where} invalid gradient at index {i} - got shape {tuple(shape)} but "
                    f"expected a shape compatible with {meta.shape} (the input of "
                    f"{next_fn.name()})"
                )
            from ..ops.functional import sum_to

            grad = grads[i] = sum_to(grad, meta.shape)
        if grad._backend is not meta.backend:
            raise RuntimeError(
                f"{where} invalid gradient at index {i} - expected a {meta.backend.name} "
                f"tensor but got a {grad.backend} one"
            )
        if grad._device is not meta.device and grad._device != meta.device:
            raise RuntimeError(
                f"{where} invalid gradient at index {i} - expected device {meta.device} but "
                f"got {grad.device}"
            )
        if grad._data.dtype != meta.dtype:
            grad = grads[i] = grad.astype(meta.dtype)
    return grads


def _accumulate(buffer: list, pos: int, grad: Any, consumer: Any) -> None:
    """Add `grad` into slot `pos` of an input buffer (recorded under create_graph).

    `consumer` is the stream the buffer's node runs on (None on the cpu); see
    Note [Streaming backward].
    """
    if grad is None:
        return
    old = buffer[pos]
    if consumer is None or grad._device != consumer.device:
        buffer[pos] = grad if old is None else old + grad
        return
    producer = streams.current_stream(consumer.device)
    if producer != consumer:
        consumer.wait_stream(producer)
    if old is None:
        buffer[pos] = grad
    else:
        with streams.stream(consumer):
            buffer[pos] = old + grad


def _buffer_device(buffer: list) -> int:
    """The device index whose queue runs a node with this input buffer (Note [Device threads])."""
    for grad in buffer:
        if grad is not None:
            index = grad._device.index
            if index is not None:
                return index
    return CPU_DEVICE


class _ReentrantPool:
    """Threads that take over a ready queue whose thread blocks in a deep reentrant backward.

    See Note [Reentrant backward].
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._cond = threading.Condition()
        self._tasks: deque[GraphTask] = deque()
        self._idle = 0
        self._closing = False
        self.threads: list[threading.Thread] = []

    def submit(self, graph_task: GraphTask) -> None:
        with self._cond:
            if self._closing:
                raise RuntimeError("the autograd engine is shutting down")
            start = self._idle <= len(self._tasks)
            self._tasks.append(graph_task)
            if start:
                thread = self._engine._new_thread(self._serve, "reentrant backward")
                self.threads.append(thread)
                thread.start()
            self._cond.notify()

    def _serve(self) -> None:
        while True:
            with self._cond:
                self._idle += 1
                while not self._tasks and not self._closing:
                    self._cond.wait()
                self._idle -= 1
                if not self._tasks:
                    return
                graph_task = self._tasks.popleft()
            worker.worker_device = graph_task.owner
            worker.ready_queue = graph_task.cpu_ready_queue
            worker.total_depth = graph_task.reentrant_depth
            worker.current_depth = 0
            try:
                self._engine.thread_main(graph_task)
            finally:
                worker.worker_device = NO_DEVICE
                worker.ready_queue = None

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()


class Engine:
    """Runs graph tasks. One engine serves the whole process (`get_default_engine`)."""

    def __init__(self) -> None:
        # Each level of reentrant backward costs about a dozen Python frames; this
        # keeps a thread well inside the default recursion limit of 1000.
        self.max_reentrant_depth = 40
        self._lock = threading.Lock()
        self._device_queues: dict[int, ReadyQueue] = {}
        self._device_threads: dict[int, threading.Thread] = {}
        self._pool = _ReentrantPool(self)
        self._threads_at_fork = False
        self._forked_child = False

    # --------------------------------------------------------------- threads
    def _new_thread(self, target: Callable[[], None], role: str) -> threading.Thread:
        """A daemon thread of the engine (the caller starts it). See Note [Device threads]."""
        _capture_worker_warnings()
        return threading.Thread(target=target, name=f"jaxstream autograd {role}", daemon=True)

    def _device_queue(self, index: int) -> ReadyQueue:
        queue = self._device_queues.get(index)
        if queue is not None:
            return queue
        with self._lock:
            queue = self._device_queues.get(index)
            if queue is None:
                queue = ReadyQueue()
                thread = self._new_thread(
                    lambda: self._serve_device(index, queue), f"device {index}"
                )
                self._device_threads[index] = thread
                thread.start()
                self._device_queues[index] = queue
        return queue

    def _serve_device(self, index: int, queue: ReadyQueue) -> None:
        worker.worker_device = index
        worker.ready_queue = queue
        self.thread_main(None)

    def ready_queue(self, graph_task: GraphTask, device_index: int) -> ReadyQueue:
        """Where a node whose input buffer is on `device_index` runs (Note [Device threads])."""
        if device_index == CPU_DEVICE or not graph_task.multithreaded:
            return graph_task.cpu_ready_queue
        return self._device_queue(device_index)

    def queue_for(self, graph_task: GraphTask, buffer: list) -> ReadyQueue:
        """The queue of the node whose input buffer this is."""
        if graph_task.caller_only:
            return graph_task.cpu_ready_queue
        return self.ready_queue(graph_task, _buffer_device(buffer))

    def ready_queue_by_owner(self, graph_task: GraphTask) -> ReadyQueue:
        if graph_task.owner == CPU_DEVICE:
            return graph_task.cpu_ready_queue
        return self._device_queue(graph_task.owner)

    def threads(self) -> list[threading.Thread]:
        """The live threads this engine started (device workers and reentrant pool threads)."""
        with self._lock:
            started = [*self._device_threads.values(), *self._pool.threads]
        return [t for t in started if t.is_alive()]

    def shutdown(self, timeout: float = 5.0) -> bool:
        """Stop every engine thread; whether they all ended within `timeout` seconds.

        Call it only when no backward is running. Threads start again, lazily,
        with the next backward that needs them.
        """
        with self._lock:
            queues = list(self._device_queues.values())
            threads = [*self._device_threads.values(), *self._pool.threads]
            pool = self._pool
            self._device_queues = {}
            self._device_threads = {}
            self._pool = _ReentrantPool(self)
        for queue in queues:
            queue.push_shutdown()
        pool.close()
        deadline = _monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - _monotonic()))
        return not any(t.is_alive() for t in threads)

    def _before_fork(self) -> None:
        self._threads_at_fork = bool(self.threads())

    def _after_fork_in_child(self) -> None:
        """The child has none of the parent's threads: forget them (Note [Device threads])."""
        self._forked_child = self._forked_child or self._threads_at_fork
        self._lock = threading.Lock()
        self._device_queues = {}
        self._device_threads = {}
        self._pool = _ReentrantPool(self)
        worker.ready_queue = None

    # --------------------------------------------------------------- entry point
    def execute(self, root_edges: list, grads: list, keep_graph: bool, create_graph: bool,
                accumulate_grad: bool, outputs: list) -> list:
        validate_outputs(root_edges, grads, None)
        if not accumulate_grad and not outputs:
            raise ValueError("grad requires non-empty inputs.")
        if worker.ready_queue is None:
            worker.ready_queue = ReadyQueue()
        reentrant = worker.worker_device != NO_DEVICE
        outer = exec_state.graph_task
        multithreaded = (
            outer.multithreaded if reentrant and outer is not None
            else grad_state.multithreading_enabled
        )
        if multithreaded and self._forked_child:
            raise RuntimeError(
                "the autograd engine's worker threads were started before this process was "
                "forked, and a forked child has none of them. Start child processes with the "
                "'spawn' or 'forkserver' method, or run this backward with "
                "js.autograd.set_multithreading_enabled(False)."
            )
        graph_task = GraphTask(
            keep_graph,
            create_graph,
            worker.total_depth + 1 if reentrant else 0,
            worker.ready_queue,
            [fn for fn, _ in root_edges],
            multithreaded,
        )
        single_root = len(root_edges) == 1
        graph_root = root_edges[0][0] if single_root else GraphRoot(root_edges, grads)
        min_topo_nr = min((fn.topological_nr for fn, _ in outputs), default=0)
        self.compute_dependencies(graph_root, graph_task, min_topo_nr)
        if outputs:
            graph_task.init_to_execute(graph_root, outputs, accumulate_grad, min_topo_nr)
        if single_root:
            buffer: list = [None] * graph_root.num_inputs
            input_nr = root_edges[0][1]
            # The seed is ordered into the root's stream (Note [Streaming backward]).
            consumer = graph_root.input_metadata[input_nr].stream
            _accumulate(buffer, input_nr, grads[0], consumer)
        else:
            buffer = []
        try:
            self.execute_with_graph_task(graph_task, graph_root, buffer)
        finally:
            graph_task.replay_warnings()
        return graph_task.captured_vars

    def compute_dependencies(self, root: Node, task: GraphTask, min_topo_nr: int) -> None:
        """Count, for every node reachable from `root`, how many edges point at it."""
        dependencies = task.dependencies
        seen = task.nodes_in_graph
        on_devices = root.stream is not None
        stack = [root]
        while stack:
            fn = stack.pop()
            if fn.topological_nr < min_topo_nr:
                continue
            for next_fn, _ in fn.next_edges:
                if next_fn is not None:
                    dependencies[next_fn] = dependencies.get(next_fn, 0) + 1
                    if next_fn not in seen:
                        seen.add(next_fn)
                        stack.append(next_fn)
                        if next_fn.stream is not None:
                            on_devices = True
        task.caller_only = not (task.multithreaded and on_devices)

    def execute_with_graph_task(self, graph_task: GraphTask, graph_root: Node,
                                buffer: list) -> None:
        queue = self.queue_for(graph_task, buffer)
        if worker.worker_device == NO_DEVICE:
            # See Note [CPU work runs on the caller]
            worker.worker_device = CPU_DEVICE
            graph_task.owner = CPU_DEVICE
            queue.push(graph_task, graph_root, buffer)
            try:
                self.thread_main(graph_task)
                graph_task.done.wait()
            finally:
                worker.worker_device = NO_DEVICE
                if graph_task.exception is not None:
                    graph_task.cpu_ready_queue.drop_tasks_of(graph_task)
        else:
            # See Note [Reentrant backward]
            graph_task.owner = worker.worker_device
            queue.push(graph_task, graph_root, buffer)
            if worker.current_depth >= self.max_reentrant_depth:
                self._pool.submit(graph_task)
                graph_task.done.wait()
            else:
                worker.total_depth += 1
                worker.current_depth += 1
                try:
                    self.thread_main(graph_task)
                    graph_task.done.wait()
                finally:
                    worker.current_depth -= 1
                    worker.total_depth -= 1
                    if graph_task.exception is not None:
                        graph_task.cpu_ready_queue.drop_tasks_of(graph_task)
        if graph_task.exception is not None:
            raise graph_task.exception

    # --------------------------------------------------------------- worker loop
    def thread_main(self, graph_task: GraphTask | None) -> None:
        """Pop and run node tasks until `graph_task` is done (until shutdown if it is None)."""
        queue = worker.ready_queue
        previous_task = exec_state.graph_task
        previous_grad_mode = grad_state.grad_enabled
        previous_autocast = amp.current_dtype()
        previous_checkpoint_valid = exec_state.checkpoint_valid
        previous_sink = worker.warning_sink
        me = threading.get_ident()
        try:
            while graph_task is None or not graph_task.done.is_set():
                _, _, local_task, fn, inputs = queue.pop()
                if local_task is None:
                    break
                worker.warning_sink = (
                    None if local_task.owner_thread == me else local_task.warnings
                )
                if fn is not None and local_task.exception is None:
                    exec_state.graph_task = local_task
                    exec_state.checkpoint_valid = (
                        previous_checkpoint_valid and not local_task.exec_info
                    )
                    grad_state.grad_enabled = local_task.create_graph
                    amp.set_current_dtype(local_task.autocast_dtype)
                    try:
                        if profiler.active:
                            profiler.evaluate_node(self, local_task, fn, inputs)
                        else:
                            self.evaluate_function(local_task, fn, inputs)
                    except BaseException as exc:  # noqa: BLE001  (delivered to the caller)
                        _add_node_note(exc, fn)
                        local_task.set_exception(exc, fn)
                if local_task.finish_one():
                    local_task.mark_as_completed_and_run_post_processing()
                    if worker.worker_device != local_task.owner:
                        # Wake the owner up (Note [Device threads]).
                        self.ready_queue_by_owner(local_task).push(local_task, None, [])
                worker.warning_sink = previous_sink
        finally:
            exec_state.graph_task = previous_task
            exec_state.checkpoint_valid = previous_checkpoint_valid
            grad_state.grad_enabled = previous_grad_mode
            amp.set_current_dtype(previous_autocast)
            worker.warning_sink = previous_sink

    def evaluate_function(self, graph_task: GraphTask, fn: Node, inputs: list) -> None:
        stream = fn.stream
        if stream is None:
            self._evaluate(graph_task, fn, inputs)
        else:
            # See Note [Streaming backward]
            with streams.stream(stream):
                self._evaluate(graph_task, fn, inputs)

    def _evaluate(self, graph_task: GraphTask, fn: Node, inputs: list) -> None:
        exec_info = graph_task.exec_info
        if exec_info:
            info = exec_info[fn]
            if not info.needed:
                # Tensor pre-hooks run even for capture-only nodes (Note [Hook order]).
                inputs = _call_tensor_pre_hooks(fn, inputs)
            if info.captures is not None:
                with graph_task.lock:
                    for input_nr, output_idx in info.captures:
                        graph_task.captured_vars[output_idx] = inputs[input_nr]
                    if fn.stream is not None:
                        graph_task.leaf_streams.add(fn.stream)
            if not info.needed:
                return

        outputs = self.call_function(graph_task, fn, inputs)
        if not graph_task.keep_graph:
            fn.release_variables()
        if not outputs:
            if fn.stream is not None:
                with graph_task.lock:
                    graph_task.leaf_streams.add(fn.stream)
            return
        if anomaly.state.enabled and anomaly.state.check_nan:
            _check_nan(fn, outputs)

        next_edges = fn.next_edges
        with graph_task.lock:
            dependencies = graph_task.dependencies
            not_ready = graph_task.not_ready
            for i, output in enumerate(outputs):
                next_fn, input_nr = next_edges[i]
                if next_fn is None:
                    continue
                count = dependencies.get(next_fn)
                if count is None:
                    raise RuntimeError(f"dependency not found for {next_fn.name()}")
                if count == 1:
                    del dependencies[next_fn]
                    is_ready = True
                else:
                    dependencies[next_fn] = count - 1
                    is_ready = False
                buffer = not_ready.get(next_fn)
                if buffer is None:
                    if exec_info:
                        info = exec_info.get(next_fn)
                        if info is None or not (info.needed or info.captures is not None):
                            continue
                    buffer = [None] * len(next_fn.input_metadata)
                    if not is_ready:
                        not_ready[next_fn] = buffer
                elif is_ready:
                    del not_ready[next_fn]
                _accumulate(buffer, input_nr, output, next_fn.input_metadata[input_nr].stream)
                if is_ready:
                    self.queue_for(graph_task, buffer).push(graph_task, next_fn, buffer)

    def call_function(self, graph_task: GraphTask, fn: Node, inputs: list) -> list:
        if fn._tensor_pre_hooks or fn._retains_grad_hooks:
            inputs = _call_tensor_pre_hooks(fn, inputs)
        if fn._pre_hooks:
            inputs = _call_pre_hooks(fn, inputs)
        outputs = fn.apply(inputs)
        validate_outputs(fn.next_edges, outputs, fn)
        if fn._post_hooks:
            outputs = _call_post_hooks(fn, outputs, inputs)
        return outputs


def _add_node_note(exc: BaseException, fn: Node) -> None:
    note = f"raised while running {fn.name()} in the backward pass"
    if note not in getattr(exc, "__notes__", ()):
        exc.add_note(note)


def _check_nan(fn: Node, outputs: list) -> None:
    from ..dispatch import apply
    from ..ops.rules import ISNAN_ANY

    for i, out in enumerate(outputs):
        if out is not None and bool(apply(ISNAN_ANY, out)._data):
            raise RuntimeError(f"Function '{fn.name()}' returned nan values in its {i}th output.")


_default_engine = Engine()
atexit.register(_default_engine.shutdown, 1.0)
os.register_at_fork(
    before=_default_engine._before_fork, after_in_child=_default_engine._after_fork_in_child
)


def get_default_engine() -> Engine:
    return _default_engine


def engine_threads() -> list[threading.Thread]:
    """The live threads the engine started: one per accelerator device index, plus pool threads."""
    return _default_engine.threads()


def shutdown_engine_threads(timeout: float = 5.0) -> bool:
    """Stop the engine's threads (they restart when needed); whether all ended in time."""
    return _default_engine.shutdown(timeout)


def set_max_reentrant_depth(depth: int) -> None:
    """How many backwards may nest on one thread before a pool thread takes over.

    Each level costs about a dozen Python frames on that thread, so a limit
    times that, plus the frames of the backward functions themselves, must stay
    below `sys.getrecursionlimit()`. See Note [Reentrant backward].
    """
    if not isinstance(depth, int) or depth < 1:
        raise ValueError(f"max_reentrant_depth must be a positive int, got {depth!r}")
    _default_engine.max_reentrant_depth = depth


def get_max_reentrant_depth() -> int:
    return _default_engine.max_reentrant_depth


def queue_callback(callback: Callable[[], None]) -> None:
    """Run `callback` when the current graph task finishes (first in, first out)."""
    task = exec_state.graph_task
    if task is None:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    with task.lock:
        task.final_callbacks.append(callback)

