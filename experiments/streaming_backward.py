"""Streaming backward on sim devices: what running each op on its forward stream costs.

A chain of `y = y * 1.0001` on a small tensor is built with its ops spread
round-robin over 1, 2 or 4 streams of `sim:0` (each op waits for the previous
stream, as a correct multi-stream forward must). Backward runs every node on
its forward stream on the device's worker thread, ordering each gradient into
its consumer's stream with an event wherever the stream changes, and syncs the
caller's stream with the leaf's at the end. The same chain on the cpu, where
none of that happens, is the baseline. Every sim run is checked by the stream
sanitizer; the checks also confirm that the unsafe pattern of the streaming
backward notes (using grads on another stream without a sync) raises.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from experiments.plots import grouped_bars
from experiments.registry import Experiment, RunOptions
from experiments.result import Column, ExperimentResult
from experiments.timing import (
    STATISTICS,
    STATISTICS_HEADER,
    Outcome,
    Prepare,
    ratio_or_none,
    statistic_or_none,
    time_interleaved,
)

SHAPE = (4,)
FACTOR = 1.0001
PEERS = {
    "cpu": "cpu (no streams)",
    "sim-1": "sim, 1 stream",
    "sim-2": "sim, 2 streams",
    "sim-4": "sim, 4 streams",
}


@dataclass(frozen=True)
class Sizes:
    lengths: tuple[int, ...]
    warmup: int
    repeat: int


SIZES = {
    "smoke": Sizes((50,), warmup=1, repeat=2),
    "quick": Sizes((500, 2_000), warmup=1, repeat=7),
    "full": Sizes((500, 2_000), warmup=2, repeat=21),
}


def _chain(length: int, device: str, n_streams: int) -> tuple[Any, Any]:
    """The leaf and the loss of a chain whose ops cycle over `n_streams` streams."""
    import jaxstream as js

    leaf = js.ones(SHAPE, dtype="float32", requires_grad=True, device=device)
    if device == "cpu":
        y = leaf
        for _ in range(length):
            y = y * FACTOR
        return leaf, y.sum()
    ambient = js.current_stream(device)
    streams = [js.Stream(device) for _ in range(n_streams)]
    previous = ambient
    y = leaf
    for i in range(length):
        stream = streams[i % n_streams]
        stream.wait_stream(previous)
        with js.stream(stream):
            y = y * FACTOR
        previous = stream
    ambient.wait_stream(previous)
    return leaf, y.sum()


def _prepare(length: int, peer: str) -> Prepare:
    device, n_streams = ("cpu", 0) if peer == "cpu" else ("sim:0", int(peer.split("-")[1]))

    def prepare() -> Callable[[], None]:
        leaf, loss = _chain(length, device, n_streams)

        def backward() -> None:
            loss.backward()
            leaf.grad.numpy()

        return backward

    return prepare


def _checks() -> dict[str, Any]:
    import jaxstream as js

    device = "sim:1"
    side = js.Stream(device)
    side.wait_stream(js.current_stream(device))
    with js.stream(side):
        x = js.ones(SHAPE, requires_grad=True, device=device)
        (x * 2).sum().backward()
    try:
        x.grad * 1
        unsafe_raises = False
    except js.StreamRaceError:
        unsafe_raises = True
    js.current_stream(device).wait_stream(side)
    safe_value = float((x.grad * 1).numpy()[0])
    leaf, loss = _chain(10, "sim:0", 4)
    loss.backward()
    js.autograd.shutdown_engine_threads()
    return {
        "unsynced_use_raises_stream_race": unsafe_raises,
        "wait_stream_then_use_is_clean": safe_value == 2.0,
        "four_stream_chain_grad": float(leaf.grad.numpy()[0]),
        "expected_chain_grad": FACTOR**10,
    }


def run(options: RunOptions) -> ExperimentResult:
    sizes = SIZES[options.mode]
    bar = options.progress(
        len(sizes.lengths) * len(PEERS) * (sizes.warmup + sizes.repeat), "streaming_backward"
    )
    rows, failures = [], {}
    for length in sizes.lengths:
        bar.set_postfix_str(f"chain {length:,}")
        outcomes = time_interleaved(
            {peer: _prepare(length, peer) for peer in PEERS},
            warmup=sizes.warmup,
            repeat=sizes.repeat,
            on_sample=bar.update,
        )
        rows.append(_row(length, outcomes))
        failures.update(
            {
                f"chain {length}: {peer}": outcome.reason
                for peer, outcome in outcomes.items()
                if getattr(outcome, "failed", False)
            }
        )
    bar.close()
    return ExperimentResult(
        columns=_columns(),
        rows=rows,
        parameters={
            "shape": list(SHAPE),
            "dtype": "float32",
            "chain_factor": FACTOR,
            "lengths": list(sizes.lengths),
            "warmup": sizes.warmup,
            "repeat": sizes.repeat,
            "peers": PEERS,
        },
        checks=_checks(),
        failures=failures,
        notes=[
            "Backward time per node (the backward and a host read of the gradient; the "
            "graph is rebuilt untimed for every sample). sim nodes run on the device's "
            "worker thread under their forward stream with the stream sanitizer on, so the "
            "sim columns include the thread hand-off and the sanitizer's bookkeeping; with "
            "more than one stream every edge also records and waits for an event.",
        ],
        plot=partial(_plot, rows=rows),
    )


def _row(length: int, outcomes: dict[str, Outcome]) -> dict[str, Any]:
    per_node_us = 1e6 / (length + 2)
    row: dict[str, Any] = {"chain": length}
    for peer, outcome in outcomes.items():
        for suffix, statistic in STATISTICS.items():
            row[f"{peer}_us_per_node{suffix}"] = statistic_or_none(outcome, statistic, per_node_us)
    for suffix in STATISTICS:
        row[f"sim4_over_sim1{suffix}"] = ratio_or_none(
            row[f"sim-4_us_per_node{suffix}"], row[f"sim-1_us_per_node{suffix}"]
        )
    row["timings"] = {peer: outcome.to_json() for peer, outcome in outcomes.items()}
    return row


def _columns() -> list[Column]:
    return [
        Column("chain length", ("chain",), "{:,}"),
        *(
            Column(f"{label} us/node", (f"{peer}_us_per_node",), "{:.1f}")
            for peer, label in PEERS.items()
        ),
        Column(
            f"4 streams / 1 stream ({STATISTICS_HEADER})",
            tuple(f"sim4_over_sim1{suffix}" for suffix in STATISTICS),
            "{:.2f}x",
        ),
    ]


def _plot(path: Path, rows: list[dict[str, Any]]) -> bool:
    return grouped_bars(
        path,
        groups=[f"chain {row['chain']:,}" for row in rows],
        series={
            label: [row[f"{peer}_us_per_node"] for row in rows] for peer, label in PEERS.items()
        },
        ylabel="backward time per node (us, median)",
        title="Streaming backward on sim streams",
    )


EXPERIMENT = Experiment(
    name="streaming_backward",
    description="Backward per node with ops spread over 1, 2 and 4 sim streams "
    "(event syncs, sanitizer on) against the cpu.",
    run=run,
)
