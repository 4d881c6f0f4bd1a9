"""The cpu_defaults run: each workload timed in one process and each peer alone, the table,
the target verdicts and the BLAS comparison that chose jaxstream's default."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from experiments.cpu_defaults.peers import (
    BLAS_CAPPED,
    BLAS_OWN,
    JAXSTREAM_PEERS,
    MLP_LEARNING_RATE,
    MLP_WIDTHS,
    PEERS,
    WORKLOADS,
    timed_step,
)
from experiments.digits_training.peers import thread_settings
from experiments.harness import alone, peer_table, verdicts
from experiments.harness.experiment import Experiment, PaperRun, RunOptions
from experiments.harness.intervals import SHOWN
from experiments.harness.peers import placement_note
from experiments.harness.plots import ratio_bars
from experiments.harness.progress import ProgressBar
from experiments.harness.results import Column, ExperimentResult
from experiments.harness.timing import STATISTICS_HEADER, Missing, Outcome, failures, time_case
from experiments.harness.verdicts import Target

BASELINE = "torch"
SETTINGS = {"": "one process", "_alone": "each alone"}
"""Row-key suffix of a ratio -> how its peers ran."""


TARGETS = {"hessian": Target(1.2), "mlp": Target(1.5)}


@dataclass(frozen=True)
class Sizes:
    batches: dict[str, int]
    """Each workload's batch."""
    warmup: int
    repeat: dict[str, int]
    alone: bool = True
    """Whether each peer is also timed in a process of its own (the smoke size, for tests,
    leaves those workers out; tests/test_cpu_defaults.py runs one)."""


SIZES = {
    "smoke": Sizes({"hessian": 64, "mlp": 16}, 1, {"hessian": 2, "mlp": 2}, alone=False),
    "quick": Sizes({"hessian": 2_000, "mlp": 128}, 5, {"hessian": 60, "mlp": 300}),
    "full": Sizes({"hessian": 2_000, "mlp": 128}, 10, {"hessian": 200, "mlp": 1_000}),
}


def _ratio_name(peer: str) -> str:
    return f"{peer}_over_{BASELINE}"


def _time(name: str, sizes: Sizes, device: str, bar: ProgressBar,
          failed: dict[str, str]) -> tuple[dict[str, Outcome], dict[str, Outcome]]:
    """The workload's peers in one process, then each in a worker of its own."""
    repeat = sizes.repeat[name]
    together = time_case(
        f"{name}, one process",
        {peer: timed_step(peer, name, sizes.batches[name], device) for peer in PEERS},
        warmup=sizes.warmup, repeat=repeat, bar=bar, failed=failed,
    )
    if not sizes.alone:
        return together, {peer: Missing("not timed alone in smoke mode", False) for peer in PEERS}
    bar.set_postfix_str(f"{name}, each alone")
    requests = {
        peer: {"peer": peer, "workload": name, "batch": sizes.batches[name], "device": device}
        for peer in PEERS
    }
    each = alone.time_each_alone(
        requests, "experiments.cpu_defaults.peers:prepare_alone",
        warmup=sizes.warmup, repeat=repeat, on_sample=bar.update,
    )
    failed.update(failures(f"{name}, each alone", each))
    return together, each


def _row(name: str, batch: int, together: dict[str, Outcome],
         each: dict[str, Outcome]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "workload": WORKLOADS[name].format(batch=batch), "key": name, "batch": batch,
    }
    for suffix, outcomes in zip(SETTINGS, (together, each), strict=True):
        row.update(peer_table.peer_times(outcomes, f"ms{suffix}", 1e3))
        for peer in JAXSTREAM_PEERS:
            row.update(peer_table.ratio_of(f"{_ratio_name(peer)}{suffix}", outcomes[peer],
                                           outcomes[BASELINE]))
        row.update(peer_table.ratio_of(f"blas_own_over_capped{suffix}", outcomes[BLAS_OWN],
                                       outcomes[BLAS_CAPPED]))
        for peer in JAXSTREAM_PEERS:
            row.update(verdicts.judged(row, f"{_ratio_name(peer)}{suffix}", TARGETS[name]))
    row["timings"] = peer_table.timings(together)
    row["timings_alone"] = peer_table.timings(each)
    return row


def run(options: RunOptions) -> ExperimentResult:
    sizes = SIZES[options.mode]
    settings = 2 if sizes.alone else 1
    samples = sum(settings * len(PEERS) * (sizes.warmup + sizes.repeat[n]) for n in sizes.batches)
    bar = options.progress(samples, "cpu_defaults")
    failed: dict[str, str] = {}
    rows = []
    for name, batch in sizes.batches.items():
        rows.append(_row(name, batch, *_time(name, sizes, options.device, bar, failed)))
    bar.close()
    threads = thread_settings()
    return ExperimentResult(
        columns=_columns(),
        rows=rows,
        parameters={
            "workloads": {n: WORKLOADS[n].format(batch=b) for n, b in sizes.batches.items()},
            "mlp": {"widths": list(MLP_WIDTHS), "optimizer": f"SGD(lr={MLP_LEARNING_RATE:g})",
                    "loss": "cross-entropy (mean)"},
            "hessian": "experiments/workloads/hessian_model.py, variant A, tanh, trimming on",
            "warmup": sizes.warmup, "repeat": sizes.repeat, "peers": PEERS, "threads": threads,
        },
        failures=failed,
        notes=[*_notes(rows, options.intra_op_threads),
               *placement_note(options.device, ("jaxstream", "torch"))],
        plot=partial(_plot, rows=rows),
    )


