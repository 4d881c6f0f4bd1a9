"""Streaming backward: K = 1, 2, 4 independent branches on K streams, forward and backward.

The workload is an input `x` (batch x width) on the device and `layers` layers
`h = tanh(linear(h, W))` in all, split into K independent branches of
`layers / K` layers each, so every K does the same total work. Branch k runs
its forward under `with js.stream(s_k)` after `s_k.wait_stream(caller)`, so its
read of `x` is ordered after `x` was made; the caller's stream waits for every
s_k and joins the branch sums into one loss; `loss.backward()` runs on the
caller's stream and the gradient of `x` is read there. The same K-branch graph
with every branch on one side stream is the baseline, so "K streams / 1 stream"
measures what the streams themselves do.

On `sim` the kernels run synchronously on the host, so streams cannot overlap:
the sim timings are the scheduling overhead of streams (events, the device's
worker thread, the stream sanitizer, always on for sim), and what sim shows is
the schedule: one profiled backward per K, which thread and stream ran each
node, and a timeline of it. With `--device cuda` (CuPy and a GPU), the same
workload on `cuda:0` streams measures the wall-clock overlap.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from itertools import groupby
from pathlib import Path
from typing import Any

import numpy as np

from experiments.plots import grouped_bars
from experiments.registry import Experiment, RunOptions
from experiments.result import Column, ExperimentResult
from experiments.timing import (
    STATISTICS,
    STATISTICS_HEADER,
    Outcome,
    PeerUnavailable,
    Prepare,
    ratio_or_none,
    statistic_or_none,
    time_interleaved,
)

BRANCH_COUNTS = (1, 2, 4)
SIM_DEVICE = "sim:0"
RACE_CHECK_DEVICE = "sim:1"  # a device of its own, so the deliberate race touches no timed stream
CUDA_DEVICE = "cuda:0"
PLACES = {"sim": SIM_DEVICE, "cuda": CUDA_DEVICE}
LAYOUTS = {"k": "K streams", "one": "1 stream"}
PHASES = ("forward", "backward")
GRAD_TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}


@dataclass(frozen=True)
class Sizes:
    batch: int
    width: int
    layers: int
    warmup: int
    repeat: int


SIZES = {
    "smoke": Sizes(batch=8, width=16, layers=4, warmup=1, repeat=2),
    "quick": Sizes(batch=256, width=256, layers=8, warmup=2, repeat=15),
    "full": Sizes(batch=512, width=512, layers=16, warmup=2, repeat=21),
}


@dataclass(frozen=True)
class Inputs:
    """Host arrays every device starts from, so each device's grads can be compared."""

    x: np.ndarray
    weights: tuple[np.ndarray, ...]


@dataclass(frozen=True)
class Leaves:
    x: Any
    weights: tuple[Any, ...]


@dataclass(frozen=True)
class Graph:
    """One forward: its leaves, its loss, and per branch the stream and nodes it recorded."""

    leaves: Leaves
    loss: Any
    branch_streams: tuple[Any, ...]
    branch_nodes: tuple[frozenset[int], ...]
    """Sequence numbers of each branch's backward nodes (its linear, tanh and sum)."""


@dataclass(frozen=True)
class ScheduledNode:
    """A backward node as the profiler saw it run.

    `stream` is the stream's role in the workload (caller, s1, ...), `label` the
    profiler's name for it, which the timeline's rows show.
    """

    name: str
    thread: str
    stream: str
    label: str
    sequence_nr: int | None


def make_inputs(sizes: Sizes) -> Inputs:
    rng = np.random.default_rng(0)
    scale = 1.0 / np.sqrt(sizes.width)
    return Inputs(
        x=rng.standard_normal((sizes.batch, sizes.width), dtype=np.float32),
        weights=tuple(
            (rng.standard_normal((sizes.width, sizes.width)) * scale).astype(np.float32)
            for _ in range(sizes.layers)
        ),
    )


def make_leaves(inputs: Inputs, device: str) -> Leaves:
    """Private copies of the inputs on `device` (an upload on cuda), built untimed."""
    import jaxstream as js

    backend = "cupy" if device.startswith("cuda") else "numpy"

    def leaf(array: np.ndarray) -> Any:
        return js.tensor(array.copy(), device=device, backend=backend, requires_grad=True)

    return Leaves(leaf(inputs.x), tuple(leaf(w) for w in inputs.weights))


