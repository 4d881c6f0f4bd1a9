"""The hessian record's notes: how to read the table, the verdicts, js.compile's trimming,
the forms beside the PR's, ReLU, the page faults, and the checks."""

from __future__ import annotations

from typing import Any

from experiments.harness import verdicts
from experiments.harness.intervals import SHOWN, interval_text
from experiments.harness.verdicts import Target
from experiments.hessian.peers import EAGER, FUNCTIONAL_PEERS, PEERS
from experiments.hessian.pr82544 import PARAMETERS, PR_SPEEDUPS
from experiments.hessian.table import (
    BEST,
    BEST_EAGER_TARGET,
    COMPILE_READING,
    COMPILE_TARGET,
    COMPILED,
    TRIMMING_TARGET,
    speedup,
)
from experiments.workloads.hessian_model import ACTIVATIONS, ALL_VARIANTS, PR_FORM, WORKLOADS

UNUSED_BIAS_VERDICTS = {
    True: "so they are in every jaxstream column",
    False: "NOT so in every jaxstream column",
    None: "not measured in this run",
}


def where(row: dict[str, Any]) -> str:
    """"A (tanh) at batch 2,000": the row's variant, activation and batch."""
    return f"{row['variant'].split(':')[0]} at batch {row['batch']:,}"


def _verdicts(rows: list[dict[str, Any]], ratio: str, target: Target) -> str:
    """``ratio``'s verdict in each of ``rows``, named by variant and batch."""
    found = [
        f"{where(row)} {verdict}"
        for row in rows
        if (verdict := verdicts.described(row, ratio, target))
    ]
    return "; ".join(found) or "not measured in this run"


def _best_eager(rows: list[dict[str, Any]]) -> str:
    """The best-eager verdicts, each naming the configuration it judges and the cores it and
    PyTorch used."""
    found = [
        f"{where(row)}, {row['jaxstream_best']} ({row['jaxstream_best_cores']:.2f} cores, "
        f"PyTorch {row['torch_ms_cores']:.2f}): {verdict}"
        for row in rows
        if (verdict := verdicts.described(row, BEST, BEST_EAGER_TARGET))
    ]
    return "; ".join(found) or "not measured in this run"


def notes(rows: list[dict[str, Any]], checks: dict[str, Any]) -> list[str]:
    targeted = [row for row in rows if row["variant_key"] == "hessian"]
    speedups = "; ".join(
        f"{backend}: {_verdicts(targeted, speedup(backend), TRIMMING_TARGET)}"
        for backend in EAGER
    )
    return [
        "Times are medians of one whole step (forward, both grads and, in B, the backward "
        "into the weights), in ms: wall time, CPU time, and the cores the peer used (CPU time "
        "/ wall time; XLA runs threads of its own, so a JAX peer may use more than one core "
        "however its intra-op threads are capped). Speed-up = trimming off / trimming on; "
        '"fastest eager jaxstream / PyTorch" takes the one eager jaxstream configuration '
        "(NumPy or JAX, trimming off or on) with the lowest median wall time in its row, "
        "named with its cores in its own column, and divides each of its statistics by "
        "PyTorch's (below 1 is faster); chosen from the same samples, it is the best of four "
        "and so leans to jaxstream's side. Ratios are given three ways: wall-time median, "
        "wall-time minimum and CPU-time median (the process's CPU time leaves out the time "
        f"it was descheduled), the medians with their {SHOWN}s. The machine may be shared "
        "and noisy, so compare ratios within this run. All samples are in the JSON record.",
        f"Target: trimming on at least {TRIMMING_TARGET.value:g}x faster than off in variant A "
        f"(the PR measured {PR_SPEEDUPS['hessian']:.2f}x at batch {PARAMETERS['batch']:,}, in "
        "the form of A'). "
        f"Measured ({verdicts.RULE}): {speedups}.",
        f"Target: the fastest eager jaxstream configuration within "
        f"{BEST_EAGER_TARGET.value:g}x of PyTorch eager, by its wall and its CPU time: one core "
        f"against one only where both used one ({verdicts.RULE}). Measured: "
        + _best_eager(rows) + ".",
        _compiled_note(rows),
        _forms_note(),
        relu_note(checks["second_order"]),
        faults_note(rows),
        "In B the plain `backward` also accumulates into `x.grad`, as a training step "
        "would for an input that requires grad; the jax.jit and torch.func peers "
        "differentiate only the weights.",
        _checks_note(checks),
    ]


