"""The profiler_overhead run: its workloads, its peers, its table and notes."""

from __future__ import annotations

import statistics
import timeit
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from experiments.harness import peer_table
from experiments.harness.experiment import Experiment, RunOptions
from experiments.harness.intervals import SHOWN, interval_text, paired_interval
from experiments.harness.peers import (
    jaxstream_leaf,
    placement_note,
    require,
    torch_leaf,
    torch_synchronizer,
)
from experiments.harness.plots import ratio_bars
from experiments.harness.results import Column, ExperimentResult
from experiments.harness.timing import (
    Case,
    Outcome,
    Prepare,
    Timing,
    ratio_or_none,
    time_cases,
)
from experiments.profiler_overhead.compiled_out import (
    QUIET_TEST,
    UNREACHED,
    DirectCalls,
    backward_with,
    compiled_out_engine,
)
from experiments.workloads import chain

PEERS = {
    "compiled-out": "jaxstream, instrumentation compiled out",
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
OFF_PATH = "off_over_compiled_out"
AGAINST_PREDICTION = "off_path_against_prediction"
"""The row's reading of the off-path ratio's interval against its prediction."""


@dataclass(frozen=True)
class Sizes:
    chain_lengths: tuple[int, ...]
    hooked_chain_length: int
    warmup: int
    repeat: int
    indirection_loops: int


SIZES = {
    "smoke": Sizes((100,), 50, warmup=1, repeat=2, indirection_loops=100_000),
    "quick": Sizes((2_000, 10_000), 2_000, warmup=2, repeat=25, indirection_loops=2_000_000),
    "full": Sizes((2_000, 10_000), 2_000, warmup=3, repeat=61, indirection_loops=10_000_000),
}
INDIRECTIONS = {
    "evaluate_node": (
        "instrumentation.current().evaluate_node(step, arg, arg, arg)", "step(arg, arg, arg)"
    ),
    "call_hook": (
        "instrumentation.current().call_hook('tensor_pre', arg, arg, step, arg)", "step(arg)"
    ),
    QUIET_TEST: ("instrumentation.installed is quiet and step", "True and step"),
}
"""Per instrumented step of a backward node: the step through the instrumentation, and
what it is compiled out to."""


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
            return partial(backward_with, compiled_out_engine().engine, loss)
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
    """How many events one profiled backward of `workload` records (untimed), on the cpu:
    the engine records the same events on every device."""
    import jaxstream as js

    leaf = js.tensor(chain.start(), requires_grad=True, device="cpu")
    loss = _chain_loss(leaf, workload)
    with js.profiler.profile() as prof:
        loss.backward()
    return len(prof.events)


def bypasses_instrumentation(direct: DirectCalls) -> bool:
    """Whether a hooked backward with a final callback, run by the compiled-out engine,
    makes no call to the installed instrumentation (untimed)."""
    import jaxstream as js
    from jaxstream import instrumentation
    from jaxstream.instrumentation import Instrumentation

    calls: list[str] = []

    class Counting(Instrumentation):
        def evaluate_node(self, *args: Any) -> None:
            calls.append("evaluate_node")
            super().evaluate_node(*args)

        def call_hook(self, *args: Any) -> Any:
            calls.append("call_hook")
            return super().call_hook(*args)

        def run_callback(self, *args: Any) -> None:
            calls.append("run_callback")
            super().run_callback(*args)

    leaf = js.tensor(chain.start(), requires_grad=True, device="cpu")
    leaf.register_hook(lambda grad: js.autograd.queue_callback(lambda: None))
    loss = chain.loss(leaf, 3, _no_op_hook)
    instrumentation.install(Counting())
    try:
        backward_with(direct.engine, loss)
    finally:
        instrumentation.install(None)
    return not calls and leaf.grad is not None


def indirection_ns(loops: int) -> dict[str, float]:
    """Per method of INDIRECTIONS: the time one call through the default instrumentation
    adds to the call it makes (profiling off), net of that call."""
    from jaxstream import instrumentation
    from jaxstream.instrumentation import Instrumentation

    assert type(instrumentation.current()) is Instrumentation, "a profile is open"
    namespace = {
        "instrumentation": instrumentation, "quiet": instrumentation.QUIET,
        "step": _no_op_step, "arg": None,
    }

    def best(statement: str) -> float:
        return min(timeit.repeat(statement, globals=namespace, number=loops, repeat=5))

    return {
        method: max(best(through) - best(direct), 0.0) / loops * 1e9
        for method, (through, direct) in INDIRECTIONS.items()
    }


def _no_op_step(*args: Any) -> None:
    return None


def run(options: RunOptions) -> ExperimentResult:
    sizes = SIZES[options.mode]
    cases = workloads(sizes)
    direct = compiled_out_engine()
    added_ns = indirection_ns(sizes.indirection_loops)
    outcomes, failures = time_cases(
        [
            Case(workload.label, _peer_prepares(workload, options.device), repeat=sizes.repeat)
            for workload in cases
        ],
        warmup=sizes.warmup,
        progress=partial(options.progress, desc="profiler_overhead"),
    )
    rows = [
        _row(workload, found, added_ns)
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
            "indirection_loops": sizes.indirection_loops,
            "peers": PEERS,
        },
        checks={
            "instrumented_calls_compiled_out": direct.calls_removed,
            "instrumented_calls_by_method": dict(sorted(direct.removed.items())),
            "instrumented_methods_left_unreached": UNREACHED,
            "compiled_out_bypasses_instrumentation": bypasses_instrumentation(direct),
            "indirection_ns": added_ns,
            "events_match_nodes_and_hooks": all(
                row["events"] == row["nodes"] + row["hooks"] for row in rows
            ),
        },
        failures=failures,
        notes=[
            *_notes(rows, added_ns, direct),
            *placement_note(options.device, ("jaxstream", "torch")),
        ],
        plot=partial(_plot, rows=rows),
    )


