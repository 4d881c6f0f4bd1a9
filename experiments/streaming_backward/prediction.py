"""What the streams would gain on a GPU: the same forward and backward under virtual time.

Each sim run below also advances a virtual clock of this machine's GPU's
profile, the H100's where there is none (Note [Virtual time] in
jaxstream/devices/virtual_time.py): the kernels still run on the host, and the
clock predicts how long the schedule would take on the GPU, with the host
issuing each op (a product at its own figure) and each event record, wait and
stream switch at what jaxstream's CuPy backend spends on it there (the backend
the cuda peers run) and kernels of different streams sharing the SMs.
Each prediction says whether the host or the device sets its pace. Besides the
K-branch workload, a mix of two small branches (the workload's size) and two
large ones (whose matmuls fill the device), each with its own input, shows
where streams stop paying.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from experiments.harness.peers import array_backend
from experiments.streaming_backward.peers import LAYOUTS, PHASES
from experiments.streaming_backward.schedule import stream_roles
from experiments.streaming_backward.workload import (
    CUDA_DEVICE,
    SIM_DEVICE,
    Build,
    Inputs,
    Sizes,
    Workload,
    backward,
    make_inputs,
    make_streams,
)

PROFILE = "auto"
"""This machine's GPU, or the default profile (Note [Virtual time])."""
BACKEND = array_backend(CUDA_DEVICE)
"""The backend whose host costs the clock charges: the one the cuda peers run."""
PREDICTED = "predicted"
MIXED = "2 small + 2 large"
MIXED_BRANCHES = 4
NARROW = "4 narrow"
NARROW_BRANCHES = 4
NARROW_ON_SIM = "timed on cuda only: its matmuls are long on a host"


@dataclass(frozen=True)
class Prediction:
    """One row's predicted times (the row's keys) and, for K streams, the profiled backward
    and its virtual clock."""

    values: dict[str, Any]
    clock: Any
    roles: dict[str, str]
    """Each stream's label on the clock -> its role (caller, s1, ...)."""


def clock() -> Any:
    """A new virtual clock of the prediction's profile and backend."""
    import jaxstream as js

    return js.sim.virtual_time(PROFILE, backend=BACKEND)


def _predict(build: Build, stream_count: int) -> tuple[dict[str, Any], dict[str, str]]:
    """The forward's and the backward's clocks, by phase, and the streams' roles."""
    streams = make_streams(SIM_DEVICE, stream_count)
    with clock() as forward_clock:
        graph = build(streams)
        graph.loss.numpy()
    with clock() as backward_clock:
        backward(graph)
    return {"forward": forward_clock, "backward": backward_clock}, stream_roles(graph)


def predict(workload: Workload, branches: int) -> Prediction:
    """`workload` on `branches` streams and on one, each on fresh sim leaves: the makespans
    (us), their ratio, and for K streams the verdict and the host's share."""
    values: dict[str, Any] = {}
    kept: tuple[Any, dict[str, str]] = (None, {})
    for layout in LAYOUTS:
        clocks, roles = _predict(workload(SIM_DEVICE), branches if layout == "k" else 1)
        for phase, phase_clock in clocks.items():
            values[f"{PREDICTED}-{layout}-{phase}_us"] = phase_clock.makespan * 1e6
            if layout == "k":
                values[f"{PREDICTED}-{phase}-verdict"] = phase_clock.verdict
                values[f"{PREDICTED}-{phase}-host_share"] = phase_clock.host_share
        if layout == "k":
            kept = (clocks["backward"], roles)
    for phase in PHASES:
        values[f"{PREDICTED}-{phase}-k_over_one"] = (
            values[f"{PREDICTED}-k-{phase}_us"] / values[f"{PREDICTED}-one-{phase}_us"]
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


def narrow_inputs(sizes: Sizes) -> Inputs:
    """The narrow workload: a few rows through wide layers, so that each matmul runs long but
    fills a fraction of a GPU's SMs; there PyTorch's streams overlap and gain."""
    batch, width = sizes.narrow
    return make_inputs(sizes, batch=batch, width=width)
