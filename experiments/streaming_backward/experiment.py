"""The streaming_backward run: per K, the timed peers, then one profiled and checked backward."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from experiments.harness.experiment import Experiment, RunOptions
from experiments.harness.peers import placement_note
from experiments.harness.progress import ProgressBar
from experiments.harness.results import ExperimentResult
from experiments.harness.timing import time_case
from experiments.streaming_backward import table
from experiments.streaming_backward.checks import (
    Profiled,
    failed_checks,
    profile_and_check,
    race_checks,
    run_checks,
)
from experiments.streaming_backward.peers import PEER_COUNT, TORCH, cuda_unavailable, peers
from experiments.streaming_backward.prediction import (
    MIXED,
    MIXED_BRANCHES,
    NARROW,
    NARROW_BRANCHES,
    NARROW_ON_SIM,
    Prediction,
    mixed_inputs,
    narrow_inputs,
    predict,
)
from experiments.streaming_backward.schedule import schedule_markdown
from experiments.streaming_backward.timelines import plot_predicted, plot_schedule
from experiments.streaming_backward.torch_peer import torch_unavailable
from experiments.streaming_backward.workload import (
    BRANCH_COUNTS,
    SIM_DEVICE,
    SIZES,
    BranchArrays,
    Inputs,
    Sizes,
    branch_workload,
    make_inputs,
    own_arrays,
    shared_arrays,
)


@dataclass(frozen=True)
class Measured:
    """Per K: the table's row and the profiled backward, and the peers that raised; the
    predictions (per K and of the mix), the mix's row and the narrow branches' row."""

    rows: list[dict[str, Any]]
    schedules: dict[int, Profiled]
    failures: dict[str, str]
    predictions: dict[str, Prediction]
    mixed: dict[str, Any]
    narrow: dict[str, Any]


def _measure(inputs: Inputs, sizes: Sizes, reasons: dict[str, str | None], bar: ProgressBar
             ) -> Measured:
    """Time every peer at each K, then profile and check one sim backward and predict both
    layouts on the GPU (one bar step); then time and predict the mix and the narrow
    branches (one more step each). `reasons` says why a place cannot run, or None."""
    measured = Measured([], {}, {}, {}, {}, {})

    def time_and_predict(case: str, arrays: BranchArrays, branches: int,
                         unavailable: dict[str, str | None]) -> tuple[dict, Prediction]:
        outcomes = time_case(
            case, peers(arrays, branches, unavailable), warmup=sizes.warmup,
            repeat=sizes.repeat, bar=bar, failed=measured.failures,
        )
        return outcomes, predict(branch_workload(arrays), branches)

    for branches in BRANCH_COUNTS:
        outcomes, predicted = time_and_predict(
            f"K = {branches}", shared_arrays(inputs, branches), branches, reasons
        )
        profiled = profile_and_check(inputs, branches, reasons["cuda"])
        bar.update()
        measured.schedules[branches] = profiled
        measured.predictions[f"k{branches}"] = predicted
        measured.rows.append(
            table.row(branches, sizes.layers // branches, outcomes,
                      {**profiled.facts, **predicted.values})
        )
    outcomes, predicted = time_and_predict(
        MIXED, own_arrays(mixed_inputs(sizes)), MIXED_BRANCHES, reasons
    )
    bar.update()
    measured.predictions["mixed"] = predicted
    measured.mixed.update(
        table.extra_row(MIXED, outcomes, predicted.values, sizes.layers // MIXED_BRANCHES)
    )
    outcomes, predicted = time_and_predict(
        NARROW, shared_arrays(narrow_inputs(sizes), NARROW_BRANCHES), NARROW_BRANCHES,
        {**reasons, "sim": NARROW_ON_SIM},
    )
    bar.update()
    measured.narrow.update(
        table.extra_row(NARROW, outcomes, predicted.values, sizes.layers // NARROW_BRANCHES)
    )
    return measured


def _predicted_timelines(predictions: dict[str, Prediction]) -> dict[str, Any]:
    """Per prediction, the backward on K streams in virtual time."""
    return {
        f"predicted_timeline_{name}": partial(
            plot_predicted, clock=predicted.clock, roles=predicted.roles
        )
        for name, predicted in predictions.items()
    }


def run(options: RunOptions) -> ExperimentResult:
    import jaxstream as js
    from jaxstream import sanitizer

    sizes = SIZES[options.mode]
    inputs = make_inputs(sizes)
    cuda_reason = cuda_unavailable(options.device)
    reasons = {"sim": None, "cuda": cuda_reason, TORCH: torch_unavailable(options.device)}
    bar = options.progress(
        (len(BRANCH_COUNTS) + 2) * (PEER_COUNT * (sizes.warmup + sizes.repeat) + 1),
        "streaming_backward",
    )
    try:
        measured = _measure(inputs, sizes, reasons, bar)
        checks = run_checks(
            measured.rows, race_checks(inputs), sanitizer.enabled_for(SIM_DEVICE),
            also_timed=(measured.mixed,),
        )
        measured.failures.update(failed_checks(checks))
    finally:
        js.autograd.shutdown_engine_threads()
        bar.close()
    schedules = measured.schedules
    return ExperimentResult(
        columns=table.columns(),
        rows=[*measured.rows, measured.mixed, measured.narrow],
        parameters=table.parameters(sizes, cuda_reason),
        checks=checks,
        failures=measured.failures,
        notes=[*table.NOTES, *placement_note(options.device, ("cupy",))],
        appendix_markdown="\n\n".join(
            schedule_markdown(branches, profiled.nodes) for branches, profiled in schedules.items()
        ),
        plot=partial(table.plot, rows=measured.rows),
        extra_plots={
            **{
                f"timeline_k{branches}": partial(
                    plot_schedule, profile=profiled.profile, roles=profiled.roles
                )
                for branches, profiled in schedules.items()
            },
            **_predicted_timelines(measured.predictions),
        },
    )


EXPERIMENT = Experiment(
    name="streaming_backward",
    description="K = 1, 2, 4 independent branches on K streams, forward and backward: "
    "the sim schedule and timeline (sanitizer on), and the overlap on cuda.",
    run=run,
)
