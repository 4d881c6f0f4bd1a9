"""The hessian experiment's run: the timing of every peer per variant (its table is
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
from experiments.hessian.peers import PEERS, timed_step
from experiments.hessian.pr82544 import beside_the_pr
from experiments.workloads.hessian_model import (
    HIDDEN_LAYERS,
    HIDDEN_WIDTH,
    INPUT_FEATURES,
    SEED,
    VARIANTS,
    init_inputs,
    init_parameters,
)


@dataclass(frozen=True)
class Sizes:
    batches: tuple[int, ...]  # the last is the headline batch, whose rows the notes judge
    warmup: int
    repeat: int


SIZES = {
    "smoke": Sizes(batches=(hessian_checks.CHECK_BATCH,), warmup=1, repeat=2),
    "quick": Sizes(batches=(2_000,), warmup=3, repeat=30),
    "full": Sizes(batches=(2_000, 10_000), warmup=3, repeat=20),
}


def row_key(variant: str, batch: int, headline: int) -> str:
    """A row's key: the variant's own name at the headline batch, which the paper cites."""
    return variant if batch == headline else f"{variant} at {batch}"


def run(options: RunOptions) -> ExperimentResult:
    sizes = SIZES[options.mode]
    headline = sizes.batches[-1]
    timing_steps = (
        len(sizes.batches) * len(VARIANTS) * len(PEERS) * (sizes.warmup + sizes.repeat)
    )
    bar = options.progress(hessian_checks.STEPS + timing_steps, "hessian")
    bar.set_postfix_str("checks")
    checks = {
        "agreement": hessian_checks.agreement(options.device, bar.update),
        "unused_bias_grads": hessian_checks.unused_bias_grads(options.device, bar.update),
    }
    params = init_parameters()
    rows, failures = [], {}
    for batch in sizes.batches:
        x = init_inputs(batch)
        for variant, label in VARIANTS.items():
            key = row_key(variant, batch, headline)
            outcomes = time_case(
                key,
                {peer: timed_step(peer, variant, x, params, options.device) for peer in PEERS},
                warmup=sizes.warmup,
                repeat=sizes.repeat,
                bar=bar,
                failed=failures,
            )
            rows.append(table.row(variant, key, label, batch, outcomes))
    bar.close()
    failures.update(hessian_checks.failures(checks))
    return ExperimentResult(
        columns=table.columns(),
        rows=rows,
        parameters={
            "input_features": INPUT_FEATURES,
            "hidden_width": HIDDEN_WIDTH,
            "hidden_layers": HIDDEN_LAYERS,
            "activation": "tanh",
            "dtype": "float32",
            "batch": headline,
            "batches": list(sizes.batches),
            "seed": SEED,
            "warmup": sizes.warmup,
            "repeat": sizes.repeat,
            "variants": VARIANTS,
            "peers": PEERS,
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
    "(after PyTorch PR #82544), against PyTorch eager and jax.jit.",
    run=run,
    paper=PaperRun(mode="full"),
)
