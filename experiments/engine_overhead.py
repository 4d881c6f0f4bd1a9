"""Backward time per node on tiny tensors, where the engine's own bookkeeping dominates.

Workloads: chains of ``y = y * 1.0001`` on a (4,) float32 tensor, and a seeded
random layered DAG of elementwise ops (``random_dag``). The backward rows time
the backward pass only: ``loss.backward()`` for the define-by-run engines, on a
graph rebuilt untimed before every repetition, and for eager JAX the pullback
returned by ``jax.vjp`` (the backward half of ``jax.grad``, without ``jit``).
The forward-recording row times the longest chain's forward with grad on (the
ops and the recording of their nodes; eager JAX records nothing). The last
two rows time the longest chain's forward and backward together, with Python's
garbage collector off (as the harness, like ``timeit``, runs everything) and on,
as a user's program runs them.
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, partial
from typing import Any

import numpy as np

from experiments.harness import peer_table, verdicts
from experiments.harness.experiment import Experiment, PaperRun, RunOptions
from experiments.harness.intervals import SHOWN
from experiments.harness.peers import (
    block_until_ready,
    jax_device,
    placement_note,
    require,
    tape,
)
from experiments.harness.results import Column, ExperimentResult
from experiments.harness.timing import Case, Prepare, time_cases
from experiments.harness.verdicts import Target
from experiments.workloads import chain
from experiments.workloads.random_dag import DagPlan, Unary, evaluate, make_plan

DAG_SEED = 0
# Issue targets against PyTorch, per node (wall and CPU medians): the backward of the
# longest chain, the random DAG's backward, and the forward's recording per op.
CHAIN_TARGET = Target(1.2)
DAG_TARGET = Target(1.5)
FORWARD_TARGET = Target(1.5)
TARGETED = "jaxstream-numpy_over_torch"
"""The ratio the targets judge."""
BOTH_PASSES = "forward and backward"
GC_ON = f"{BOTH_PASSES}, GC on"
PEERS = {
    "jaxstream-numpy": "jaxstream (NumPy)",
    "jaxstream-jax": "jaxstream (JAX)",
    "torch": "PyTorch",
    "jax-eager": "JAX eager",
}
RATIOS = (("jaxstream-numpy", "torch"), ("jaxstream-jax", "jax-eager"))


@dataclass(frozen=True)
class Sizes:
    """``long_repeat`` serves chains of ``LONG_CHAIN`` nodes or more, whose samples are slow."""

    chain_lengths: tuple[int, ...]
    dag_layers: int
    dag_width: int
    warmup: int
    repeat: int
    long_repeat: int

    def repeats(self, nodes: int) -> int:
        return self.long_repeat if nodes >= LONG_CHAIN else self.repeat


LONG_CHAIN = 10_000
SIZES = {
    "smoke": Sizes((100, 300), 10, 10, warmup=1, repeat=2, long_repeat=2),
    "quick": Sizes((1_000, 10_000), 100, 10, warmup=1, repeat=7, long_repeat=3),
    "full": Sizes((1_000, 10_000), 100, 10, warmup=2, repeat=41, long_repeat=9),
}
ACCELERATOR_QUICK = Sizes((100, 1_000), 20, 10, warmup=1, repeat=7, long_repeat=3)
"""Quick mode on an accelerator (cuda, and sim, its stand-in): Note [Quick chains on an
accelerator]."""

# Note [Quick chains on an accelerator]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# On an accelerator a JAX gradient is made on XLA's stream, and each backward node runs on
# its forward's stream: moving the gradient into the node's input buffer orders that stream
# after XLA's (Note [Streaming backward] in jaxstream/autograd/input_buffer.py). XLA's stream
# cannot be told to wait, so the wait is the host's: a one-element computation launched on
# the device and waited for (Note [XLA's stream] in jaxstream/devices/xla.py). Every backward
# node of the JAX peer thus pays a host round trip to the device, and eager JAX pays a
# device dispatch per op, forward and backward; at the cpu's quick sizes (chains of 10,000
# nodes, in four of the rows) the quick mode outran a minute on a GPU. There it times chains
# of 100 and 1,000 nodes and a 20-layer DAG instead, which show the same per-node costs;
# `--full` keeps the cpu's sizes. The sim run (Note [The sim run] in
# experiments/harness/peers.py) takes the cuda sizes, so that it rehearses the same run.


def sizes_for(options: RunOptions) -> Sizes:
    """The sizes of ``options``' mode, on its device."""
    if options.mode == "quick" and options.device != "cpu":
        return ACCELERATOR_QUICK
    return SIZES[options.mode]


