"""The table, the parameters, the notes and the figures of the streaming_backward record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from experiments.harness import peer_table
from experiments.harness.hardware import gpu_name
from experiments.harness.intervals import SHOWN
from experiments.harness.results import Column
from experiments.harness.timing import STATISTICS, Outcome
from experiments.streaming_backward.checks import GRAD_TOLERANCE, RACE_CHECK_DEVICE
from experiments.streaming_backward.peers import PHASES, TIMED, TORCH, peer_name
from experiments.streaming_backward.prediction import (
    BACKEND,
    MIXED,
    MIXED_BRANCHES,
    NARROW,
    NARROW_BRANCHES,
    NARROW_ON_SIM,
    PREDICTED,
    clock,
)
from experiments.streaming_backward.workload import BRANCH_COUNTS, CUDA_DEVICE, SIM_DEVICE, Sizes


def row(
    branches: int, layers_per_branch: int, outcomes: dict[str, Outcome], facts: dict[str, Any]
) -> dict[str, Any]:
    """Each peer's times (ms), the K streams / 1 stream ratios, the schedule's facts and
    every sample."""
    found: dict[str, Any] = {"branches": branches, "layers_per_branch": layers_per_branch}
    found.update(peer_table.peer_times(outcomes, "ms", 1e3))
    for place in TIMED:
        for phase in PHASES:
            found.update(
                peer_table.ratio_of(
                    f"{place}-{phase}-k_over_one",
                    outcomes[peer_name(place, "k", phase)],
                    outcomes[peer_name(place, "one", phase)],
                )
            )
    found.update(facts)
    found.update(prediction_errors(found))
    found.update(against_torch(found))
    found["timings"] = peer_table.timings(outcomes)
    return found


def prediction_errors(found: dict[str, Any]) -> dict[str, float | None]:
    """Per phase, the prediction against cuda's medians: (predicted - measured) / measured of
    the K-streams time, and predicted - measured of the K streams / 1 stream ratio; None
    unmeasured."""
    errors: dict[str, float | None] = {}
    for phase in PHASES:
        measured_ms = found.get(f"{peer_name('cuda', 'k', phase)}_ms")
        predicted_us = found.get(f"{PREDICTED}-k-{phase}_us")
        errors[f"{PREDICTED}-{phase}-time_error"] = (
            None if predicted_us is None or not measured_ms
            else predicted_us / (measured_ms * 1e3) - 1
        )
        predicted, measured = (found.get(f"{place}-{phase}-k_over_one")
                               for place in (PREDICTED, "cuda"))
        errors[f"{PREDICTED}-{phase}-ratio_difference"] = (
            None if predicted is None or measured is None else predicted - measured
        )
    return errors


GAIN_KEPT_TARGET = 0.8
"""The share of PyTorch's gain from streams that jaxstream's must keep where PyTorch gains."""


def against_torch(found: dict[str, Any]) -> dict[str, Any]:
    """Per phase, jaxstream's streams on cuda against PyTorch's: the share of PyTorch's gain
    kept, (1 - cuda ratio) / (1 - PyTorch's ratio), where PyTorch gains (its K-streams /
    1-stream ratio below 1), and the verdict: where PyTorch gains, at least 80% of its gain
    kept; where it does not, no loss (a cuda ratio at most 1). None unmeasured."""
    verdicts: dict[str, Any] = {}
    for phase in PHASES:
        cuda, torch = (found.get(f"{place}-{phase}-k_over_one") for place in ("cuda", TORCH))
        kept = None if cuda is None or torch is None or torch >= 1 else (1 - cuda) / (1 - torch)
        verdicts[f"cuda-{phase}-torch_gain_kept"] = kept
        verdicts[f"cuda-{phase}-streams_target"] = (
            None if cuda is None or torch is None
            else ("met" if (kept >= GAIN_KEPT_TARGET if kept is not None else cuda <= 1)
                  else "missed")
        )
    return verdicts


def columns() -> list[Column]:
    ratio_statistics = {"sim": tuple(STATISTICS), "cuda": ("", "_min"), TORCH: ("", "_min")}
    gpu_header = f"median [{SHOWN}] / min"
    ratio_headers = {"sim": peer_table.RATIO_HEADER, "cuda": gpu_header, TORCH: gpu_header}
    timing_columns = [
        peer_table.peer_column(peer_name(place, "k", phase), f"{place} {phase} ms, K streams",
                               "ms", "{:.2f}")
        for place in TIMED
        for phase in PHASES
    ]
    ratio_columns = [
        Column(
            f"{place} {phase}, K streams / 1 stream ({ratio_headers[place]})",
            tuple(f"{place}-{phase}-k_over_one{suffix}" for suffix in ratio_statistics[place]),
            "{:.2f}x",
        )
        for place in TIMED
        for phase in PHASES
    ]
    gain_columns = [
        Column(
            f"cuda {phase}: PyTorch's gain from streams kept / target",
            (f"cuda-{phase}-torch_gain_kept", f"cuda-{phase}-streams_target"),
            ("{:.0%}", "{}"),
        )
        for phase in PHASES
    ]
    return [
        Column("K (branches)", ("branches",)),
        Column("layers per branch", ("layers_per_branch",)),
        *timing_columns[:2],
        *ratio_columns[:2],
        *_predicted_columns(),
        *timing_columns[2:4],
        *ratio_columns[2:4],
        *(
            Column(
                f"prediction against cuda: {phase} (K-streams time error / ratio difference)",
                (f"{PREDICTED}-{phase}-time_error", f"{PREDICTED}-{phase}-ratio_difference"),
                ("{:+.0%}", "{:+.2f}"),
            )
            for phase in PHASES
        ),
        *timing_columns[4:],
        *ratio_columns[4:],
        *gain_columns,
        Column("sim backward: streams in execution order (x nodes)", ("sim_backward_order",)),
        Column("sim backward thread", ("sim_backward_threads",)),
    ]


def _predicted_columns() -> list[Column]:
    """The predictions (virtual time, on the GPU the parameters name) beside the sim timings:
    the makespans, their ratio, and what sets the pace with K streams."""
    return [
        *(
            Column(
                f"predicted (virtual time): {phase} us, K streams / 1 stream",
                (f"{PREDICTED}-k-{phase}_us", f"{PREDICTED}-one-{phase}_us"),
                "{:.1f}",
            )
            for phase in PHASES
        ),
        *(
            Column(
                f"predicted: {phase}, K streams / 1 stream",
                (f"{PREDICTED}-{phase}-k_over_one",),
                "{:.2f}x",
            )
            for phase in PHASES
        ),
        *(
            Column(
                f"predicted: {phase} with K streams, verdict / host share of the makespan",
                (f"{PREDICTED}-{phase}-verdict", f"{PREDICTED}-{phase}-host_share"),
                ("{}", "{:.0%}"),
            )
            for phase in PHASES
        ),
    ]


def extra_row(
    name: str, outcomes: dict[str, Outcome], predicted: dict[str, float], layers_per_branch: int
) -> dict[str, Any]:
    """The row of the mix or the narrow branches: its times and predictions; the schedule's
    cells (profiled per K only) read n/a."""
    found: dict[str, Any] = {key: None for column in columns() for key in column.keys}
    found.update(row(name, layers_per_branch, outcomes, predicted))
    return found


def parameters(sizes: Sizes, cuda_reason: str | None) -> dict[str, Any]:
    predicting = clock()
    profile, host = predicting.profile, predicting.host_costs
    return {
        "batch": sizes.batch,
        "width": sizes.width,
        "layers": sizes.layers,
        "dtype": "float32",
        "layer": "h = tanh(linear(h, W)), one W per layer",
        "work": "the same for every K: `layers` layers in all, K branches of layers / K each",
        "branch_counts": list(BRANCH_COUNTS),
        "layouts": {
            "k": "branch k on its own stream s_k",
            "one": "every branch on one side stream",
        },
        "sim_device": SIM_DEVICE,
        "race_check_device": RACE_CHECK_DEVICE,
        "cuda_device": f"n/a ({cuda_reason})" if cuda_reason else f"{CUDA_DEVICE} ({gpu_name()})",
        "grad_tolerance": GRAD_TOLERANCE,
        "warmup": sizes.warmup,
        "repeat": sizes.repeat,
        "prediction_profile": f"{profile.description} ({profile.name}): {profile.sms} SMs, "
        f"{profile.matmul_rate('float32') / 1e12:g} TFLOP/s float32, "
        f"{profile.memory_bandwidth / 1e12:g} TB/s",
        "prediction_host": f"jaxstream's {BACKEND} backend: {host.op_s * 1e6:.1f} us per op, "
        f"{host.node_s * 1e6:.1f} us per backward node, and the driver's "
        f"{profile.host_launch_s * 1e6:g} us per launch ({host.source})",
        "mixed_branches": f"{MIXED}: two {sizes.batch} x {sizes.width} branches and two "
        f"{sizes.large} x {sizes.large} ones, {sizes.layers // MIXED_BRANCHES} layers each",
        "mixed_large": sizes.large,
        "narrow_branches": f"{NARROW}: {NARROW_BRANCHES} branches of a {sizes.narrow[0]} x "
        f"{sizes.narrow[1]} input through {sizes.layers // NARROW_BRANCHES} {sizes.narrow[1]}"
        f"-wide layers each; {NARROW_ON_SIM}",
        "torch_peer": "PyTorch's autograd, the same branches on K torch.cuda.Streams "
        "(n/a without --device cuda)",
    }


NOTES = [
    "Timings: the forward is the K branches and the join, ending with a host read of the "
    "loss; the backward is `loss.backward()` and a host read of x's grad on the caller's "
    "stream, on a graph built untimed for every sample. Every K does the same total work "
    '(its layers split over K branches). "1 stream" is the same K-branch graph with every '
    "branch on one side stream, so K = 1 shows the noise floor of the ratio. On sim the "
    "kernels run on the host one at a time, so nothing overlaps: a sim ratio above 1 is the "
    "cost of the streams (events, the stream sanitizer's clocks), not lost overlap. On cuda "
    "a ratio below 1 is overlap gained from the streams, and beside the cuda columns the "
    "prediction against them: (predicted - measured) / measured of the K-streams time, and "
    "predicted - measured of the ratio (n/a without --device cuda).",
    "Predicted (virtual time): the same forward and backward run once more on sim under "
    "`js.sim.virtual_time(\"auto\", backend=\"cupy\")`, a clock of this machine's GPU (the "
    "H100's where there is none; the parameters name it). The host issues one op after "
    "another, each at what jaxstream's CuPy backend spends per op and per backward node on "
    "that GPU (measured by `make gpu-check`; on a CPU-measured default until it has run) plus "
    "the driver's launch call; each kernel costs its FLOPs and bytes at the GPU's peak rates, "
    "scaled by the share of its SMs it fills, with kernels of different streams sharing the "
    "SMs (Note [Virtual time]). The times are the predicted makespans in microseconds, K "
    "streams / 1 stream; a ratio below 1 is the overlap the model predicts. The verdict says "
    "what sets the pace with K streams: host-bound where the host spent longer issuing than "
    "the device spent running kernels, so that no stream can help, else device-bound; the "
    "host share is the part of the makespan the host spent issuing. The row \"2 small + 2 "
    "large\" is a mix of four branches, each with its own input, whose two large branches' "
    "matmuls fill the device; it is timed like the K rows, and its schedule is not profiled.",
    "PyTorch: the same branches in PyTorch's autograd on K torch.cuda.Streams (and on one), "
    "timed the same way on the same GPU (n/a without --device cuda). Its K streams / 1 stream "
    "ratio is what streams can gain a define-by-run engine here; beside it, the share of "
    "PyTorch's gain that jaxstream's cuda streams kept, (1 - cuda ratio) / (1 - PyTorch's "
    "ratio), where PyTorch gains. The target: at least 80% of it where PyTorch gains, and "
    "no loss (a ratio at most 1) where it does not. The row \"4 narrow\" is four branches "
    "of a few rows through wide layers, whose matmuls run long but fill a fraction of the "
    "SMs, the shape where streams gain on a GPU; it is timed on cuda only.",
    "Schedule: one profiled sim backward per K. Every backward node runs on the device's "
    "worker thread under the stream its forward ran on; the thread pops ready nodes by "
    "sequence number, so the branches run one after another, each on its own stream s_k, "
    "and the join's nodes on the caller's stream. The timeline of each K is drawn from the "
    "same profile.",
]


def plot(path: Path, rows: list[dict[str, Any]]) -> bool:
    """K streams / 1 stream per K: measured on sim (and cuda, where it ran) with intervals,
    beside the prediction; below 1 is overlap gained."""
    ratios = {
        f"{place}-{phase}-k_over_one": f"{place} {phase}"
        for place in (*TIMED, PREDICTED)
        for phase in PHASES
        if any(row.get(f"{place}-{phase}-k_over_one") is not None for row in rows)
    }
    return peer_table.ratio_figure(
        path, rows, ratios, groups=[f"K = {row['branches']}" for row in rows],
        title="Streaming backward: K branches on K streams / on 1 stream",
        ylabel=f"time ratio (median, {SHOWN})",
    )
