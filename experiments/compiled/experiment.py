"""The compiled experiment's run: each workload's step timed for every peer, checks, notes."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from experiments.compiled import mlp
from experiments.harness import peer_table, verdicts
from experiments.harness.experiment import Experiment, RunOptions
from experiments.harness.hotspots import hotspots
from experiments.harness.intervals import SHOWN
from experiments.harness.peers import as_numpy, placement_note
from experiments.harness.results import Column, ExperimentResult
from experiments.harness.timing import STATISTICS_HEADER, Case, Prepare, attempt, time_cases
from experiments.harness.verdicts import Target
from experiments.hessian.peers import build_stepper, timed_step
from experiments.workloads.hessian_model import VARIANTS, init_inputs, init_parameters

TARGET = Target(1.5)
TARGETED = "compiled_over_jax-jit"
TOLERANCE = 1e-4
PROFILE_CALLS = 50
PROFILE_ROWS = 6
PEERS = {
    "jaxstream": "jaxstream eager (JAX)",
    "compiled": "js.compile",
    "jax-jit": "jax.jit",
}
RATIOS = (("compiled", "jax-jit"), ("jaxstream", "compiled"))
HESSIAN_PEERS = {"jaxstream": "jaxstream-jax/on", "compiled": "jaxstream-compile/on",
                 "jax-jit": "jax-jit"}
"""Our peers by the hessian experiment's names (trimming on, as by default)."""


@dataclass(frozen=True)
class Sizes:
    """A small MLP batch shows the fixed cost of a compiled call (Note [Reusing a walk]),
    which the larger one's program hides."""

    mlp_batches: tuple[int, ...]
    hessian_batches: tuple[int, ...]
    warmup: int
    repeat: int
    mlp_repeat: int
    """The MLP steps take a millisecond or so, and a sub-millisecond compiled call's ratio
    needs many samples before its interval can decide the target."""


SIZES = {
    "smoke": Sizes((32,), (32,), warmup=2, repeat=2, mlp_repeat=2),
    "quick": Sizes((16, 256), (2_000, 10_000), warmup=3, repeat=21, mlp_repeat=101),
    "full": Sizes((16, 256), (2_000, 10_000), warmup=3, repeat=41, mlp_repeat=201),
}


def _hessian_prepares(variant: str, batch: int, device: str) -> dict[str, Prepare]:
    x, params = init_inputs(batch), init_parameters()
    return {ours: timed_step(theirs, variant, x, params, device)
            for ours, theirs in HESSIAN_PEERS.items()}


def _cases(sizes: Sizes, device: str) -> list[tuple[str, str, int, Case]]:
    """(workload, label, batch, case) for every row."""
    cases = [("mlp", "MLP training step", batch,
              Case(f"mlp {batch}", mlp.prepares(mlp.init_parameters(), batch, device),
                   repeat=sizes.mlp_repeat))
             for batch in sizes.mlp_batches]
    for batch in sizes.hessian_batches:
        for variant, label in VARIANTS.items():
            name = f"hessian {variant} {batch}"
            cases.append((variant, f"hessian {label}", batch,
                          Case(name, _hessian_prepares(variant, batch, device),
                               repeat=sizes.repeat)))
    return cases


def run(options: RunOptions) -> ExperimentResult:
    sizes = SIZES[options.mode]
    cases = _cases(sizes, options.device)
    outcomes, failures = time_cases(
        [case for *_, case in cases],
        warmup=sizes.warmup,
        progress=partial(options.progress, desc="compiled"),
    )
    rows = [_row(workload, label, batch, found)
            for (workload, label, batch, _), found in zip(cases, outcomes, strict=True)]
    checks = {
        "mlp": _checked(mlp.agreement, options.device),
        "hessian": _checked(_hessian_agreement, options.device),
        "profile_of_the_compiled_mlp_step": _checked(
            _profile, max(sizes.mlp_batches), options.device
        ),
    }
    failures.update(_check_failures(checks))
    return ExperimentResult(
        columns=_columns(),
        rows=rows,
        parameters={
            "mlp_widths": list(mlp.WIDTHS),
            "mlp_batches": list(sizes.mlp_batches),
            "hessian_batches": list(sizes.hessian_batches),
            "dtype": "float32",
            "warmup": sizes.warmup,
            "repeat": sizes.repeat,
            "mlp_repeat": sizes.mlp_repeat,
            "peers": PEERS,
        },
        checks=checks,
        failures=failures,
        notes=[*_notes(rows, checks), *placement_note(options.device, ("jaxstream", "jax"))],
        plot=partial(
            peer_table.ratio_figure,
            rows=rows,
            ratios={f"{n}_over_{d}": f"{PEERS[n]} / {PEERS[d]}" for n, d in RATIOS},
            groups=[f"{row['workload'].split(':')[0]}, batch {row['batch']:,}" for row in rows],
            title="js.compile against jax.jit and the eager step: ratios of medians",
            ylabel=f"time ratio (median, {SHOWN})",
            targets=[TARGET.value] * len(rows),
            target_label="target of js.compile / jax.jit",
        ),
    )


