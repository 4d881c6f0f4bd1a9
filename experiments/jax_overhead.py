"""The cost of running a JAX function as a jaxstream node, against one fused ``jax.jit``.

Workload: forward and backward of a 4-layer tanh MLP block (batch 256, width 512,
float32), reduced to a scalar. ``jax.jit(jax.value_and_grad(loss))`` does both
in one compiled call; ``jax_function(loss)`` runs the forward (``jax.vjp``
under ``jax.jit``) and the backward (the stored VJP, compiled) as two calls
with the engine in between, on JAX-backend tensors and on NumPy-backend ones
(which enter JAX through DLPack). Only the weights and biases need gradients.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from typing import Any

import numpy as np

from experiments.harness import peer_table, verdicts
from experiments.harness.experiment import Experiment, RunOptions
from experiments.harness.intervals import SHOWN
from experiments.harness.peers import (
    JAX_PRECISION,
    block_until_ready,
    jax_device,
    jaxstream_leaf,
    placement_note,
    require,
)
from experiments.harness.results import Column, ExperimentResult
from experiments.harness.timing import (
    STATISTICS_HEADER,
    Case,
    Missing,
    Outcome,
    Prepare,
    attempt,
    time_cases,
)
from experiments.harness.verdicts import Target

LAYERS = 4
SEED = 0
TARGET = Target(1.3)
TOLERANCE = 1e-4
PEERS = {
    "jax-jit": "jax.jit(value_and_grad)",
    "jaxstream-jax": "jax_function (JAX tensors)",
    "jaxstream-numpy": "jax_function (NumPy tensors)",
}
JAXSTREAM_PEERS = ("jaxstream-jax", "jaxstream-numpy")


@dataclass(frozen=True)
class Sizes:
    batch: int
    width: int
    warmup: int
    repeat: int


SIZES = {
    "smoke": Sizes(batch=16, width=32, warmup=1, repeat=2),
    "quick": Sizes(batch=256, width=512, warmup=3, repeat=30),
    "full": Sizes(batch=256, width=512, warmup=5, repeat=100),
}


def block_loss(params: list[dict[str, Any]], x: Any) -> Any:
    """Sum of squares of the block's output, written in jax.numpy, its products in float32
    (Note [Float32 products in every peer] in experiments/harness/peers.py)."""
    jnp = require("jax.numpy")
    for layer in params:
        x = jnp.tanh(jnp.matmul(x, layer["w"], precision=JAX_PRECISION) + layer["b"])
    return jnp.mean(x * x)


def init(sizes: Sizes) -> tuple[list[dict[str, np.ndarray]], np.ndarray]:
    rng = np.random.default_rng(SEED)
    scale = 1.0 / np.sqrt(sizes.width)
    params = [
        {
            "w": (rng.standard_normal((sizes.width, sizes.width)) * scale).astype(np.float32),
            "b": np.zeros(sizes.width, np.float32),
        }
        for _ in range(LAYERS)
    ]
    return params, rng.standard_normal((sizes.batch, sizes.width)).astype(np.float32)


def _jax_jit(params: list, x: np.ndarray, device: str) -> Prepare:
    """Set up in the first sample, where a peer that cannot run here reads n/a."""

    @cache
    def built() -> tuple[Callable[..., Any], Any, Any]:
        jax = require("jax")
        target = jax_device(device)
        step = jax.jit(jax.value_and_grad(block_loss))
        return step, jax.device_put(params, target), jax.device_put(x, target)

    def prepare() -> Callable[[], object]:
        jax = require("jax")
        step, on_device, inputs = built()
        return lambda: jax.block_until_ready(step(on_device, inputs))

    return prepare


def _backend(peer: str) -> str:
    """The array backend of a jaxstream peer: ``jaxstream-jax`` -> ``jax``."""
    return peer.split("-")[1]


def _leaves(params: list, backend: str, device: str) -> list[dict[str, Any]]:
    """Fresh jaxstream leaves (requiring grad) over private copies of ``params``."""
    return [
        {name: jaxstream_leaf(array, backend, device) for name, array in layer.items()}
        for layer in params
    ]


def _jaxstream(params: list, x: np.ndarray, backend: str, device: str) -> Prepare:
    """Fresh leaves every sample (their ``.grad`` starts empty), then forward and backward;
    the rest set up in the first sample, where a peer that cannot run here reads n/a."""

    @cache
    def built() -> tuple[Callable[..., Any], Any]:
        from jaxstream.jax_interop import jax_function

        return jax_function(block_loss), jaxstream_leaf(x, backend, device, requires_grad=False)

    def prepare() -> Callable[[], object]:
        loss_fn, inputs = built()
        leaves = _leaves(params, backend, device)

        def step() -> None:
            loss_fn(leaves, inputs).backward()
            block_until_ready(t.grad for layer in leaves for t in layer.values())

        return step

    return prepare


def _prepares(params: list, x: np.ndarray, device: str) -> dict[str, Prepare]:
    return {
        "jax-jit": _jax_jit(params, x, device),
        **{peer: _jaxstream(params, x, _backend(peer), device) for peer in JAXSTREAM_PEERS},
    }


def agreement(params: list, x: np.ndarray, device: str) -> dict[str, Any]:
    """The largest relative gradient difference of each jaxstream peer against jax.jit;
    n/a for every peer where jax.jit cannot run here."""
    reference = attempt(partial(_reference_grads, params, x, device))
    checks: dict[str, Any] = {"reference": "jax-jit", "tolerance": TOLERANCE}
    for peer in JAXSTREAM_PEERS:
        found = reference if isinstance(reference, Missing) else attempt(
            partial(_largest_difference, params, x, _backend(peer), device, reference))
        checks[peer] = (
            found.to_json()
            if isinstance(found, Missing)
            else {"max_relative_difference": found, "ok": found <= TOLERANCE}
        )
    return checks


def _reference_grads(params: list, x: np.ndarray, device: str) -> list:
    jax = require("jax")
    target = jax_device(device)
    return jax.grad(block_loss)(jax.device_put(params, target), jax.device_put(x, target))


def _largest_difference(
    params: list, x: np.ndarray, backend: str, device: str, reference: list
) -> float:
    """One jaxstream peer's gradients against ``reference``'s, relative to its largest."""
    from jaxstream.jax_interop import jax_function

    leaves = _leaves(params, backend, device)
    jax_function(block_loss)(leaves, jaxstream_leaf(x, backend, device, False)).backward()
    return max(
        float(np.max(np.abs(t.grad.numpy() - ref)) / (np.max(np.abs(ref)) + 1e-12))
        for layer, ref_layer in zip(leaves, reference, strict=True)
        for t, ref in ((layer[k], np.asarray(ref_layer[k])) for k in layer)
    )


def run(options: RunOptions) -> ExperimentResult:
    sizes = SIZES[options.mode]
    params, x = init(sizes)
    checks = agreement(params, x, options.device)
    (outcomes,), failures = time_cases(
        [Case("mlp block", _prepares(params, x, options.device), repeat=sizes.repeat)],
        warmup=sizes.warmup,
        progress=partial(options.progress, desc="jax_overhead"),
    )
    row = _row(sizes, outcomes)
    failures.update(_check_failures(checks))
    return ExperimentResult(
        columns=_columns(),
        rows=[row],
        parameters={
            "layers": LAYERS,
            "batch": sizes.batch,
            "width": sizes.width,
            "activation": "tanh",
            "dtype": "float32",
            "seed": SEED,
            "warmup": sizes.warmup,
            "repeat": sizes.repeat,
            "peers": PEERS,
        },
        checks=checks,
        failures=failures,
        notes=[*_notes(row, checks), *placement_note(options.device, ("jaxstream", "jax"))],
        plot=partial(
            peer_table.ratio_figure,
            rows=[row],
            ratios={f"{peer}_over_jit": f"{PEERS[peer]} / jax.jit" for peer in JAXSTREAM_PEERS},
            groups=[row["workload"]],
            title="A JAX function as a jaxstream node against one jax.jit",
            ylabel=f"time ratio (median, {SHOWN})",
            targets=[TARGET.value],
        ),
    )


def _check_failures(checks: dict[str, Any]) -> dict[str, str]:
    """A peer whose gradients stray from jax.jit's, or that raised, is a failure."""
    found = {}
    for peer in JAXSTREAM_PEERS:
        verdict = checks[peer]
        if verdict.get("status") == "error":
            found[f"agreement: {peer}"] = verdict["reason"]
        elif verdict.get("ok") is False:
            found[f"agreement: {peer}"] = (
                "gradients differ from jax.jit by "
                f"{verdict['max_relative_difference']:.2e} (relative)"
            )
    return found