def make_streams(device: str, count: int) -> tuple[Any, ...]:
    """`count` new streams on `device`; none on the cpu, which has no streams."""
    import jaxstream as js

    return () if device == "cpu" else tuple(js.Stream(device) for _ in range(count))


def _branch(x: Any, weights: tuple[Any, ...]) -> tuple[Any, frozenset[int]]:
    """The branch's sum, and the sequence numbers of the nodes it recorded."""
    import jaxstream as js

    h, nodes = x, []
    for weight in weights:
        pre_activation = js.linear(h, weight)
        h = js.tanh(pre_activation)
        nodes += [pre_activation.grad_fn.sequence_nr, h.grad_fn.sequence_nr]
    total = h.sum()
    return total, frozenset([*nodes, total.grad_fn.sequence_nr])


def forward(leaves: Leaves, streams: tuple[Any, ...], branches: int) -> Graph:
    """Branch k on `streams[k % len(streams)]` (no stream on the cpu), joined on the caller's."""
    import jaxstream as js

    caller = js.current_stream(leaves.x.device)
    per_branch = len(leaves.weights) // branches
    sums, branch_streams, branch_nodes = [], [], []
    for k in range(branches):
        stream = streams[k % len(streams)] if streams else None
        if stream is not None:
            stream.wait_stream(caller)
        with js.stream(stream):
            total, nodes = _branch(leaves.x, leaves.weights[k * per_branch : (k + 1) * per_branch])
        sums.append(total)
        branch_streams.append(stream)
        branch_nodes.append(nodes)
    for stream in streams:
        caller.wait_stream(stream)
    loss = js.stack(sums).sum()
    return Graph(leaves, loss, tuple(branch_streams), tuple(branch_nodes))


def backward(graph: Graph) -> None:
    """Backward from the caller's stream, then a host read of x's grad on that stream."""
    graph.loss.backward()
    graph.leaves.x.grad.numpy()


def _timed_forward(leaves: Leaves, streams: tuple[Any, ...], branches: int) -> None:
    """The forward, ending with a host read of the loss (the caller waited for every branch)."""
    forward(leaves, streams, branches).loss.numpy()


def _prepare(
    inputs: Inputs,
    device: str,
    branches: int,
    stream_count: int,
    phase: str,
    unavailable: str | None,
) -> Prepare:
    def prepare() -> Callable[[], None]:
        if unavailable:
            raise PeerUnavailable(unavailable)
        leaves = make_leaves(inputs, device)
        streams = make_streams(device, stream_count)
        if phase == "forward":
            return partial(_timed_forward, leaves, streams, branches)
        return partial(backward, forward(leaves, streams, branches))

    return prepare


def _peer(place: str, layout: str, phase: str) -> str:
    return f"{place}-{layout}-{phase}"


def _peers(inputs: Inputs, branches: int, unavailable: dict[str, str | None]) -> dict[str, Prepare]:
    return {
        _peer(place, layout, phase): _prepare(
            inputs, device, branches, branches if layout == "k" else 1, phase, unavailable[place]
        )
        for place, device in PLACES.items()
        for layout in LAYOUTS
        for phase in PHASES
    }


def cuda_unavailable(options: RunOptions) -> str | None:
    """Why the cuda cells read n/a, or None when CuPy sees a GPU and --device cuda was given."""
    if options.device != "cuda":
        return "run with --device cuda"
    from jaxstream.streams import cuda_device_count

    return None if cuda_device_count() > 0 else "CuPy is not installed or sees no GPU"


# ----------------------------------------------------------------- the schedule


def _stream_roles(graph: Graph) -> dict[str, str]:
    """The profiler's label of each stream (as `jaxstream.profiler` writes it) -> caller, s1, ..."""
    import jaxstream as js

    caller = js.current_stream(graph.leaves.x.device)
    streams = [caller, *graph.branch_streams]
    roles = ["caller", *(f"s{k + 1}" for k in range(len(graph.branch_streams)))]
    return {f"{s.device} stream {s.id}": role for s, role in zip(streams, roles, strict=True)}