def _row(workload: Workload, outcomes: dict[str, Outcome],
         added_ns: dict[str, float]) -> dict[str, Any]:
    per_node_us = 1e6 / workload.nodes
    hooks = workload.length if workload.hooks else 0
    row: dict[str, Any] = {
        "workload": workload.label,
        "nodes": workload.nodes,
        "hooks": hooks,
        "events": events_per_backward(workload),
    }
    row.update(peer_table.peer_times(outcomes, "us_per_node", per_node_us))
    for key, (numerator, denominator, _) in RATIOS.items():
        row[key] = paired_ratio(outcomes[numerator], outcomes[denominator])
        row[f"{key}_interval"] = _paired_interval(outcomes[numerator], outcomes[denominator])
        row[f"{key}_min"] = ratio_or_none(
            row[f"{numerator}_us_per_node_min"], row[f"{denominator}_us_per_node_min"]
        )
    # Instrumented steps per node with profiling off: every node tests whether anyone
    # observes; a hooked node then goes the general way, through evaluate_node, and makes
    # one call_hook per hook (each after its own instrumentation.current()).
    added_per_node_ns = added_ns[QUIET_TEST] + hooks / workload.nodes * (
        added_ns["evaluate_node"] + added_ns["call_hook"]
    )
    compiled_out = row["compiled-out_us_per_node"]
    row["predicted_off_over_compiled_out"] = (
        None if not compiled_out else 1 + added_per_node_ns / (compiled_out * 1e3)
    )
    row[AGAINST_PREDICTION] = against_prediction(
        row[f"{OFF_PATH}_interval"], row["predicted_off_over_compiled_out"]
    )
    row["timings"] = peer_table.timings(outcomes)
    return row


def against_prediction(interval: list[float] | None, predicted: float | None) -> str:
    """What the off-path ratio's interval says against its prediction, as the paper cites it."""
    if interval is None or predicted is None:
        return "not measured in this run"
    low, high = interval
    if high < predicted:
        return ("it lies wholly below the prediction, so the shipping engine, which makes the "
                "calls, ran faster than the copy without them")
    if low > predicted:
        return "it lies wholly above the prediction, so the calls cost more than timeit says"
    return "it includes the prediction"


def paired_ratio(numerator: Outcome, denominator: Outcome) -> float | None:
    """The median over rounds of numerator / denominator, each pair timed in the same round.

    Pairs taken close in time cancel most of a shared machine's slow drifts in load.
    """
    if not (isinstance(numerator, Timing) and isinstance(denominator, Timing)):
        return None
    return statistics.median(
        n / d for n, d in zip(numerator.samples_s, denominator.samples_s, strict=True)
    )


def _paired_interval(numerator: Outcome, denominator: Outcome) -> list[float] | None:
    """The paired ratio's interval, resampling whole rounds (Note [Bootstrap intervals of
    ratios] in experiments/harness/intervals.py)."""
    if not (isinstance(numerator, Timing) and isinstance(denominator, Timing)):
        return None
    return paired_interval(numerator.samples_s, denominator.samples_s)


