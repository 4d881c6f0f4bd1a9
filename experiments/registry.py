"""Which experiments exist: the modules listed in ``MODULES``, each defining ``EXPERIMENT``.

Adding an experiment is adding its module (or package) and its line here. The
modules are imported only when ``experiments()`` is called, because the command
line must cap the frameworks' intra-op threads before NumPy, torch or JAX is
first imported; the experiments import torch, JAX and jaxstream inside
functions, which keeps ``list`` fast and lets a peer that is not installed read
"n/a" instead of breaking the import.
"""

from __future__ import annotations

import importlib

from experiments.harness.experiment import Experiment, RunOptions

__all__ = ["MODULES", "Experiment", "RunOptions", "experiments"]

MODULES = (
    "experiments.deep_reentrant",
    "experiments.compiled",
    "experiments.cpu_defaults",
    "experiments.device_overhead",
    "experiments.digits_training",
    "experiments.engine_overhead",
    "experiments.hessian",
    "experiments.jax_dispatch",
    "experiments.jax_overhead",
    "experiments.profiler_overhead",
    "experiments.stream_semantics",
    "experiments.streaming_backward",
)
"""Every experiment, by the module (or package) whose ``EXPERIMENT`` defines it."""


def experiments() -> dict[str, Experiment]:
    """Every experiment of ``MODULES``, by name, in name order."""
    found: dict[str, Experiment] = {}
    for module_name in MODULES:
        experiment = importlib.import_module(module_name).EXPERIMENT
        if not isinstance(experiment, Experiment):
            raise TypeError(f"{module_name}.EXPERIMENT is not an Experiment")
        if experiment.name in found:
            raise RuntimeError(f"two experiments are named {experiment.name!r}")
        found[experiment.name] = experiment
    return dict(sorted(found.items()))
