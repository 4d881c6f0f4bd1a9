"""The run: time every peer of each pass round-robin, then the table, the checks, the notes."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from experiments.device_overhead import calibrating, peers
from experiments.device_overhead.peers import PASSES, Place, placed
from experiments.harness import peer_table, verdicts
from experiments.harness.experiment import Experiment, RunOptions
from experiments.harness.hotspots import hotspots
from experiments.harness.intervals import SHOWN
from experiments.harness.peers import require
from experiments.harness.results import Column, ExperimentResult
from experiments.harness.timing import STATISTICS_HEADER, Case, Outcome, PeerUnavailable, time_cases
from experiments.harness.verdicts import Target
from experiments.workloads import tanh_mul_chain as chain

SIM_TARGET = Target(1.5)
"""sim with the checks off, per op and per node, against the cpu."""
STAND_IN_TARGET = Target(1.3)
"""cuda over the CuPy stand-in, per op, against the cpu's NumPy."""
TARGETED = "jaxstream_over_host"
RATIOS = {
    "jaxstream_over_host": ("host", "jaxstream on the cpu"),
    "jaxstream_over_torch": ("torch", "PyTorch"),
    "jaxstream_over_floor": ("floor", "one raw call"),
}
"""Row key of each ratio -> the place's field naming its denominator, and its label."""
CHECK_LENGTH = 8
GRADIENT_TOLERANCE = 1e-5


@dataclass(frozen=True)
class Sizes:
    length: int
    warmup: int
    repeat: int


SIZES = {
    "smoke": Sizes(length=20, warmup=1, repeat=2),
    "quick": Sizes(length=400, warmup=3, repeat=15),
    "full": Sizes(length=1_000, warmup=3, repeat=31),
}


def target_of(place: Place, pass_: str) -> Target | None:
    if place.peer in ("sim-numpy", "sim-jax"):
        return SIM_TARGET
    if place.stand_in and pass_ == "forward":
        return STAND_IN_TARGET
    return None


def row_of(place: Place, pass_: str, length: int, outcomes: dict[str, Outcome]) -> dict[str, Any]:
    """One place's row of one pass: its time, PyTorch's and the floor's, and the ratios."""
    row: dict[str, Any] = {"pass": pass_, "place": place.label, "nodes": length}
    shown = {"jaxstream": place.peer, "host": place.host or place.peer, "torch": place.torch,
             "floor": place.floor}
    for key, peer in shown.items():
        row.update(peer_table.peer_times({key: outcomes[peer]}, "us", 1e6 / length))
    for name, (field, _) in RATIOS.items():
        denominator = getattr(place, field)
        row.update(peer_table.ratio_of(
            name, outcomes[place.peer], None if denominator is None else outcomes[denominator]
        ))
    row.update(verdicts.judged(row, TARGETED, target_of(place, pass_)))
    row["timings"] = peer_table.timings({key: outcomes[peer] for key, peer in shown.items()})
    return row


def columns() -> list[Column]:
    return [
        Column("pass", ("pass",)),
        Column("jaxstream on", ("place",)),
        peer_table.peer_column("jaxstream", "jaxstream us/op or node", "us", "{:.2f}"),
        peer_table.peer_column("host", "jaxstream on the cpu us/op or node", "us", "{:.2f}"),
        peer_table.peer_column("torch", "PyTorch us/op or node", "us", "{:.2f}"),
        peer_table.peer_column("floor", "one raw call us/op", "us", "{:.2f}"),
        *(peer_table.ratio_column(f"/ {label}", name) for name, (_, label) in RATIOS.items()),
        verdicts.verdict_column("/ jaxstream on the cpu", TARGETED),
    ]


