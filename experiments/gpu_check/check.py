"""The GPU check's run: its steps, each within its budget, then the report's record.

Note [The GPU check's budget]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The check must finish within eight minutes on one GPU with 16 cores, so every
step runs within a budget of its own (`steps.GPU_BUDGETS`, 450 s in all): a step
that overruns is stopped, reported as timed out with what it had done by then,
and the check goes on. The environment, the GPU tests and the README's commands
run one after the other; then the experiments and the whole suite run side by
side, each within five minutes: the experiments, single-threaded each, four at a
time, and the suite over the other cores. device_overhead starts first, and
streaming_backward only once the host calibration from it is stored
(experiment_runs.py), so those two run one after the other, each within its own
three minutes. Either step alone would take most of the eight minutes. So the
experiments' timings are taken on a busy machine: they show that each
experiment runs on the GPU and what its ratios look like, and a run of one
experiment alone (`python -m experiments run NAME --device cuda`) gives numbers
of its own. Every process is told not to take 75% of the GPU's memory at its
first JAX operation (`XLA_PYTHON_CLIENT_PREALLOCATE=false`), since several share
the GPU. A rehearsal (`--device sim`) runs the same steps on the GPU twin in
smoke sizes, within budgets for a small CPU machine.
"""

from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.gpu_check.commands import run_command
from experiments.gpu_check.experiment_runs import run_experiments
from experiments.gpu_check.pytest_steps import run_pytest, whole_suite_args
from experiments.gpu_check.readme import run_readme
from experiments.gpu_check.report import REHEARSAL_SLUG, build_record, slug
from experiments.gpu_check.steps import (
    FAILED,
    GPU_BUDGETS,
    OK,
    REHEARSAL_BUDGETS,
    TIMED_OUT,
    Budgets,
    StepResult,
)
from experiments.harness.progress import progress_bar

TWIN_ENV = "JAXSTREAM_GPU_TWIN"
"""Note [The GPU twin] in jaxstream/devices/xla.py (read here without importing JAX)."""
NO_GPU = (
    "no CUDA GPU: CuPy and JAX see none. On a machine with an NVIDIA GPU, install the extra "
    "of its CUDA (pip install -e '.[cuda13,test,oracle,experiments,examples]', or cuda12); "
    "to rehearse the check on the CPU, run it with --device sim"
)


class NoGpu(RuntimeError):
    """The check was asked for cuda where CuPy and JAX see no GPU, or cannot tell."""


@dataclass(frozen=True)
class CheckOptions:
    """What to check: ``device`` is "cuda", or "sim" for the CPU rehearsal."""

    device: str
    out: Path
    logs: Path
    mode: str
    suite_args: tuple[str, ...] | None = None
    """The suite's pytest arguments; by default the whole suite (``whole_suite_args``)."""
    experiments: list[str] | None = None
    show_progress: bool = True

    @property
    def budgets(self) -> Budgets:
        return GPU_BUDGETS if self.device == "cuda" else REHEARSAL_BUDGETS


def child_environment(device: str) -> dict[str, str]:
    """The environment of every step's processes (Note [The GPU check's budget])."""
    env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    if device == "sim":
        env[TWIN_ENV] = "1"
    return env


def probe_environment(options: CheckOptions, env: dict[str, str]) -> StepResult:
    """The environment step; raises NoGpu where a cuda check has no GPU to run on."""
    timeout_s = options.budgets.environment
    result = run_command(
        [sys.executable, "-m", "experiments.gpu_check.probe"], timeout_s=timeout_s,
        log=options.logs / "environment.log", env=env,
    )
    facts = _probed_facts(result.log) if result.returncode == 0 else None
    if facts is None:
        if options.device == "cuda":
            raise NoGpu(f"the environment probe failed, so no GPU can be named:\n{result.tail()}")
        status, summary = (TIMED_OUT if result.timed_out else FAILED), "the probe failed"
        details: dict[str, Any] = {"output_tail": result.tail()}
    else:
        if options.device == "cuda" and facts["jaxstream"]["cuda_devices"] == 0:
            raise NoGpu(NO_GPU)
        status, details = OK, {"facts": facts}
        summary = (
            f"GPU: {facts['gpu_name'] or 'none'}; JAX {facts['jax']['version']}, "
            f"CuPy {facts['cupy']['version']}, torch {facts['torch']['version']}"
        )
    return StepResult("environment", "Environment", status, result.wall_s, timeout_s, summary,
                      details)


def _probed_facts(log: Path) -> dict[str, Any] | None:
    lines = log.read_text(encoding="utf-8").strip().splitlines()
    try:
        return json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        return None


def run_check(options: CheckOptions) -> dict[str, Any]:
    """Every step (Note [The GPU check's budget]), then the report's record (not yet written)."""
    start = time.perf_counter()
    env = child_environment(options.device)
    budgets = options.budgets
    environment_step = probe_environment(options, env)
    gpu = environment_step.details.get("facts", {}).get("gpu_name")
    gpu = gpu if options.device == "cuda" else None
    records = options.out / (slug(gpu) if gpu else REHEARSAL_SLUG)
    bar = progress_bar(3, "gpu check", enabled=options.show_progress, leave=True)
    bar.set_postfix_str("pytest -m cuda")
    cuda_tests = run_pytest("cuda_tests", "GPU tests: pytest -m cuda", ("-m", "cuda"),
                            timeout_s=budgets.cuda_tests, env=env, logs=options.logs)
    bar.update()
    bar.set_postfix_str("README")
    readme = run_readme(options.device, timeout_s=budgets.readme, env=env, logs=options.logs)
    bar.update()
    bar.set_postfix_str("experiments and the whole suite")
    with ThreadPoolExecutor(max_workers=2) as side_by_side:
        experiments = side_by_side.submit(
            run_experiments, options.device, options.mode, budgets, out=records,
            logs=options.logs, env=env, gpu=gpu, names=options.experiments,
            show_progress=options.show_progress,
        )
        suite = side_by_side.submit(
            run_pytest, "suite", "The whole suite",
            options.suite_args or whole_suite_args(budgets.concurrency), timeout_s=budgets.suite,
            env=env, logs=options.logs,
        )
        steps = [environment_step, cuda_tests, readme, experiments.result(), suite.result()]
    bar.update()
    bar.close()
    return build_record(steps, device=options.device, gpu=gpu, budget_s=budgets.total_s,
                        wall_s=time.perf_counter() - start)
