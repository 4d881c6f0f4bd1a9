"""GraphTask: the state of one backward call, what it runs, and how it finishes.

Note [exec_info]
~~~~~~~~~~~~~~~~
When a backward is given `inputs` (`grad()`, `backward(inputs=)`), only the
nodes on a path from the roots to those inputs run. `init_to_execute` marks
them: a node is `needed` when it must run, and `captures` lists which of its
input gradients `grad()` returns. `should_execute` is the one test of both.
Nodes below the smallest topological number among the inputs cannot lead to
them and are not visited. A node asks `needs_input_grad` which of its own
inputs some path needs, so it can skip the others (PyTorch PR #82544;
`set_trimming_enabled(False)` turns that off for comparison). With no
`inputs`, `exec_info` is empty and every node runs.

Shared GraphTask state (dependencies, not_ready, captured_vars, leaf_streams,
the outstanding count, the exception) changes only under the task's locks,
except for a task that never leaves its caller's thread (`caller_only`, see
Note [Device threads] in threads.py), whose counters need none.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
import warnings
from collections.abc import Callable
from typing import Any

from .. import amp, instrumentation, streams
from . import anomaly
from .exec_state import exec_state
from .grad_mode import state as grad_state
from .node import Node
from .ready_queue import NO_DEVICE, ReadyQueue, TaskQueue

_graph_task_ids = itertools.count()


class _Trimming:
    enabled = True


def is_trimming_enabled() -> bool:
    return _Trimming.enabled


class set_trimming_enabled:
    """Turns exec_info trimming of node outputs on or off (global; a function or a context).

    With trimming on (the default), a node computes only the gradients that
    `exec_info` says some captured input or leaf needs (PyTorch PR #82544). With
    it off, every node computes the gradient of every input that requires grad,
    as engines did before that change; the engine still skips unneeded nodes.
    """

    def __init__(self, mode: bool) -> None:
        self._prev = _Trimming.enabled
        _Trimming.enabled = bool(mode)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        _Trimming.enabled = self._prev


class ExecInfo:
    """Whether a node must run (`needed`) and which grad() outputs it captures."""

    __slots__ = ("needed", "captures")

    def __init__(self) -> None:
        self.needed = False
        self.captures: list[tuple[int, int]] | None = None


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
        self.min_topo_nr = 0
        self.not_ready: dict = {}
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

    # -------------------------------------------------------------- counters
    def add_outstanding(self) -> None:
        """Count one task pushed to a shared queue (a caller-only task's own queue counts
        without the lock, `TaskQueue.push`)."""
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

    # -------------------------------------------------------------- the graph
    def compute_dependencies(self, root: Node, min_topo_nr: int) -> None:
        """Count, for every node reachable from `root`, how many edges point at it."""
        self.min_topo_nr = min_topo_nr
        on_devices = count_edges([root], min_topo_nr, self.dependencies, self.nodes_in_graph)
        self.caller_only = not (self.multithreaded and (on_devices or root.stream is not None))
        if self.caller_only:
            self.cpu_ready_queue = TaskQueue()

    def should_execute(self, fn: Node) -> bool:
        """Whether `fn` runs in this task (Note [exec_info])."""
        if not self.exec_info:
            return True
        info = self.exec_info.get(fn)
        return info is not None and (info.needed or info.captures is not None)

    def needs_input_grad(self, node: Node) -> tuple:
        """For each input of `node`: whether some path of this task needs its gradient."""
        trimming = _Trimming.enabled
        return tuple([
            fn is not None and (not trimming or self.should_execute(fn))
            for fn, _ in node.next_edges
        ])

    def init_to_execute(self, graph_root: Node, outputs: list, accumulate_grad: bool,
                        min_topo_nr: int) -> None:
        """Mark what runs and what is captured (Note [exec_info])."""
        exec_info = self.exec_info
        for output_idx, (fn, input_nr) in enumerate(outputs):
            info = exec_info.setdefault(fn, ExecInfo())
            if accumulate_grad:
                info.needed = True
            else:
                if info.captures is None:
                    info.captures = []
                info.captures.append((input_nr, output_idx))
        if not accumulate_grad:
            self.captured_vars = [None] * len(outputs)
        exec_info.setdefault(graph_root, ExecInfo())
        self._mark_needed(graph_root, min_topo_nr)

    def _mark_needed(self, graph_root: Node, min_topo_nr: int) -> None:
        """A node is needed when one of its next nodes runs (a depth-first walk, no recursion)."""
        exec_info = self.exec_info
        seen: set[Node] = set()
        stack = [(graph_root, iter(graph_root.next_edges))]
        while stack:
            fn, children = stack[-1]
            child = None
            for next_fn, _ in children:
                if next_fn is None:
                    continue
                if next_fn in seen:
                    if self.should_execute(next_fn):
                        exec_info.setdefault(fn, ExecInfo()).needed = True
                    continue
                seen.add(next_fn)
                if next_fn.topological_nr >= min_topo_nr:
                    child = next_fn
                    break
            if child is not None:
                stack.append((child, iter(child.next_edges)))
                continue
            stack.pop()
            if stack and self.should_execute(fn):
                exec_info.setdefault(stack[-1][0], ExecInfo()).needed = True

    # -------------------------------------------------------------- completion
    def set_exception(self, exc: BaseException, fn: Node | None) -> None:
        """Fail the task with `exc` (the first error wins); never raises."""
        with self.lock:
            first = self.exception is None
            if first:
                self.exception = exc
        if first and anomaly.state.enabled and fn is not None:
            with contextlib.suppress(Exception):
                anomaly.warn_forward_trace(fn)
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

    def note_leaf_stream(self, stream: Any) -> None:
        """A node that ends a path (a leaf's accumulation, a capture) ran on `stream`: the
        caller's stream waits for it before the final callbacks (Note [Streaming backward]
        in input_buffer.py)."""
        if stream is not None:
            with self.lock:
                self.leaf_streams.add(stream)

    def exec_post_processing(self) -> None:
        """Sync the caller's streams with the leaves', then run the final callbacks.

        See Note [Streaming backward] in input_buffer.py.
        """
        if self.not_ready:
            names = ", ".join(sorted({fn.name() for fn in self.not_ready}))
            raise RuntimeError(f"could not compute gradients for some functions ({names})")
        if not self.leaf_streams and not self.final_callbacks:
            return  # nothing to sync, nothing to call: no state to switch to
        previous = exec_state.graph_task
        exec_state.graph_task = self
        grad_mode = grad_state.grad_enabled
        grad_state.grad_enabled = self.create_graph
        try:
            with streams.using_thread_streams(self.caller_streams):
                for leaf_stream in self.leaf_streams:
                    caller_stream = streams.current_stream(leaf_stream.device)
                    if caller_stream != leaf_stream:
                        caller_stream.wait_stream(leaf_stream)
                observer = instrumentation.current()
                i = 0
                while i < len(self.final_callbacks):
                    observer.run_callback(self, self.final_callbacks[i])
                    i += 1
        finally:
            exec_state.graph_task = previous
            grad_state.grad_enabled = grad_mode


def queue_callback(callback: Callable[[], None]) -> None:
    """Run `callback` when the current graph task finishes (first in, first out)."""
    task = exec_state.graph_task
    if task is None:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    with task.lock:
        task.final_callbacks.append(callback)


# ------------------------------------------------------------------ scheduler queries
def current_execution_order() -> list[Node]:
    """The nodes the current backward runs from now on, in order, the running one first.

    The backward must run with multithreading disabled (the flag it started
    with): its schedule is then one thread's, fixed by Note [Ready queue order].
    Called before the first node, or from its hooks, it is the whole order;
    from a later node's hooks, the rest of it; from a final callback, empty.
    """
    task = exec_state.graph_task
    if task is None:
        raise RuntimeError("current_execution_order can only be called during a backward pass")
    if task.multithreaded:
        raise RuntimeError(
            "current_execution_order expects the current backward to be executed with "
            "multithreading disabled, e.g. by running:\n\n"
            ">>> with js.autograd.set_multithreading_enabled(False):\n"
            "...     js.grad(...)\n"
        )
    if task.completed_flag:
        return []
    order = _replay_schedule(task)
    # The order so far is a prefix: the nodes neither waiting for an input nor queued.
    waiting = set(task.dependencies).union(task.cpu_ready_queue.nodes_of(task))
    started = sum(1 for fn in order if fn not in waiting)
    return order[max(started - 1, 0):]


def _replay_schedule(task: GraphTask) -> list[Node]:
    """The task's whole single-threaded schedule, from its roots' initial dependency counts.

    A node is ready once every edge into it has delivered; the ready node
    created last runs first, ties first in, first out (Note [Ready queue order]).
    """
    roots = list(dict.fromkeys(task.graph_roots))
    counts: dict[Node, int] = {}
    count_edges(roots, task.min_topo_nr, counts, set(roots))
    ticket = itertools.count()
    heap = [(-fn.sequence_nr, next(ticket), fn) for fn in roots if fn not in counts]
    heapq.heapify(heap)
    order: list[Node] = []
    while heap:
        fn = heapq.heappop(heap)[2]
        order.append(fn)
        if fn.topological_nr < task.min_topo_nr:
            continue
        for next_fn, _ in fn.next_edges:
            if next_fn is None:
                continue
            counts[next_fn] -= 1
            if counts[next_fn] == 0 and task.should_execute(next_fn):
                heapq.heappush(heap, (-next_fn.sequence_nr, next(ticket), next_fn))
    return order


def count_edges(roots: list[Node], min_topo_nr: int, counts: dict[Node, int],
                seen: set[Node]) -> bool:
    """Count into `counts` how many edges point at each node reachable from `roots`.

    Nodes below `min_topo_nr` are not walked past; `seen` collects the nodes
    reached. Returns whether any of them has a stream (runs on a device).
    """
    on_devices = False
    stack = list(roots)
    while stack:
        fn = stack.pop()
        if fn.topological_nr < min_topo_nr:
            continue
        for next_fn, _ in fn.next_edges:
            if next_fn is None:
                continue
            if next_fn in seen:
                counts[next_fn] = counts.get(next_fn, 0) + 1  # a root has no count yet
                continue
            seen.add(next_fn)
            counts[next_fn] = 1
            stack.append(next_fn)
            if next_fn.stream is not None:
                on_devices = True
    return on_devices


def will_engine_execute_node(node: object) -> bool:
    """Whether the running backward will execute `node`.

    `node` is a Node, or a tensor: its grad_fn, or for a leaf its AccumulateGrad.
    """
    task = exec_state.graph_task
    if task is None:
        raise RuntimeError(
            "will_engine_execute_node should only be called during the backward pass"
        )
    if not isinstance(node, Node):
        node = _node_of_tensor(node)
        if node is None:
            return False
    if node not in task.nodes_in_graph:
        return False
    if not task.should_execute(node):
        return False
    if task.exec_info and node.topological_nr == 0 and task.exec_info[node].captures is not None:
        raise RuntimeError(
            "A leaf node was passed to will_engine_execute_node but we are currently "
            "running grad(). This is currently not supported."
        )
    return True


def _node_of_tensor(tensor: object) -> Node | None:
    if not hasattr(tensor, "existing_grad_accumulator") or not tensor.requires_grad:
        raise TypeError(
            "will_engine_execute_node expects a Node or a tensor that requires grad, got "
            f"{type(tensor).__name__}"
        )
    if tensor.grad_fn is not None:
        return tensor.grad_fn
    return tensor.existing_grad_accumulator()
