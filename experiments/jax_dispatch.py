"""The JAX backend's cost per op, against one jitted JAX op's dispatch and eager ``jnp``.

Workloads: chains of ``y = y * 1.0001`` and of ``y = tanh(y)`` on a (4,) float32
JAX tensor that requires grad, timed per node: the forward (each op runs its
compiled kernel and records a node) and the backward (``loss.backward()`` on a
graph built untimed). Beside them, in the same run: ``jax.jit(jnp.multiply)``
(or ``jnp.tanh``) called in a loop with ``block_until_ready`` at the end, which
is one jitted op's dispatch, and the eager ``jnp`` function in the same loop.
PyTorch is measured the same way, as the reference for what a define-by-run
engine adds to its own op: its chain with autograd (per node, forward and
backward) against its op alone, with no graph, in the same loop.
A cProfile of each pass of the mul chain says where jaxstream's time goes, and
the garbage collector's callbacks how much of it its passes take.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from experiments.harness import peer_table, verdicts
from experiments.harness.experiment import Experiment, RunOptions
from experiments.harness.hotspots import hotspots
from experiments.harness.intervals import SHOWN
from experiments.harness.peers import (
    jax_device,
    jaxstream_leaf,
    placement_note,
    require,
    torch_leaf,
    torch_synchronizer,
)
from experiments.harness.results import Column, ExperimentResult
from experiments.harness.timing import STATISTICS_HEADER, Case, Prepare, time_cases
from experiments.harness.verdicts import Target
from experiments.workloads import chain

TARGET = Target(1.3)
TARGETED = "jaxstream_over_jax-jit"
PROFILE_ROWS = 6
COLLECTOR_RUNS = 7
PEERS = {
    "jaxstream": "jaxstream (JAX)",
    "jax-jit": "jax.jit op",
    "jnp-eager": "eager jnp",
    "torch": "PyTorch",
    "torch-op": "PyTorch op, no grad",
}
TAPES = ("jaxstream", "torch")
"""The peers that record a graph; the others call the op alone."""
RATIOS = (("jaxstream", "jax-jit"), ("jaxstream", "jnp-eager"), ("torch", "torch-op"))
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
    """One node of the chain, on any framework's values (tensors of either tape, jnp arrays)."""
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


def _waiter(framework: str, device: str) -> Callable[[Any], None]:
    """What waits for a value of ``framework`` ("jaxstream", "jax" or "torch") to be computed."""
    if framework == "torch":
        synchronize = torch_synchronizer(device)
        return lambda _: synchronize()
    jax = require("jax")
    if framework == "jaxstream":
        return lambda t: jax.block_until_ready(t.array)
    return jax.block_until_ready


def _leaf(tape: str, device: str, requires_grad: bool) -> Any:
    """A fresh chain input of ``tape`` ("jaxstream": on the JAX backend, or "torch")."""
    if tape == "torch":
        return torch_leaf(chain.start(), device, requires_grad)
    return jaxstream_leaf(chain.start(), "jax", device, requires_grad)


def _tape_prepare(tape: str, op: str, pass_: str, length: int, device: str) -> Prepare:
    """A define-by-run peer's chain: its forward (``length`` ops and a sum, from a fresh
    leaf), or its backward on a graph built untimed."""
    step = _step(op)

    def forward() -> tuple[Any, Any]:
        y = leaf = _leaf(tape, device, requires_grad=True)
        for _ in range(length):
            y = step(y)
        return leaf, y.sum()

    def prepare() -> Callable[[], object]:
        wait = _waiter(tape, device)
        if pass_ == "forward":
            return lambda: wait(forward()[1])
        leaf, loss = forward()

        def backward() -> None:
            loss.backward()
            wait(leaf.grad)

        return backward

    return prepare


def _op_prepare(framework: str, op: str, device: str, length: int) -> Prepare:
    """One op of the chain called ``length`` times in a loop, with no graph, waited for once
    at the end: ``jax.jit`` of it ("jax-jit"), ``jnp``'s ("jnp-eager") or PyTorch's
    ("torch-op")."""

    pytorch = framework == "torch-op"
    # Made once, not per sample: a new `jax.jit` would take its slow path on its first call.
    function = _step(op) if pytorch else _jax_op(op, jitted=framework == "jax-jit")

    def prepare() -> Callable[[], object]:
        wait = _waiter("torch" if pytorch else "jax", device)
        if pytorch:
            start = _leaf("torch", device, requires_grad=False)
        else:
            start = require("jax").device_put(chain.start(), jax_device(device))

        def loop() -> None:
            y = start
            for _ in range(length):
                y = function(y)
            wait(y)

        return loop

    return prepare


def _prepares(op: str, pass_: str, length: int, device: str) -> dict[str, Prepare]:
    return {
        peer: _tape_prepare(peer, op, pass_, length, device)
        if peer in TAPES
        else _op_prepare(peer, op, device, length)
        for peer in PEERS
    }


