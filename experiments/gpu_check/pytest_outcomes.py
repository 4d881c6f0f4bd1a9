"""A pytest plugin that writes each test's outcome as it is known, one JSON line each.

The GPU check loads it (``-p experiments.gpu_check.pytest_outcomes``) with the
file named in ``OUTCOMES_ENV``, so that a suite stopped at its budget still says
which tests passed, failed and were skipped, and which never finished: pytest's
own summary comes only at the end. Under xdist only the controller writes; it
sees every worker's reports.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

OUTCOMES_ENV = "JAXSTREAM_GPU_CHECK_OUTCOMES"
_in_worker = False


def _write(entry: dict[str, Any]) -> None:
    path = os.environ.get(OUTCOMES_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _outcome(report: pytest.TestReport) -> str | None:
    """pytest's word for a test from one phase's report (None: the phase says nothing new)."""
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "xpassed"
    if report.when == "call":
        return report.outcome
    if report.failed:
        return "error"
    if report.skipped:
        return "skipped"
    return None


@pytest.hookimpl
def pytest_configure(config: pytest.Config) -> None:
    global _in_worker
    _in_worker = hasattr(config, "workerinput")


@pytest.hookimpl
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _in_worker:
        return
    outcome = _outcome(report)
    if outcome is not None:
        entry = {"nodeid": report.nodeid, "outcome": outcome, "when": report.when}
        if outcome == "skipped":
            entry["reason"] = _skip_reason(report)
        _write(entry)


@pytest.hookimpl
def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed and not _in_worker:
        _write({"nodeid": report.nodeid, "outcome": "error", "when": "collect"})
