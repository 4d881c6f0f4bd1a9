"""The hessian table: a row per variant and batch, its columns, its targets and its figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from experiments.harness import peer_table, verdicts
from experiments.harness.intervals import SHOWN
from experiments.harness.plots import ratio_bars
from experiments.harness.results import Column
from experiments.harness.timing import Outcome, Timing
from experiments.harness.verdicts import Target
from experiments.hessian.peers import EAGER, EAGER_PEERS, FLAVOURS, PEERS

TRIMMING_TARGET = Target(1.5, at_least=True)
"""Trimming on at least this much faster than off, in variant A."""
COMPILE_TARGET = Target(1.5)
"""js.compile within this of jax.jit."""
BEST_EAGER_TARGET = Target(1.2)
"""The fastest eager jaxstream configuration within this of PyTorch eager."""
BEST = "jaxstream_best_over_torch"
COMPILED = "compile_over_jit"


def speedup(flavour: str) -> str:
    return f"jaxstream-{flavour}_speedup"


def row(
    variant: str, key: str, label: str, batch: int, outcomes: dict[str, Outcome]
) -> dict[str, Any]:
    """Per-peer median and min (ms), trimming speed-ups, js.compile against jax.jit, and
    the fastest eager jaxstream configuration against PyTorch eager, with their verdicts."""
    found: dict[str, Any] = {"key": key, "variant_key": variant, "variant": label, "batch": batch}
    found.update(peer_table.peer_times(outcomes, "ms", 1e3))
    for flavour in FLAVOURS:
        found.update(peer_table.ratio_of(
            speedup(flavour), outcomes[f"jaxstream-{flavour}/off"],
            outcomes[f"jaxstream-{flavour}/on"],
        ))
    found.update(peer_table.ratio_of(COMPILED, outcomes["jaxstream-compile/on"],
                                     outcomes["jax-jit"]))
    best = fastest_eager(outcomes)
    found["jaxstream_best"] = None if best is None else PEERS[best]
    found.update(peer_table.ratio_of(BEST, outcomes.get(best), outcomes["torch"]))
    for name, target in targets(variant).items():
        found.update(verdicts.judged(found, name, target))
    for peer, outcome in outcomes.items():
        found[f"{peer}_faults"] = outcome.faults_median if isinstance(outcome, Timing) else None
    found["timings"] = peer_table.timings(outcomes)
    return found


def fastest_eager(outcomes: dict[str, Outcome]) -> str | None:
    """The eager jaxstream configuration with the lowest median wall time: one configuration,
    whose every statistic the "best eager" ratio then reports."""
    timed = {peer: outcomes[peer].median_s for peer in EAGER_PEERS
             if isinstance(outcomes[peer], Timing)}
    return min(timed, key=timed.__getitem__, default=None)


def targets(variant: str) -> dict[str, Target | None]:
    """Each targeted ratio's target in ``variant``'s rows (trimming is judged in A only)."""
    trimming = TRIMMING_TARGET if variant == "hessian" else None
    return {
        **{speedup(flavour): trimming for flavour in EAGER},
        BEST: BEST_EAGER_TARGET,
        COMPILED: COMPILE_TARGET,
    }


def columns() -> list[Column]:
    return [
        Column("variant", ("variant",)),
        Column("batch", ("batch",), "{:,}"),
        Column("jaxstream (NumPy) off, ms", ("jaxstream-numpy/off_ms",), "{:.1f}"),
        Column("jaxstream (NumPy) on, ms", ("jaxstream-numpy/on_ms",), "{:.1f}"),
        peer_table.ratio_column("NumPy speed-up", speedup("numpy")),
        verdicts.verdict_column("NumPy speed-up", speedup("numpy")),
        Column("jaxstream (JAX) off, ms", ("jaxstream-jax/off_ms",), "{:.1f}"),
        Column("jaxstream (JAX) on, ms", ("jaxstream-jax/on_ms",), "{:.1f}"),
        peer_table.ratio_column("JAX speed-up", speedup("jax")),
        verdicts.verdict_column("JAX speed-up", speedup("jax")),
        Column("js.compile off, ms", ("jaxstream-compile/off_ms",), "{:.1f}"),
        Column("js.compile on, ms", ("jaxstream-compile/on_ms",), "{:.1f}"),
        peer_table.ratio_column("js.compile speed-up", speedup("compile")),
        Column("PyTorch eager, ms", ("torch_ms",), "{:.1f}"),
        Column("jax.jit(jax.grad), ms", ("jax-jit_ms",), "{:.1f}"),
        Column("fastest eager jaxstream (by median)", ("jaxstream_best",)),
        peer_table.ratio_column("fastest eager jaxstream / PyTorch", BEST),
        verdicts.verdict_column("fastest eager / PyTorch", BEST),
        peer_table.ratio_column("js.compile on / jax.jit", COMPILED),
        verdicts.verdict_column("js.compile on / jax.jit", COMPILED),
    ]


def plot(path: Path, rows: list[dict[str, Any]]) -> bool:
    """Trimming's speed-ups, and the fastest eager run and js.compile against their
    references, each with its interval and target."""
    groups = [f"{r['variant'].split(':')[0]}, batch {r['batch']:,}" for r in rows]
    ylabel = f"ratio (median, {SHOWN})"

    def target_of(name: str) -> list[float | None]:
        return [None if (t := targets(r["variant_key"])[name]) is None else t.value for r in rows]

    speedups = peer_table.ratio_panel(
        rows,
        {speedup(flavour): f"jaxstream ({label})" for flavour, label
         in zip(FLAVOURS, ("NumPy", "JAX", "js.compile"), strict=True)},
        groups=groups, ylabel=ylabel, targets=target_of(speedup("numpy")),
        title="Speed-up from trimming (off / on); target for the eager backends, variant A",
    )
    eager = peer_table.ratio_panel(
        rows, {BEST: "fastest eager jaxstream / PyTorch eager"},
        groups=groups, ylabel=ylabel, targets=target_of(BEST),
        title="The fastest eager jaxstream configuration (by median) against PyTorch eager",
    )
    compiled = peer_table.ratio_panel(
        rows, {COMPILED: "js.compile (trimming on) / jax.jit"},
        groups=groups, ylabel=ylabel, targets=target_of(COMPILED),
        title="js.compile against jax.jit of the same computation",
    )
    return ratio_bars(path, [speedups, eager, compiled], "MLP input Hessian")
