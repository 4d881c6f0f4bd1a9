"""What an experiment is and how one is invoked."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from experiments.harness.progress import ProgressBar, progress_bar
from experiments.harness.results import ExperimentResult

Mode = Literal["smoke", "quick", "full"]
DeviceKind = Literal["cpu", "cuda", "sim"]
"""Where a run puts its work: ``sim`` is the CPU stand-in for ``cuda`` (Note [The sim run]
in harness/peers.py)."""


@dataclass(frozen=True)
class RunOptions:
    """How large and where to run: ``smoke`` is for tests, ``quick`` the default."""

    mode: Mode = "quick"
    device: DeviceKind = "cpu"
    intra_op_threads: int = 1
    show_progress: bool = True

    def progress(self, total: int, desc: str) -> ProgressBar:
        return progress_bar(total, desc, enabled=self.show_progress)


@dataclass(frozen=True)
class PaperRun:
    """The size and intra-op threads the paper's rows of an experiment are measured at:
    what `reproduce` runs it with (Note [One command, this paper] in experiments/__main__.py).
    ``threads`` 0 keeps each framework's default."""

    mode: Mode = "quick"
    threads: int = 1

    def arguments(self) -> list[str]:
        """The command-line options that ask for this run."""
        return (["--full"] if self.mode == "full" else []) + ["--threads", str(self.threads)]


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str
    run: Callable[[RunOptions], ExperimentResult]
    paper: PaperRun = PaperRun()
    host_only: bool = False
    """Whether it measures the host itself (the CPU at its defaults), so that a GPU
    machine's check leaves it out; it still runs on any ``--device`` asked for."""