def _compiled_note(rows: list[dict[str, Any]]) -> str:
    """js.compile beside jax.jit, and what its trimming speed-up's interval allows."""
    against = [
        f"{where(row)} {verdict}"
        for row in rows
        if (verdict := verdicts.described(row, COMPILED, COMPILE_TARGET))
    ]
    trimming = [
        f"{where(row)} {row[speedup('compile')]:.2f}x"
        f"{interval_text(row[speedup('compile') + '_interval'])}, {row[COMPILE_READING]}"
        for row in rows
        if row[speedup("compile")] is not None
    ]
    return (
        "js.compile runs the JAX backend's whole step (forward, engine, both grads) as one XLA "
        f"program, traced once; target: within {COMPILE_TARGET.value:g}x of jax.jit "
        f"({verdicts.RULE}). Measured: " + ("; ".join(against) or "not measured in this run")
        + ". Under js.compile, trimming only decides what the trace records, and XLA's "
        "dead-code elimination may drop the weight-gradient matmuls that no output needs even "
        "with trimming off; if it made the two programs the same, the speed-up from trimming "
        "would be 1x. What the intervals of this run allow (trimming off / on, wall-time "
        "median): " + ("; ".join(trimming) or "not measured in this run") + "."
    )


def _forms_note() -> str:
    return (
        f"Forms: A ({ALL_VARIANTS['hessian'].partition(': ')[2]}) is ours, its second grad "
        "without create_graph, as nothing differentiates h; A' "
        f"({ALL_VARIANTS[PR_FORM].partition(': ')[2]}) records that grad's graph as well; B "
        "needs create_graph on both. "
        f"{' and '.join(PEERS[peer] for peer in FUNCTIONAL_PEERS)} transform functions and "
        "record no graph, so their A' cells run A's program. torch.func takes the "
        "forward-over-reverse product that torch.func.hessian (jacfwd of jacrev) takes with "
        "every basis tangent, with the one tangent, all ones, whose product is h, as the PR's "
        "functorch column computed the Hessian with functorch; jax.jit composes reverse over "
        "reverse."
    )


def relu_note(second_order: dict[str, Any]) -> str:
    """Which tapes' second grad finds x through ReLU, and so which ReLU cells are measured."""
    unreached = {
        activation: [PEERS[peer] for peer, reached in second_order[activation].items()
                     if reached is False]
        for activation in ACTIVATIONS
    }
    gaps = "; ".join(f"through {activation}: {', '.join(peers)}"
                     for activation, peers in unreached.items() if peers)
    return (
        "ReLU: the PR's layers were Linear + ReLU, whose input Hessian is zero almost "
        "everywhere; its products run all the same, so ReLU's rows are timed beside tanh's. "
        "A tape whose second grad, grad(sum(dy/dx), x), finds no path back to x raises there "
        "(PyTorch's relu backward, recorded under create_graph, keeps an edge to relu's input "
        "with a zero gradient); such a peer's cells read n/a, with the reason in the JSON "
        "record. No path back to x " + (gaps or "for no peer") + "."
    )


def _checks_note(checks: dict[str, Any]) -> str:
    unused, agreement = checks["unused_bias_grads"], checks["agreement"]
    agreeing = all(
        verdict.get("ok", True) for key in WORKLOADS for verdict in agreement[key].values()
    )
    return (
        f"Checks (batch {agreement['batch']}): every measured peer "
        f"{'agrees' if agreeing else 'does NOT agree'} with jax.jit within a relative "
        f"{agreement['tolerance']:g}, in every workload; unused bias gradients "
        "(allow_unused=True, variant A, tanh) should be None exactly for layer(s) "
        f"{unused['expected_none_layers']}: {UNUSED_BIAS_VERDICTS[unused['ok']]}. Details are "
        "in the JSON record."
    )


# Note [Page faults in a step]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A step of variant B holds tens of megabytes at its peak (the activations, two graphs
# recorded with create_graph, their gradients) and frees them all at its end. glibc's
# malloc gives the freed top of its heap back to the kernel once more than its trim
# threshold lies free there, and the next step's peak takes the pages back one by one, each
# zero-filled by the kernel on first touch: a minor page fault. The threshold moves with the
# largest block the process has freed from its own mapping, so a step's faults depend on
# what ran before in the process as much as on the step: PyTorch's allocations raise it, and
# a jaxstream step run after PyTorch's in one process faults hardly at all. jaxstream leaves
# malloc's settings alone, as they are the whole process's; the harness counts the faults of
# every sample so that the tables show where that time goes.
def faults_note(rows: list[dict[str, Any]]) -> str:
    """The median page faults per step of the eager peers, row by row."""
    peers = ("torch", *(f"jaxstream-{backend}/on" for backend in EAGER))
    found = [
        f"{where(row)}: " + ", ".join(counted)
        for row in rows
        if (counted := [f"{PEERS[peer]} {row[f'{peer}_faults']:,.0f}" for peer in peers
                        if row[f"{peer}_faults"] is not None])
    ]
    return (
        "Page faults: minor page faults per step (median), the pages the kernel zero-filled "
        "on first touch after the allocator gave memory back between steps (Note [Page faults "
        "in a step] in hessian/notes.py): "
        + ("; ".join(found) or "not counted on this platform")
        + ". All peers run in one process here, so they share one heap and its thresholds."
    )