def profiled_backward(inputs: Inputs, branches: int) -> tuple[Any, Graph, list[ScheduledNode]]:
    """One backward on sim with K streams under the profiler, and its nodes in execution order."""
    import jaxstream as js

    graph = forward(make_leaves(inputs, SIM_DEVICE), make_streams(SIM_DEVICE, branches), branches)
    with js.profiler.profile() as profile:
        backward(graph)
    roles = _stream_roles(graph)
    nodes = [
        ScheduledNode(
            e.name, e.thread, roles.get(e.stream or "", "other"), str(e.stream), e.sequence_nr
        )
        for e in profile.events
        if e.kind == "node"
    ]
    return profile, graph, nodes


def branches_ran_on_their_streams(graph: Graph, nodes: list[ScheduledNode]) -> bool:
    """Every node a branch recorded ran once, on that branch's stream s_k."""
    for k, recorded in enumerate(graph.branch_nodes):
        ran = [node for node in nodes if node.sequence_nr in recorded]
        if len(ran) != len(recorded) or any(node.stream != f"s{k + 1}" for node in ran):
            return False
    return True


def stream_summary(nodes: list[ScheduledNode]) -> dict[str, dict[str, Any]]:
    """Per stream, in order of first use: its timeline label, its node count, their threads."""
    counts = Counter(node.stream for node in nodes)
    labels = {node.stream: node.label for node in nodes}
    return {
        stream: {
            "label": labels[stream],
            "nodes": counts[stream],
            "threads": sorted({node.thread for node in nodes if node.stream == stream}),
        }
        for stream in dict.fromkeys(node.stream for node in nodes)
    }


def execution_order(nodes: list[ScheduledNode]) -> str:
    """The streams in the order the nodes ran, a run of nodes on one stream as "s2 x7"."""
    runs = groupby(node.stream for node in nodes)
    return ", ".join(f"{stream} x{len(list(run))}" for stream, run in runs)


def schedule_markdown(branches: int, nodes: list[ScheduledNode]) -> str:
    lines = [
        f"### Backward schedule on sim, K = {branches}",
        "",
        f"Execution order (stream x nodes): {execution_order(nodes)}.",
        "",
        "| stream | row in the timeline | nodes | thread |",
        "|---|---|---|---|",
    ]
    for stream, summary in stream_summary(nodes).items():
        threads = ", ".join(summary["threads"])
        lines.append(f"| {stream} | {summary['label']} | {summary['nodes']} | {threads} |")
    return "\n".join(lines)


# ----------------------------------------------------------------- checks


def _grads(leaves: Leaves) -> list[np.ndarray]:
    return [np.asarray(leaf.grad.numpy()) for leaf in (leaves.x, *leaves.weights)]


def cpu_grads(inputs: Inputs, branches: int) -> list[np.ndarray]:
    graph = forward(make_leaves(inputs, "cpu"), (), branches)
    graph.loss.backward()
    return _grads(graph.leaves)


def largest_grad_difference(leaves: Leaves, reference: list[np.ndarray]) -> float:
    return max(float(np.max(np.abs(g - r))) for g, r in zip(_grads(leaves), reference, strict=True))


def grads_close(leaves: Leaves, reference: list[np.ndarray]) -> bool:
    return all(
        np.allclose(g, r, **GRAD_TOLERANCE) for g, r in zip(_grads(leaves), reference, strict=True)
    )


def cuda_grads_match_cpu(inputs: Inputs, branches: int, reference: list[np.ndarray]) -> bool:
    graph = forward(make_leaves(inputs, CUDA_DEVICE), make_streams(CUDA_DEVICE, branches), branches)
    backward(graph)
    return grads_close(graph.leaves, reference)


def race_checks(inputs: Inputs) -> dict[str, bool]:
    """Backward in a side stream on the 2-branch workload, grads then used on the caller's stream.

    Without a sync the use must raise `StreamRaceError`; after
    `caller.wait_stream(side)` the same use must pass and give the cpu's gradient.
    """
    import jaxstream as js

    graph = forward(make_leaves(inputs, RACE_CHECK_DEVICE), make_streams(RACE_CHECK_DEVICE, 2), 2)
    caller = js.current_stream(RACE_CHECK_DEVICE)
    side = js.Stream(RACE_CHECK_DEVICE)
    side.wait_stream(caller)
    with js.stream(side):
        graph.loss.backward()
    try:
        graph.leaves.x.grad * 1
        unsynced_raises = False
    except js.StreamRaceError:
        unsynced_raises = True
    caller.wait_stream(side)
    used = (graph.leaves.x.grad * 1).numpy()
    return {
        "unsynced_use_raises_stream_race": unsynced_raises,
        "wait_stream_then_use_is_clean": bool(
            np.allclose(used, cpu_grads(inputs, 2)[0], **GRAD_TOLERANCE)
        ),
    }


