"""Leaves shared by backwards on several threads: one gradient accumulator per leaf, and
every gradient summed into `.grad` exactly once (Note [One accumulator per leaf] in
tensor.py)."""

from __future__ import annotations

import sys
import threading

import numpy as np
from helpers import WAIT_S, run_threads

import jaxstream as js

THREADS = 4
ROUNDS = 500
LEAVES_PER_ROUND = 4
SCALES = (1.0, 2.0, 4.0, 8.0)  # one per thread; float64 sums of these are exact


def test_concurrent_backwards_into_fresh_leaves_equal_the_sequential_sum():
    rounds = [[js.tensor(np.zeros(3), requires_grad=True) for _ in range(LEAVES_PER_ROUND)]
              for _ in range(ROUNDS)]
    accumulators = [[()] * THREADS for _ in range(ROUNDS)]
    together = threading.Barrier(THREADS, timeout=WAIT_S)

    def backward_into_each_leaf(thread: int) -> None:
        for r, leaves in enumerate(rounds):
            together.wait()  # all threads reach the fresh leaves at once
            outs = [x * SCALES[thread] for x in leaves]
            accumulators[r][thread] = tuple(out.grad_fn.next_functions[0][0] for out in outs)
            js.stack([out.sum() for out in outs]).sum().backward()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-7)  # switch threads as often as CPython allows
    try:
        errors = run_threads(backward_into_each_leaf, [(i,) for i in range(THREADS)])
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    duplicated = [r for r, seen in enumerate(accumulators) if len(set(seen)) > 1]
    expected = np.full(3, sum(SCALES))
    wrong = [x for leaves in rounds for x in leaves
             if not np.array_equal(x.grad.numpy(), expected)]
    assert (duplicated, wrong) == ([], []), (
        f"{len(duplicated)} rounds built more than one AccumulateGrad for a leaf, "
        f"{len(wrong)} leaves lost a gradient"
    )


def test_a_hook_registered_on_a_leaf_reaches_the_accumulator_its_graph_uses():
    x = js.tensor(np.ones(2), requires_grad=True)
    out = x * 3.0
    seen = []
    x.register_hook(lambda g: seen.append(g.numpy().copy()))
    out.sum().backward()
    np.testing.assert_array_equal(seen, [[3.0, 3.0]])
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
