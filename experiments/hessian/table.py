"""The hessian table: a row per workload and batch, its columns, its targets and its figure."""

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
from experiments.workloads.hessian_model import ALL_VARIANTS

TRIMMING_TARGET = Target(1.5, at_least=True)
"""Trimming on at least this much faster than off, in variant A."""
COMPILE_TARGET = Target(1.5)
"""js.compile within this of jax.jit."""
BEST_EAGER_TARGET = Target(1.2)
"""The fastest eager jaxstream configuration within this of PyTorch eager."""
BEST = "jaxstream_best_over_torch"
COMPILED = "compile_over_jit"
FUNC = "torch-func_over_torch"
"""torch.func against PyTorch eager, as the PR's functorch column against its trimmed eager."""
COMPILE_READING = "compile_trimming_against_one"
"""What the interval of js.compile's trimming speed-up says against 1 (equal programs)."""


def speedup(flavour: str) -> str:
    return f"jaxstream-{flavour}_speedup"


def label(activation: str, variant: str) -> str:
    """"A (tanh): h = d/dx sum(dy/dx)": the variant's label with its activation."""
    head, _, tail = ALL_VARIANTS[variant].partition(":")
    return f"{head} ({activation}):{tail}"


def row(
    key: str, activation: str, variant: str, batch: int, outcomes: dict[str, Outcome]
) -> dict[str, Any]:
    """Per-peer times (ms) and cores, trimming speed-ups, js.compile against jax.jit,
    torch.func against PyTorch eager, and the fastest eager jaxstream configuration against
    PyTorch eager, with their verdicts."""
    found: dict[str, Any] = {"key": key, "variant_key": variant, "activation": activation,
                             "variant": label(activation, variant), "batch": batch}
    found.update(peer_table.peer_times(outcomes, "ms", 1e3))
    for flavour in FLAVOURS:
        found.update(peer_table.ratio_of(
            speedup(flavour), outcomes[f"jaxstream-{flavour}/off"],
            outcomes[f"jaxstream-{flavour}/on"],
        ))
    found[COMPILE_READING] = against_one(found[f"{speedup('compile')}_interval"])
    found.update(peer_table.ratio_of(COMPILED, outcomes["jaxstream-compile/on"],
                                     outcomes["jax-jit"]))
    found.update(peer_table.ratio_of(FUNC, outcomes["torch-func"], outcomes["torch"]))
    best = fastest_eager(outcomes)
    found["jaxstream_best"] = None if best is None else PEERS[best]
    found["jaxstream_best_cores"] = None if best is None else found[f"{best}_ms_cores"]
    found.update(peer_table.ratio_of(BEST, outcomes.get(best), outcomes["torch"]))
    for name, target in targets(variant).items():
        found.update(verdicts.judged(found, name, target))
    for peer, outcome in outcomes.items():
        found[f"{peer}_faults"] = outcome.faults_median if isinstance(outcome, Timing) else None
    found["timings"] = peer_table.timings(outcomes)
    return found


def against_one(interval: list[float] | None) -> str:
    """What js.compile's trimming speed-up's interval says about programs of equal cost."""
    if interval is None:
        return "not measured in this run"
    low, high = interval
    if low > 1:
        return "it lies above 1, so trimming made the compiled step faster: the programs differ"
    if high < 1:
        return "it lies below 1, so the trimmed program was slower"
    return "it includes 1, so this run cannot tell the two programs' times apart"


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
        *peer_table.peer_columns(PEERS, "ms", "{label}, ms", "{:.1f}"),
        peer_table.ratio_column("NumPy speed-up", speedup("numpy")),
        verdicts.verdict_column("NumPy speed-up", speedup("numpy")),
        peer_table.ratio_column("JAX speed-up", speedup("jax")),
        verdicts.verdict_column("JAX speed-up", speedup("jax")),
        peer_table.ratio_column("js.compile speed-up", speedup("compile")),
        Column("js.compile speed-up against 1", (COMPILE_READING,)),
        Column("fastest eager jaxstream (by median) / its cores", ("jaxstream_best",
                                                                   "jaxstream_best_cores"),
               ("{}", "{:.2f}")),
        peer_table.ratio_column("fastest eager jaxstream / PyTorch", BEST),
        verdicts.verdict_column("fastest eager / PyTorch", BEST),
        peer_table.ratio_column("js.compile on / jax.jit", COMPILED),
        verdicts.verdict_column("js.compile on / jax.jit", COMPILED),
        peer_table.ratio_column("torch.func / PyTorch eager", FUNC),
    ]


def plot(path: Path, rows: list[dict[str, Any]]) -> bool:
    """At the headline batch (the last row's): trimming's speed-ups, and the fastest eager
    run and js.compile against their references, each with its interval and target."""
    headline = [r for r in rows if r["batch"] == rows[-1]["batch"]] if rows else []
    groups = [r["variant"].split(":")[0] for r in headline]
    ylabel = f"ratio (median, {SHOWN})"

    def target_of(name: str) -> list[float | None]:
        return [None if (t := targets(r["variant_key"])[name]) is None else t.value
                for r in headline]

    speedups = peer_table.ratio_panel(
        headline,
        {speedup(flavour): f"jaxstream ({name})" for flavour, name
         in zip(FLAVOURS, ("NumPy", "JAX", "js.compile"), strict=True)},
        groups=groups, ylabel=ylabel, targets=target_of(speedup("numpy")),
        title="Speed-up from trimming (off / on); target for the eager backends, variant A",
    )
    eager = peer_table.ratio_panel(
        headline, {BEST: "fastest eager jaxstream / PyTorch eager",
                   FUNC: "torch.func / PyTorch eager"},
        groups=groups, ylabel=ylabel, targets=target_of(BEST),
        target_label="target of the fastest eager jaxstream",
        title="Against PyTorch eager: the fastest eager jaxstream configuration (by median) "
              "and torch.func",
    )
    compiled = peer_table.ratio_panel(
        headline, {COMPILED: "js.compile (trimming on) / jax.jit"},
        groups=groups, ylabel=ylabel, targets=target_of(COMPILED),
        title="js.compile against jax.jit of the same computation",
    )
    batch = f", batch {rows[-1]['batch']:,}" if rows else ""
    return ratio_bars(path, [speedups, eager, compiled], f"MLP input Hessian{batch}")