def profile(pass_: str, length: int, device: str) -> list[str]:
    """The functions where the mul chain's ``pass_`` spends most of its own time, as
    "share% function (file:line)" lines."""
    work = _tape_prepare("jaxstream", "mul", pass_, length, device)
    work()()  # compile and warm the caches outside the profile
    return hotspots(work(), PROFILE_ROWS)


def collector_share(pass_: str, length: int, device: str) -> float:
    """The share of the mul chain's ``pass_`` spent in the garbage collector's passes over
    the objects a graph allocates: the median of ``COLLECTOR_RUNS`` runs, as the table's
    times are medians (a rare full collection would dominate a sum)."""
    work = _tape_prepare("jaxstream", "mul", pass_, length, device)
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
    for row in rows:
        row.update(verdicts.judged(row, TARGETED, TARGET))
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
        notes=[
            *_notes(rows, where, collector),
            *placement_note(options.device, ("jaxstream", "jax", "torch")),
        ],
        plot=partial(
            peer_table.ratio_figure,
            rows=rows,
            ratios={f"{n}_over_{d}": f"{PEERS[n]} / {PEERS[d]}" for n, d in RATIOS},
            groups=[row["workload"] for row in rows],
            title="Per node against one op's dispatch: jaxstream (JAX) and PyTorch",
            ylabel=f"time ratio (median, {SHOWN})",
            targets=[TARGET.value] * len(rows),
            target_label="target of jaxstream / jax.jit op",
        ),
    )


def _columns() -> list[Column]:
    return [
        Column("workload", ("workload",)),
        *peer_table.peer_columns(PEERS, "us_per_node", "{label} us/node", "{:.2f}"),
        *peer_table.pair_ratio_columns(PEERS, RATIOS),
        verdicts.verdict_column("jaxstream / jax.jit op", TARGETED),
    ]


def _on_target(ratio: float) -> bool:
    """Whether a median ratio is within the target, for the reference's count."""
    return ratio <= TARGET.value


def _notes(
    rows: list[dict[str, Any]], where: dict[str, list[str]], collector: dict[str, float]
) -> list[str]:
    measured = [
        f"{row['workload']} {verdict}"
        for row in rows
        if (verdict := verdicts.described(row, TARGETED, TARGET))
    ]
    return [
        "Times per node (the engines) or per op call (the ops alone), in us; ratios are given "
        f"three ways ({STATISTICS_HEADER}). Peers are sampled round-robin in one run; compare "
        "the ratios, not absolute times across runs. All samples are in the JSON record.",
        f"Target: jaxstream per node within {TARGET.value:g}x of one jitted JAX op's dispatch "
        f"({verdicts.RULE}). Measured: "
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
        "itself, in each pass: no calling convention of the call can close that gap. "
        "The jitted product is given the number 1.0001, as JAX code is written, and JAX "
        "makes an array of it on every call; jaxstream's calls, forward and backward, are "
        "given an array made once (Note [Numbers as cached arrays] in "
        "jaxstream/ops/compiled_kernels.py), which is why its mul rows read lower than its "
        "tanh rows.",
        _reference_note(rows),
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


def _reference_note(rows: list[dict[str, Any]]) -> str:
    """What PyTorch's C++ engine adds to its own op, measured as the target measures ours."""
    key = "torch_over_torch-op"
    measured = [(row["workload"], row[key], row[f"{key}_cpu"]) for row in rows]
    if any(wall is None or cpu is None for _, wall, cpu in measured):
        return "Reference: PyTorch was not measured in this run."
    over = sum(1 for _, wall, cpu in measured if not (_on_target(wall) and _on_target(cpu)))

    def added(engine: str, op: str) -> str:
        extra = [row[f"{engine}_us_per_node"] - row[f"{op}_us_per_node"] for row in rows]
        return f"{min(extra):.1f} to {max(extra):.1f} us"

    return (
        "Reference, in the same run: PyTorch's C++ engine per node against its own op with "
        "no graph, as the target measures jaxstream against one jitted op (wall / CPU "
        "medians): "
        + "; ".join(f"{name} {wall:.2f}x / {cpu:.2f}x" for name, wall, cpu in measured)
        + f". By the target's measure, PyTorch's own engine is over {TARGET.value:g}x on "
        f"{over} of {len(measured)} rows. In absolute terms a node adds "
        f"{added('torch', 'torch-op')} to PyTorch's op and {added('jaxstream', 'jax-jit')} "
        "to one jitted op in jaxstream, whose engine is Python where PyTorch's is C++."
    )


EXPERIMENT = Experiment(
    name="jax_dispatch",
    description="Per-node cost of jaxstream on the JAX backend, against one jitted JAX op's "
    "dispatch and eager jnp, with PyTorch's engine against its own op beside them.",
    run=run,
)
