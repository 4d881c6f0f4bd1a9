"""The profiler_overhead run: its workloads, its peers, its table and notes."""

from __future__ import annotations

import statistics
import timeit
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from experiments.harness import peer_table
from experiments.harness.experiment import Experiment, RunOptions
from experiments.harness.peers import jaxstream_leaf, require, torch_leaf, torch_synchronizer
from experiments.harness.results import Column, ExperimentResult
from experiments.harness.timing import (
    STATISTICS,
    Case,
    Outcome,
    Prepare,
    Timing,
    ratio_or_none,
    time_cases,
)
from experiments.profiler_overhead.compiled_out import backward_with, compiled_out_engine
from experiments.workloads import chain

PEERS = {
    "compiled-out": "jaxstream, checks compiled out",
    "off": "jaxstream, profiling off",
    "on": "jaxstream, profiling on",
    "torch": "PyTorch",
    "torch-profiled": "PyTorch, profiling on",
}
RATIOS = {
    "off_over_compiled_out": ("off", "compiled-out", "profiling off / compiled out"),
    "on_over_off": ("on", "off", "profiling on / off"),
    "torch_profiled_over_torch": ("torch-profiled", "torch", "PyTorch profiling on / off"),
}
MEDIAN_AND_MIN = {suffix: STATISTICS[suffix] for suffix in ("", "_min")}
"""What this table keeps per peer (its ratios are paired by round, on wall times only)."""


@dataclass(frozen=True)
class Sizes:
    chain_lengths: tuple[int, ...]
    hooked_chain_length: int
    warmup: int
    repeat: int
    check_loops: int


SIZES = {
    "smoke": Sizes((100,), 50, warmup=1, repeat=2, check_loops=100_000),
    "quick": Sizes((2_000, 10_000), 2_000, warmup=2, repeat=25, check_loops=2_000_000),
    "full": Sizes((2_000, 10_000), 2_000, warmup=3, repeat=61, check_loops=10_000_000),
}


@dataclass(frozen=True)
class Workload:
    label: str
    length: int
    hooks: bool

    @property
    def nodes(self) -> int:
        """The multiplications, the sum and the leaf's accumulator."""
        return self.length + 2


def workloads(sizes: Sizes) -> list[Workload]:
    chains = [Workload(f"chain {n:,}", n, hooks=False) for n in sizes.chain_lengths]
    hooked = sizes.hooked_chain_length
    return [*chains, Workload(f"chain {hooked:,}, a hook per node", hooked, hooks=True)]


def _no_op_hook(grad: Any) -> None:
    return None


def _chain_loss(leaf: Any, workload: Workload) -> Any:
    return chain.loss(leaf, workload.length, _no_op_hook if workload.hooks else None)


def _jaxstream_prepare(workload: Workload, peer: str, device: str) -> Prepare:
    def prepare() -> Callable[[], None]:
        from jaxstream import profiler
        from jaxstream.autograd import engine

        leaf = jaxstream_leaf(chain.start(), backend="numpy", device=device)
        loss = _chain_loss(leaf, workload)
        if peer == "compiled-out":
            return partial(backward_with, compiled_out_engine()[0], loss)
        if peer == "off":
            return partial(backward_with, engine.get_default_engine(), loss)

        def profiled() -> None:
            with profiler.profile():
                backward_with(engine.get_default_engine(), loss)

        return profiled

    return prepare


def _torch_prepare(workload: Workload, profiled: bool, device: str) -> Prepare:
    def prepare() -> Callable[[], None]:
        torch = require("torch")
        leaf = torch_leaf(chain.start(), device=device)
        loss = _chain_loss(leaf, workload)
        wait = torch_synchronizer(device)
        if not profiled:
            return lambda: (loss.backward(), wait())

        activities = [torch.profiler.ProfilerActivity.CPU]

        def run_profiled() -> None:
            with torch.profiler.profile(activities=activities):
                loss.backward()
                wait()

        return run_profiled

    return prepare


def _peer_prepares(workload: Workload, device: str) -> dict[str, Prepare]:
    return {
        "compiled-out": _jaxstream_prepare(workload, "compiled-out", device),
        "off": _jaxstream_prepare(workload, "off", device),
        "on": _jaxstream_prepare(workload, "on", device),
        "torch": _torch_prepare(workload, profiled=False, device=device),
        "torch-profiled": _torch_prepare(workload, profiled=True, device=device),
    }


def events_per_backward(workload: Workload) -> int:
    """How many events one profiled backward of `workload` records (untimed)."""
    import jaxstream as js

    leaf = js.tensor(chain.start(), requires_grad=True)
    loss = _chain_loss(leaf, workload)
    with js.profiler.profile() as prof:
        loss.backward()
    return len(prof.events)


def if_check_ns(loops: int) -> float:
    """The time of one ``if profiler.active:`` with profiling off, net of an empty loop."""
    from jaxstream import profiler

    namespace = {"profiler": profiler}
    checked = min(timeit.repeat("if profiler.active: pass", globals=namespace, number=loops,
                                repeat=5))
    empty = min(timeit.repeat("pass", globals=namespace, number=loops, repeat=5))
    return max(checked - empty, 0.0) / loops * 1e9


