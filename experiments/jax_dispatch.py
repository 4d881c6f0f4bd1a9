"""The JAX backend's cost per op, against one jitted JAX op's dispatch and eager ``jnp``.

Workloads: chains of ``y = y * 1.0001`` and of ``y = tanh(y)`` on a (4,) float32
JAX tensor that requires grad, timed per node: the forward (each op runs its
compiled kernel and records a node) and the backward (``loss.backward()`` on a
graph built untimed). Beside them, in the same run: ``jax.jit(jnp.multiply)``
(or ``jnp.tanh``) called in a loop with ``block_until_ready`` at the end, which
is one jitted op's dispatch, and the eager ``jnp`` function in the same loop.
A cProfile of each pass of the mul chain says where jaxstream's time goes, and
the garbage collector's callbacks how much of it its passes take.
"""

from __future__ import annotations

import cProfile
import gc
import pstats
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from experiments.harness import peer_table
from experiments.harness.experiment import Experiment, RunOptions
from experiments.harness.peers import jax_device, jaxstream_leaf, require
from experiments.harness.results import Column, ExperimentResult
from experiments.harness.timing import STATISTICS_HEADER, Case, Prepare, time_cases
from experiments.workloads import chain

TARGET_RATIO = 1.3
PROFILE_ROWS = 6
COLLECTOR_RUNS = 7
PEERS = {
    "jaxstream": "jaxstream (JAX)",
    "jax-jit": "jax.jit op",
    "jnp-eager": "eager jnp",
}
RATIOS = (("jaxstream", "jax-jit"), ("jaxstream", "jnp-eager"))
OPS = ("mul", "tanh")
PASSES = ("forward", "backward")


@dataclass(frozen=True)
class Sizes:
    """A kernel compiles the first time its key is seen: ``warmup`` covers that."""

    length: int
    warmup: int
    repeat: int


SIZES = {
    "smoke": Sizes(length=50, warmup=2, repeat=2),
    "quick": Sizes(length=1_000, warmup=3, repeat=15),
    "full": Sizes(length=2_000, warmup=3, repeat=41),
}


def _step(op: str) -> Callable[[Any], Any]:
    """One node of the chain, on any framework's values (jaxstream tensors or jnp arrays)."""
    if op == "mul":
        return lambda y: y * chain.FACTOR
    return lambda y: y.tanh()


def _jax_op(op: str, jitted: bool) -> Callable[[Any], Any]:
    """One op of the chain in JAX: ``jnp``'s function, or its ``jax.jit``."""
    jax, jnp = require("jax"), require("jax.numpy")
    if op == "mul":
        multiply = jax.jit(jnp.multiply) if jitted else jnp.multiply
        return lambda y: multiply(y, chain.FACTOR)
    return jax.jit(jnp.tanh) if jitted else jnp.tanh


def _forward(op: str, length: int, device: str) -> Callable[[], Any]:
    """The jaxstream chain's forward, from a fresh leaf: ``length`` ops and a sum."""
    step = _step(op)

    def forward() -> Any:
        y = leaf = jaxstream_leaf(chain.start(), "jax", device)
        for _ in range(length):
            y = step(y)
        return leaf, y.sum()

    return forward


def _jaxstream_prepare(op: str, pass_: str, length: int, device: str) -> Prepare:
    jax = require("jax")
    forward = _forward(op, length, device)

    def prepare() -> Callable[[], object]:
        if pass_ == "forward":
            return lambda: jax.block_until_ready(forward()[1].array)
        leaf, loss = forward()

        def backward() -> None:
            loss.backward()
            jax.block_until_ready(leaf.grad.array)

        return backward

    return prepare


def _jax_prepare(function: Callable[[Any], Any], length: int, device: str) -> Prepare:
    """``function`` called ``length`` times in a loop, waited for once at the end."""
    jax = require("jax")

    def prepare() -> Callable[[], object]:
        start = jax.device_put(chain.start(), jax_device(device))

        def loop() -> None:
            y = start
            for _ in range(length):
                y = function(y)
            jax.block_until_ready(y)

        return loop

    return prepare


def _prepares(op: str, pass_: str, length: int, device: str) -> dict[str, Prepare]:
    return {
        "jaxstream": _jaxstream_prepare(op, pass_, length, device),
        "jax-jit": _jax_prepare(_jax_op(op, jitted=True), length, device),
        "jnp-eager": _jax_prepare(_jax_op(op, jitted=False), length, device),
    }


def profile(pass_: str, length: int, device: str) -> list[str]:
    """The functions where the mul chain's ``pass_`` spends most of its own time, as
    "share% function (file:line)" lines."""
    work = _jaxstream_prepare("mul", pass_, length, device)
    work()()  # compile and warm the caches outside the profile
    profiler = cProfile.Profile()
    profiler.runcall(work())
    stats = pstats.Stats(profiler).stats
    total = sum(entry[2] for entry in stats.values())
    top = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:PROFILE_ROWS]
    return [
        f"{100 * own / total:.0f}% {name} ({file.rsplit('/', 1)[-1]}:{line})"
        for (file, line, name), (_, _, own, _, _) in top
    ]