def _row(sizes: Sizes, outcomes: dict[str, Outcome]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "workload": f"{LAYERS}-layer MLP, batch {sizes.batch}, width {sizes.width}",
    }
    row.update(peer_table.peer_times(outcomes, "ms", 1e3))
    for peer in JAXSTREAM_PEERS:
        row.update(peer_table.ratio_of(f"{peer}_over_jit", outcomes[peer], outcomes["jax-jit"]))
        row.update(verdicts.judged(row, f"{peer}_over_jit", TARGET))
    row["timings"] = peer_table.timings(outcomes)
    return row


def _columns() -> list[Column]:
    return [
        Column("workload", ("workload",)),
        *peer_table.peer_columns(PEERS, "ms", "{label}, ms", "{:.2f}"),
        *(
            column
            for peer in JAXSTREAM_PEERS
            for column in (
                peer_table.ratio_column(f"{PEERS[peer]} / jax.jit", f"{peer}_over_jit"),
                verdicts.verdict_column(f"{PEERS[peer]} / jax.jit", f"{peer}_over_jit"),
            )
        ),
    ]


def _verdict(row: dict[str, Any], peer: str) -> str:
    verdict = verdicts.described(row, f"{peer}_over_jit", TARGET)
    if verdict is None:
        return f"{PEERS[peer]}: not measured in this run"
    return f"{PEERS[peer]} {verdict}"


