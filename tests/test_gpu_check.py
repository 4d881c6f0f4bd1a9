"""The GPU check (`python -m experiments.gpu_check`): its refusal without a GPU, its CPU
rehearsal's report, the pieces the report is built from, and the paper's GPU section.

The rehearsal runs every step on the GPU twin with a tiny suite (one test of this
module) and two experiments, so that it stays fast. Timings are never asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.gpu_check import readme
from experiments.gpu_check.commands import REPOSITORY_ROOT, run_command
from experiments.gpu_check.experiment_runs import headline
from experiments.gpu_check.pytest_steps import run_pytest, summarize
from experiments.gpu_check.report import build_record, slug, write_report
from experiments.gpu_check.steps import GPU_BUDGETS, OK, TIMED_OUT, StepResult
from paper.builder import render_paper
from paper.builder.gpu import NO_REPORT

REHEARSED_EXPERIMENTS = ("stream_semantics", "jax_overhead")
TINY_SUITE = "tests/test_gpu_check.py::test_a_gpu_name_makes_a_file_name"
SECTIONS = (
    "## Environment",
    "## Steps",
    "## GPU tests: pytest -m cuda",
    "## README: Running on a GPU",
    "## Experiments, smoke mode, --device sim",
    "## The whole suite",
)


def run_check(*arguments: str, env: dict[str, str] | None = None,
              timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "experiments.gpu_check", "--no-progress", *arguments],
        cwd=REPOSITORY_ROOT, capture_output=True, text=True, timeout=timeout, env=env,
    )


class Rehearsal:
    """One `--device sim` check into a directory of its own, and what it wrote."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.completed = run_check(
            "--device", "sim", "--out", str(out), "--suite-args", TINY_SUITE,
            "--experiments", ",".join(REHEARSED_EXPERIMENTS),
        )
        self.markdown = (out / "cpu-rehearsal.md").read_text(encoding="utf-8")
        self.record = json.loads((out / "cpu-rehearsal.json").read_text(encoding="utf-8"))

    def step(self, name: str) -> dict:
        return next(step for step in self.record["steps"] if step["name"] == name)


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory: pytest.TempPathFactory) -> Rehearsal:
    return Rehearsal(tmp_path_factory.mktemp("gpu_check"))


def test_a_gpu_name_makes_a_file_name() -> None:
    assert slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert slug("NVIDIA H200") == "nvidia-h200"


def test_without_a_gpu_the_check_says_so_and_writes_nothing(tmp_path: Path) -> None:
    hidden = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu"}
    completed = run_check("--out", str(tmp_path), env=hidden, timeout=120)
    assert completed.returncode == 2
    assert "no CUDA GPU: CuPy and JAX see none" in completed.stderr
    assert "--device sim" in completed.stderr
    assert not list(tmp_path.iterdir())


def test_the_gpu_budgets_fit_in_eight_minutes() -> None:
    assert GPU_BUDGETS.total_s <= 8 * 60


@pytest.mark.twin_only
def test_the_rehearsal_passes_every_step_and_reports_each(rehearsal: Rehearsal) -> None:
    assert rehearsal.completed.returncode == 0, rehearsal.completed.stdout[-4000:]
    record = rehearsal.record
    assert record["rehearsal"] is True and record["device"] == "sim" and record["gpu"] is None
    assert [step["name"] for step in record["steps"]] == [
        "environment", "cuda_tests", "readme", "experiments", "suite"
    ]
    assert all(step["status"] == OK for step in record["steps"]), record["steps"]
    assert record["ok"] is True
    for section in SECTIONS:
        assert section in rehearsal.markdown, section
    assert "A CPU rehearsal, not a GPU measurement" in rehearsal.markdown
    assert str(REPOSITORY_ROOT) not in rehearsal.markdown


@pytest.mark.twin_only
def test_the_rehearsal_records_the_environment_of_the_twin(rehearsal: Rehearsal) -> None:
    facts = rehearsal.step("environment")["details"]["facts"]
    assert facts["gpu_name"] is None
    assert facts["jaxstream"]["gpu_twin"] is True
    assert facts["torch"]["cuda_available"] is False
    assert facts["jaxstream"]["revision"] == rehearsal.record["revision"]


@pytest.mark.twin_only
def test_the_rehearsal_counts_the_tests_it_ran(rehearsal: Rehearsal) -> None:
    suite = rehearsal.step("suite")["details"]
    assert suite["counts"] == {"passed": 1} and suite["failures"] == []
    cuda = rehearsal.step("cuda_tests")["details"]
    assert set(cuda["counts"]) == {"skipped"}  # no GPU here: every GPU test skips, saying why
    assert all("needs" in reason for reason in cuda["skip_reasons"])


@pytest.mark.twin_only
def test_the_rehearsal_runs_the_readme_gpu_commands_on_sim(rehearsal: Rehearsal) -> None:
    commands = rehearsal.step("readme")["details"]["commands"]
    ran = [command for command in commands if "wall_s" in command]
    assert ran and all(command["status"] == OK for command in ran)
    for command in ran:
        if "--device cuda" in command["command"]:
            assert "--device sim" in command["ran_as"]
    assert all(command.get("reason") for command in commands if command not in ran)