def gradients_agree(device: str) -> dict[str, bool | None]:
    """Whether each place's gradient of a short chain is `jax.grad`'s (None: not here)."""
    jax, jnp = require("jax"), require("jax.numpy")

    def loss(y: Any) -> Any:
        return jnp.sum(chain.op_chain(y, CHECK_LENGTH, jnp.tanh, jnp.multiply))

    expected = np.asarray(jax.grad(loss)(chain.start()))
    found: dict[str, bool | None] = {}
    for place in peers.places(device):
        try:
            with placed(place):
                start = peers.leaf(place)
                chain.tape_chain(start, CHECK_LENGTH).sum().backward()
                got = start.grad.numpy()
        except PeerUnavailable:
            found[place.peer] = None
            continue
        found[place.peer] = bool(np.allclose(got, expected, rtol=GRADIENT_TOLERANCE))
    return found


def where_time_goes(length: int) -> dict[str, list[str]]:
    """The hotspots of sim's NumPy chain with the checks off: its forward, and its backward
    on the calling thread (multithreading off: cProfile follows one thread)."""
    import jaxstream as js

    place = next(place for place in peers.PLACES if place.peer == "sim-numpy")
    found = {}
    for pass_ in PASSES:
        work = peers.jaxstream_prepare(place, pass_, length)
        work()()  # warm the caches outside the profile
        previous = js.autograd.is_multithreading_enabled()
        js.autograd.set_multithreading_enabled(False)
        try:
            found[pass_] = hotspots(work())
        finally:
            js.autograd.set_multithreading_enabled(previous)
    return found


def cases(device: str, sizes: Sizes) -> list[Case]:
    """The chain's passes, then the product chain and each stream work (calibrating.py)."""
    calls = calibrating.count(sizes.length)
    return [
        *(Case(pass_, peers.prepares(device, pass_, sizes.length), repeat=sizes.repeat)
          for pass_ in PASSES),
        Case(calibrating.PRODUCT_PASS, calibrating.product_prepares(device, calls),
             repeat=sizes.repeat),
        *(Case(pass_, calibrating.stream_prepares(device, work, calls), repeat=sizes.repeat)
          for work, pass_ in calibrating.STREAM_WORK.items()),
    ]


def run(options: RunOptions) -> ExperimentResult:
    sizes = SIZES[options.mode]
    places = peers.places(options.device)
    outcomes, failures = time_cases(
        cases(options.device, sizes),
        warmup=sizes.warmup,
        progress=partial(options.progress, desc="device_overhead"),
    )
    rows = [
        row_of(place, pass_, sizes.length, found)
        for pass_, found in zip(PASSES, outcomes, strict=False)
        for place in places
    ]
    works = dict(zip(calibrating.STREAM_WORK, outcomes[len(PASSES) + 1:], strict=True))
    rows += calibrating.rows(options.device, sizes.length, outcomes[len(PASSES)], works)
    targets = [target_of(place, pass_) for pass_ in PASSES for place in places]
    targets += [None] * (len(rows) - len(targets))
    compared = [i for i, row in enumerate(rows) if row[TARGETED] is not None]
    gradients = gradients_agree(options.device)
    failures.update({
        f"gradients: {peer}": f"the gradient differs from jax.grad's (rtol {GRADIENT_TOLERANCE})"
        for peer, agrees in gradients.items() if agrees is False
    })
    profile = where_time_goes(sizes.length)
    return ExperimentResult(
        columns=columns(),
        rows=rows,
        parameters={
            **chain.parameters(sizes.length),
            **calibrating.parameters(),
            "warmup": sizes.warmup,
            "repeat": sizes.repeat,
            "places": {place.peer: place.label for place in places},
            "floors": peers.FLOORS | (peers.CUDA_FLOORS if options.device == "cuda" else {}),
        },
        checks={
            "gradients_match_jax_grad": gradients,
            **{f"profile_of_sim_numpy_{pass_}": lines for pass_, lines in profile.items()},
        },
        failures=failures,
        notes=notes(rows, targets, profile, options.device),
        plot=partial(
            peer_table.ratio_figure,
            rows=[rows[i] for i in compared],
            ratios={TARGETED: "jaxstream / jaxstream on the cpu"},
            groups=[f"{rows[i]['place']}, {rows[i]['pass']}" for i in compared],
            title="What an accelerator's host side adds to an op, against the cpu",
            ylabel=f"time ratio (median, {SHOWN})",
            targets=[None if targets[i] is None else targets[i].value for i in compared],
            target_label="target",
        ),
    )