def _plot(path: Path, rows: list[dict[str, Any]]) -> bool:
    """The paired ratios with their intervals: the off-path cost against its prediction,
    then what profiling on costs, ours and PyTorch's."""
    groups = [row["workload"] for row in rows]
    ylabel = f"time ratio (paired median, {SHOWN})"
    off_path = peer_table.ratio_panel(
        rows, {OFF_PATH: RATIOS[OFF_PATH][2]}, groups=groups, ylabel=ylabel,
        title="The off-path cost: profiling off / instrumentation compiled out",
        targets=[row["predicted_off_over_compiled_out"] for row in rows],
        target_label="predicted",
    )
    profiling = peer_table.ratio_panel(
        rows, {key: label for key, (_, _, label) in RATIOS.items() if key != OFF_PATH},
        groups=groups, ylabel=ylabel, title="Profiling on / off",
    )
    return ratio_bars(path, [off_path, profiling], "Profiler overhead per backward node")


def _columns() -> list[Column]:
    return [
        Column("workload", ("workload",)),
        Column("backward nodes", ("nodes",), "{:,}"),
        Column("events recorded", ("events",), "{:,}"),
        *peer_table.peer_columns(PEERS, "us_per_node", "{label} us/node", "{:.2f}"),
        *(
            Column(f"{label} (paired median [{SHOWN}] / min)", (key, f"{key}_min"), "{:.3f}x")
            for key, (_, _, label) in RATIOS.items()
        ),
        Column("predicted off / compiled out", ("predicted_off_over_compiled_out",), "{:.4f}x"),
    ]


def _notes(rows: list[dict[str, Any]], added_ns: dict[str, float],
           direct: DirectCalls) -> list[str]:
    measured = [
        f"{row['workload']} {row[OFF_PATH]:.3f}x{interval_text(row[f'{OFF_PATH}_interval'])} "
        f"against {row['predicted_off_over_compiled_out']:.3f}x predicted: "
        f"{row[AGAINST_PREDICTION]}"
        for row in rows
        if row[OFF_PATH] is not None and row["predicted_off_over_compiled_out"] is not None
    ]
    verdict = "; ".join(measured) if measured else "not measured in this run"
    by_method = ", ".join(
        f"{count} {method}" for method, count in sorted(direct.removed.items())
        if method != QUIET_TEST
    )
    return [
        f"Off-path cost: the engine's {direct.calls_removed} calls through the installed "
        f"instrumentation ({by_method}) were compiled out of a copy of the engine (its own "
        "source, recompiled with `instrumentation.current().evaluate_node(F, *args)` made "
        "`F(*args)`, and likewise for hooks and final callbacks; its "
        f"{direct.removed[QUIET_TEST]} test of whether anyone observes made True) and that "
        "copy was timed "
        "against the shipping engine with profiling off, where the default "
        f"`Instrumentation` only makes the call. Profiling off / compiled out, paired median "
        f"with its {SHOWN}: {verdict}. The instrumentation can only add time, so a ratio whose "
        "interval lies wholly below its prediction is not its cost: the shipping engine then "
        "ran faster than the copy without the calls, a difference between the two copies of "
        "the engine that this experiment does not explain, beside which the off-path cost is "
        "too small to be seen (not measured as zero).",
        f"With profiling off, a node's test of whether anyone observes costs "
        f"{added_ns[QUIET_TEST]:.1f} ns; a plain node then runs in the engine's loop with no "
        "call through the instrumentation (Note [A plain node in one frame] in "
        "jaxstream/autograd/engine.py). A hooked node goes the general way: evaluating it "
        f"through the instrumentation adds {added_ns['evaluate_node']:.1f} ns to the call it "
        f"makes and calling a hook through it adds {added_ns['call_hook']:.1f} ns (timeit, "
        "`instrumentation.current().method(...)` net of the direct call). These give the "
        "predicted ratio in the last column. Stream operations also go through the "
        "instrumentation, but none runs in these CPU chains.",
        "Profiling on includes opening and closing the profile; events are Python objects "
        "appended under a lock. PyTorch's profiler (CPU activities) is timed the same "
        "way, its closing included, where it post-processes what it recorded.",
        "Times are wall-time and CPU-time medians of the backward pass only, per backward "
        "node, beside the cores each peer used (CPU time / wall time); graphs are rebuilt "
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
