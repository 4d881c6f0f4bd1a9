"""The hessian experiment's correctness checks, recorded beside its timings.

Every peer's outputs are compared with ``jax.jit``'s, and the bias gradients
that no path needs must come back None under ``allow_unused=True``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from experiments.harness.peers import as_numpy
from experiments.harness.timing import Missing, attempt
from experiments.hessian.peers import JAXSTREAM_PEERS, PEERS, TAPE_PEERS, build_stepper, tape_peer
from experiments.workloads.hessian_model import (
    HIDDEN_LAYERS,
    VARIANTS,
    init_inputs,
    init_parameters,
    unused_bias_layers,
)

CHECK_BATCH = 32
TOLERANCE = 1e-3
STEPS = len(VARIANTS) * len(PEERS) + len(TAPE_PEERS)
"""How many times the checks call ``on_step`` (for a progress bar)."""


def _host_outputs(peer: str, variant: str, device: str) -> list[np.ndarray | None]:
    stepper = build_stepper(peer, variant, init_inputs(CHECK_BATCH), init_parameters(), device)
    return [None if value is None else as_numpy(value) for value in stepper.step()]


def agreement(device: str, on_step: Callable[[], object]) -> dict[str, Any]:
    """Each peer's largest deviation from jax.jit, relative to jax.jit's largest entry."""
    checks: dict[str, Any] = {"reference": "jax-jit", "batch": CHECK_BATCH, "tolerance": TOLERANCE}
    for variant in VARIANTS:
        outputs = {}
        for peer in PEERS:
            outputs[peer] = attempt(partial(_host_outputs, peer, variant, device))
            on_step()
        checks[variant] = {
            peer: _compare(found, outputs["jax-jit"]) for peer, found in outputs.items()
        }
    return checks


def _compare(found: Any, reference: Any) -> dict[str, Any]:
    if isinstance(found, Missing):
        return found.to_json()
    if isinstance(reference, Missing):
        return {"status": "n/a", "reason": f"no reference: {reference.reason}"}
    deviation = max(
        float(np.max(np.abs(_zero_if_none(a, r) - r))) / max(float(np.max(np.abs(r))), 1e-30)
        for a, r in zip(found, reference, strict=True)
    )
    return {"relative_deviation": deviation, "ok": deviation <= TOLERANCE}


def _zero_if_none(array: np.ndarray | None, like: np.ndarray) -> np.ndarray:
    """A None gradient (no path from the loss) means zeros, which is what jax.grad returns."""
    return np.zeros_like(like) if array is None else array


def _none_bias_layers(peer_name: str, device: str) -> list[int]:
    peer = tape_peer(peer_name, device)
    x, params = init_inputs(CHECK_BATCH), init_parameters()
    layers = peer.compile(
        partial(unused_bias_layers, peer.autograd, peer.leaf(x),
                [(peer.leaf(w), peer.leaf(b)) for w, b in params])
    )
    with peer.mode():
        return layers()


def unused_bias_grads(device: str, on_step: Callable[[], object]) -> dict[str, Any]:
    expected = [HIDDEN_LAYERS]
    found: dict[str, Any] = {}
    for peer in TAPE_PEERS:
        result = attempt(partial(_none_bias_layers, peer, device))
        found[peer] = result.to_json() if isinstance(result, Missing) else result
        on_step()
    measured = [found[peer] for peer in JAXSTREAM_PEERS if isinstance(found[peer], list)]
    return {
        "question": "grad(sum(dy/dx), [x, *biases], allow_unused=True) in variant A: "
        "which layers' bias gradients are None",
        "expected_none_layers": expected,
        "none_layers": found,
        "ok": all(layers == expected for layers in measured) if measured else None,
    }


def failures(checks: dict[str, Any]) -> dict[str, str]:
    """Check results that are errors or wrong answers, keyed like the timing failures."""
    found = {}
    for variant in VARIANTS:
        for peer, verdict in checks["agreement"][variant].items():
            if verdict.get("status") == "error":
                found[f"agreement check ({variant}): {peer}"] = verdict["reason"]
            elif verdict.get("ok") is False:
                found[f"agreement check ({variant}): {peer}"] = (
                    f"deviates from jax.jit by {verdict['relative_deviation']:.2e} (relative)"
                )
    unused = checks["unused_bias_grads"]
    for peer, layers in unused["none_layers"].items():
        if isinstance(layers, dict):
            if layers["status"] == "error":
                found[f"unused bias check: {peer}"] = layers["reason"]
        elif peer in JAXSTREAM_PEERS and layers != unused["expected_none_layers"]:
            found[f"unused bias check: {peer}"] = f"None bias gradients in layers {layers}"
    return found
