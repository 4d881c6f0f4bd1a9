"""What every step of the GPU check hands back to the report, and the budgets it runs within."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

OK = "ok"
FAILED = "failed"
TIMED_OUT = "timed out"
STATUSES = (OK, FAILED, TIMED_OUT)


@dataclass
class StepResult:
    """One step: its status, wall time and budget, a one-line summary, and its details
    (JSON-ready; each step's own shape, which the report renders)."""

    name: str
    title: str
    status: str
    wall_s: float
    timeout_s: float
    summary: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "status": self.status,
            "wall_s": self.wall_s,
            "timeout_s": self.timeout_s,
            "summary": self.summary,
            "details": self.details,
        }


@dataclass(frozen=True)
class Budgets:
    """Each step's wall-time limit in seconds (Note [The GPU check's budget] in check.py);
    ``experiment`` bounds one experiment's run, ``concurrency`` how many run at once."""

    environment: float
    cuda_tests: float
    readme: float
    experiments: float
    experiment: float
    suite: float
    concurrency: int

    @property
    def total_s(self) -> float:
        """The whole check's: the experiments and the suite run side by side."""
        return self.environment + self.cuda_tests + self.readme + max(self.experiments, self.suite)


GPU_BUDGETS = Budgets(
    environment=30, cuda_tests=75, readme=45, experiments=300, experiment=180, suite=300,
    concurrency=4,
)
"""On one GPU with 16 cores: 450 s in all, within the check's eight minutes."""
REHEARSAL_BUDGETS = Budgets(
    environment=60, cuda_tests=90, readme=90, experiments=420, experiment=300, suite=420,
    concurrency=2,
)
"""On a small CPU machine, for the rehearsal (experiments in smoke sizes)."""
