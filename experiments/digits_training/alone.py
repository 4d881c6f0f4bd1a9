"""Each digits_training peer timed alone, in a worker process of its own
(``harness/alone.py``), on the same weights and the same minibatch as in one process."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache, partial
from typing import Any

from experiments.digits_training.peers import build, timed_step
from experiments.harness import alone
from experiments.harness.timing import Outcome, Prepare
from experiments.workloads.digits_mlp import batches, init_state, load


def prepare(request: Mapping[str, Any]) -> Prepare:
    """A worker's step: one training step of its peer on the first minibatch."""
    minibatch = next(batches(load(), request["batch"]))
    trainer = cache(partial(build, request["peer"], init_state(), request["device"]))
    return timed_step(trainer, minibatch)


def time_each_alone(
    peers: Mapping[str, str],
    batch: int,
    *,
    warmup: int,
    repeat: int,
    device: str,
    on_sample: Callable[[], object] = lambda: None,
) -> dict[str, Outcome]:
    """Every peer's step at ``batch`` timed in its own worker process, round-robin."""
    requests = {peer: {"peer": peer, "batch": batch, "device": device} for peer in peers}
    return alone.time_each_alone(
        requests, f"{__name__}:prepare", warmup=warmup, repeat=repeat, on_sample=on_sample
    )
