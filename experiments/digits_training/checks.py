"""The sanity check beside the timings: every peer, trained the same number of steps from
the same weights on the same minibatches, must end at jax.jit's loss."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from itertools import islice
from typing import Any

from experiments.digits_training.peers import REFERENCE, Trainer, loss_value
from experiments.harness.timing import Missing, attempt
from experiments.workloads.digits_mlp import Data, batches

TOLERANCE = 1e-3
"""Relative, on the loss: float32 Adam steps in four frameworks round differently."""


def _final_loss(make_trainer: Callable[[], Trainer], data: Data, batch: int, steps: int) -> float:
    trainer = make_trainer()
    losses = [
        trainer.step(trainer.batch(*minibatch)) for minibatch in islice(batches(data, batch), steps)
    ]
    return loss_value(losses[-1])


def loss_agreement(
    trainers: dict[str, Callable[[], Trainer]],
    data: Data,
    batch: int,
    steps: int,
    on_step: Callable[[], object],
) -> dict[str, Any]:
    """Each peer's final loss and its difference from jax.jit's, relative to jax.jit's.

    ``trainers`` give each peer's trainer, fresh from the initial weights.
    """
    losses = {}
    for peer, make_trainer in trainers.items():
        losses[peer] = attempt(partial(_final_loss, make_trainer, data, batch, steps))
        on_step()
    reference = losses[REFERENCE]
    compared = {peer: _compare(found, reference) for peer, found in losses.items()}
    differences = [
        verdict["relative_difference"] for verdict in compared.values() if "loss" in verdict
    ]
    return {
        "batch": batch,
        "steps": steps,
        "reference": REFERENCE,
        "tolerance": TOLERANCE,
        "peers": compared,
        "max_relative_difference": max(differences, default=None),
        "ok": all(
            verdict.get("ok", verdict.get("status") == "n/a") for verdict in compared.values()
        ),
    }


def _compare(found: float | Missing, reference: float | Missing) -> dict[str, Any]:
    if isinstance(found, Missing):
        return found.to_json()
    if isinstance(reference, Missing):
        return {"status": "n/a", "reason": f"no reference: {reference.reason}"}
    difference = abs(found - reference) / max(abs(reference), 1e-30)
    return {"loss": found, "relative_difference": difference, "ok": difference <= TOLERANCE}


def failures(check: dict[str, Any]) -> dict[str, str]:
    """A peer that raised, or whose loss strays from the reference's, is a failure."""
    case = f"loss agreement (batch {check['batch']})"
    found: dict[str, str] = {}
    for peer, verdict in check["peers"].items():
        if verdict.get("status") == "error":
            found[f"{case}: {peer}"] = verdict["reason"]
        elif not verdict.get("ok", True):
            found[f"{case}: {peer}"] = (
                f"loss {verdict['loss']:.6g} after {check['steps']} steps differs from "
                f"{REFERENCE}'s by {verdict['relative_difference']:.2e} (relative)"
            )
    return found
