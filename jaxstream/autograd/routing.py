"""Routing a node's outputs: into the input buffers of the nodes they flow to, and the nodes
now ready into the queues that run them, or back to the thread that runs the next one.

Note [The next node, handed back]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
On a chain, the one node a node makes ready goes to the queue its own thread pops, and is
popped from it next: a push and a pop, which on a device thread's shared queue take a lock
each, and the task's count of outstanding tasks one up and one down, under another lock.
So when a node makes exactly one node ready, and that node's queue is the one the thread
pops (`mine`) and is empty, `route_outputs` hands it back instead, and `thread_main` runs
it next, where it would have popped it: the handed-back node takes over the finished one's
count, so neither count moves. The order is one the queues allow: with the queue empty the
node would have been popped next, unless another thread pushed a node first, which may as
well have come after the pop. A node made ready with others is queued with them, so that
the queue orders them (Note [Ready queue order] in ready_queue.py); a wake-up or shutdown
task is never handed back, and a handed-back node of a task that failed meanwhile is
skipped as a popped one is (Note [Failed tasks leave the queues]).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..tensor import Tensor
from .input_buffer import accumulate, device_index
from .validate import validated

if TYPE_CHECKING:
    from .graph_task import GraphTask
    from .node import Node
    from .ready_queue import ReadyQueue, TaskQueue
    from .threads import EngineThreads


def route_outputs(threads: EngineThreads, graph_task: GraphTask, fn: Node, outputs: list,
                  mine: ReadyQueue | TaskQueue | None = None) -> tuple | None:
    """Check each output against the input it flows into, add it into that input's
    buffer, and queue the buffers now complete; the node task handed back instead of
    queued on `mine`, if any (Note [The next node, handed back]).

    A gradient that does not fit as it is goes through `validated` (Note [A plain
    node in one frame] in engine.py); the caller has checked that there is one per edge.
    The caller holds the task's lock unless the task never leaves its thread.
    """
    ready = []
    edges = fn.next_edges  # as many as outputs: the caller checked
    exec_info = graph_task.exec_info
    dependencies = graph_task.dependencies
    not_ready = graph_task.not_ready
    stream = fn.stream  # where the outputs were made (Note [Streaming backward])
    for i, output in enumerate(outputs):  # not zip(strict=False): its keyword costs a call
        next_fn, input_nr = edges[i]
        if next_fn is None:
            continue
        meta = next_fn.input_metadata[input_nr]
        if output is not None and (type(output) is not Tensor or not (
            output.array.shape == meta.shape and output.array.dtype is meta.dtype
            and output.device is meta.device and output.array_backend is meta.array_backend
        )):
            output = validated(output, next_fn, input_nr, i, fn)
        count = dependencies.pop(next_fn)  # every node reached from the roots is counted
        if count == 1:
            grads = not_ready.pop(next_fn, None)
        else:
            dependencies[next_fn] = count - 1
            grads = not_ready.get(next_fn)
        if grads is None:
            if exec_info and not graph_task.should_execute(next_fn):
                continue
            grads = [None] * len(next_fn.input_metadata)
            if count != 1:
                not_ready[next_fn] = grads
        if grads[input_nr] is None and (meta.stream is None or meta.stream is stream):
            grads[input_nr] = output  # `accumulate` of a first gradient that orders nothing
        else:
            accumulate(grads, input_nr, output, meta.stream)
        if count == 1:
            ready.append((next_fn, grads))
    return queue_ready(threads, graph_task, ready, mine) if ready else None


def queue_ready(threads: EngineThreads, graph_task: GraphTask, ready: list,
                mine: ReadyQueue | TaskQueue | None) -> tuple | None:
    """Queue the nodes `ready` (with their input buffers) where they run, or hand the one
    node back, as a popped node task, where its queue is `mine` and empty (Note [The next
    node, handed back])."""
    here = graph_task.cpu_ready_queue if graph_task.caller_only else None
    for next_fn, grads in ready:
        queue = here if here is not None else threads.queue_for(graph_task, device_index(grads))
        if queue is mine and len(ready) == 1 and not len(queue):
            return (None, None, graph_task, next_fn, grads)
        queue.push(graph_task, next_fn, grads)
    return None
