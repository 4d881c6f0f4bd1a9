"""What the streams would gain on an H100: the same forward and backward under virtual time.

Each sim run below also advances a virtual clock of the H100 profile (Note
[Virtual time] in jaxstream/devices/virtual_time.py): the kernels still run on
the host, and the clock predicts how long the schedule would take on the GPU,
with kernels of different streams sharing its SMs. Besides the K-branch
workload, a mix of two small branches (the workload's size) and two large ones
(whose matmuls fill the device), each with its own input, shows where streams
stop paying.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from experiments.streaming_backward.peers import LAYOUTS, PHASES
from experiments.streaming_backward.schedule import stream_roles
from experiments.streaming_backward.workload import (
    SIM_DEVICE,
    Build,
    Inputs,
    Sizes,
    Workload,
    backward,
    make_inputs,
    make_streams,
)

PROFILE = "h100"
MIXED = "2 small + 2 large"
MIXED_BRANCHES = 4


@dataclass(frozen=True)
class Prediction:
    """One row's predicted times (the row's keys) and, for K streams, the profiled backward
    and its virtual clock."""

    values: dict[str, float]
    clock: Any
    roles: dict[str, str]
    """Each stream's label on the clock -> its role (caller, s1, ...)."""


def _predict(build: Build, stream_count: int) -> tuple[float, float, Any, dict[str, str]]:
    """Predicted forward and backward makespans (us), the backward's clock and its streams'
    roles."""
    import jaxstream as js

    streams = make_streams(SIM_DEVICE, stream_count)
    with js.sim.virtual_time(PROFILE) as forward_clock:
        graph = build(streams)
        graph.loss.numpy()
    with js.sim.virtual_time(PROFILE) as backward_clock:
        backward(graph)
    return (forward_clock.makespan * 1e6, backward_clock.makespan * 1e6, backward_clock,
            stream_roles(graph))


def predict(workload: Workload, branches: int) -> Prediction:
    """`workload` on `branches` streams and on one, each on fresh sim leaves."""
    values: dict[str, float] = {}
    kept: tuple[Any, dict[str, str]] = (None, {})
    for layout in LAYOUTS:
        forward_us, backward_us, clock, roles = _predict(
            workload(SIM_DEVICE), branches if layout == "k" else 1
        )
        values[f"h100-{layout}-forward_us"] = forward_us
        values[f"h100-{layout}-backward_us"] = backward_us
        if layout == "k":
            kept = (clock, roles)
    for phase in PHASES:
        values[f"h100-{phase}-k_over_one"] = (
            values[f"h100-k-{phase}_us"] / values[f"h100-one-{phase}_us"]
        )
    return Prediction(values, *kept)


def mixed_inputs(sizes: Sizes) -> list[Inputs]:
    """Per branch of the mix: two of the workload's size, then two `sizes.large` square ones."""
    layers = sizes.layers // MIXED_BRANCHES
    small = [make_inputs(sizes, layers=layers, seed=k) for k in range(2)]
    large = [
        make_inputs(sizes, batch=sizes.large, width=sizes.large, layers=layers, seed=k + 2)
        for k in range(2)
    ]
    return small + large
