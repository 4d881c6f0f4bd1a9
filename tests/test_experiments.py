"""The experiments command line and each experiment's records, in a tiny (smoke) size.

Timings are never asserted here: they belong in the results, not in pass/fail.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.random_dag import make_plan
from experiments.registry import discover
from experiments.result import Column
from experiments.timing import Missing, PeerUnavailable, Timing, time_interleaved

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = sorted(discover())
RECORD_KEYS = {
    "schema_version",
    "experiment",
    "description",
    "command",
    "date_utc",
    "mode",
    "device",
    "intra_op_threads",
    "revision",
    "machine",
    "versions",
    "parameters",
    "columns",
    "rows",
    "checks",
    "failures",
    "notes",
    "files",
}


def run_cli(*arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "experiments", *arguments],
        cwd=REPOSITORY_ROOT,
        capture_output=True,
        text=True,
        timeout=110,
        env=env,
    )


def smoke_run(name: str, out_dir: Path, env: dict[str, str] | None = None) -> dict:
    completed = run_cli("run", name, "--smoke", "--no-progress", "--out", str(out_dir), env=env)
    assert completed.returncode == 0, completed.stderr
    return json.loads((out_dir / f"{name}.json").read_text(encoding="utf-8"))


def test_list_names_every_experiment_with_a_description() -> None:
    completed = run_cli("list")
    assert completed.returncode == 0, completed.stderr
    listed = dict(line.split(maxsplit=1) for line in completed.stdout.splitlines())
    assert {"engine_overhead", "hessian"} <= set(listed)
    assert sorted(listed) == EXPERIMENTS
    assert all(description.strip() for description in listed.values())


def test_unknown_experiment_is_refused() -> None:
    completed = run_cli("run", "no_such_experiment", "--smoke")
    assert completed.returncode == 2
    assert "no_such_experiment" in completed.stderr


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_smoke_run_writes_a_complete_record_and_table(name: str, tmp_path: Path) -> None:
    record = smoke_run(name, tmp_path)

    assert set(record) == RECORD_KEYS
    assert record["experiment"] == name
    assert record["mode"] == "smoke"
    assert f"-m experiments run {name} --smoke" in record["command"]
    date = datetime.datetime.fromisoformat(record["date_utc"])
    assert date.utcoffset() == datetime.timedelta(0)
    assert {"platform", "processor", "cpu_count"} <= set(record["machine"])
    assert {"python", "numpy", "jax", "torch", "jaxstream"} <= set(record["versions"])
    assert record["failures"] == {}
    assert record["rows"]
    keys = [key for column in record["columns"] for key in column["keys"]]
    for row in record["rows"]:
        assert set(keys) <= set(row)
        assert all(timing["status"] in {"ok", "n/a"} for timing in row.get("timings", {}).values())

    markdown = (tmp_path / record["files"]["markdown"]).read_text(encoding="utf-8")
    header = "| " + " | ".join(column["header"] for column in record["columns"]) + " |"
    lines = markdown.splitlines()
    assert header in lines
    table_start = lines.index(header)
    assert lines[table_start + 1].startswith("|---")
    assert all(
        line.startswith("| ")
        for line in lines[table_start + 2 : table_start + 2 + len(record["rows"])]
    )
    if record["files"]["plot"]:
        assert (tmp_path / record["files"]["plot"]).read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_without_torch_its_columns_read_not_available(name: str, tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "torch"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('torch is hidden by the test')\n")
    path = os.pathsep.join(filter(None, [str(shadow.parent), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    record = smoke_run(name, tmp_path / "out", env=env)

    assert record["failures"] == {}
    for row in record["rows"]:
        for peer, timing in row.get("timings", {}).items():
            if peer.startswith("torch"):
                assert timing == {"status": "n/a", "reason": "torch is not installed"}


def test_interleaved_timing_tells_absent_peers_from_failing_ones() -> None:
    def absent() -> None:
        raise PeerUnavailable("not installed here")

    def broken() -> None:
        raise ValueError("a bug")

    outcomes = time_interleaved(
        {"ok": lambda: lambda: None, "absent": absent, "broken": broken}, warmup=1, repeat=3
    )
    assert isinstance(outcomes["ok"], Timing) and len(outcomes["ok"].samples_s) == 3
    assert outcomes["absent"] == Missing("not installed here", failed=False)
    assert outcomes["broken"].failed and "ValueError: a bug" in outcomes["broken"].reason


def test_columns_render_missing_values_as_not_available() -> None:
    column = Column("ratio (median / min)", ("median", "min"), "{:.2f}x")
    assert column.render({"median": 1.234, "min": None}) == "1.23x / n/a"


def test_random_dag_is_reproducible_from_its_seed() -> None:
    assert make_plan(20, 5, seed=3) == make_plan(20, 5, seed=3)
    assert make_plan(20, 5, seed=3) != make_plan(20, 5, seed=4)
    assert make_plan(20, 5, seed=3).backward_node_count() >= 5