# ----------------------------------------------------------------- the run


@dataclass(frozen=True)
class Profiled:
    """One profiled sim backward: the profile (for its timeline), its nodes, the row's facts."""

    profile: Any
    nodes: list[ScheduledNode]
    facts: dict[str, Any]


def profile_and_check(inputs: Inputs, branches: int, cuda_reason: str | None) -> Profiled:
    """The schedule of one sim backward with K streams, checked against the cpu and the branches."""
    profile, graph, nodes = profiled_backward(inputs, branches)
    reference = cpu_grads(inputs, branches)
    facts = {
        "sim_backward_order": execution_order(nodes),
        "sim_backward_threads": ", ".join(sorted({node.thread for node in nodes})),
        "schedule": {
            "streams": stream_summary(nodes),
            "nodes": [{"node": n.name, "thread": n.thread, "stream": n.stream} for n in nodes],
        },
        "branch_nodes_on_their_streams": branches_ran_on_their_streams(graph, nodes),
        "sim_grads_match_cpu": grads_close(graph.leaves, reference),
        "sim_largest_grad_difference": largest_grad_difference(graph.leaves, reference),
        "cuda_grads_match_cpu": (
            None if cuda_reason else cuda_grads_match_cpu(inputs, branches, reference)
        ),
    }
    return Profiled(profile, nodes, facts)


