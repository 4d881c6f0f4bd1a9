"""The GPU check (`python -m experiments.gpu_check`): its refusal without a GPU, its CPU
rehearsal's report, the pieces the report is built from, and the paper's GPU section.

The rehearsal runs every step on the GPU twin with a tiny suite (one test of this
module) and two experiments, so that it stays fast. Timings are never asserted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import jaxstream as js
from experiments.gpu_check import calibration, experiment_runs, probe, readme
from experiments.gpu_check.commands import REPOSITORY_ROOT, run_command
from experiments.gpu_check.experiment_runs import headline
from experiments.gpu_check.pytest_steps import run_pytest, summarize
from experiments.gpu_check.report import build_record, experiment_tables, slug, write_report
from experiments.gpu_check.report import table as report_table
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


def test_a_headline_keeps_every_leading_label_column() -> None:
    """Rows told apart by a second label (the place, the batch) keep it: without it two rows
    of one workload would read alike."""
    record = {
        "columns": [
            {"header": "pass", "keys": ["pass"]},
            {"header": "place", "keys": ["place"]},
            {"header": "batch", "keys": ["batch"]},
            {"header": "us", "keys": ["us"]},
            {"header": "a / b", "keys": ["a_over_b"]},
        ],
        "rows": [
            {"pass": "forward", "place": "cpu", "batch": 8, "us": 2.0, "a_over_b": 1.5},
            {"pass": "forward", "place": "cuda", "batch": 8, "us": 4.0, "a_over_b": 2.5},
        ],
    }
    assert headline(record) == {
        "headers": ["pass", "place", "batch", "a / b"],
        "rows": [["forward", "cpu", "8", "1.50x"], ["forward", "cuda", "8", "2.50x"]],
    }


def test_the_probe_names_jaxstream_run_from_a_checkout_not_installed(monkeypatch) -> None:
    """On a GPU machine without a network the check runs from the checkout on the path,
    where no installed metadata names jaxstream."""
    def installed_only(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(probe.metadata, "version", installed_only)
    assert probe._jaxstream()["version"] == js.__version__


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
                      timeout_s=8, env=dict(os.environ), logs=tmp_path)
    assert step.status == TIMED_OUT
    assert step.details["counts"] == {"passed": 1}
    assert "stopped at its 8 s budget" in step.summary


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


def _overhead_record(times: dict[str, tuple[float, float]]) -> dict:
    """A device_overhead record whose place ``label`` took (forward us/op, backward us/node)."""
    return {
        "mode": "quick", "device": "cuda", "date_utc": "2026-12-01T00:00:00+00:00",
        "revision": "abc1234", "machine": {"processor": "a CPU"},
        "rows": [{"pass": phase, "place": label, "jaxstream_us": pair[index]}
                 for label, pair in times.items()
                 for index, phase in enumerate(("forward", "backward"))],
    }


def test_device_overhead_calibrates_the_host_per_backend_less_the_drivers_call() -> None:
    record = _overhead_record({"cuda, CuPy": (52.0, 92.0), "cuda, JAX": (None, 80.0),
                               "sim, NumPy, checks off": (9.0, 13.0)})
    on_gpu = calibration.host_costs_of(record, True, 2e-6, ops_per_node=2.0)
    assert set(on_gpu) == {"cupy"}  # JAX's forward was not timed: no figure made up for it
    assert (on_gpu["cupy"].op_s, on_gpu["cupy"].node_s) == pytest.approx((50e-6, 88e-6))
    on_cpu = calibration.host_costs_of(record, False, 2e-6, ops_per_node=1.0)
    assert set(on_cpu) == {"numpy"} and on_cpu["numpy"].op_s == pytest.approx(9e-6)
    assert calibration.backward_ops_per_node() == 1.0  # a tanh or a multiply per node


def test_products_and_stream_work_calibrate_their_own_figures() -> None:
    record = _overhead_record({"cuda, CuPy": (52.0, 92.0), "cuda, CuPy stand-in": (8.0, 25.0)})
    record["rows"] += [{"pass": phase, "place": label, "jaxstream_us": us} for phase, label, us in (
        ("product forward", "cuda, CuPy", 72.0), ("record event", "cuda, CuPy", 11.0),
        ("wait event", "cuda, CuPy", 6.0), ("product forward", "cuda, CuPy stand-in", 9.0))]
    cupy = calibration.host_costs_of(record, True, 2e-6, ops_per_node=1.0)["cupy"]
    assert cupy.product_op_s == pytest.approx(70e-6)  # less the driver's call, as an op
    assert (cupy.record_s, cupy.wait_s, cupy.switch_s) == pytest.approx((11e-6, 6e-6, None))
    stand_in = calibration.host_costs_of(record, False, 2e-6, ops_per_node=1.0)["cupy"]
    assert stand_in.product_op_s == pytest.approx(9e-6) and stand_in.record_s is None
    assert set(stand_in.to_json()) == {"op_us", "node_us", "product_op_us", "ops_per_node"}


def test_the_calibrating_rows_time_products_and_stream_work_in_their_places() -> None:
    from experiments.device_overhead import calibrating
    from experiments.harness.timing import time_interleaved

    products = time_interleaved(calibrating.product_prepares("cpu", 4), warmup=0, repeat=1)
    works = {work: time_interleaved(calibrating.stream_prepares("cpu", work, 4), warmup=0,
                                    repeat=1) for work in calibrating.STREAM_WORK}
    js.autograd.shutdown_engine_threads()
    assert set(products) == {"sim-numpy", "sim-jax", "cuda-stand-in", "torch"}
    rows = calibrating.rows("cpu", 16, products, works)
    sim, stand_in = "sim, NumPy, checks off", "cuda, CuPy stand-in"
    assert [(row["pass"], row["place"]) for row in rows] == [
        ("product forward", sim), ("product forward", "sim, JAX, checks off"),
        ("product forward", stand_in),
        *((work, place) for work in ("record event", "wait event", "stream switch")
          for place in (sim, stand_in))]
    assert all(row["jaxstream_us"] > 0 and row["nodes"] == 4 for row in rows)
    assert rows[0]["jaxstream_over_torch"] > 0 and rows[3]["jaxstream_over_torch"] is None
    start, weight = calibrating.product_start(), calibrating.product_weight()
    assert (calibrating.product_chain(start, weight, 4, lambda y, w: y @ w.T) == start).all()


def test_a_calibration_is_stored_under_the_gpus_profile_and_a_rehearsal_keeps_the_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jaxstream.devices import virtual_host

    record = tmp_path / "device_overhead.json"
    record.write_text(json.dumps(_overhead_record({"cuda, CuPy": (52.0, 92.0),
                                                   "cuda, CuPy stand-in": (8.0, 25.0)})))
    shipped = virtual_host.HOST_COSTS_FILE.read_text()
    details, env = calibration.calibrate(record, device="sim", gpu=None, records=tmp_path)
    assert virtual_host.HOST_COSTS_FILE.read_text() == shipped
    assert details["stored"] and details["profile"] == "h100" and set(details["backends"]) == {
        "cupy"}
    monkeypatch.setenv(virtual_host.HOST_COSTS_ENV, env[virtual_host.HOST_COSTS_ENV])
    assert virtual_host.host_costs("h100", "cupy").op_s == pytest.approx(8e-6)
    details, env = calibration.calibrate(record, device="cuda", gpu="NVIDIA H200",
                                         records=tmp_path)  # into the file the variable names
    assert details["profile"] == "h200" and env == {}
    assert virtual_host.host_costs("h200", "cupy").op_s == pytest.approx(50e-6)
    assert "Host calibration of virtual time, stored under the h200 profile" in "\n".join(
        calibration.calibration_markdown(details, report_table))
    unknown, _ = calibration.calibrate(record, device="cuda", gpu="NVIDIA GeForce RTX 4090",
                                       records=tmp_path)
    assert not unknown["stored"] and "no device profile describes" in unknown["reason"]


def test_the_calibrated_experiments_wait_for_the_calibrating_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = []

    def fake_calibrate(path: Path, **kwargs: object) -> tuple[dict, dict]:
        calls.append(path.name)
        return {"stored": True}, {"JAXSTREAM_HOST_COSTS": "here.json"}

    monkeypatch.setattr(experiment_runs, "calibrate", fake_calibrate)
    runner = experiment_runs._Runner("sim", "smoke", GPU_BUDGETS, tmp_path, tmp_path, {})
    names = experiment_runs.order(["hessian", "streaming_backward", "device_overhead"])
    assert names[0] == "device_overhead"
    held = experiment_runs._Calibrating(names, runner, None)
    assert held.held == ["streaming_backward"] and held.done("hessian") == []
    assert held.done("device_overhead") == ["streaming_backward"]
    assert calls == ["device_overhead.json"] and runner.env["JAXSTREAM_HOST_COSTS"] == "here.json"
    alone = experiment_runs._Calibrating(["streaming_backward"], runner, None)
    assert alone.held == []  # nothing calibrates in this run: it predicts with what is stored


def _predicted_row(branches: object, cuda: bool) -> dict:
    row = {"branches": branches}
    predicted = {"forward": (2000.0, 1.3), "backward": (900.0, 0.7)}
    for phase, (predicted_us, ratio) in predicted.items():
        row.update({f"predicted-k-{phase}_us": predicted_us,
                    f"predicted-{phase}-k_over_one": ratio,
                    f"predicted-{phase}-verdict": "host-bound",
                    f"predicted-{phase}-host_share": 0.9})
        row.update({f"cuda-k-{phase}_ms": 2.5 if cuda else None,
                    f"cuda-{phase}-k_over_one": 1.39 if cuda else None})
    return row


def test_the_report_puts_each_prediction_beside_the_measurement_with_its_error(
    tmp_path: Path,
) -> None:
    record = {"experiment": "streaming_backward", "failures": {},
              "columns": [{"header": "K", "keys": ["branches"]}],
              "rows": [_predicted_row(4, True), _predicted_row("2 small + 2 large", False)]}
    (tmp_path / "streaming_backward.json").write_text(json.dumps(record))
    outcome = experiment_runs._outcome(tmp_path / "streaming_backward.json", 0)
    rows = outcome["predictions"]
    forward, backward, unmeasured = rows[0], rows[1], rows[2]
    assert forward["row"] == "K = 4" and unmeasured["row"] == "2 small + 2 large"
    assert forward["ratio_difference"] == pytest.approx(-0.09) and forward["ratio_within"]
    assert forward["makespan_error"] == pytest.approx(-0.2) and forward["makespan_within"]
    assert backward["ratio_within"] is False and backward["makespan_within"] is False
    assert unmeasured["ratio_within"] is None and unmeasured["measured_us"] is None
    text = "\n".join(experiment_tables({"runs": [{
        "name": "streaming_backward", "status": OK, "wall_s": 60.0, "failures": {},
        "predictions": rows,
    }], "calibration": {"stored": False, "reason": "device_overhead wrote no record"}}))
    assert "| K = 4 | forward | 1.30 / 1.39 | -0.09 | yes | 2000 / 2500 | -20% | yes |" in text
    assert "| 2 small + 2 large | forward | 1.30 / n/a | n/a | n/a |" in text
    assert ("Targets met, the ratio within 0.15 of measured: 1 of 2 measured rows; the "
            "makespan within 30%: 1 of 2 measured rows.") in text
    assert "Host calibration: not stored (device_overhead wrote no record)." in text


def test_the_check_runs_every_experiment_but_the_host_only_ones() -> None:
    every = experiment_runs.checked(None)
    assert "cpu_defaults" not in every
    assert {"device_overhead", "streaming_backward", "hessian"} <= set(every)
    assert every[0] == "device_overhead", "the calibrating experiment starts first"
    assert experiment_runs.checked(["cpu_defaults"]) == ["cpu_defaults"]


def test_a_cpu_record_becomes_the_default_calibration_and_a_cuda_one_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jaxstream.devices import virtual_host

    costs = tmp_path / "costs.json"
    shutil.copyfile(virtual_host.HOST_COSTS_FILE, costs)
    monkeypatch.setenv(virtual_host.HOST_COSTS_ENV, str(costs))
    record = json.loads((REPOSITORY_ROOT / "experiments/results/device_overhead.json").read_text())
    cpu = tmp_path / "device_overhead.json"
    cpu.write_text(json.dumps(record))
    assert calibration.store_default(cpu) == costs
    stored = json.loads(costs.read_text())
    assert stored["default"]["source"].startswith("device_overhead (")
    assert set(stored["default"]["backends"]) == {"numpy", "jax", "cupy"}
    assert stored["h200"] == json.loads(virtual_host.HOST_COSTS_FILE.read_text())["h200"]
    on_gpu = tmp_path / "on_gpu.json"
    on_gpu.write_text(json.dumps({**record, "device": "cuda"}))
    with pytest.raises(ValueError, match="measured on cuda"):
        calibration.store_default(on_gpu)
