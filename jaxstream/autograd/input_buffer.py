"""Input buffers: where a node's incoming gradients are summed before it runs.

Note [Streaming backward]
~~~~~~~~~~~~~~~~~~~~~~~~~
A node with a stream (its forward's) runs under that stream, on whichever
thread runs it, so every kernel of its backward lands there. Moving a gradient
into a consumer's input buffer orders the consumer's stream after the
producer's (an event recorded on one, waited on by the other) and sums there.
The seed gradient is ordered into the root's stream the same way, from the
caller's current stream (with several roots, `GraphRoot` carries the caller's
streams of the seeds to the thread that runs it).

A gradient that crosses streams is read on the consumer's (by the sum, or by
the node) while its memory is the producer's, whose next allocations may reuse
it once the gradient is dropped. So, as PyTorch's `InputBuffer::add` does, it
is recorded on the consumer's stream (`Tensor.record_stream`, Note
[record_stream at deallocation] in conversions.py): its memory is not reused
before the work queued there up to its deallocation is done. Every stream that
reads a gradient made on another is recorded; the seed's included. On `sim`
such a hold lasts until the host waits for that stream (`js.synchronize`, a
host read of a tensor whose stream is ordered after it).

The task remembers the streams of the leaves it accumulated and of the nodes
whose gradients `grad()` captured. At the end, the caller's current streams,
taken when the backward started, wait for each of them, and the final
callbacks run under the caller's streams (`GraphTask.exec_post_processing`):
the gradients can be used on the caller's current stream afterwards, as after
any other op, and on no other stream unsynced.

A node's stream is the stream its forward's kernels ran on (`streams.stream_for`),
and so is a gradient's producer: for JAX on an accelerator both are XLA's stream
(Note [XLA's stream] in devices/xla.py), which a node is issued on (its device's
guard) rather than entered. As in PyTorch, a consumer waits for a producer only
when their streams differ, so JAX nodes on one device order nothing between
them: no event, no host round trip per node; only the crossings to and from
jaxstream's streams (the seed, a move, the caller's wait for the leaves) do.
"""

from __future__ import annotations

import sys
from typing import Any

from .. import streams
from ..ops.dispatch import apply
from ..ops.rules import ADD
from ..ops.venues import venue_of
from ..tensor import Tensor
from .grad_mode import state as grad_state
from .ready_queue import CPU_DEVICE


def accumulate(grads: list, pos: int, grad: Any, consumer: Any) -> None:
    """Add `grad` into slot `pos` of a node's input buffer `grads` (one slot per input).

    `consumer` is the stream the node runs on (None on the cpu). This is the
    single place where the engine adds gradients; the sum is an ordinary op
    (recorded under create_graph) on the consumer's stream. A buffer is a plain
    list, so a node's inputs cost one allocation. See Note [Streaming backward].
    """
    if grad is None:
        return
    old = grads[pos]
    if consumer is None or grad.device is not consumer.device:  # one object per device
        grads[pos] = grad if old is None else _sum(old, grad)
        return
    producer = streams.stream_for(grad.device, grad.array_backend)
    if producer is not consumer and producer != consumer:
        consumer.wait_stream(producer)
        grad.record_stream(consumer)  # read there, made here: Note [Streaming backward]
    if old is None:
        grads[pos] = grad
    else:
        with streams.issuing(consumer):
            grads[pos] = apply(ADD, old, grad)


# Note [Summing into a gradient no one else holds]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# As PyTorch's input buffer does, the second gradient of an input is added in place into the
# first when nothing else can see the first: grad mode off (else the sum is recorded), and
# the buffer's slot the only holder of the tensor, and the tensor the only holder of its
# array, which owns its memory. The gradient a node returned for two inputs, one a hook
# kept, a seed the caller holds, a view of another array: each is held elsewhere too, so the
# sum is a new array as before. Holders are counted by CPython's reference counts: `_sum`
# sees the slot, `accumulate`'s and its own name and `getrefcount`'s argument (4), and the
# array the tensor, its own name and the argument (3). Interpreters that count otherwise
# (another implementation, or CPython from 3.14, whose frames may borrow references) always
# make a new array. On the hessian workload's final backward at batch 2,000 the sums took
# 1.8 to 2.4 ms per step against 3.4 to 3.5 ms (cProfile, 53 sums of 2,000x64 float32).
_COUNTS_HOLDERS = sys.implementation.name == "cpython" and sys.version_info < (3, 14)


def _sum(old: Tensor, grad: Tensor) -> Tensor:
    """`old + grad`, two gradients of one input (so of its shape and dtype already): an op
    recorded under create_graph, and on the host without it the arrays' sum, with no op
    dispatched (Note [Array vjps on the host] in ops/twins.py), into `old` where no one else
    holds it (Note [Summing into a gradient no one else holds])."""
    if grad_state.grad_enabled or not venue_of(old).sums_on_host:
        return apply(ADD, old, grad)  # Note [Deciding once where an op runs] in ops/venues.py
    array = old.array
    if (_COUNTS_HOLDERS and sys.getrefcount(old) == 4 and sys.getrefcount(array) == 3
            and array.flags.owndata and array.flags.writeable):
        array += grad.array
        old.version_counter[0] += 1
        return old
    backend = old.array_backend
    return Tensor.wrap(backend.normalize(array + grad.array), backend, old.device)


def device_index(grads: list) -> int:
    """The device index whose queue runs the node (Note [Device threads] in threads.py)."""
    for grad in grads:
        if grad is not None:
            index = grad.device.index
            if index is not None:
                return index
    return CPU_DEVICE
