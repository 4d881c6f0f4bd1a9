"""The hessian experiment's correctness checks, recorded beside its timings.

Every peer's outputs are compared with ``jax.jit``'s, in every workload; the bias
gradients that no path needs must come back None under ``allow_unused=True``; and each
tape's second grad must find x again through each activation, as PyTorch's does.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from experiments.harness.peers import as_numpy
from experiments.harness.timing import Missing, attempt
from experiments.hessian.peers import (
    JAXSTREAM_PEERS,
    PEERS,
    TAPE_PEERS,
    Steppers,
    second_order_reaches_input,
    tape_peer,
)
from experiments.workloads.hessian_model import (
    ACTIVATIONS,
    HIDDEN_LAYERS,
    WORKLOADS,
    init_inputs,
    init_parameters,
    unused_bias_layers,
)

CHECK_BATCH = 32
TOLERANCE = 1e-3
STEPS = len(WORKLOADS) * len(PEERS) + len(TAPE_PEERS) * (1 + len(ACTIVATIONS))
"""How many times the checks call ``on_step`` (for a progress bar)."""


def _host_outputs(steppers: Steppers, peer: str, key: str) -> list[np.ndarray | None]:
    stepper = steppers.get(peer, key, CHECK_BATCH)
    stepper.reset()
    return [None if value is None else as_numpy(value) for value in stepper.step()]


def agreement(steppers: Steppers, on_step: Callable[[], object]) -> dict[str, Any]:
    """Each peer's largest deviation from jax.jit, relative to jax.jit's largest entry, by
    workload."""
    checks: dict[str, Any] = {"reference": "jax-jit", "batch": CHECK_BATCH, "tolerance": TOLERANCE}
    for key in WORKLOADS:
        outputs = {}
        for peer in PEERS:
            outputs[peer] = attempt(partial(_host_outputs, steppers, peer, key))
            on_step()
        checks[key] = {
            peer: _compare(found, outputs["jax-jit"]) for peer, found in outputs.items()
        }
    return checks


def second_order(device: str, on_step: Callable[[], object]) -> dict[str, Any]:
    """Per activation, whether each tape's grad(sum(dy/dx), x) finds x again (PyTorch's does
    through both); where it does not, that peer's cells of the activation's rows read n/a."""
    found: dict[str, Any] = {}
    for activation in ACTIVATIONS:
        found[activation] = {}
        for peer in TAPE_PEERS:
            result = attempt(partial(second_order_reaches_input, peer, device, activation))
            found[activation][peer] = result.to_json() if isinstance(result, Missing) else result
            on_step()
    return {"question": "grad(sum(dy/dx), x, allow_unused=True) is not None", **found}


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
    return {**_agreement_failures(checks["agreement"]),
            **_second_order_failures(checks["second_order"]),
            **_unused_bias_failures(checks["unused_bias_grads"])}


def _agreement_failures(agreement: dict[str, Any]) -> dict[str, str]:
    found = {}
    for key in WORKLOADS:
        for peer, verdict in agreement[key].items():
            if verdict.get("status") == "error":
                found[f"agreement check ({key}): {peer}"] = verdict["reason"]
            elif verdict.get("ok") is False:
                found[f"agreement check ({key}): {peer}"] = (
                    f"deviates from jax.jit by {verdict['relative_deviation']:.2e} (relative)"
                )
    return found


def _second_order_failures(second_order: dict[str, Any]) -> dict[str, str]:
    """A probe that raised (a bug); one that found no path back to x is not one here: its
    peer's cells read n/a, and the notes say why."""
    return {
        f"second-order check ({activation}): {peer}": reached["reason"]
        for activation in ACTIVATIONS
        for peer, reached in second_order[activation].items()
        if isinstance(reached, dict) and reached["status"] == "error"
    }


def _unused_bias_failures(unused: dict[str, Any]) -> dict[str, str]:
    found = {}
    for peer, layers in unused["none_layers"].items():
        if isinstance(layers, dict):
            if layers["status"] == "error":
                found[f"unused bias check: {peer}"] = layers["reason"]
        elif peer in JAXSTREAM_PEERS and layers != unused["expected_none_layers"]:
            found[f"unused bias check: {peer}"] = f"None bias gradients in layers {layers}"
    return found
