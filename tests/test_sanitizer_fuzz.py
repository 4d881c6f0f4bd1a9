"""Random multi-stream programs under the stream sanitizer, forward and backward.

A program is a list of ops on random streams of one sim device, each op's
operands ordered into its stream by `wait_stream` or an event, then a loss
summed on a caller stream and a backward from there. Correctly synchronized, no
program may raise, forward or backward (the engine's own syncs, input buffers
included, must be enough: Note [Streaming backward] in autograd/input_buffer.py),
and its gradients are those of the same program on the cpu. With one needed
ordering left out, every program raises `StreamRaceError` at the op that reads
unordered: whether an ordering is needed is decided by a model of the streams'
clocks written here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

import jaxstream as js

SIM = "sim:0"
STREAMS = 3  # the device's default stream and two side streams
MAX_OPS = 8

OPS = {
    "add": (2, lambda a, b: a + b),
    "mul": (2, lambda a, b: a * b),
    "sub": (2, lambda a, b: a - b),
    "tanh": (1, lambda a: a.tanh()),
}

ORDERINGS = {
    "wait_stream": lambda producer, consumer: consumer.wait_stream(producer),
    "wait_event": lambda producer, consumer: consumer.wait_event(producer.record_event()),
    "event.wait": lambda producer, consumer: producer.record_event().wait(consumer),
}


class Step(NamedTuple):
    """One op: its name, the values it reads (indices), its stream, how operands are ordered."""

    op: str
    operands: tuple[int, ...]
    stream: int
    ordering: str


class Program(NamedTuple):
    leaves: tuple[float, ...]
    steps: tuple[Step, ...]
    caller: int  # the stream the loss is summed on and backward is called from
    ordering: str  # how the caller's stream is ordered after each value's


@st.composite
def programs(draw: st.DrawFn) -> Program:
    leaves = tuple(draw(st.lists(st.sampled_from([0.5, 0.75, 1.25, 1.5]), min_size=1,
                                 max_size=3)))
    steps = []
    for k in range(draw(st.integers(1, MAX_OPS))):
        op = draw(st.sampled_from(sorted(OPS)))
        arity, _ = OPS[op]
        values = st.integers(0, len(leaves) + k - 1)
        steps.append(Step(
            op,
            tuple(draw(values) for _ in range(arity)),
            draw(st.integers(0, STREAMS - 1)),
            draw(st.sampled_from(sorted(ORDERINGS))),
        ))
    return Program(leaves, tuple(steps), draw(st.integers(0, STREAMS - 1)),
                   draw(st.sampled_from(sorted(ORDERINGS))))


def kernels_of(program: Program) -> list[tuple[int, tuple[int, ...]]]:
    """(stream, values read) of each kernel that may read across streams: the steps, then
    the loss, which reads every value on the caller's stream."""
    values = len(program.leaves) + len(program.steps)
    return [(s.stream, s.operands) for s in program.steps] + [
        (program.caller, tuple(range(values)))
    ]


def cross_stream_reads(program: Program) -> list[tuple[int, int]]:
    """(kernel, operand) of each read of a value made on another stream: the reads `run`
    orders."""
    made_on = [0] * len(program.leaves) + [s.stream for s in program.steps]
    return [(k, j) for k, (stream, operands) in enumerate(kernels_of(program))
            for j, value in enumerate(operands) if made_on[value] != stream]


def unordered_without(program: Program, skipped: tuple[int, int]) -> bool:
    """Whether leaving out the ordering of read `skipped` (kernel, operand) leaves a read of
    that kernel unordered after the kernel that made its value: the clocks of Note [Stream
    sanitizer], with one tick per step (a leaf is tick 0 of the default stream)."""
    clocks = [[0 if s == o else -1 for o in range(STREAMS)] for s in range(STREAMS)]
    made = [(0, 0)] * len(program.leaves)  # (stream, tick) of each value
    for k, (stream, operands) in enumerate(kernels_of(program)):
        for j, value in enumerate(operands):
            producer = made[value][0]
            if producer != stream and (k, j) != skipped:
                clocks[stream] = [max(a, b) for a, b in zip(clocks[stream], clocks[producer],
                                                            strict=True)]
        if k == skipped[0]:
            return any(clocks[stream][made[v][0]] < made[v][1] for v in operands)
        clocks[stream][stream] += 1
        made.append((stream, clocks[stream][stream]))
    raise AssertionError(f"the program has no kernel {skipped[0]}")


def run(program: Program, device: str, skipped: tuple[int, int] | None = None) -> list:
    """Run `program` on `device` (its streams ordered except `skipped`); the leaves' grads."""
    on_sim = device != "cpu"
    streams = [js.current_stream(device)] + [
        js.Stream(device) if on_sim else None for _ in range(STREAMS - 1)
    ]
    leaves = [js.tensor(np.full((3, 3), v), device=device, requires_grad=True)
              for v in program.leaves]
    values = [(leaf, 0) for leaf in leaves]

    def kernel(k: int, stream: int, operands: tuple, ordering: str,
               body: Callable) -> js.Tensor:
        for j, value in enumerate(operands):
            producer = values[value][1]
            if on_sim and producer != stream and (k, j) != skipped:
                ORDERINGS[ordering](streams[producer], streams[stream])
        with js.stream(streams[stream]):
            return body(*(values[v][0] for v in operands))

    for k, step in enumerate(program.steps):
        values.append((kernel(k, step.stream, step.operands, step.ordering, OPS[step.op][1]),
                       step.stream))
    caller = streams[program.caller]
    loss = kernel(len(program.steps), program.caller, tuple(range(len(values))),
                  program.ordering, lambda *vs: js.stack([v.sum() for v in vs]).sum())
    with js.stream(caller):
        loss.backward()
        return [leaf.grad.numpy() for leaf in leaves]


def finish(device: str) -> None:
    """End the program as a program ends: the host waits for the device's streams."""
    js.synchronize(js.device(device))


# A gradient made on the default stream, summed on stream 1, then dropped: its memory was
# reused by the default stream while stream 1 still read it, until input buffers recorded it.
REUSED_BEFORE_READ = Program(
    leaves=(0.5, 0.5),
    steps=(Step("add", (0, 0), 1, "event.wait"), Step("add", (0, 0), 0, "event.wait"),
           Step("add", (1, 0), 0, "event.wait"), Step("mul", (0, 0), 0, "event.wait")),
    caller=0,
    ordering="event.wait",
)


@settings(max_examples=40, deadline=None)
@given(programs())
@example(REUSED_BEFORE_READ)
def test_a_synchronized_multi_stream_program_never_races_and_matches_the_cpu(program):
    try:
        grads = run(program, SIM)
    finally:
        finish(SIM)
    for got, want in zip(grads, run(program, "cpu"), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


@settings(max_examples=30, deadline=None)
@given(programs(), st.data())
def test_a_program_missing_one_needed_ordering_raises_at_the_unordered_read(program, data):
    needed = [read for read in cross_stream_reads(program) if unordered_without(program, read)]
    assume(needed)  # a program on one stream has no ordering to leave out
    skipped = data.draw(st.sampled_from(needed))
    kernel, _ = skipped
    # The loss reads each value with a `sum` on the caller's stream.
    op = "sum" if kernel == len(program.steps) else program.steps[kernel].op
    try:
        with pytest.raises(js.StreamRaceError, match="read-after-write") as info:
            run(program, SIM, skipped)
    finally:
        finish(SIM)
    assert info.value.op == op
