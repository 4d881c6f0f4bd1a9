"""What the run verifies besides its timings: gradients against the cpu's, the schedule
against the branches' streams, and the stream sanitizer catching a deliberate race."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from experiments.streaming_backward.schedule import (
    ScheduledNode,
    branches_ran_on_their_streams,
    execution_order,
    profiled_backward,
    stream_roles,
    stream_summary,
)
from experiments.streaming_backward.workload import (
    CUDA_DEVICE,
    Inputs,
    Leaves,
    backward,
    forward,
    make_leaves,
    make_streams,
)

RACE_CHECK_DEVICE = "sim:1"  # a device of its own, so the deliberate race touches no timed stream
GRAD_TOLERANCE = 1e-5
"""The largest difference from the cpu's gradients allowed, relative to the largest
magnitude among them: Note [Gradients of another device]."""

# Note [Gradients of another device]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A GPU's float32 kernels (cuBLAS's matmuls, reductions in another order) round otherwise
# than the cpu's, and the error of an entry follows the size of the terms summed into it,
# not the entry's own size: a gradient entry near zero, summed from large terms, differs by
# as much as a large one. So the device's gradients are compared with the cpu's by their
# largest difference relative to the largest magnitude among the cpu's gradients, as
# `torch.testing.assert_close` scales its float32 tolerance with the values, and not entry
# by entry with an absolute floor, which a small entry of a correct GPU result exceeds.
# One layer of this workload in PyTorch, cuda against cpu, differs by about 1e-6 of its
# largest gradient; the tolerance leaves a factor of ten. On sim the kernels are the cpu's,
# and the difference is nil or a last bit.


def _grads(leaves: Leaves) -> list[np.ndarray]:
    return [np.asarray(leaf.grad.numpy()) for leaf in (leaves.x, *leaves.weights)]


def cpu_grads(inputs: Inputs, branches: int) -> list[np.ndarray]:
    graph = forward(make_leaves(inputs, "cpu"), (), branches)
    graph.loss.backward()
    return _grads(graph.leaves)


def relative_difference(found: list[np.ndarray], reference: list[np.ndarray]) -> float:
    """The largest |found - reference| over every array, relative to the largest
    |reference| (Note [Gradients of another device])."""
    scale = max(float(np.max(np.abs(r))) for r in reference)
    largest = max(float(np.max(np.abs(f - r))) for f, r in zip(found, reference, strict=True))
    return largest / max(scale, np.finfo(np.float32).tiny)


def largest_grad_difference(leaves: Leaves, reference: list[np.ndarray]) -> float:
    return relative_difference(_grads(leaves), reference)


def grads_close(leaves: Leaves, reference: list[np.ndarray]) -> bool:
    return largest_grad_difference(leaves, reference) <= GRAD_TOLERANCE


def cuda_grads(inputs: Inputs, branches: int, reference: list[np.ndarray]) -> float:
    """The largest relative difference of one cuda backward's gradients from the cpu's."""
    graph = forward(make_leaves(inputs, CUDA_DEVICE), make_streams(CUDA_DEVICE, branches), branches)
    backward(graph)
    return largest_grad_difference(graph.leaves, reference)


def race_checks(inputs: Inputs) -> dict[str, bool]:
    """Backward in a side stream on the 2-branch workload, grads then used on the caller's stream.

    Without a sync the use must raise `StreamRaceError`; after
    `caller.wait_stream(side)` the same use must pass and give the cpu's gradient.
    """
    import jaxstream as js

    graph = forward(make_leaves(inputs, RACE_CHECK_DEVICE), make_streams(RACE_CHECK_DEVICE, 2), 2)
    caller = js.current_stream(RACE_CHECK_DEVICE)
    side = js.Stream(RACE_CHECK_DEVICE)
    side.wait_stream(caller)
    with js.stream(side):
        graph.loss.backward()
    try:
        graph.leaves.x.grad * 1
        unsynced_raises = False
    except js.StreamRaceError:
        unsynced_raises = True
    caller.wait_stream(side)
    used = (graph.leaves.x.grad * 1).numpy()
    return {
        "unsynced_use_raises_stream_race": unsynced_raises,
        "wait_stream_then_use_is_clean": (
            relative_difference([used], cpu_grads(inputs, 2)[:1]) <= GRAD_TOLERANCE
        ),
    }


@dataclass(frozen=True)
class Profiled:
    """One profiled sim backward: the profile (for its timeline), its nodes, the row's facts."""

    profile: Any
    nodes: list[ScheduledNode]
    facts: dict[str, Any]
    roles: dict[str, str]
    """Each stream's profiler label -> its role (caller, s1, ...)."""


def profile_and_check(inputs: Inputs, branches: int, cuda_reason: str | None) -> Profiled:
    """The schedule of one sim backward with K streams, checked against the cpu and the branches."""
    profile, graph, nodes = profiled_backward(inputs, branches)
    reference = cpu_grads(inputs, branches)
    cuda_difference = None if cuda_reason else cuda_grads(inputs, branches, reference)
    facts = {
        "sim_backward_order": execution_order(nodes),
        "sim_backward_threads": ", ".join(sorted({node.thread for node in nodes})),
        "schedule": {
            "streams": stream_summary(nodes),
            "nodes": [{"node": n.name, "thread": n.thread, "stream": n.stream} for n in nodes],
        },
        "branch_nodes_on_their_streams": branches_ran_on_their_streams(graph, nodes),
        "sim_grads_match_cpu": grads_close(graph.leaves, reference),
        "sim_largest_grad_difference": largest_grad_difference(graph.leaves, reference),
        "cuda_grads_match_cpu": (
            None if cuda_difference is None else cuda_difference <= GRAD_TOLERANCE
        ),
        "cuda_largest_grad_difference": cuda_difference,
    }
    return Profiled(profile, nodes, facts, stream_roles(graph))


def run_checks(
    rows: list[dict[str, Any]],
    races: dict[str, bool],
    sanitizer_on: bool,
    also_timed: tuple[dict[str, Any], ...] = (),
) -> dict[str, Any]:
    """What the run verifies; `failed_checks` turns every False here into a failure.

    `rows` are the K rows; the sim runs of `also_timed` (the mix) must pass the sanitizer too.
    """
    cuda = [row["cuda_grads_match_cpu"] for row in rows]
    sim_statuses = [
        timing["status"]
        for row in [*rows, *also_timed]
        for peer, timing in row["timings"].items()
        if peer.startswith("sim")
    ]
    return {
        "stream_sanitizer_on_for_sim": sanitizer_on,
        "sim_runs_without_stream_race": all(status == "ok" for status in sim_statuses),
        "sim_grads_match_cpu": all(row["sim_grads_match_cpu"] for row in rows),
        "sim_largest_grad_difference": max(row["sim_largest_grad_difference"] for row in rows),
        "cuda_grads_match_cpu": None if None in cuda else all(cuda),
        "cuda_largest_grad_difference": (
            None if None in cuda else max(row["cuda_largest_grad_difference"] for row in rows)
        ),
        "branch_nodes_on_their_streams": all(row["branch_nodes_on_their_streams"] for row in rows),
        **races,
    }


def failed_checks(checks: dict[str, Any]) -> dict[str, str]:
    """A check that came out False is a bug in the engine or the streams, not a timing."""
    return {f"check {name}": "expected true, got false" for name, v in checks.items() if v is False}
