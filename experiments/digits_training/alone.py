"""Each peer timed alone, in a process of its own, beside the round-robin timing.

In the round-robin timing every framework is loaded in one process, and the
thread pools of the peers not being timed (PyTorch's OpenMP threads, XLA's, a
BLAS pool) may spin on the cores of the peer that is. A fresh process per peer
loads only that peer's framework (all of them import NumPy), with the same
thread limits (the parent's environment), the same weights and the same
minibatch; it runs ``main`` with the request as its argument and prints its
samples as one JSON line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache, partial
from pathlib import Path
from typing import Any

from experiments.digits_training.peers import build, timed_step
from experiments.harness.timing import (
    Missing,
    Outcome,
    Timing,
    attempt,
    describe_error,
    time_interleaved,
)
from experiments.workloads.digits_mlp import batches, init_state, load

TIMEOUT_S = 600
_CHILD = f"import sys; from {__name__} import main; main(sys.argv[1])"
_ROOT = Path(__file__).resolve().parents[2]


def time_alone(peer: str, batch: int, warmup: int, repeat: int, device: str) -> Outcome:
    """``peer``'s step timed in a child process (``warmup`` then ``repeat`` samples)."""
    request = {"peer": peer, "batch": batch, "warmup": warmup, "repeat": repeat, "device": device}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, json.dumps(request)],
            cwd=_ROOT,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as error:
        return Missing(describe_error(error), failed=True)
    if done.returncode != 0:
        return Missing(f"the process timing {peer} alone failed: {done.stderr[-2000:]}", True)
    return _outcome(json.loads(done.stdout.strip().splitlines()[-1]))


def _outcome(record: dict[str, Any]) -> Outcome:
    if record["status"] == "ok":
        return Timing(tuple(record["samples_s"]), tuple(record["cpu_samples_s"]))
    return Missing(record["reason"], failed=record["status"] == "error")


def _time_here(request: dict[str, Any]) -> Outcome:
    """The child's side: build the peer, then time it (a round-robin of one)."""
    minibatch = next(batches(load(), request["batch"]))
    trainer = cache(partial(build, request["peer"], init_state(), request["device"]))
    ready = attempt(trainer)
    if isinstance(ready, Missing):
        return ready
    (outcome,) = time_interleaved(
        {request["peer"]: timed_step(trainer, minibatch)},
        warmup=request["warmup"],
        repeat=request["repeat"],
    ).values()
    return outcome


def main(request: str) -> None:
    """The child process: time the peer of ``request`` (JSON) and print the outcome."""
    print(json.dumps(_time_here(json.loads(request)).to_json()))