def collector_share(pass_: str, length: int, device: str) -> float:
    """The share of the mul chain's ``pass_`` spent in the garbage collector's passes over
    the objects a graph allocates: the median of ``COLLECTOR_RUNS`` runs, as the table's
    times are medians (a rare full collection would dominate a sum)."""
    work = _jaxstream_prepare("mul", pass_, length, device)
    work()()  # compile and warm the caches first
    started: list[float] = []
    spent: list[float] = []

    def observe(phase: str, info: dict) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            spent.append(time.perf_counter() - started.pop())

    shares = []
    for _ in range(COLLECTOR_RUNS):
        timed = work()
        spent.clear()
        gc.callbacks.append(observe)
        begin = time.perf_counter()
        try:
            timed()
        finally:
            total = time.perf_counter() - begin
            gc.callbacks.remove(observe)
        shares.append(sum(spent) / total)
    return statistics.median(shares)


def run(options: RunOptions) -> ExperimentResult:
    sizes = SIZES[options.mode]
    labels = [(op, pass_) for op in OPS for pass_ in PASSES]
    outcomes, failures = time_cases(
        [
            Case(
                f"{op} {pass_}",
                _prepares(op, pass_, sizes.length, options.device),
                repeat=sizes.repeat,
            )
            for op, pass_ in labels
        ],
        warmup=sizes.warmup,
        progress=partial(options.progress, desc="jax_dispatch"),
    )
    rows = [
        peer_table.per_node_row(f"{op} chain, {pass_}", sizes.length, found, RATIOS)
        for (op, pass_), found in zip(labels, outcomes, strict=True)
    ]
    where = {pass_: profile(pass_, sizes.length, options.device) for pass_ in PASSES}
    collector = {
        pass_: collector_share(pass_, sizes.length, options.device) for pass_ in PASSES
    }
    return ExperimentResult(
        columns=_columns(),
        rows=rows,
        parameters={
            **chain.parameters([sizes.length]),
            "ops": list(OPS),
            "warmup": sizes.warmup,
            "repeat": sizes.repeat,
            "peers": PEERS,
        },
        checks={
            **{f"profile_of_the_{pass_}_mul_chain": lines for pass_, lines in where.items()},
            **{f"collector_share_of_the_{p}_mul_chain": share for p, share in collector.items()},
        },
        failures=failures,
        notes=_notes(rows, where, collector),
        plot=partial(
            peer_table.peer_bars,
            rows=rows,
            peers=PEERS,
            unit="us_per_node",
            ylabel="time per node or op (us, median)",
            title="JAX backend: jaxstream per node vs one JAX op's dispatch",
        ),
    )


def _columns() -> list[Column]:
    return [
        Column("workload", ("workload",)),
        *peer_table.peer_columns(PEERS, "us_per_node", "{label} us/node", "{:.2f}"),
        *peer_table.pair_ratio_columns(PEERS, RATIOS),
    ]


def _on_target(ratio: float) -> bool:
    return ratio <= TARGET_RATIO


def _notes(
    rows: list[dict[str, Any]], where: dict[str, list[str]], collector: dict[str, float]
) -> list[str]:
    measured = [
        f"{row['workload']} {verdict}"
        for row in rows
        if (verdict := peer_table.ratio_verdict(row, "jaxstream_over_jax-jit", _on_target))
    ]
    return [
        "Times per node (jaxstream) or per op call (JAX), in us; ratios are given three ways "
        f"({STATISTICS_HEADER}). Peers are sampled round-robin in one run; compare the ratios, "
        "not absolute times across runs. All samples are in the JSON record.",
        f"Target: jaxstream per node within {TARGET_RATIO:g}x of one jitted JAX op's dispatch "
        "(wall and CPU medians). Measured: "
        + ("; ".join(measured) if measured else "not measured in this run")
        + ".",
        "A forward node is one compiled kernel call plus the Python around it: the op's "
        "dispatch (`dispatch.apply`, Note [The op fast path]) and the node's recording (the "
        "node, its edges and the saved tensors its vjps read, which the garbage collector's "
        "passes then walk: Note [Objects the collector tracks per node] in "
        "jaxstream/ops/opdef.py). A backward node is the engine's bookkeeping (ready queue, "
        "input buffers, output validation) plus its vjp rules run as one compiled call (Note "
        "[Compiled backward on JAX] in jaxstream/ops/compiled_backward.py), and the freeing "
        "of the gradient it consumed and of what the forward saved (tanh's output; a product "
        "by a number saves no array). The jitted op pays only the call. "
        "On these (4,) tensors the Python around the call takes about as long as the call "
        "itself, in each pass: no calling convention of the call can close that gap.",
        "Share of the mul chain's time spent in the garbage collector's passes: "
        + "; ".join(f"{pass_} {100 * share:.0f}%" for pass_, share in collector.items())
        + ".",
        *(
            f"Where the mul chain's {pass_} spends its own time (cProfile, share of the total): "
            + "; ".join(lines)
            + "."
            for pass_, lines in where.items()
        ),
    ]


EXPERIMENT = Experiment(
    name="jax_dispatch",
    description="Per-node cost of jaxstream on the JAX backend, against one jitted JAX op's "
    "dispatch and eager jnp.",
    run=run,
)
