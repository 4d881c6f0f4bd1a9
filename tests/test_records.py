"""What a record says about the code and the machine it measured: the revision and its diff,
the package versions, the thread and allocator variables, memory and load, the pinned lock."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from experiments.harness import conditions, environment, revision

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
LOCK = REPOSITORY_ROOT / "requirements-lock.txt"


def _git(repository: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repository, check=True, capture_output=True)


@pytest.fixture
def repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A committed tree with code, a results file and the paper, as the harness's root."""
    for path, text in {"code.py": "x = 1\n", "experiments/results/run.json": "{}\n",
                       "paper/paper.md": "# paper\n"}.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=test", "-c", "user.email=test@example.com",
         "commit", "-q", "-m", "start")
    monkeypatch.setattr(revision, "_REPOSITORY_ROOT", tmp_path)
    return tmp_path


def test_rewritten_outputs_do_not_make_the_tree_dirty(repository: Path) -> None:
    (repository / "experiments/results/run.json").write_text('{"rerun": true}\n')
    (repository / "paper/paper.md").write_text("# paper, rebuilt\n")
    (repository / "notes.txt").write_text("untracked\n")
    assert not revision.revision().endswith("-dirty")
    assert revision.code_diff() is None


def test_a_code_change_makes_it_dirty_and_its_diff_is_kept(repository: Path) -> None:
    (repository / "code.py").write_text("x = 2\n")
    (repository / "experiments/results/run.json").write_text('{"rerun": true}\n')
    (repository / "helper.py").write_text("y = 1\n")
    assert revision.revision().endswith("-dirty")
    diff = revision.code_diff()
    assert "+x = 2" in diff and "run.json" not in diff
    assert diff.endswith("# untracked: helper.py\n")


def test_a_long_diff_is_cut(repository: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(revision, "DIFF_LIMIT", 100)
    (repository / "code.py").write_text("x = 2\n" * 200)
    diff = revision.code_diff()
    assert "# ... cut at 100 bytes of" in diff and len(diff) < 300


def test_versions_name_the_pinned_packages_and_every_imported_one() -> None:
    import numpy  # noqa: F401

    found = environment.versions()
    assert set(environment.PACKAGES) | {"python"} == set(found)
    imported = environment.imported_versions()
    assert imported["numpy"] == found["numpy"]
    assert not {"os", "sys", "json"} & set(imported)


def test_the_thread_and_allocator_variables_are_kept_without_machine_paths(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("MALLOC_ARENA_MAX", "2")
    monkeypatch.setenv("XLA_FLAGS", f"--xla_dump_to={REPOSITORY_ROOT}/dump")
    monkeypatch.setenv("UNRELATED_SETTING", "1")
    found = conditions.variables()
    assert found["OMP_NUM_THREADS"] == "3" and found["MALLOC_ARENA_MAX"] == "2"
    assert found["XLA_FLAGS"] == "--xla_dump_to=./dump"
    assert "UNRELATED_SETTING" not in found


def test_a_snapshot_holds_memory_and_load() -> None:
    found = conditions.snapshot()
    assert set(found) == {"memory_total_bytes", "memory_available_bytes", "load_average"}
    if Path("/proc/meminfo").exists():
        assert 0 < found["memory_available_bytes"] <= found["memory_total_bytes"]
    assert conditions.conditions(found)["at_start"] is found


def test_the_lock_pins_every_package_a_record_names_but_not_the_project() -> None:
    pins = dict(
        line.split("==", 1)
        for line in LOCK.read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    )
    named = {package.lower() for package in environment.PACKAGES} - {"jaxstream"}
    assert named <= {name.lower() for name in pins}
    assert not any(name.lower() == "jaxstream" or name.startswith("-e") for name in pins)
    assert all("+" not in version for version in pins.values())  # installable from PyPI