def run(options: RunOptions) -> ExperimentResult:
    import jaxstream as js
    from jaxstream import sanitizer

    sizes = SIZES[options.mode]
    inputs = make_inputs(sizes)
    unavailable = {"sim": None, "cuda": cuda_unavailable(options)}
    peer_count = len(PLACES) * len(LAYOUTS) * len(PHASES)
    bar = options.progress(
        len(BRANCH_COUNTS) * (peer_count * (sizes.warmup + sizes.repeat) + 1), "streaming_backward"
    )
    rows, failures, schedules = [], {}, {}
    try:
        for branches in BRANCH_COUNTS:
            bar.set_postfix_str(f"K = {branches}")
            outcomes = time_interleaved(
                _peers(inputs, branches, unavailable),
                warmup=sizes.warmup,
                repeat=sizes.repeat,
                on_sample=bar.update,
            )
            profiled = profile_and_check(inputs, branches, unavailable["cuda"])
            bar.update()
            schedules[branches] = profiled
            rows.append(_row(branches, sizes.layers // branches, outcomes, profiled.facts))
            failures.update(
                {
                    f"K = {branches}: {peer}": outcome.reason
                    for peer, outcome in outcomes.items()
                    if getattr(outcome, "failed", False)
                }
            )
        checks = _checks(rows, race_checks(inputs), sanitizer.enabled_for(SIM_DEVICE))
        failures.update(_failed_checks(checks))
    finally:
        js.autograd.shutdown_engine_threads()
        bar.close()
    return ExperimentResult(
        columns=_columns(),
        rows=rows,
        parameters=_parameters(sizes, unavailable["cuda"]),
        checks=checks,
        failures=failures,
        notes=NOTES,
        appendix_markdown="\n\n".join(
            schedule_markdown(branches, profiled.nodes) for branches, profiled in schedules.items()
        ),
        plot=partial(_plot, rows=rows),
        extra_plots={
            f"timeline_k{branches}": partial(_plot_timeline, profile=profiled.profile)
            for branches, profiled in schedules.items()
        },
    )


def _checks(
    rows: list[dict[str, Any]], races: dict[str, bool], sanitizer_on: bool
) -> dict[str, Any]:
    """What the run verifies; `_failed_checks` turns every False here into a failure."""
    cuda = [row["cuda_grads_match_cpu"] for row in rows]
    sim_statuses = [
        timing["status"]
        for row in rows
        for peer, timing in row["timings"].items()
        if peer.startswith("sim")
    ]
    return {
        "stream_sanitizer_on_for_sim": sanitizer_on,
        "sim_runs_without_stream_race": all(status == "ok" for status in sim_statuses),
        "sim_grads_match_cpu": all(row["sim_grads_match_cpu"] for row in rows),
        "sim_largest_grad_difference": max(row["sim_largest_grad_difference"] for row in rows),
        "cuda_grads_match_cpu": None if None in cuda else all(cuda),
        "branch_nodes_on_their_streams": all(row["branch_nodes_on_their_streams"] for row in rows),
        **races,
    }


def _failed_checks(checks: dict[str, Any]) -> dict[str, str]:
    """A check that came out False is a bug in the engine or the streams, not a timing."""
    return {f"check {name}": "expected true, got false" for name, v in checks.items() if v is False}


def _row(
    branches: int, layers_per_branch: int, outcomes: dict[str, Outcome], facts: dict[str, Any]
) -> dict[str, Any]:
    row: dict[str, Any] = {"branches": branches, "layers_per_branch": layers_per_branch}
    for peer, outcome in outcomes.items():
        for suffix, statistic in STATISTICS.items():
            row[f"{peer}_ms{suffix}"] = statistic_or_none(outcome, statistic, 1e3)
    for place in PLACES:
        for phase in PHASES:
            for suffix in STATISTICS:
                row[f"{place}-{phase}-k_over_one{suffix}"] = ratio_or_none(
                    row[f"{_peer(place, 'k', phase)}_ms{suffix}"],
                    row[f"{_peer(place, 'one', phase)}_ms{suffix}"],
                )
    row.update(facts)
    row["timings"] = {peer: outcome.to_json() for peer, outcome in outcomes.items()}
    return row


def _columns() -> list[Column]:
    ratio_statistics = {"sim": tuple(STATISTICS), "cuda": ("", "_min")}
    ratio_headers = {"sim": STATISTICS_HEADER, "cuda": "median / min"}
    timing_columns = [
        Column(
            f"{place} {phase} ms, K streams (median / min)",
            (f"{_peer(place, 'k', phase)}_ms", f"{_peer(place, 'k', phase)}_ms_min"),
            "{:.2f}",
        )
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
        *timing_columns[2:],
        *ratio_columns[2:],
        Column("sim backward: streams in execution order (x nodes)", ("sim_backward_order",)),
        Column("sim backward thread", ("sim_backward_threads",)),
    ]


def _parameters(sizes: Sizes, cuda_reason: str | None) -> dict[str, Any]:
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
        "cuda_device": f"n/a ({cuda_reason})" if cuda_reason else CUDA_DEVICE,
        "grad_tolerance": GRAD_TOLERANCE,
        "warmup": sizes.warmup,
        "repeat": sizes.repeat,
    }


NOTES = [
    "Timings: the forward is the K branches and the join, ending with a host read of the "
    "loss; the backward is `loss.backward()` and a host read of x's grad on the caller's "
    "stream, on a graph built untimed for every sample. Every K does the same total work "
    '(its layers split over K branches). "1 stream" is the same K-branch graph with every '
    "branch on one side stream, so K = 1 shows the noise floor of the ratio. On sim the "
    "kernels run on the host one at a time, so nothing overlaps: a sim ratio above 1 is the "
    "cost of the streams (events, the stream sanitizer's clocks), not lost overlap. On cuda "
    "a ratio below 1 is overlap gained from the streams.",
    "Schedule: one profiled sim backward per K. Every backward node runs on the device's "
    "worker thread under the stream its forward ran on; the thread pops ready nodes by "
    "sequence number, so the branches run one after another, each on its own stream s_k, "
    "and the join's nodes on the caller's stream. The timeline of each K is drawn from the "
    "same profile.",
]


def _plot(path: Path, rows: list[dict[str, Any]]) -> bool:
    series = {
        f"{place} {phase}, {label}": [row[f"{_peer(place, layout, phase)}_ms"] for row in rows]
        for place in PLACES
        for phase in PHASES
        for layout, label in LAYOUTS.items()
    }
    measured = {label: values for label, values in series.items() if any(values)}
    measured_on_cuda = any(label.startswith("cuda") for label in measured)
    return grouped_bars(
        path,
        groups=[f"K = {row['branches']}" for row in rows],
        series=measured,
        ylabel="time (ms, median)",
        title="Streaming backward: K branches on K streams against 1 stream",
        log_scale=measured_on_cuda,
    )


def _plot_timeline(path: Path, profile: Any) -> bool:
    profile.plot_timeline(path)
    return True


EXPERIMENT = Experiment(
    name="streaming_backward",
    description="K = 1, 2, 4 independent branches on K streams, forward and backward: "
    "the sim schedule and timeline (sanitizer on), and the overlap on cuda.",
    run=run,
)