def _row(workload: str, label: str, batch: int, outcomes: dict) -> dict[str, Any]:
    row: dict[str, Any] = {"workload": label, "key": workload, "batch": batch}
    row.update(peer_table.peer_times(outcomes, "ms", 1e3))
    for numerator, denominator in RATIOS:
        row.update(peer_table.ratio_of(f"{numerator}_over_{denominator}",
                                       outcomes[numerator], outcomes[denominator]))
    row.update(verdicts.judged(row, TARGETED, TARGET))
    row["timings"] = peer_table.timings(outcomes)
    return row


def _checked(compute: Any, *args: Any) -> Any:
    found = attempt(partial(compute, *args))
    return found if isinstance(found, dict | list) else found.to_json()


def _hessian_agreement(device: str, batch: int = 32) -> dict[str, Any]:
    """js.compile's outputs against jax.jit's, per variant (relative to jax.jit's largest)."""
    x, params = init_inputs(batch), init_parameters()
    found = {}
    for variant in VARIANTS:
        compiled, reference = (
            [None if v is None else as_numpy(v)
             for v in build_stepper(peer, variant, x, params, device).step()]
            for peer in (HESSIAN_PEERS["compiled"], HESSIAN_PEERS["jax-jit"])
        )
        found[variant] = max(
            float(np.max(np.abs((np.zeros_like(r) if c is None else c) - r)))
            / max(float(np.max(np.abs(r))), 1e-30)
            for c, r in zip(compiled, reference, strict=True)
        )
    return {"batch": batch, "relative_deviation_from_jax_jit": found}


def _profile(batch: int, device: str) -> list[str]:
    """Where compiled MLP steps spend their own time, as "share% function (file:line)"."""
    sample = mlp.prepares(mlp.init_parameters(), batch, device)["compiled"]()
    sample()
    sample()
    return hotspots(lambda: [sample() for _ in range(PROFILE_CALLS)], PROFILE_ROWS)


def _check_failures(checks: dict[str, Any]) -> dict[str, str]:
    found = {}
    for name, check in checks.items():
        if isinstance(check, dict) and check.get("status") == "error":
            found[f"{name} check"] = check["reason"]
    deviations = {
        "mlp": checks["mlp"].get("compiled_vs_eager"),
        **checks["hessian"].get("relative_deviation_from_jax_jit", {}),
    }
    for name, deviation in deviations.items():
        if deviation is not None and deviation > TOLERANCE:
            found[f"agreement check: {name}"] = f"deviates by {deviation:.2e} (relative)"
    return found


def _columns() -> list[Column]:
    return [
        Column("workload", ("workload",)),
        Column("batch", ("batch",), "{:,}"),
        *peer_table.peer_columns(PEERS, "ms", "{label}, ms", "{:.2f}"),
        *peer_table.pair_ratio_columns(PEERS, RATIOS),
        verdicts.verdict_column("js.compile / jax.jit", TARGETED),
    ]


def _notes(rows: list[dict[str, Any]], checks: dict[str, Any]) -> list[str]:
    measured = [
        f"{row['workload']} at {row['batch']:,}: {verdict}"
        for row in rows
        if (verdict := verdicts.described(row, TARGETED, TARGET))
    ]
    profile = checks["profile_of_the_compiled_mlp_step"]
    return [
        "Times are wall-time medians of one whole step, in ms; ratios are given three ways "
        f"({STATISTICS_HEADER}). Peers are sampled round-robin in one run; compare the ratios, "
        "not absolute times across runs. All samples are in the JSON record.",
        f"Target: js.compile within {TARGET.value:g}x of jax.jit of the same computation "
        f"({verdicts.RULE}). Measured: "
        + ("; ".join(measured) if measured else "not measured in this run")
        + ".",
        "The MLP step updates the parameters in place under no_grad and clears their .grad; "
        "js.compile applies those effects to the real tensors after each call. The hessian rows "
        "are the hessian experiment's workload with trimming on; its table has js.compile "
        "with trimming off and on.",
        "Where a compiled MLP step spends its own time (cProfile over "
        f"{PROFILE_CALLS} calls, share of the total): "
        + ("; ".join(profile) if isinstance(profile, list) else "not measured")
        + ". JAX runs the program asynchronously: block_until_ready is the wait for the XLA "
        "program, and the compiled call's own time (compiled.py) is mostly the jitted call's "
        "dispatch. What the step reaches (the model, its parameters, the list of weights) is "
        "walked once and then only checked on each call, by identity, against guards the walk "
        "recorded (guards.py); the arguments are walked on every call (discovery.py). The "
        "rest per call is building the input list and applying the effects (effects.py).",
        "A compiled call's Python around its program is a fixed cost, the same at every batch: "
        "a small step shows it, a large one hides it, hence the two MLP batches. The CPU ratios "
        "count every thread of the process: the compiled call's Python runs while threads that "
        "other samples set going (XLA's pool among them) may still run, and their time counts "
        "too, so at the small batch the CPU ratio reads higher than the wall one.",
        f"Checks: compiled against eager after {checks['mlp'].get('steps')} MLP steps and "
        "against jax.jit on the hessian workload; deviations are in the JSON record "
        f"(tolerance {TOLERANCE:g}, relative).",
    ]


EXPERIMENT = Experiment(
    name="compiled",
    description="js.compile of an MLP training step and of the hessian workload, against "
    "jax.jit of the same computation and the eager step.",
    run=run,
)