@pytest.mark.twin_only
def test_the_rehearsal_keeps_each_experiments_record_and_headline(rehearsal: Rehearsal) -> None:
    runs = rehearsal.step("experiments")["details"]["runs"]
    assert sorted(run["name"] for run in runs) == sorted(REHEARSED_EXPERIMENTS)
    for run in runs:
        assert run["status"] == OK and run["failures"] == {}
        assert run["headline"]["rows"] and run["headline"]["headers"]
        written = json.loads((rehearsal.out / "cpu-rehearsal" / f"{run['name']}.json").read_text())
        assert written["device"] == "sim" and written["mode"] == "smoke"
        assert str(REPOSITORY_ROOT) not in written["command"]


def test_a_headline_keeps_the_first_column_and_the_ratios() -> None:
    record = {
        "columns": [
            {"header": "workload", "keys": ["workload"]},
            {"header": "torch us", "keys": ["torch_us"]},
            {"header": "a / b (median / min)", "keys": ["a_over_b", "a_over_b_min"]},
        ],
        "rows": [{"workload": "chain", "torch_us": 3.0, "a_over_b": 1.5, "a_over_b_min": None}],
    }
    assert headline(record) == {
        "headers": ["workload", "a / b (median / min)"], "rows": [["chain", "1.50x / n/a"]]
    }


def test_pytest_outcomes_are_counted_as_pytest_counts_them() -> None:
    summary = summarize([
        {"nodeid": "t.py::a", "outcome": "passed", "when": "call"},
        {"nodeid": "t.py::a", "outcome": "error", "when": "teardown"},
        {"nodeid": "t.py::b", "outcome": "failed", "when": "call"},
        {"nodeid": "t.py::c", "outcome": "skipped", "when": "setup", "reason": "needs a GPU"},
    ])
    assert summary["counts"] == {"error": 1, "failed": 1, "passed": 1, "skipped": 1}
    assert summary["failures"] == ["t.py::a (error, teardown)", "t.py::b (failed, call)"]
    assert summary["skip_reasons"] == {"needs a GPU": 1}


def test_a_command_past_its_budget_is_stopped(tmp_path: Path) -> None:
    result = run_command([sys.executable, "-c", "import time; time.sleep(600)"], timeout_s=0.5,
                         log=tmp_path / "sleep.log", env=dict(os.environ))
    assert result.timed_out and result.returncode is None


@pytest.mark.twin_only
def test_a_suite_stopped_at_its_budget_keeps_what_had_finished(tmp_path: Path) -> None:
    tests = tmp_path / "test_slow.py"
    tests.write_text("import time\n\ndef test_quick():\n    pass\n\n"
                     "def test_slow():\n    time.sleep(600)\n")
    step = run_pytest("suite", "The whole suite", ("-p", "no:cacheprovider", str(tests)),
                      timeout_s=15, env=dict(os.environ), logs=tmp_path)
    assert step.status == TIMED_OUT
    assert step.details["counts"] == {"passed": 1}
    assert "stopped at its 15 s budget" in step.summary


def test_the_readme_gpu_section_is_found_and_its_commands_sorted() -> None:
    found = readme.commands()
    assert any(command.covered_by is None for command in found)
    assert all(
        command.covered_by for command in found if command.text.startswith(("pip ", "pytest"))
    )


@pytest.mark.parametrize("text", ["make gpu-check", "python -m experiments.gpu_check",
                                  "make reproduce DEVICE=cuda", "make test"])
def test_the_readme_step_never_runs_the_check_or_a_whole_run_again(text: str) -> None:
    assert readme.Command(text, "bash").covered_by


def _report(tmp_path: Path, *, rehearsal: bool) -> Path:
    """A GPU check record, as a GPU machine would write it, under tmp_path/gpu."""
    experiments = StepResult(
        "experiments", "Experiments, quick mode, --device cuda", OK, 100.0, 170.0, "1 of 1",
        {"mode": "quick", "device": "cuda", "concurrency": 4, "runs": [{
            "name": "jax_overhead", "status": OK, "wall_s": 20.0, "failures": {},
            "headline": {"headers": ["workload", "x / jax.jit"], "rows": [["MLP", "1.23x"]]},
        }]},
    )
    record = build_record([experiments], device="sim" if rehearsal else "cuda",
                          gpu=None if rehearsal else "NVIDIA H200", budget_s=470, wall_s=300)
    write_report(record, tmp_path / "gpu")
    return tmp_path


def test_the_paper_shows_the_newest_gpu_report_and_names_its_gpu(tmp_path: Path) -> None:
    text = render_paper("{{gpu:newest}}", _report(tmp_path, rehearsal=False), tmp_path / "paper")
    assert "Measured on NVIDIA H200" in text
    assert "| MLP | 1.23x |" in text
    assert "4 at a time" in text


def test_the_paper_never_shows_a_rehearsal_as_a_gpu_report(tmp_path: Path) -> None:
    text = render_paper("{{gpu:newest}}", _report(tmp_path, rehearsal=True), tmp_path / "paper")
    assert text.strip().endswith(NO_REPORT)
