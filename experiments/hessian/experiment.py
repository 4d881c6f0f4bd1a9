"""The hessian experiment's run: the timing of every peer per workload (its table is
``table``'s, its notes ``notes``')."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from experiments.harness.experiment import Experiment, PaperRun, RunOptions
from experiments.harness.peers import placement_note
from experiments.harness.results import ExperimentResult
from experiments.harness.timing import time_case
from experiments.hessian import checks as hessian_checks
from experiments.hessian import table
from experiments.hessian.notes import notes
from experiments.hessian.peers import PEERS, Steppers
from experiments.hessian.pr82544 import beside_the_pr, pr_record
from experiments.workloads.hessian_model import (
    ACTIVATIONS,
    ALL_VARIANTS,
    HIDDEN_LAYERS,
    HIDDEN_WIDTH,
    INPUT_FEATURES,
    SEED,
    WORKLOADS,
)


@dataclass(frozen=True)
class Sizes:
    batches: tuple[int, ...]  # the last is the headline batch, whose rows the notes judge
    warmup: int
    repeat: int


SIZES = {
    "smoke": Sizes(batches=(hessian_checks.CHECK_BATCH,), warmup=1, repeat=2),
    "quick": Sizes(batches=(2_000,), warmup=3, repeat=30),
    "full": Sizes(batches=(2_000, 10_000), warmup=3, repeat=50),
}


def row_key(key: str, batch: int, headline: int) -> str:
    """A row's key: the workload's own key at the headline batch, which the paper cites."""
    return key if batch == headline else f"{key} at {batch}"


def run(options: RunOptions) -> ExperimentResult:
    sizes = SIZES[options.mode]
    headline = sizes.batches[-1]
    timing_steps = (
        len(sizes.batches) * len(WORKLOADS) * len(PEERS) * (sizes.warmup + sizes.repeat)
    )
    bar = options.progress(hessian_checks.STEPS + timing_steps, "hessian")
    bar.set_postfix_str("checks")
    steppers = Steppers(options.device)
    checks = {
        "agreement": hessian_checks.agreement(steppers, bar.update),
        "unused_bias_grads": hessian_checks.unused_bias_grads(options.device, bar.update),
        "second_order": hessian_checks.second_order(options.device, bar.update),
    }
    rows, failures = [], {}
    for batch in sizes.batches:
        for key, (activation, variant) in WORKLOADS.items():
            shown = row_key(key, batch, headline)
            outcomes = time_case(
                shown,
                {peer: steppers.timed(peer, key, batch) for peer in PEERS},
                warmup=sizes.warmup,
                repeat=sizes.repeat,
                bar=bar,
                failed=failures,
            )
            rows.append(table.row(shown, activation, variant, batch, outcomes))
    bar.close()
    failures.update(hessian_checks.failures(checks))
    return ExperimentResult(
        columns=table.columns(),
        rows=rows,
        parameters={
            "input_features": INPUT_FEATURES,
            "hidden_width": HIDDEN_WIDTH,
            "hidden_layers": HIDDEN_LAYERS,
            "activation": list(ACTIVATIONS),
            "dtype": "float32",
            "batch": headline,
            "batches": list(sizes.batches),
            "seed": SEED,
            "warmup": sizes.warmup,
            "repeat": sizes.repeat,
            "variants": ALL_VARIANTS,
            "peers": PEERS,
            "pr82544": pr_record(),
        },
        checks=checks,
        failures=failures,
        notes=[
            *notes(rows, checks),
            *placement_note(options.device, ("jaxstream", "jax", "torch")),
        ],
        appendix_markdown=beside_the_pr(rows),
        plot=partial(table.plot, rows=rows),
    )


EXPERIMENT = Experiment(
    name="hessian",
    description="MLP input Hessian and a training step on it, with and without trimming "
    "(after PyTorch PR #82544, in its form and ours, with tanh and ReLU), against PyTorch "
    "eager, torch.func and jax.jit.",
    run=run,
    paper=PaperRun(mode="full"),
)
