"""The schedule of one profiled sim backward: which thread and stream ran each node, in order."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from experiments.streaming_backward.workload import (
    SIM_DEVICE,
    Graph,
    Inputs,
    backward,
    forward,
    make_leaves,
    make_streams,
)


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


def stream_roles(graph: Graph) -> dict[str, str]:
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
    roles = stream_roles(graph)
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