@dataclass(frozen=True)
class Workload:
    """A loss written once over any framework's tensors, and the leaves it starts from."""

    label: str
    nodes: int
    leaves: tuple[np.ndarray, ...]
    loss: Callable[[Sequence[Any], Unary], Any]


def _chain_loss(leaves: Sequence[Any], unary: Unary, length: int) -> Any:
    del unary
    return chain.loss(leaves[0], length)


def _dag_loss(leaves: Sequence[Any], unary: Unary, plan: DagPlan) -> Any:
    return evaluate(plan, leaves, unary)


def workloads(sizes: Sizes) -> list[Workload]:
    rng = np.random.default_rng(DAG_SEED)
    found = [
        Workload(
            f"chain {length:,}",
            length,
            (chain.start(),),
            partial(_chain_loss, length=length),
        )
        for length in sizes.chain_lengths
    ]
    plan = make_plan(sizes.dag_layers, sizes.dag_width, DAG_SEED)
    leaves = tuple(
        rng.uniform(-1, 1, chain.SHAPE).astype(np.float32) for _ in range(sizes.dag_width)
    )
    found.append(
        Workload(
            f"random DAG {sizes.dag_layers}x{sizes.dag_width}",
            plan.backward_node_count(),
            leaves,
            partial(_dag_loss, plan=plan),
        )
    )
    return found


@dataclass(frozen=True)
class TapeFramework:
    """A define-by-run peer: how it makes leaves, its unary ops, how to wait for it."""

    leaf: Callable[[np.ndarray], Any]
    unary: Unary
    synchronize: Callable[[], None]


def _tape_framework(peer: str, device: str) -> TapeFramework:
    """Raises PeerUnavailable where the peer cannot run here."""
    leaf, synchronize = tape(peer, device)
    if peer == "torch":
        torch = require("torch")
        return TapeFramework(leaf, Unary(tanh=torch.tanh, cos=torch.cos), synchronize)
    return TapeFramework(leaf, Unary(tanh=lambda t: t.tanh(), cos=lambda t: t.cos()), synchronize)


def _tape_prepare(workload: Workload, peer: str, device: str) -> Prepare:
    """Build a fresh graph (``backward`` frees it), then time ``loss.backward()``."""

    def prepare() -> Callable[[], None]:
        framework = _tape_framework(peer, device)
        leaves = [framework.leaf(array) for array in workload.leaves]
        loss = workload.loss(leaves, framework.unary)

        def backward() -> None:
            loss.backward()
            block_until_ready(leaf.grad for leaf in leaves if leaf.grad is not None)
            framework.synchronize()

        return backward

    return prepare


def _jax_eager_prepare(workload: Workload, device: str) -> Prepare:
    """Eager JAX: ``jax.vjp`` runs the forward once, untimed; its pullback is timed.

    The pullback is a pure function that frees nothing, so calling it again does
    the same work as calling a fresh one: building it once spares the slow
    eager linearisation of every repetition.
    """

    @cache
    def pullback_and_seed() -> tuple[Callable[[Any], Any], Any]:
        jax = require("jax")
        jnp = require("jax.numpy")
        target = jax_device(device)
        leaves = [jax.device_put(array, target) for array in workload.leaves]
        unary = Unary(tanh=jnp.tanh, cos=jnp.cos)
        loss, pullback = jax.vjp(lambda *xs: workload.loss(xs, unary), *leaves)
        return pullback, jnp.ones_like(loss)

    def prepare() -> Callable[[], object]:
        jax = require("jax")
        pullback, seed = pullback_and_seed()
        return lambda: jax.block_until_ready(pullback(seed))

    return prepare


TAPE_PEERS = ("jaxstream-numpy", "jaxstream-jax", "torch")


def _as_is(thunk: Callable[[], object]) -> Callable[[], object]:
    return thunk


def _collector_on(thunk: Callable[[], object]) -> Callable[[], object]:
    """`thunk` run with Python's garbage collector on, from a collected heap."""
    gc.collect()

    def collected() -> object:
        gc.enable()
        try:
            return thunk()
        finally:
            gc.disable()

    return collected


def _from_leaves(
    workload: Workload,
    device: str,
    tape_step: Callable[[Workload, TapeFramework, list], object],
    jax_step: Callable[[Workload, Unary, list], object],
    wrap: Callable[[Callable[[], object]], Callable[[], object]] = _as_is,
) -> dict[str, Prepare]:
    """Every peer's prepare: its leaves are made untimed, then its step on them is timed
    (through `wrap`)."""

    def tape_prepare(peer: str) -> Prepare:
        def prepare() -> Callable[[], object]:
            framework = _tape_framework(peer, device)
            leaves = [framework.leaf(array) for array in workload.leaves]
            return wrap(partial(tape_step, workload, framework, leaves))

        return prepare

    def jax_prepare() -> Callable[[], object]:
        jax = require("jax")
        jnp = require("jax.numpy")
        target = jax_device(device)
        leaves = [jax.device_put(array, target) for array in workload.leaves]
        return wrap(partial(jax_step, workload, Unary(tanh=jnp.tanh, cos=jnp.cos), leaves))

    return {**{peer: tape_prepare(peer) for peer in TAPE_PEERS}, "jax-eager": jax_prepare}


