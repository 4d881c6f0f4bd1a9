"""The autograd engine: execute a backward, the worker loop, evaluate a node.

The structure follows PyTorch's engine: `execute` builds a `GraphTask`
(graph_task.py: dependency counts, `exec_info`), pushes the root into a ready
queue (ready_queue.py: the thread's shared `ReadyQueue`, or the task's own
`TaskQueue` when it never leaves the caller's thread), and `thread_main` pops
node tasks and runs them until the task's outstanding count reaches zero. Each
output gradient is validated (validate.py) and added into the next node's
input buffer (input_buffer.py), which is queued once complete. Then the task's
post-processing runs the final callbacks and the caller gets the captured
gradients. Device threads and the reentrant pool are in threads.py.

Note [CPU work runs on the caller]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The thread that calls backward drives the graph task: it becomes a worker for
its own CPU ready queue (`worker_device = CPU_DEVICE`) until the task completes.
A backward called from inside a node (reentrant) finds `worker_device` already
set: it runs the nested task on the same thread and the same queue, one level
deeper (see Note [Reentrant backward] in threads.py).

Note [Per-task thread state]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~
While a node runs, its thread carries the node's graph task in `exec_state`
(what `queue_callback` and `needs_input_grad` ask), the task's autocast state,
whether a reentrant checkpoint may run, and where warnings go. All of these
belong to the task, so `thread_main` switches them when the popped node belongs
to another task than the last one, not for every node; a nested `thread_main`
(reentrant backward) puts back on exit what it found, which is the task of the
node that called it. Grad mode alone is set for every node, to the task's
`create_graph`, because a node may leave it changed. A node without a stream
is evaluated without entering one (`_evaluate` directly). `ThreadState`
(threads.py) holds what the loop found on entry.

Note [A plain node in one frame]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Most nodes need none of the engine's optional steps: no hooks, no `exec_info`
(no `inputs=`), no anomaly checks, no observer. `thread_main` runs such a plain
node of a task that never leaves its caller's thread, without a stream, in its
own frame: `apply`, free the saved variables, `route_outputs`. A plain node with
a stream, or of a task on several threads, takes one frame more
(`_evaluate_plain`): its stream entered, in the worker's lane where it can be
(Note [A lane of plain nodes] in devices/current.py), and the task's lock taken
around the routing where other threads may route too. Every other node goes
through `evaluate_function`, one call for each step. They differ only in Python
calls; a frame per step cost a quarter of a random DAG's backward.
`route_outputs` (routing.py) checks each gradient against the input it flows
into (shape, dtype, device and backend the same objects) and hands any that
does not fit to `validated`, which sums a broadcast gradient back, casts a
floating dtype, or raises naming the node, as `validate_outputs` does for a
whole list; the one node it makes ready may come back to run next (Note [The
next node, handed back] in routing.py). What a hook returns is held to
PyTorch's checks where the hook is called (Note [Hook results] in
hook_results.py), and only there, so a node without hooks pays nothing for them.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading

from .. import instrumentation, streams
from ..devices.current import StreamLane
from ..ops.reductions import isnan_any
from . import anomaly
from .exec_state import exec_state
from .grad_mode import state as grad_state
from .graph_task import GraphTask
from .hooks import call_post_hooks, call_pre_hooks, call_tensor_pre_hooks
from .input_buffer import accumulate, device_index
from .node import GraphRoot, Node
from .ready_queue import CPU_DEVICE, NO_DEVICE, ReadyQueue, TaskQueue
from .routing import route_outputs
from .threads import EngineThreads, ThreadState, worker
from .validate import validate_outputs

__all__ = ["Engine", "get_default_engine", "set_default_engine", "validate_outputs"]


class Engine:
    """Runs graph tasks. One engine serves the whole process (`get_default_engine`)."""

    def __init__(self) -> None:
        # Each level of reentrant backward costs about a dozen Python frames; this
        # keeps a thread well inside the default recursion limit of 1000.
        self.max_reentrant_depth = 40
        self.threads = EngineThreads(self.thread_main)

    # --------------------------------------------------------------- entry point
    def execute(self, root_edges: list, grads: list, keep_graph: bool, create_graph: bool,
                accumulate_grad: bool, outputs: list) -> list:
        """Run one backward from `root_edges` seeded with `grads`; the captured gradients."""
        validate_outputs(root_edges, grads, None)
        if not accumulate_grad and not outputs:
            raise ValueError("grad requires non-empty inputs.")
        graph_task = self._new_graph_task(root_edges, keep_graph, create_graph)
        single_root = len(root_edges) == 1
        graph_root = root_edges[0][0] if single_root else GraphRoot(root_edges, grads)
        min_topo_nr = min((fn.topological_nr for fn, _ in outputs), default=0)
        graph_task.compute_dependencies(graph_root, min_topo_nr)
        if outputs:
            graph_task.init_to_execute(graph_root, outputs, accumulate_grad, min_topo_nr)
        inputs = [None] * graph_root.num_inputs if single_root else []
        if single_root:
            input_nr = root_edges[0][1]
            # The seed is ordered into the root's stream (Note [Streaming backward]).
            accumulate(inputs, input_nr, grads[0], graph_root.input_metadata[input_nr].stream)
        try:
            self.execute_with_graph_task(graph_task, graph_root, inputs)
        finally:
            graph_task.replay_warnings()
        return graph_task.captured_vars

    def _new_graph_task(self, root_edges: list, keep_graph: bool,
                        create_graph: bool) -> GraphTask:
        if worker.ready_queue is None:
            worker.ready_queue = ReadyQueue()
        reentrant = worker.worker_device != NO_DEVICE
        outer = exec_state.graph_task
        multithreaded = (
            outer.multithreaded if reentrant and outer is not None
            else grad_state.multithreading_enabled
        )
        if multithreaded and self.threads.forked_child:
            raise RuntimeError(
                "the autograd engine's worker threads were started before this process was "
                "forked, and a forked child has none of them. Start child processes with the "
                "'spawn' or 'forkserver' method, or run this backward with "
                "js.autograd.set_multithreading_enabled(False)."
            )
        return GraphTask(
            keep_graph,
            create_graph,
            worker.total_depth + 1 if reentrant else 0,
            worker.ready_queue,
            [fn for fn, _ in root_edges],
            multithreaded,
        )

    def execute_with_graph_task(self, graph_task: GraphTask, graph_root: Node,
                                inputs: list) -> None:
        queue = self._queue_for(graph_task, inputs)
        if worker.worker_device == NO_DEVICE:
            # See Note [CPU work runs on the caller]
            worker.worker_device = CPU_DEVICE
            graph_task.owner = CPU_DEVICE
            queue.push(graph_task, graph_root, inputs)
            try:
                self._run_until_done(graph_task)
            finally:
                worker.worker_device = NO_DEVICE
        else:
            # See Note [Reentrant backward] in threads.py
            graph_task.owner = worker.worker_device
            queue.push(graph_task, graph_root, inputs)
            if worker.current_depth >= self.max_reentrant_depth:
                self.threads.hand_off(graph_task)
            else:
                worker.total_depth += 1
                worker.current_depth += 1
                try:
                    self._run_until_done(graph_task)
                finally:
                    worker.current_depth -= 1
                    worker.total_depth -= 1
        if graph_task.exception is not None:
            raise graph_task.exception

    def _run_until_done(self, graph_task: GraphTask) -> None:
        try:
            self.thread_main(graph_task)
        except BaseException as exc:
            # Interrupted outside any node (Ctrl-C while waiting): the task stops as well.
            self._fail(graph_task, None, exc)
            raise
        graph_task.done.wait()

    # --------------------------------------------------------------- worker loop
    def thread_main(self, graph_task: GraphTask | None) -> None:
        """Pop and run node tasks until `graph_task` is done (until shutdown if it is None).

        Nothing a node raises escapes this loop: see Note [A worker never dies] in threads.py.
        The thread's state is switched per task, not per node: Note [Per-task thread state].
        A plain node runs in this frame: Note [A plain node in one frame].
        """
        own = graph_task is not None and graph_task.caller_only
        mine = graph_task.cpu_ready_queue if own else worker.ready_queue
        pop = mine.pop
        route = route_outputs
        threads = self.threads
        plain = self._evaluate_plain
        observed = self._evaluate_observed
        quiet = instrumentation.QUIET
        anomaly_state = anomaly.state
        previous = ThreadState.of_thread()
        current = None
        handed = None  # a node task handed back to run next: Note [The next node, handed back]
        lane = StreamLane()  # Note [A lane of plain nodes] in devices/current.py
        try:
            while graph_task is None or not graph_task.completed_flag:
                _, _, local_task, fn, inputs = handed or pop()
                handed = None
                if local_task is None:
                    break
                if local_task is not current:
                    lane.leave()
                    current = local_task
                    previous.enter(local_task)
                if fn is not None and local_task.exception is None:
                    grad_state.grad_enabled = local_task.create_graph
                    try:
                        steps = (
                            local_task.exec_info or instrumentation.installed is not quiet
                            or anomaly_state.enabled or fn.tensor_pre_hooks
                            or fn.retains_grad_hooks or fn.pre_hooks or fn.post_hooks
                        )  # whether it needs any of the optional steps
                        if not steps and local_task.caller_only and fn.stream is None:
                            outputs = fn.apply(inputs)
                            if len(outputs) != len(fn.next_edges):
                                validate_outputs(fn.next_edges, outputs, fn)  # raises
                            if not local_task.keep_graph:
                                fn.release_variables()
                            handed = route(threads, local_task, fn, outputs, mine)
                        else:
                            handed = (observed if steps else plain)(
                                local_task, fn, inputs, mine, lane
                            )
                    except BaseException as exc:  # noqa: BLE001  (delivered to the caller)
                        self._fail(local_task, fn, exc)
                # A node handed back takes over this one's count of outstanding tasks.
                if not handed and local_task.finish_one():
                    self._complete(local_task)
        finally:
            lane.leave()
            previous.restore()

    def _fail(self, graph_task: GraphTask, fn: Node | None, exc: BaseException) -> None:
        """Deliver `exc` to the task's caller and drop the task's queued nodes; never raises.

        See Note [A worker never dies] in threads.py and Note [Failed tasks leave
        the queues] in ready_queue.py.
        """
        if fn is not None:
            with contextlib.suppress(Exception):  # a node whose name() fails still reports
                _add_node_note(exc, fn)
        graph_task.set_exception(exc, fn)
        for queue in self.threads.queues_of(graph_task):
            queue.drop_tasks_of(graph_task)

    def _complete(self, graph_task: GraphTask) -> None:
        graph_task.mark_as_completed_and_run_post_processing()
        if worker.worker_device != graph_task.owner:
            # Wake the owner up (Note [Device threads]).
            self.threads.queue_for(graph_task, graph_task.owner).push(graph_task, None, [])

    # --------------------------------------------------------------- one node
    def evaluate_function(self, graph_task: GraphTask, fn: Node, inputs: list) -> None:
        """Run `fn` (or only capture its inputs) and route its outputs to the next nodes."""
        stream = fn.stream
        if stream is None:
            self._evaluate(graph_task, fn, inputs)
        else:
            # Entered, or issued on for XLA's: Note [Streaming backward] in input_buffer.py
            with streams.issuing(stream):
                self._evaluate(graph_task, fn, inputs)

    def _evaluate_observed(self, graph_task: GraphTask, fn: Node, inputs: list,
                           mine: ReadyQueue | TaskQueue, lane: StreamLane) -> None:
        """A node with optional steps, through the installed instrumentation."""
        instrumentation.current().evaluate_node(self.evaluate_function, graph_task, fn, inputs)

    def _evaluate_plain(self, graph_task: GraphTask, fn: Node, inputs: list,
                        mine: ReadyQueue | TaskQueue, lane: StreamLane) -> tuple | None:
        """A plain node with a stream, or of a task on several threads, under its stream:
        in the worker's lane (Note [A lane of plain nodes] in devices/current.py), or in a
        block of its own; the node task handed back to run next, if any."""
        stream = fn.stream
        if stream is None or lane.holds(stream) or lane.enter(streams.issuing(stream)):
            return self._run_plain(graph_task, fn, inputs, mine)
        with streams.issuing(stream):
            return self._run_plain(graph_task, fn, inputs, mine)

    def _run_plain(self, graph_task: GraphTask, fn: Node, inputs: list,
                   mine: ReadyQueue | TaskQueue) -> tuple | None:
        """`apply`, free the saved variables, route the outputs (Note [A plain node in one
        frame]); the node task handed back to run next, if any."""
        outputs = fn.apply(inputs)
        if len(outputs) != len(fn.next_edges):
            validate_outputs(fn.next_edges, outputs, fn)  # raises
        if not graph_task.keep_graph:
            fn.release_variables()
        if not outputs:
            graph_task.note_leaf_stream(fn.stream)
            return None
        if graph_task.caller_only:
            return route_outputs(self.threads, graph_task, fn, outputs, mine)
        lock = graph_task.lock
        lock.acquire()  # not `with`, which costs twice as much: this runs per node
        try:
            return route_outputs(self.threads, graph_task, fn, outputs, mine)
        finally:
            lock.release()

    def _evaluate(self, graph_task: GraphTask, fn: Node, inputs: list) -> None:
        if graph_task.exec_info and not self._capture(graph_task, fn, inputs):
            return
        if fn.tensor_pre_hooks or fn.retains_grad_hooks or fn.pre_hooks or fn.post_hooks:
            outputs = self.call_function(graph_task, fn, inputs)
        else:
            outputs = validate_outputs(fn.next_edges, fn.apply(inputs), fn)
        if not graph_task.keep_graph:
            fn.release_variables()
        if not outputs:
            graph_task.note_leaf_stream(fn.stream)
            return
        if anomaly.state.enabled and anomaly.state.check_nan:
            _check_nan(fn, outputs)
        if graph_task.caller_only:
            route_outputs(self.threads, graph_task, fn, outputs)  # one thread: no lock to take
        else:
            with graph_task.lock:
                route_outputs(self.threads, graph_task, fn, outputs)

    @staticmethod
    def _capture(graph_task: GraphTask, fn: Node, inputs: list) -> bool:
        """Keep the gradients `grad()` returns; whether `fn` must run too (Note [exec_info])."""
        info = graph_task.exec_info[fn]
        if not info.needed:
            # Tensor pre-hooks run even for capture-only nodes (Note [Hook order]).
            inputs = call_tensor_pre_hooks(graph_task, fn, inputs)
        if info.captures is not None:
            with graph_task.lock:
                for input_nr, output_idx in info.captures:
                    graph_task.captured_vars[output_idx] = inputs[input_nr]
            graph_task.note_leaf_stream(fn.stream)
        return info.needed

    def _queue_for(self, graph_task: GraphTask, inputs: list) -> ReadyQueue:
        if graph_task.caller_only:
            return graph_task.cpu_ready_queue
        return self.threads.queue_for(graph_task, device_index(inputs))

    def call_function(self, graph_task: GraphTask, fn: Node, inputs: list) -> list:
        """Hooks in the order of Note [Hook order] around `fn.apply`, outputs validated."""
        if fn.tensor_pre_hooks or fn.retains_grad_hooks:
            inputs = call_tensor_pre_hooks(graph_task, fn, inputs)
        if fn.pre_hooks:
            inputs = call_pre_hooks(graph_task, fn, inputs)
        outputs = fn.apply(inputs)
        validate_outputs(fn.next_edges, outputs, fn)
        if fn.post_hooks:
            outputs = call_post_hooks(graph_task, fn, outputs, inputs)
        return outputs


def _add_node_note(exc: BaseException, fn: Node) -> None:
    note = f"raised while running {fn.name()} in the backward pass"
    if note not in getattr(exc, "__notes__", ()):
        exc.add_note(note)


def _check_nan(fn: Node, outputs: list) -> None:
    for i, out in enumerate(outputs):
        if out is not None and bool(isnan_any(out).array):
            raise RuntimeError(f"Function '{fn.name()}' returned nan values in its {i}th output.")


_default_engine = Engine()
atexit.register(_default_engine.threads.shutdown)
os.register_at_fork(
    before=_default_engine.threads.before_fork,
    after_in_child=_default_engine.threads.after_fork_in_child,
)


def get_default_engine() -> Engine:
    return _default_engine


def set_default_engine(engine: Engine) -> Engine:
    """Make `engine` the one every backward runs on; returns the previous one.

    For comparing engine variants (an experiment swaps one in and back). The
    process's exit and fork handling stay with the first engine's threads, so
    put the previous engine back when done.
    """
    global _default_engine
    if not isinstance(engine, Engine):
        raise TypeError(f"set_default_engine expects an Engine, got {type(engine).__name__}")
    previous, _default_engine = _default_engine, engine
    return previous


def engine_threads() -> list[threading.Thread]:
    """The live threads the engine started: one per accelerator device index, plus pool threads."""
    return _default_engine.threads.alive()


def shutdown_engine_threads(timeout: float | None = None) -> bool:
    """Stop the engine's threads (they restart when needed); whether all ended in time.

    `timeout` defaults to `js.config.autograd_shutdown_wait_s`; a warning names
    any thread still running then.
    """
    return _default_engine.threads.shutdown(timeout)


def set_max_reentrant_depth(depth: int) -> None:
    """How many backwards may nest on one thread before a pool thread takes over.

    Each level costs about a dozen Python frames on that thread, so a limit
    times that, plus the frames of the backward functions themselves, must stay
    below `sys.getrecursionlimit()`. See Note [Reentrant backward] in threads.py.
    """
    if not isinstance(depth, int) or depth < 1:
        raise ValueError(f"max_reentrant_depth must be a positive int, got {depth!r}")
    _default_engine.max_reentrant_depth = depth


def get_max_reentrant_depth() -> int:
    return _default_engine.max_reentrant_depth