def _columns() -> list[Column]:
    jaxstream = {peer: PEERS[peer] for peer in JAXSTREAM_PEERS}
    return [
        Column("workload", ("workload",)),
        *(
            column
            for suffix, how in SETTINGS.items()
            for column in peer_table.peer_columns(PEERS, f"ms{suffix}", f"{{label}}, {how}, ms",
                                                  "{:.2f}")
        ),
        *(
            peer_table.ratio_column(f"{label} / PyTorch, {how}", f"{_ratio_name(peer)}{suffix}")
            for suffix, how in SETTINGS.items()
            for peer, label in jaxstream.items()
        ),
        *(
            peer_table.ratio_column(f"NumPy's own BLAS threads / 1 thread, {how}",
                                    f"blas_own_over_capped{suffix}")
            for suffix, how in SETTINGS.items()
        ),
        *(
            verdicts.verdict_column(f"{label} / PyTorch, {how}", f"{_ratio_name(peer)}{suffix}")
            for suffix, how in SETTINGS.items()
            for peer, label in jaxstream.items()
        ),
    ]


def _blas_finding(row: dict[str, Any], suffix: str) -> str:
    """What NumPy's own BLAS threads did against one thread, by the ratio's interval."""
    name = f"blas_own_over_capped{suffix}"
    ratio, interval = row.get(name), row.get(f"{name}_interval")
    if ratio is None:
        return "not measured"
    low, high = interval if interval is not None else (ratio, ratio)
    found = "faster" if high < 1 else "slower" if low > 1 else "neither faster nor slower"
    shown = f"{ratio:.2f}x" + (f" [{low:.2f}, {high:.2f}]" if interval is not None else "")
    return f"{shown}, {found}"


def _notes(rows: list[dict[str, Any]], intra_op_threads: int) -> list[str]:
    caveat = (
        "" if intra_op_threads == 0 else
        f" This run capped every framework at {intra_op_threads} intra-op thread(s) "
        "(`--threads`); the targets are judged with `--threads 0`, each library's defaults."
    )
    measured = "; ".join(
        f"{row['workload']}, {PEERS[peer]}, {how}: {_described(row, peer, suffix)}"
        for row in rows
        for suffix, how in SETTINGS.items()
        for peer in JAXSTREAM_PEERS
    )
    blas = "; ".join(
        f"{row['workload']}, {how}: {_blas_finding(row, suffix)}"
        for row in rows
        for suffix, how in SETTINGS.items()
    )
    return [
        "Times are per step, in ms, each library as a user runs it with nothing configured: "
        "PyTorch at its own intra-op threads, jaxstream at its defaults. Ratios are given "
        f"three ways ({STATISTICS_HEADER}). Peers are sampled round-robin in one process, "
        "then each in a process of its own (\"each alone\": the thread pools of the "
        "libraries not being timed cannot spin on the cores of the one that is). All "
        "samples are in the JSON record.",
        f"Targets: the hessian step within {TARGETS['hessian'].value:g}x of PyTorch, the MLP "
        f"step within {TARGETS['mlp'].value:g}x, on jaxstream's best backend in one process; "
        "every jaxstream configuration is judged, in one process and each alone, so that "
        f"none is picked after the fact ({verdicts.RULE}). In one process PyTorch's "
        "intra-op threads share the cores with XLA's and a BLAS pool, which slows PyTorch "
        "more than jaxstream, whose kernels run on one thread; each alone is the fairer "
        f"comparison. Measured: {measured}.{caveat}",
        "BLAS threads, jaxstream (NumPy) with NumPy's own BLAS threads over the same with one "
        f"(median wall time, {SHOWN}; below 1: NumPy's own threads are faster): {blas}. "
        "Note [BLAS threads] in jaxstream/backends/blas.py says which jaxstream runs by "
        "default and why.",
    ]


def _described(row: dict[str, Any], peer: str, suffix: str) -> str:
    found = verdicts.described(row, _ratio_name(peer) + suffix, _target(row))
    return found or "not measured"


def _target(row: dict[str, Any]) -> Target:
    return TARGETS[row["key"]]


def _plot(path: Path, rows: list[dict[str, Any]]) -> bool:
    """Each jaxstream configuration over PyTorch, in one process and each alone, with the
    target of each workload; and NumPy's own BLAS threads over one."""
    panels = [
        peer_table.ratio_panel(
            rows,
            {f"{_ratio_name(peer)}{suffix}": PEERS[peer] for peer in JAXSTREAM_PEERS},
            groups=[row["workload"] for row in rows],
            ylabel=f"time / PyTorch's (median, {SHOWN})",
            title=f"jaxstream / PyTorch, {how}",
            targets=[_target(row).value for row in rows],
            target_label="target (jaxstream's default)",
        )
        for suffix, how in SETTINGS.items()
    ]
    panels.append(peer_table.ratio_panel(
        rows,
        {f"blas_own_over_capped{suffix}": how for suffix, how in SETTINGS.items()},
        groups=[row["workload"] for row in rows],
        ylabel=f"time ratio (median, {SHOWN})",
        title="jaxstream (NumPy): NumPy's own BLAS threads / 1 thread",
    ))
    return ratio_bars(path, panels, "The CPU at each library's defaults")


EXPERIMENT = Experiment(
    name="cpu_defaults",
    description="The hessian step (batch 2,000) and an MLP training step (64-128-10, SGD, "
    "batch 128) with every library at its defaults, jaxstream against PyTorch, in one "
    "process and each alone.",
    run=run,
    paper=PaperRun(mode="full", threads=0),
    host_only=True,
)