def _tape_forward(workload: Workload, framework: TapeFramework, leaves: list) -> None:
    block_until_ready([workload.loss(leaves, framework.unary)])
    framework.synchronize()


def _jax_forward(workload: Workload, unary: Unary, leaves: list) -> object:
    return require("jax").block_until_ready(workload.loss(leaves, unary))


def _tape_both_passes(workload: Workload, framework: TapeFramework, leaves: list) -> None:
    workload.loss(leaves, framework.unary).backward()
    block_until_ready(leaf.grad for leaf in leaves)
    framework.synchronize()
    for leaf in leaves:
        leaf.grad = None


def _jax_both_passes(workload: Workload, unary: Unary, leaves: list) -> object:
    jax = require("jax")
    loss, pullback = jax.vjp(lambda *xs: workload.loss(xs, unary), *leaves)
    return jax.block_until_ready(pullback(require("jax.numpy").ones_like(loss)))


def _forward_prepares(workload: Workload, device: str) -> dict[str, Prepare]:
    """Time the forward with grad on, from leaves made untimed (its graph is dropped)."""
    return _from_leaves(workload, device, _tape_forward, _jax_forward)


def _both_passes_prepares(collector: bool) -> Callable[[Workload, str], dict[str, Prepare]]:
    """Time the forward and backward together, with the garbage collector on or off."""
    wrap = _collector_on if collector else _as_is
    return partial(_from_leaves, tape_step=_tape_both_passes, jax_step=_jax_both_passes, wrap=wrap)


def _peer_prepares(workload: Workload, device: str) -> dict[str, Prepare]:
    return {
        **{peer: _tape_prepare(workload, peer, device) for peer in TAPE_PEERS},
        "jax-eager": _jax_eager_prepare(workload, device),
    }


def run(options: RunOptions) -> ExperimentResult:
    sizes = sizes_for(options)
    backward_cases = workloads(sizes)
    longest = max(
        (w for w in backward_cases if w.label.startswith("chain")), key=lambda w: w.nodes
    )
    forward = dataclasses.replace(longest, label=f"{longest.label}, forward recording")
    both = dataclasses.replace(longest, label=f"{longest.label}, {BOTH_PASSES}")
    collected = dataclasses.replace(longest, label=f"{longest.label}, {GC_ON}")
    prepares = {
        forward.label: _forward_prepares,
        both.label: _both_passes_prepares(collector=False),
        collected.label: _both_passes_prepares(collector=True),
    }
    cases = [*backward_cases, forward, both, collected]
    outcomes, failures = time_cases(
        [
            Case(
                workload.label,
                prepares.get(workload.label, _peer_prepares)(workload, options.device),
                repeat=sizes.repeats(workload.nodes),
            )
            for workload in cases
        ],
        warmup=sizes.warmup,
        progress=partial(options.progress, desc="engine_overhead"),
    )
    rows = [
        peer_table.per_node_row(workload.label, workload.nodes, found, RATIOS)
        for workload, found in zip(cases, outcomes, strict=True)
    ]
    targets = [_target(row, rows) for row in rows]
    for row, target in zip(rows, targets, strict=True):
        row.update(verdicts.judged(row, TARGETED, target))
    return ExperimentResult(
        columns=_columns(),
        rows=rows,
        parameters={
            **chain.parameters(sizes.chain_lengths),
            "dag_layers": sizes.dag_layers,
            "dag_width": sizes.dag_width,
            "dag_seed": DAG_SEED,
            "warmup": sizes.warmup,
            "repeat": sizes.repeat,
            "repeat_for_long_chains": sizes.long_repeat,
            "long_chain_nodes": LONG_CHAIN,
            "peers": PEERS,
        },
        failures=failures,
        notes=[*_notes(rows), *placement_note(options.device, ("jaxstream", "jax", "torch"))],
        plot=partial(
            peer_table.ratio_figure,
            rows=rows,
            ratios={
                f"{numerator}_over_{denominator}": f"{PEERS[numerator]} / {PEERS[denominator]}"
                for numerator, denominator in RATIOS
            },
            groups=[row["workload"] for row in rows],
            title="Engine overhead per backward node (or op): ratios of medians",
            ylabel=f"time ratio (median, {SHOWN})",
            targets=[None if target is None else target.value for target in targets],
            target_label="target of jaxstream (NumPy) / PyTorch",
        ),
    )


