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
from experiments.streaming_backward.peers import PHASES, PLACES, peer_name
from experiments.streaming_backward.prediction import MIXED, MIXED_BRANCHES, PROFILE
from experiments.streaming_backward.workload import BRANCH_COUNTS, CUDA_DEVICE, SIM_DEVICE, Sizes


def row(
    branches: int, layers_per_branch: int, outcomes: dict[str, Outcome], facts: dict[str, Any]
) -> dict[str, Any]:
    """Each peer's times (ms), the K streams / 1 stream ratios, the schedule's facts and
    every sample."""
    found: dict[str, Any] = {"branches": branches, "layers_per_branch": layers_per_branch}
    found.update(peer_table.peer_times(outcomes, "ms", 1e3))
    for place in PLACES:
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
    found["timings"] = peer_table.timings(outcomes)
    return found


def prediction_errors(found: dict[str, Any]) -> dict[str, float | None]:
    """Per phase, (predicted - measured) / measured of the H100 prediction against cuda's
    median, for the K-streams time and the K streams / 1 stream ratio; None unmeasured."""
    errors: dict[str, float | None] = {}
    for phase in PHASES:
        measured_ms = found.get(f"{peer_name('cuda', 'k', phase)}_ms")
        pairs = {
            "time": (found.get(f"h100-k-{phase}_us"),
                     None if measured_ms is None else measured_ms * 1e3),
            "ratio": (found.get(f"h100-{phase}-k_over_one"),
                      found.get(f"cuda-{phase}-k_over_one")),
        }
        for what, (predicted, measured) in pairs.items():
            errors[f"h100-{phase}-{what}_error"] = (
                None if predicted is None or not measured else predicted / measured - 1
            )
    return errors


def columns() -> list[Column]:
    ratio_statistics = {"sim": tuple(STATISTICS), "cuda": ("", "_min")}
    ratio_headers = {"sim": peer_table.RATIO_HEADER, "cuda": f"median [{SHOWN}] / min"}
    timing_columns = [
        peer_table.peer_column(peer_name(place, "k", phase), f"{place} {phase} ms, K streams",
                               "ms", "{:.2f}")
        for place in PLACES
        for phase in PHASES
    ]
    ratio_columns = [
        Column(
            f"{place} {phase}, K streams / 1 stream ({ratio_headers[place]})",
            tuple(f"{place}-{phase}-k_over_one{suffix}" for suffix in ratio_statistics[place]),
            "{:.2f}x",
        )
        for place in PLACES
        for phase in PHASES
    ]
    return [
        Column("K (branches)", ("branches",)),
        Column("layers per branch", ("layers_per_branch",)),
        *timing_columns[:2],
        *ratio_columns[:2],
        *_predicted_columns(),
        *timing_columns[2:],
        *ratio_columns[2:],
        *(
            Column(
                f"H100 prediction error against cuda: {phase} (K-streams time / ratio)",
                (f"h100-{phase}-time_error", f"h100-{phase}-ratio_error"),
                "{:+.0%}",
            )
            for phase in PHASES
        ),
        Column("sim backward: streams in execution order (x nodes)", ("sim_backward_order",)),
        Column("sim backward thread", ("sim_backward_threads",)),
    ]


def _predicted_columns() -> list[Column]:
    """The H100 predictions (virtual time) beside the sim timings."""
    return [
        *(
            Column(
                f"predicted on H100 (virtual time): {phase} us, K streams / 1 stream",
                (f"h100-k-{phase}_us", f"h100-one-{phase}_us"),
                "{:.1f}",
            )
            for phase in PHASES
        ),
        *(
            Column(
                f"predicted on H100: {phase}, K streams / 1 stream",
                (f"h100-{phase}-k_over_one",),
                "{:.2f}x",
            )
            for phase in PHASES
        ),
    ]


def mixed_row(
    outcomes: dict[str, Outcome], predicted: dict[str, float], layers_per_branch: int
) -> dict[str, Any]:
    """The mix's row: its times and predictions; the schedule's cells (profiled per K only)
    read n/a."""
    found: dict[str, Any] = {key: None for column in columns() for key in column.keys}
    found.update(row(MIXED, layers_per_branch, outcomes, predicted))
    return found


def parameters(sizes: Sizes, cuda_reason: str | None) -> dict[str, Any]:
    from jaxstream.devices.profiles import get_profile

    profile = get_profile(PROFILE)
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
        "prediction_profile": f"{profile.description} ({PROFILE}): {profile.sms} SMs, "
        f"{profile.matmul_rate('float32') / 1e12:g} TFLOP/s float32, "
        f"{profile.memory_bandwidth / 1e12:g} TB/s",
        "mixed_branches": f"{MIXED}: two {sizes.batch} x {sizes.width} branches and two "
        f"{sizes.large} x {sizes.large} ones, {sizes.layers // MIXED_BRANCHES} layers each",
        "mixed_large": sizes.large,
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
    "H100 prediction's error against them, (predicted - measured) / measured, of the K-streams "
    "time and of the ratio (n/a without --device cuda).",
    "Predicted on H100 (virtual time): the same forward and backward run once more on sim "
    "under `js.sim.virtual_time(\"h100\")`, whose clock charges each kernel its FLOPs and "
    "bytes at the H100's peak rates, scaled by the share of its SMs the kernel fills, plus "
    "launch costs, with kernels of different streams sharing the SMs (Note [Virtual time]). "
    "The times are the predicted makespans in microseconds, K streams / 1 stream; the ratio "
    "below 1 is the overlap the model predicts. The row \"2 small + 2 large\" is a mix of four "
    "branches, each with its own input, whose two large branches' matmuls fill the device; "
    "it is timed like the K rows, and its schedule is not profiled.",
    "Schedule: one profiled sim backward per K. Every backward node runs on the device's "
    "worker thread under the stream its forward ran on; the thread pops ready nodes by "
    "sequence number, so the branches run one after another, each on its own stream s_k, "
    "and the join's nodes on the caller's stream. The timeline of each K is drawn from the "
    "same profile.",
]


def plot(path: Path, rows: list[dict[str, Any]]) -> bool:
    """K streams / 1 stream per K: measured on sim (and cuda, where it ran) with intervals,
    beside the H100 prediction; below 1 is overlap gained."""
    ratios = {
        f"{place}-{phase}-k_over_one": f"{place} {phase}{' (predicted)' if place == 'h100' else ''}"
        for place in (*PLACES, "h100")
        for phase in PHASES
        if any(row.get(f"{place}-{phase}-k_over_one") is not None for row in rows)
    }
    return peer_table.ratio_figure(
        path, rows, ratios, groups=[f"K = {row['branches']}" for row in rows],
        title="Streaming backward: K branches on K streams / on 1 stream",
        ylabel=f"time ratio (median, {SHOWN})",
    )
