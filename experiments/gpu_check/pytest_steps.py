"""The two pytest steps: the GPU tests (``pytest -m cuda``) and the whole suite.

Each runs pytest in a process of its own with the outcomes plugin
(``pytest_outcomes``), whose lines give the counts, the tests that failed, the
reasons for the skips, and, where the budget ran out, how many tests had
finished by then.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.gpu_check.commands import run_command
from experiments.gpu_check.pytest_outcomes import OUTCOMES_ENV
from experiments.gpu_check.steps import FAILED, OK, TIMED_OUT, StepResult

PLUGIN = "experiments.gpu_check.pytest_outcomes"


def whole_suite_args(experiments_at_once: int) -> tuple[str, ...]:
    """The whole suite over the cores the experiments leave it, each module's tests (and
    each class's) in one worker, as `make test` runs it."""
    workers = max(2, (os.cpu_count() or 1) - experiments_at_once)
    return ("-n", str(workers), "--dist", "loadscope")

BAD = ("failed", "error", "xpassed")
SHOWN_SKIP_REASONS = 5


def read_outcomes(path: Path) -> list[dict[str, Any]]:
    """The plugin's lines, in the order the tests finished."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def summarize(outcomes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Counts by outcome (as pytest counts them), the tests that failed, the commonest skip
    reasons."""
    counts = Counter(entry["outcome"] for entry in outcomes)
    reasons = Counter(entry["reason"] for entry in outcomes if entry["outcome"] == "skipped")
    return {
        "counts": dict(sorted(counts.items())),
        "failures": [
            f"{entry['nodeid']} ({entry['outcome']}, {entry['when']})"
            for entry in outcomes
            if entry["outcome"] in BAD
        ],
        "skip_reasons": dict(reasons.most_common(SHOWN_SKIP_REASONS)),
    }


def _counts_line(counts: dict[str, int]) -> str:
    return ", ".join(f"{count} {outcome}" for outcome, count in counts.items()) or "no tests ran"


def run_pytest(
    name: str, title: str, args: Sequence[str], *, timeout_s: float, env: dict[str, str],
    logs: Path,
) -> StepResult:
    """``python -m pytest -q ARGS`` within ``timeout_s``, as one step of the check."""
    outcomes_path = logs / f"{name}.outcomes.jsonl"
    outcomes_path.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", PLUGIN, *args]
    result = run_command(
        argv, timeout_s=timeout_s, log=logs / f"{name}.log",
        env={**env, OUTCOMES_ENV: str(outcomes_path)},
    )
    details = summarize(read_outcomes(outcomes_path))
    details["command"] = "pytest -q " + " ".join(args)
    # pytest exits 5 when nothing was collected, as where every test is deselected.
    passed = result.returncode in (0, 5) and not details["failures"]
    status = TIMED_OUT if result.timed_out else OK if passed else FAILED
    summary = _counts_line(details["counts"])
    if result.timed_out:
        summary += f"; stopped at its {timeout_s:.0f} s budget"
    elif not passed and not details["failures"]:
        details["output_tail"] = result.tail()
        summary += f"; pytest exited with status {result.returncode}"
    return StepResult(name, title, status, result.wall_s, timeout_s, summary, details)