def _notes(row: dict[str, Any], checks: dict[str, Any]) -> list[str]:
    compared = [checks[peer] for peer in JAXSTREAM_PEERS if "ok" in checks[peer]]
    agreeing = all(verdict["ok"] for verdict in compared)
    return [
        "Times are per training step (forward and backward, gradients ready), in ms; ratios "
        f"are jaxstream / jax.jit, given three ways ({STATISTICS_HEADER}: wall-time median, "
        "wall-time minimum, process CPU-time median). Peers are sampled round-robin in one "
        "run; compare the ratios, not absolute times across runs. All samples are in the "
        "JSON record.",
        f"Target: within {TARGET.value:g}x of jax.jit ({verdicts.RULE}). Measured: "
        + "; ".join(_verdict(row, peer) for peer in JAXSTREAM_PEERS)
        + ".",
        "jax_function pays two compiled calls instead of one (the VJP's residuals go out to "
        "the node and back in), the engine's bookkeeping, and fresh leaves each step. NumPy "
        "tensors enter JAX by DLPack, without a copy only when their buffer is 64-byte "
        "aligned (the ones here are plain NumPy allocations); gradients come back as "
        "read-only NumPy views of JAX's buffers.",
        f"Checks: gradients of every jaxstream peer that ran "
        f"{'agree' if agreeing else 'do NOT agree'} with jax.jit within a relative "
        f"{TOLERANCE:g} (details in the JSON record).",
    ]


EXPERIMENT = Experiment(
    name="jax_overhead",
    description="Forward+backward of a 4-layer MLP block through jax_function, "
    "against jax.jit(jax.value_and_grad) of the same function.",
    run=run,
)