def _columns() -> list[Column]:
    return [
        Column("workload", ("workload",)),
        Column("backward nodes", ("nodes",), "{:,}"),
        *peer_table.peer_columns(PEERS, "us_per_node", "{label} us/node", "{:.2f}"),
        *peer_table.pair_ratio_columns(PEERS, RATIOS),
        verdicts.verdict_column("jaxstream (NumPy) / PyTorch", TARGETED),
    ]


def _target(row: dict[str, Any], rows: list[dict[str, Any]]) -> Target | None:
    """The row's target ratio; None for the shorter chains and the rows of both passes."""
    if BOTH_PASSES in row["workload"]:
        return None
    if "forward" in row["workload"]:
        return FORWARD_TARGET
    if "DAG" in row["workload"]:
        return DAG_TARGET
    chains = [r for r in rows if "chain" in r["workload"] and "forward" not in r["workload"]]
    return CHAIN_TARGET if row is max(chains, key=lambda r: r["nodes"]) else None


def _notes(rows: list[dict[str, Any]]) -> list[str]:
    measured = [
        f"{row['workload']} {verdict}"
        for row in rows
        if (target := _target(row, rows)) is not None
        and (verdict := verdicts.described(row, TARGETED, target)) is not None
    ]
    verdict = (
        f"Measured ({verdicts.RULE}): " + "; ".join(measured)
        if measured
        else "Not measured in this run (a peer was unavailable or failed)"
    )
    return [
        "Wall-time medians of the backward pass only, per backward node, except the forward "
        "recording row (the forward with grad on, per op) and the rows of both passes "
        "(forward and backward per op, the last with Python's garbage collector on). Ratios "
        "are given "
        "three ways: wall-time median, wall-time minimum and CPU-time median (the process's "
        "CPU time leaves out the time it was descheduled). Peers are sampled round-robin, "
        "one intra-op thread each. The machine may be shared and noisy: compare the ratios, "
        "which are taken within one run, rather than absolute times across runs; where the "
        "wall and CPU ratios disagree, the CPU one is the steadier. All samples are in the "
        "JSON record.",
        f"Targets: jaxstream (NumPy) per node within {CHAIN_TARGET.value:g}x of PyTorch on the "
        f"longest chain's backward, within {DAG_TARGET.value:g}x on the random DAG's backward "
        f"and within {FORWARD_TARGET.value:g}x per op in the forward recording. {verdict}.",
        "jaxstream and PyTorch time `loss.backward()` on a graph rebuilt, untimed, before "
        "every repetition (backward frees it). JAX eager times the pullback of `jax.vjp` "
        "(the backward half of `jax.grad`, no `jit`); being pure, it is built once and "
        "called every repetition.",
        _gc_note(rows),
    ]


def _gc_note(rows: list[dict[str, Any]]) -> str:
    """What the garbage collector adds: the two rows of both passes, with it on and off."""
    by_label = {row["workload"]: row for row in rows}
    measured = []
    for collected in (row for row in rows if GC_ON in row["workload"]):
        off = by_label.get(collected["workload"].removesuffix(", GC on"))
        for peer in ("jaxstream-numpy", "torch"):
            key = f"{peer}_us_per_node"
            if off is None or None in (collected[key], off[key]):
                continue
            measured.append(
                f"{PEERS[peer]} {collected[key]:.2f} us per op with it on against "
                f"{off[key]:.2f} us with it off ({collected[key] / off[key]:.2f}x)"
            )
    return (
        "The GC rows: jaxstream records each node as a few Python objects that Python's "
        "cyclic garbage collector tracks (the node, its edges, and the saved tensors its "
        "vjps read: three per product by a number, Note [Objects the collector tracks per "
        "node] in jaxstream/ops/opdef.py); PyTorch's nodes are C++ objects it never sees. "
        "A full collection runs once the objects that survived earlier ones grow by a "
        "quarter of all it tracks, so a graph that is large against everything else the "
        "process holds pays for full collections while it is built, and one that is small "
        "against it pays for one every few graphs. Measured in this run's process, on "
        "the longest chain, forward and backward per op: "
        + ("; ".join(measured) or "not measured in this run")
        + "."
    )


EXPERIMENT = Experiment(
    name="engine_overhead",
    description="Backward time per node of tiny-tensor chains and a random DAG, "
    "against PyTorch's engine and eager JAX.",
    run=run,
    paper=PaperRun(mode="full"),
)