def notes(rows: list[dict[str, Any]], targets: list[Target | None],
          profile: dict[str, list[str]], device: str) -> list[str]:
    measured = [
        f"{row['place']}, {row['pass']}: {verdict}"
        for row, target in zip(rows, targets, strict=True)
        if target is not None and (verdict := verdicts.described(row, TARGETED, target))
    ]
    gpu = ("with --device cuda, jaxstream's CuPy and JAX backends on cuda:0 beside PyTorch on "
           "the GPU, one CuPy call and one jax.jit call there" if device == "cuda" else
           "no GPU's places: they run with --device cuda")
    return [
        f"Device {device}: every place runs whatever the device asked for (cpu, sim:0 with "
        "the stream checks off and on, cuda:0 over the CuPy stand-in), PyTorch and the raw "
        f"calls on the cpu; {gpu}.",
        f"A chain of tanh and multiply on {chain.SIZE:,} float32s: the forward's time per op (a "
        "fresh leaf that requires grad, each op recording its node) and the backward's per "
        "node (a graph built untimed). Times in us; ratios three ways "
        f"({STATISTICS_HEADER}), each with its bootstrap interval. Every peer's samples are "
        "taken round-robin in one run, per pass; compare the ratios, not times across runs.",
        "What each ratio measures: / jaxstream on the cpu, what the device's host side adds "
        "(the device guard, the current stream, the sanitizer and the memory count of sim, "
        "the engine's device thread); / PyTorch, jaxstream against PyTorch's C++ on the same "
        "device (the cpu, for sim and the stand-in); / one raw call, jaxstream against one "
        "call of the op in the array library alone (NumPy's, the stand-in's, or a cached "
        "jax.jit), which records no graph.",
        "A backward on sim or cuda runs on the device's engine thread, a backward on the cpu "
        "on the calling thread (Note [Device threads] in jaxstream/autograd/threads.py): "
        "where the machine's cores differ in speed (a shared one), the two threads may "
        "land on different cores, and the backward rows' samples split into two groups; "
        "the min column shows the faster.",
        "The CuPy stand-in (Note [The CuPy stand-in] in experiments/harness/cupy_stand_in.py) "
        "runs jaxstream's whole cuda path (CuPy's streams, device guard and backend) on the "
        "host, its kernels NumPy's on cuda:0's arrays, which are NumPy's own: its raw call "
        "costs what NumPy's does, and what it adds to the cpu's NumPy is jaxstream's.",
        calibrating.NOTE,
        f"Targets ({verdicts.RULE}): sim with the checks off within {SIM_TARGET.value:g}x of "
        f"the cpu per op and per node, the stand-in within {STAND_IN_TARGET.value:g}x per op. "
        "Measured: " + ("; ".join(measured) if measured else "not measured in this run") + ".",
        *(
            f"Where sim's NumPy {pass_} spends its own time with the checks off (cProfile, "
            "share of the total" + ("; on the calling thread" if pass_ == "backward" else "")
            + "): " + "; ".join(lines) + "."
            for pass_, lines in profile.items()
        ),
    ]


EXPERIMENT = Experiment(
    name="device_overhead",
    description="What an accelerator's host side adds to an op and to a backward node: a "
    "tanh and multiply chain on cpu, sim (checks off and on), cuda over a CuPy stand-in and, "
    "with --device cuda, the GPU, against PyTorch and one raw call of each op.",
    run=run,
)
