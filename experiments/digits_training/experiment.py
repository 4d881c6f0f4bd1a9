"""The digits_training run: the checks and timings per batch size, the table and its notes."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import Any

from experiments.digits_training import checks as digits_checks
from experiments.digits_training.alone import time_each_alone
from experiments.digits_training.peers import (
    JAXSTREAM_PEERS,
    PEERS,
    REFERENCE,
    build,
    thread_settings,
    timed_step,
)
from experiments.harness import peer_table, verdicts
from experiments.harness.experiment import Experiment, PaperRun, RunOptions
from experiments.harness.intervals import SHOWN
from experiments.harness.peers import placement_note
from experiments.harness.plots import ratio_bars
from experiments.harness.progress import ProgressBar
from experiments.harness.results import Column, ExperimentResult
from experiments.harness.timing import STATISTICS_HEADER, Missing, Outcome, failures, time_case
from experiments.harness.verdicts import Target
from experiments.workloads.digits_mlp import (
    CLASSES,
    FEATURES,
    HIDDEN,
    LEARNING_RATE,
    SEED,
    batches,
    init_state,
    load,
)

TARGET_PEER, TARGET_BASELINE = "jaxstream-numpy", "torch"
TARGET = Target(1.5)
BASELINES = {"torch": "PyTorch", "jax-jit": "jax.jit"}


@dataclass(frozen=True)
class Sizes:
    batches: tuple[int, ...]
    check_steps: int
    warmup: int
    repeat: int
    alone: bool = True
    """Whether each peer is also timed in a process of its own (the smoke size, for tests,
    leaves those workers out; tests/test_digits_alone.py runs them)."""


SIZES = {
    "smoke": Sizes(batches=(32,), check_steps=3, warmup=1, repeat=2, alone=False),
    "quick": Sizes(batches=(64, 256), check_steps=20, warmup=5, repeat=150),
    "full": Sizes(batches=(64, 256, 1024), check_steps=100, warmup=10, repeat=200),
}


def _time_each_alone(
    batch: int, sizes: Sizes, device: str, bar: ProgressBar, failed: dict[str, str]
) -> dict[str, Outcome]:
    """Every peer timed in a process of its own (``alone.py``), round-robin."""
    if not sizes.alone:
        return {peer: Missing("not timed alone in smoke mode", False) for peer in PEERS}
    bar.set_postfix_str(f"batch {batch}: each peer alone")
    outcomes = time_each_alone(
        PEERS, batch, warmup=sizes.warmup, repeat=sizes.repeat, device=device,
        on_sample=bar.update,
    )
    failed.update(failures(f"batch {batch}, alone", outcomes))
    return outcomes


def run(options: RunOptions) -> ExperimentResult:
    sizes = SIZES[options.mode]
    data = load()
    samples_per_peer = 1 + (2 if sizes.alone else 1) * (sizes.warmup + sizes.repeat)
    bar = options.progress(len(sizes.batches) * len(PEERS) * samples_per_peer, "digits_training")
    rows: list[dict[str, Any]] = []
    checks: dict[str, Any] = {}
    failed: dict[str, str] = {}
    for batch in sizes.batches:
        # One trainer per peer: checked first, from the initial weights, then timed
        # (its compilations and first steps are behind it by then).
        trainers = {
            peer: cache(partial(build, peer, init_state(), options.device)) for peer in PEERS
        }
        bar.set_postfix_str(f"batch {batch}: loss agreement")
        check = digits_checks.loss_agreement(trainers, data, batch, sizes.check_steps, bar.update)
        minibatch = next(batches(data, batch))
        outcomes = time_case(
            f"batch {batch}",
            {peer: timed_step(trainer, minibatch) for peer, trainer in trainers.items()},
            warmup=sizes.warmup,
            repeat=sizes.repeat,
            bar=bar,
            failed=failed,
        )
        alone = _time_each_alone(batch, sizes, options.device, bar, failed)
        checks[f"batch {batch}"] = check
        failed.update(digits_checks.failures(check))
        rows.append(_row(batch, outcomes, alone, check))
    bar.close()
    threads = thread_settings()
    return ExperimentResult(
        columns=_columns(sizes.check_steps),
        rows=rows,
        parameters={
            "data": data.source,
            "samples": len(data.labels),
            "layers": [FEATURES, HIDDEN, CLASSES],
            "activation": "relu",
            "loss": "cross-entropy (mean)",
            "optimizer": f"Adam(lr={LEARNING_RATE:g}, betas=(0.9, 0.999), eps=1e-8)",
            "dtype": "float32",
            "batches": list(sizes.batches),
            "seed": SEED,
            "warmup": sizes.warmup,
            "repeat": sizes.repeat,
            "check_steps": sizes.check_steps,
            "peers": PEERS,
            "threads": threads,
        },
        checks=checks,
        failures=failed,
        notes=[
            *_notes(rows, options.intra_op_threads, threads, data.source),
            *placement_note(options.device, ("jaxstream", "jax", "torch")),
        ],
        plot=partial(_plot, rows=rows),
    )


def _ratio_name(peer: str, baseline: str) -> str:
    return f"{peer}_over_{baseline}"


def _targeted() -> tuple[str, ...]:
    """The ratios the target judges: in one process and each alone."""
    name = _ratio_name(TARGET_PEER, TARGET_BASELINE)
    return name, f"{name}_alone"


def _plot(path: Path, rows: list[dict[str, Any]]) -> bool:
    """jaxstream against each baseline, in one process and each alone; PyTorch's with the
    target."""
    groups = [row["workload"] for row in rows]
    panels = [
        peer_table.ratio_panel(
            rows,
            {
                f"{_ratio_name(peer, baseline)}{alone}": f"{PEERS[peer]} / {label}{how}"
                for peer in JAXSTREAM_PEERS
                for alone, how in (("", ", one process"), ("_alone", ", each alone"))
            },
            groups=groups, ylabel=f"time ratio (median, {SHOWN})",
            title=f"jaxstream / {label}",
            targets=[TARGET.value] * len(rows) if baseline == TARGET_BASELINE else [],
            target_label=f"target of {PEERS[TARGET_PEER]} / {label}",
        )
        for baseline, label in BASELINES.items()
    ]
    return ratio_bars(
        path, panels, f"Digits MLP {FEATURES}-{HIDDEN}-{CLASSES}: one Adam training step"
    )


def _row(
    batch: int, outcomes: dict[str, Outcome], alone: dict[str, Outcome], check: dict[str, Any]
) -> dict[str, Any]:
    """The batch's times and ratios in one process (``{peer}_ms``) and each peer alone
    (``{peer}_alone_ms``, ratios ``..._alone``)."""
    row: dict[str, Any] = {"workload": f"batch {batch}", "batch": batch}
    row.update(peer_table.peer_times(outcomes, "ms", 1e3))
    row.update(peer_table.peer_times(alone, "alone_ms", 1e3))
    for peer in JAXSTREAM_PEERS:
        for baseline in BASELINES:
            name = _ratio_name(peer, baseline)
            row.update(peer_table.ratio_of(name, outcomes[peer], outcomes[baseline]))
            row.update(peer_table.ratio_of(f"{name}_alone", alone[peer], alone[baseline]))
    for name in _targeted():
        row.update(verdicts.judged(row, name, TARGET))
    row["loss"] = check["peers"][REFERENCE].get("loss")
    row["loss_difference"] = check["max_relative_difference"]
    row["timings"] = peer_table.timings(outcomes)
    row["timings_alone"] = peer_table.timings(alone)
    return row


def _columns(check_steps: int) -> list[Column]:
    return [
        Column("batch", ("batch",), "{:,}"),
        *peer_table.peer_columns(PEERS, "ms", "{label}, ms", "{:.2f}"),
        *(
            peer_table.ratio_column(f"{PEERS[peer]} / {label}", _ratio_name(peer, baseline))
            for peer in JAXSTREAM_PEERS
            for baseline, label in BASELINES.items()
        ),
        *(
            peer_table.ratio_column(
                f"{PEERS[peer]} / {BASELINES[TARGET_BASELINE]}, each alone",
                f"{_ratio_name(peer, TARGET_BASELINE)}_alone",
            )
            for peer in JAXSTREAM_PEERS
        ),
        *(
            verdicts.verdict_column(f"{PEERS[TARGET_PEER]} / PyTorch{label}", name)
            for name, label in zip(_targeted(), ("", ", each alone"), strict=True)
        ),
        Column(
            f"loss after {check_steps} steps (jax.jit) / largest relative difference",
            ("loss", "loss_difference"),
            "{:.3g}",
        ),
    ]


def _verdicts(row: dict[str, Any]) -> str:
    found = [
        f"{how} {verdicts.described(row, key, TARGET) or 'not measured'}"
        for how, key in zip(("in one process", "each alone"), _targeted(), strict=True)
    ]
    return f"batch {row['batch']}: " + ", ".join(found)


def _target_verdict(rows: list[dict[str, Any]], intra_op_threads: int) -> str:
    measured = "; ".join(_verdicts(row) for row in rows)
    caveat = (
        ""
        if intra_op_threads == 0
        else f" This run capped every framework at {intra_op_threads} intra-op thread(s) "
        "(`--threads`); the target is judged with `--threads 0`."
    )
    return (
        f"Target: {PEERS[TARGET_PEER]} within {TARGET.value:g}x of {PEERS[TARGET_BASELINE]} "
        f"with the machine's default BLAS threads ({verdicts.RULE}). Measured: "
        f"{measured}.{caveat}{_busy_neighbours(rows)}"
    )


def _busy_neighbours(rows: list[dict[str, Any]]) -> str:
    """Where the target peer's CPU time in one process outran its wall time, against the
    same alone: the process's CPU time counts every thread, other peers' pools among them."""
    together, alone = f"{TARGET_PEER}_ms", f"{TARGET_PEER}_alone_ms"
    found = [
        f"{row[together + '_cpu'] / row[together]:.1f}x in one process and "
        f"{row[alone + '_cpu'] / row[alone]:.1f}x alone at batch {row['batch']}"
        for row in rows
        if row[together] and row[together + "_cpu"] and row[alone] and row[alone + "_cpu"]
        and row[together + "_cpu"] > 1.2 * row[together]
    ]
    if not found:
        return ""
    return (
        f" {PEERS[TARGET_PEER]}'s CPU time per step was its wall time times "
        f"{'; '.join(found)}: what one process adds is its other threads, the pools of the "
        "other frameworks loaded in it spinning on the other core, which the each-alone "
        "columns leave out."
    )


def _threads_note(threads: dict[str, Any]) -> str:
    blas = threads["blas"]
    if isinstance(blas, list):
        blas = (
            ", ".join(f"{pool['library']} ({pool['file']}) {pool['threads']}" for pool in blas)
            or "none loaded"
        )
    return (
        "Threads, as the libraries report them after the run: BLAS libraries loaded (NumPy's "
        f"among them), with their thread counts: {blas}; PyTorch intra-op threads: "
        f"{threads['torch']}; XLA flags: {threads['xla_flags']}."
    )


def _notes(
    rows: list[dict[str, Any]], intra_op_threads: int, threads: dict[str, Any], source: str
) -> list[str]:
    return [
        "Times are per training step (zero_grad, forward, cross-entropy, backward, Adam's "
        "step; jax.jit + optax does the same as one compiled call), in ms; ratios are given "
        f"three ways ({STATISTICS_HEADER}: wall-time median, wall-time minimum, process "
        "CPU-time median). Peers are sampled round-robin in one process; compare the ratios, "
        "not absolute times across runs. Then each peer is timed alone, in a process of its "
        "own (the \"each alone\" columns): in one process the thread pools of the peers not "
        "being timed may spin on the cores of the one that is. All samples are in the JSON "
        "record.",
        _target_verdict(rows, intra_op_threads),
        _threads_note(threads),
        f"Data: {source}; each row times one fixed minibatch of its size. Checks: every peer "
        "is trained from the same weights on the same seeded minibatches, and its final "
        "loss is compared with jax.jit's (the last column; the tolerance and every loss are "
        "in the JSON record).",
    ]


EXPERIMENT = Experiment(
    name="digits_training",
    description="One Adam training step of a 64-64-10 MLP on the digits data, jaxstream "
    "(NumPy, JAX) against PyTorch eager and jax.jit + optax.",
    run=run,
    paper=PaperRun(threads=0),
)
