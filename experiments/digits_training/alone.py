"""Each peer timed alone, in a process of its own, beside the timing in one process.

In one process every framework is loaded at once, and the thread pools of the
peers not being timed (PyTorch's OpenMP threads, XLA's, a BLAS pool) may spin on
the cores of the peer that is. Here each peer runs in a worker process that
loads only its own framework (all of them import NumPy), with the parent's
environment (so the same thread limits), the same weights and the same
minibatch. The parent asks the workers for one sample at a time, round-robin
with the order rotating each round as ``harness.timing`` does in one process,
so that a burst of load from elsewhere hits every peer alike. A worker runs
``main`` with its request as argument: it answers one JSON line when it is
ready (or why it cannot run), then one line per sample it is asked for.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from functools import cache, partial
from pathlib import Path
from typing import Any

from experiments.digits_training.peers import build, timed_step
from experiments.harness.timing import Missing, Outcome, Sample, attempt, sample_once, timing_of
from experiments.workloads.digits_mlp import batches, init_state, load

TIMEOUT_S = 600
"""The longest the parent waits for a worker's answer (its start, or one sample)."""
_WORKER = f"import sys; from {__name__} import main; main(sys.argv[1])"
_ROOT = Path(__file__).resolve().parents[2]
_SAMPLE = "sample\n"


class _Worker:
    """One peer's worker process: its pipe, and its samples or why it has none."""

    def __init__(self, stack: ExitStack, request: dict[str, Any]) -> None:
        self.peer = request["peer"]
        self.errors = stack.enter_context(tempfile.TemporaryFile("w+"))
        self.process = stack.enter_context(
            subprocess.Popen(
                [sys.executable, "-c", _WORKER, json.dumps(request)],
                cwd=_ROOT,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.errors,
                text=True,
            )
        )
        stack.callback(self.process.kill)
        self.samples: list[Sample] = []
        self.missing: Missing | None = None

    def answer(self) -> Any:
        """The worker's next JSON line; a failure becomes ``missing``."""
        ready, _, _ = select.select([self.process.stdout], [], [], TIMEOUT_S)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            self.process.kill()
            self.errors.seek(0)
            why = "no answer in time" if not ready else self.errors.read()[-2000:]
            self.missing = Missing(f"the worker timing {self.peer} alone failed: {why}", True)
            return None
        return json.loads(line)

    def start(self) -> None:
        record = self.answer()
        if record is not None and record["status"] != "ready":
            self.missing = Missing(record["reason"], failed=record["status"] == "error")

    def sample(self, keep: bool) -> None:
        self.process.stdin.write(_SAMPLE)
        self.process.stdin.flush()
        record = self.answer()
        if record is not None and keep:
            self.samples.append(tuple(record))

    def outcome(self) -> Outcome:
        if self.missing is not None:
            return self.missing
        return timing_of(self.samples)


def time_each_alone(
    peers: Mapping[str, str],
    batch: int,
    *,
    warmup: int,
    repeat: int,
    device: str,
    on_sample: Callable[[], object] = lambda: None,
) -> dict[str, Outcome]:
    """Every peer's step timed in its own worker process, sampled round-robin."""
    with ExitStack() as stack:
        workers = [
            _Worker(stack, {"peer": peer, "batch": batch, "device": device}) for peer in peers
        ]
        for worker in workers:
            worker.start()
        for round_index in range(warmup + repeat):
            shift = round_index % len(workers)
            for worker in workers[shift:] + workers[:shift]:
                if worker.missing is None:
                    worker.sample(keep=round_index >= warmup)
                on_sample()
        return {worker.peer: worker.outcome() for worker in workers}


FIRST_STEPS = 3
"""Untimed steps before a worker is ready: the compilations (jax.jit compiles the step
again once its state is its own output) are behind it, as the loss check leaves them
behind the peers timed in one process."""


def _first_steps(step: Callable[[], Callable[[], object]]) -> None:
    for _ in range(FIRST_STEPS):
        step()()


def _serve(request: dict[str, Any]) -> None:
    """The worker's side: build the peer, say whether it is ready, then time on demand."""
    minibatch = next(batches(load(), request["batch"]))
    trainer = cache(partial(build, request["peer"], init_state(), request["device"]))
    step = timed_step(trainer, minibatch)
    ready = attempt(partial(_first_steps, step))
    print(json.dumps(ready.to_json() if isinstance(ready, Missing) else {"status": "ready"}))
    sys.stdout.flush()
    if isinstance(ready, Missing):
        return
    for line in sys.stdin:
        if line != _SAMPLE:
            return
        print(json.dumps(sample_once(step)))
        sys.stdout.flush()


def main(request: str) -> None:
    """A worker process: serve the peer of ``request`` (JSON) until its input closes."""
    _serve(json.loads(request))
