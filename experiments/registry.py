"""Which experiments exist and how one is invoked.

An experiment is a module of this package that defines a module-level
``EXPERIMENT = Experiment(name=..., description=..., run=...)``. Adding one is
adding that module: discovery imports every public module of the package, so
experiment modules import their heavy dependencies (torch, jax, jaxstream)
inside functions, which keeps ``list`` fast and lets a peer that is not
installed read "n/a" instead of breaking the import.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from experiments.progress import ProgressBar, progress_bar
from experiments.result import ExperimentResult

Mode = Literal["smoke", "quick", "full"]
DeviceKind = Literal["cpu", "cuda"]


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
class Experiment:
    name: str
    description: str
    run: Callable[[RunOptions], ExperimentResult]


def discover() -> dict[str, Experiment]:
    """Every experiment of this package, by name, in name order."""
    found: dict[str, Experiment] = {}
    for module_info in pkgutil.iter_modules(importlib.import_module(__package__).__path__):
        if module_info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__package__}.{module_info.name}")
        experiment = getattr(module, "EXPERIMENT", None)
        if isinstance(experiment, Experiment):
            if experiment.name in found:
                raise RuntimeError(f"two experiments are named {experiment.name!r}")
            found[experiment.name] = experiment
    return dict(sorted(found.items()))
