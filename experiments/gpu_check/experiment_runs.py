"""The experiments step: every experiment on the check's device, a few at a time.

Each experiment runs as ``python -m experiments run NAME --device DEVICE`` in a
process of its own, with its records written beside the report. At most
``Budgets.concurrency`` run at once, the slowest first, so that they fit the
step's budget (Note [The GPU check's budget] in check.py). What the report keeps
of each is its status, wall time, failures and headline: the table's leading
label columns and its ratio columns. device_overhead runs first: its record calibrates
the host side of virtual time (``calibration``), and the experiments that
predict with it start once it is stored; the report puts streaming_backward's
predictions beside what cuda measured (``predictions``).
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from itertools import takewhile
from pathlib import Path
from typing import Any

from experiments import registry
from experiments.gpu_check.calibration import CALIBRATED, CALIBRATING, calibrate
from experiments.gpu_check.commands import relative, run_command
from experiments.gpu_check.predictions import PREDICTING, prediction_rows
from experiments.gpu_check.steps import FAILED, OK, TIMED_OUT, Budgets, StepResult
from experiments.harness.progress import progress_bar
from paper.builder.tables import format_number, interval_text

SLOWEST_FIRST = (CALIBRATING, "profiler_overhead", "streaming_backward", "engine_overhead",
                 "hessian")
"""Started first, so that a long one does not start last (the quick mode on a cpu); the
calibrating experiment before all, since others wait for it."""
RATIO_MARKERS = ("_over_", "speedup")
PLAIN_COLUMNS = 5
"""A table without ratios (stream_semantics) shows its first columns instead."""
ERROR_CHARACTERS = 400


def order(names: list[str]) -> list[str]:
    """``names``, the slowest first."""
    slow = [name for name in SLOWEST_FIRST if name in names]
    return slow + [name for name in names if name not in slow]


def checked(names: list[str] | None) -> list[str]:
    """``names``, or every experiment but the host-only ones (``Experiment.host_only``), the
    slowest first."""
    every = [name for name, experiment in registry.experiments().items()
             if not experiment.host_only]
    return order(names or every)


def _labels_rows(column: dict[str, Any], rows: list[dict[str, Any]]) -> bool:
    """Whether ``column`` names its rows (a word or a count in each) rather than measuring."""
    (key, *more) = column["keys"]
    return not more and all(
        isinstance(row.get(key), str | int) and not isinstance(row.get(key), bool) for row in rows
    )


def headline(record: dict[str, Any]) -> dict[str, Any]:
    """The record's table cut to its leading label columns and its ratio columns (with their
    intervals where the record holds them), as text."""
    columns = record["columns"]
    labels = len(list(takewhile(lambda c: _labels_rows(c, record["rows"]), columns[1:]))) + 1
    ratios = [c for c in columns[labels:] if any(m in c["keys"][0] for m in RATIO_MARKERS)]
    shown = [*columns[:labels], *(ratios or columns[labels:PLAIN_COLUMNS])]
    return {
        "headers": [column["header"] for column in shown],
        "rows": [
            [
                " / ".join(
                    format_number(row.get(key), key) + interval_text(row.get(f"{key}_interval"))
                    for key in column["keys"]
                )
                for column in shown
            ]
            for row in record["rows"]
        ],
    }


def _outcome(record_path: Path, returncode: int | None) -> dict[str, Any]:
    if returncode is None:
        return {"status": TIMED_OUT}
    if not record_path.exists():
        return {"status": FAILED, "failures": {"run": "it crashed before writing its record"}}
    record = json.loads(record_path.read_text(encoding="utf-8"))
    failures = {case: error[:ERROR_CHARACTERS] for case, error in record["failures"].items()}
    status = OK if returncode == 0 and not failures else FAILED
    found = {"status": status, "failures": failures, "headline": headline(record)}
    if record["experiment"] == PREDICTING:
        found["predictions"] = prediction_rows(record)
    return found


class _Runner:
    """Runs one experiment within what is left of the step's budget."""

    def __init__(self, device: str, mode: str, budgets: Budgets, out: Path, logs: Path,
                 env: dict[str, str]) -> None:
        self.device, self.mode, self.budgets = device, mode, budgets
        self.out, self.logs, self.env = out, logs, env
        self.deadline = time.perf_counter() + budgets.experiments

    def __call__(self, name: str) -> dict[str, Any]:
        left = min(self.budgets.experiment, self.deadline - time.perf_counter())
        if left <= 0:
            return {"name": name, "status": TIMED_OUT, "wall_s": 0.0,
                    "reason": "not started: the step's budget ran out"}
        record = self.out / f"{name}.json"
        record.unlink(missing_ok=True)
        argv = [sys.executable, "-m", "experiments", "run", name, "--device", self.device,
                "--no-progress", "--out", str(relative(self.out))]
        if self.mode != "quick":
            argv.append(f"--{self.mode}")
        result = run_command(argv, timeout_s=left, log=self.logs / f"experiment-{name}.log",
                             env=self.env)
        found = {"name": name, "wall_s": result.wall_s, "timeout_s": left}
        found.update(_outcome(record, result.returncode))
        return found


