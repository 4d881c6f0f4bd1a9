"""The streaming_backward run: per K, the timed peers, then one profiled and checked backward."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from experiments.harness.experiment import Experiment, RunOptions
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
from experiments.streaming_backward.peers import PEER_COUNT, cuda_unavailable, peers
from experiments.streaming_backward.schedule import schedule_markdown
from experiments.streaming_backward.workload import (
    BRANCH_COUNTS,
    SIM_DEVICE,
    SIZES,
    Inputs,
    Sizes,
    make_inputs,
)


@dataclass(frozen=True)
class Measured:
    """Per K: the table's row and the profiled backward, and the peers that raised."""

    rows: list[dict[str, Any]]
    schedules: dict[int, Profiled]
    failures: dict[str, str]


def _measure(inputs: Inputs, sizes: Sizes, cuda_reason: str | None, bar: ProgressBar) -> Measured:
    """Time every peer at each K, then profile and check one sim backward (one bar step)."""
    measured = Measured([], {}, {})
    unavailable = {"sim": None, "cuda": cuda_reason}
    for branches in BRANCH_COUNTS:
        outcomes = time_case(
            f"K = {branches}",
            peers(inputs, branches, unavailable),
            warmup=sizes.warmup,
            repeat=sizes.repeat,
            bar=bar,
            failed=measured.failures,
        )
        profiled = profile_and_check(inputs, branches, cuda_reason)
        bar.update()
        measured.schedules[branches] = profiled
        measured.rows.append(
            table.row(branches, sizes.layers // branches, outcomes, profiled.facts)
        )
    return measured


def run(options: RunOptions) -> ExperimentResult:
    import jaxstream as js
    from jaxstream import sanitizer

    sizes = SIZES[options.mode]
    inputs = make_inputs(sizes)
    cuda_reason = cuda_unavailable(options.device)
    bar = options.progress(
        len(BRANCH_COUNTS) * (PEER_COUNT * (sizes.warmup + sizes.repeat) + 1), "streaming_backward"
    )
    try:
        measured = _measure(inputs, sizes, cuda_reason, bar)
        checks = run_checks(measured.rows, race_checks(inputs), sanitizer.enabled_for(SIM_DEVICE))
        measured.failures.update(failed_checks(checks))
    finally:
        js.autograd.shutdown_engine_threads()
        bar.close()
    schedules = measured.schedules
    return ExperimentResult(
        columns=table.columns(),
        rows=measured.rows,
        parameters=table.parameters(sizes, cuda_reason),
        checks=checks,
        failures=measured.failures,
        notes=table.NOTES,
        appendix_markdown="\n\n".join(
            schedule_markdown(branches, profiled.nodes) for branches, profiled in schedules.items()
        ),
        plot=partial(table.plot, rows=measured.rows),
        extra_plots={
            f"timeline_k{branches}": partial(table.plot_timeline, profile=profiled.profile)
            for branches, profiled in schedules.items()
        },
    )


EXPERIMENT = Experiment(
    name="streaming_backward",
    description="K = 1, 2, 4 independent branches on K streams, forward and backward: "
    "the sim schedule and timeline (sanitizer on), and the overlap on cuda.",
    run=run,
)
