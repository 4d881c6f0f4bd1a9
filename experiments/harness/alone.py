"""Each peer timed alone, in a process of its own, beside the timing in one process.

In one process every framework is loaded at once, and the thread pools of the
peers not being timed (PyTorch's OpenMP threads, XLA's, a BLAS pool) may spin on
the cores of the peer that is. Here each peer runs in a worker process that
loads only its own framework (all of them import NumPy), with the parent's
environment (so the same thread limits) and the same inputs. The parent asks
the workers for one sample at a time, round-robin with the order rotating each
round as ``harness.timing`` does in one process, so that a burst of load from
elsewhere hits every peer alike. A worker turns its request into the ``Prepare``
of its step with the function the parent names (``"module:function"``), runs
``FIRST_STEPS`` untimed, answers one JSON line when it is ready (or why it
cannot run), then one line per sample it is asked for.
"""

from __future__ import annotations

import importlib
import json
import select
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

from experiments.harness.timing import (
    Missing,
    Outcome,
    Prepare,
    Sample,
    attempt,
    sample_once,
    timing_of,
)

TIMEOUT_S = 600
"""The longest the parent waits for a worker's answer (its start, or one sample)."""
FIRST_STEPS = 3
"""Untimed steps before a worker is ready: the compilations (jax.jit compiles a step again
once its state is its own output) are behind it, as warm-up leaves them behind the peers
timed in one process."""
_WORKER = f"import sys; from {__name__} import main; main(sys.argv[1], sys.argv[2])"
_ROOT = Path(__file__).resolve().parents[2]
_SAMPLE = "sample\n"


class _Worker:
    """One peer's worker process: its pipe, and its samples or why it has none."""

    def __init__(self, stack: ExitStack, peer: str, prepare: str,
                 request: Mapping[str, Any]) -> None:
        self.peer = peer
        self.errors = stack.enter_context(tempfile.TemporaryFile("w+"))
        self.process = stack.enter_context(
            subprocess.Popen(
                [sys.executable, "-c", _WORKER, prepare, json.dumps(dict(request))],
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
    requests: Mapping[str, Mapping[str, Any]],
    prepare: str,
    *,
    warmup: int,
    repeat: int,
    on_sample: Callable[[], object] = lambda: None,
) -> dict[str, Outcome]:
    """Every peer's step timed in its own worker process, sampled round-robin: ``requests``
    maps each peer to what ``prepare`` (``"module:function"``, a function of one such
    mapping giving a ``Prepare``) needs to build its step there."""
    with ExitStack() as stack:
        workers = [_Worker(stack, peer, prepare, request) for peer, request in requests.items()]
        for worker in workers:
            worker.start()
        for round_index in range(warmup + repeat):
            shift = round_index % len(workers)
            for worker in workers[shift:] + workers[:shift]:
                if worker.missing is None:
                    worker.sample(keep=round_index >= warmup)
                on_sample()
        return {worker.peer: worker.outcome() for worker in workers}


def _ready(make: Callable[[], Prepare]) -> Prepare:
    """The peer's step, built and run ``FIRST_STEPS`` times untimed."""
    prepare = make()
    for _ in range(FIRST_STEPS):
        prepare()()
    return prepare


def _serve(make: Callable[[], Prepare]) -> None:
    """The worker's side: say whether the peer is ready, then time on demand."""
    ready = attempt(partial(_ready, make))
    print(json.dumps(ready.to_json() if isinstance(ready, Missing) else {"status": "ready"}))
    sys.stdout.flush()
    if isinstance(ready, Missing):
        return
    for line in sys.stdin:
        if line != _SAMPLE:
            return
        print(json.dumps(sample_once(ready)))
        sys.stdout.flush()


def main(prepare: str, request: str) -> None:
    """A worker process: build the step of ``request`` (JSON) with ``prepare`` and serve its
    samples until the input closes."""
    module, _, function = prepare.partition(":")
    _serve(partial(getattr(importlib.import_module(module), function), json.loads(request)))