class _Calibrating:
    """Holds back the calibrated experiments until the calibrating one is done and its host
    costs stored (where it runs at all), then lets them go in the environment it asks for."""

    def __init__(self, names: list[str], runner: _Runner, gpu: str | None) -> None:
        self.held = [name for name in names if name in CALIBRATED] if CALIBRATING in names else []
        self.runner, self.gpu = runner, gpu
        self.details: dict[str, Any] | None = None

    def done(self, name: str) -> list[str]:
        """The experiments to start now that ``name`` is done."""
        if name != CALIBRATING:
            return []
        runner = self.runner
        try:
            self.details, env = calibrate(runner.out / f"{name}.json", device=runner.device,
                                          gpu=self.gpu, records=runner.out)
        except Exception as error:  # noqa: BLE001  (the report says so; the others still run)
            self.details, env = {"stored": False, "reason": f"{type(error).__name__}: {error}"}, {}
        runner.env = {**runner.env, **env}
        return self.held


def run_experiments(
    device: str, mode: str, budgets: Budgets, *, out: Path, logs: Path, env: dict[str, str],
    gpu: str | None = None, names: list[str] | None = None, show_progress: bool = True,
) -> StepResult:
    """The experiments of ``checked(names)`` on ``device`` in ``mode``, records under
    ``out``; the host calibration from ``gpu``'s run of the calibrating experiment."""
    start = time.perf_counter()
    names = checked(names)
    runner = _Runner(device, mode, budgets, out, logs, env)
    calibrating = _Calibrating(names, runner, gpu)
    bar = progress_bar(len(names), "gpu check: experiments", enabled=show_progress)
    found: dict[str, dict[str, Any]] = {}
    with ThreadPoolExecutor(max_workers=budgets.concurrency) as pool:
        pending: set[Future] = {
            pool.submit(runner, name) for name in names if name not in calibrating.held
        }
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                result = future.result()
                found[result["name"]] = result
                pending |= {pool.submit(runner, n) for n in calibrating.done(result["name"])}
                bar.set_postfix_str(result["name"])
                bar.update()
    bar.close()
    runs = [found[name] for name in sorted(found)]
    clean = sum(run["status"] == OK for run in runs)
    statuses = {run["status"] for run in runs}
    status = OK if statuses == {OK} else TIMED_OUT if TIMED_OUT in statuses else FAILED
    summary = (
        f"{clean} of {len(runs)} experiments ran without a failure ({mode} mode, "
        f"{budgets.concurrency} at a time)"
    )
    details = {"mode": mode, "device": device, "concurrency": budgets.concurrency, "runs": runs}
    if calibrating.details is not None:
        details["calibration"] = calibrating.details
    return StepResult(
        "experiments", f"Experiments, {mode} mode, --device {device}", status,
        time.perf_counter() - start, budgets.experiments, summary, details,
    )