def run(options: RunOptions) -> ExperimentResult:
    sizes = SIZES[options.mode]
    cases = workloads(sizes)
    _, removed = compiled_out_engine()
    check_ns = if_check_ns(sizes.check_loops)
    outcomes, failures = time_cases(
        [
            Case(workload.label, _peer_prepares(workload, options.device), repeat=sizes.repeat)
            for workload in cases
        ],
        warmup=sizes.warmup,
        progress=partial(options.progress, desc="profiler_overhead"),
    )
    rows = [
        _row(workload, found, check_ns)
        for workload, found in zip(cases, outcomes, strict=True)
    ]
    return ExperimentResult(
        columns=_columns(),
        rows=rows,
        parameters={
            **chain.parameters(sizes.chain_lengths),
            "hooked_chain_length": sizes.hooked_chain_length,
            "warmup": sizes.warmup,
            "repeat": sizes.repeat,
            "check_loops": sizes.check_loops,
            "peers": PEERS,
        },
        checks={
            "profiler_checks_compiled_out": removed,
            "if_check_ns": check_ns,
            "events_match_nodes_and_hooks": all(
                row["events"] == row["nodes"] + row["hooks"] for row in rows
            ),
        },
        failures=failures,
        notes=_notes(rows, check_ns, removed),
        plot=partial(
            peer_table.peer_bars,
            rows=rows,
            peers=PEERS,
            unit="us_per_node",
            ylabel="backward time per node (us, median, log scale)",
            title="Profiler overhead per backward node",
            log_scale=True,
        ),
    )


def _row(workload: Workload, outcomes: dict[str, Outcome], check_ns: float) -> dict[str, Any]:
    per_node_us = 1e6 / workload.nodes
    hooks = workload.length if workload.hooks else 0
    row: dict[str, Any] = {
        "workload": workload.label,
        "nodes": workload.nodes,
        "hooks": hooks,
        "events": events_per_backward(workload),
    }
    row.update(peer_table.peer_times(outcomes, "us_per_node", per_node_us, MEDIAN_AND_MIN))
    for key, (numerator, denominator, _) in RATIOS.items():
        row[key] = paired_ratio(outcomes[numerator], outcomes[denominator])
        row[f"{key}_min"] = ratio_or_none(
            row[f"{numerator}_us_per_node_min"], row[f"{denominator}_us_per_node_min"]
        )
    # Checks passed per node with profiling off: the node's own, plus one per hook.
    checks_per_node = (workload.nodes + hooks) / workload.nodes
    compiled_out = row["compiled-out_us_per_node"]
    row["predicted_off_over_compiled_out"] = (
        None if not compiled_out else 1 + checks_per_node * check_ns / (compiled_out * 1e3)
    )
    row["timings"] = peer_table.timings(outcomes)
    return row


def paired_ratio(numerator: Outcome, denominator: Outcome) -> float | None:
    """The median over rounds of numerator / denominator, each pair timed in the same round.

    Pairs taken close in time cancel most of a shared machine's slow drifts in load.
    """
    if not (isinstance(numerator, Timing) and isinstance(denominator, Timing)):
        return None
    return statistics.median(
        n / d for n, d in zip(numerator.samples_s, denominator.samples_s, strict=True)
    )


def _columns() -> list[Column]:
    return [
        Column("workload", ("workload",)),
        Column("backward nodes", ("nodes",), "{:,}"),
        Column("events recorded", ("events",), "{:,}"),
        *peer_table.peer_columns(PEERS, "us_per_node", "{label} us/node", "{:.2f}"),
        *(
            Column(f"{label} (paired median / min)", (key, f"{key}_min"), "{:.3f}x")
            for key, (_, _, label) in RATIOS.items()
        ),
        Column("predicted off / compiled out", ("predicted_off_over_compiled_out",), "{:.4f}x"),
    ]


def _notes(rows: list[dict[str, Any]], check_ns: float, removed: int) -> list[str]:
    measured = [
        f"{row['workload']} {row['off_over_compiled_out']:.3f}x"
        for row in rows
        if row["off_over_compiled_out"] is not None
    ]
    verdict = "; ".join(measured) if measured else "not measured in this run"
    return [
        f"Off-path cost: the engine's {removed} `if profiler.active` checks were compiled "
        "out of a copy of the engine (its own source, recompiled without them) and that "
        "copy was timed against the shipping engine with profiling off. Profiling off / "
        f"compiled out, paired median: {verdict}. A ratio within the run-to-run noise (a few "
        "percent on a shared machine) means no measurable cost.",
        f"One `if profiler.active` check with profiling off takes {check_ns:.1f} ns "
        "(timeit, net of an empty loop); a node passes one check, plus one per hook it "
        "runs, which gives the predicted ratio in the last column.",
        "Profiling on includes opening and closing the profile; events are Python objects "
        "appended under a lock. PyTorch's profiler (CPU activities) is timed the same "
        "way, its closing included, where it post-processes what it recorded.",
        "Times are medians of the backward pass only, per backward node; graphs are rebuilt "
        "untimed before every repetition and peers are sampled round-robin. A ratio is the "
        "median over rounds of the two peers' times in the same round (then the ratio of "
        "their fastest samples); min times are in the JSON record.",
    ]


EXPERIMENT = Experiment(
    name="profiler_overhead",
    description="Backward time per node with the profiler off, on and compiled out, "
    "beside PyTorch's profiler.",
    run=run,
)
