"""`reproduce` runs each experiment as its paper rows declare (Note [One command, this paper]
in experiments/__main__.py): the sizes and threads of the committed records, a process each."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import experiments.__main__ as cli
from experiments import registry


@pytest.fixture
def launched(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The commands `reproduce` starts, none of them run; the paper step left out."""
    commands: list[list[str]] = []

    def fake_run(command: list[str], check: bool) -> subprocess.CompletedProcess:
        commands.append(command)
        return subprocess.CompletedProcess(command, 1 if "compiled" in command else 0)

    monkeypatch.setattr(cli.subprocess, "run", fake_run)
    monkeypatch.setattr(cli, "_paper", lambda *args, **kwargs: 0)
    monkeypatch.setattr(cli, "limit_intra_op_threads", lambda threads: None)  # imported here
    return commands


def _by_name(commands: list[list[str]]) -> dict[str, list[str]]:
    return {command[4]: command[5:] for command in commands}


def test_each_experiment_runs_in_its_own_process_at_its_paper_size(
    launched: list[list[str]], tmp_path: Path
) -> None:
    status = cli.main(["reproduce", "--no-progress", "--out", str(tmp_path)])
    runs = _by_name(launched)
    assert set(runs) == set(registry.experiments())
    assert all(command[:4] == [sys.executable, "-m", "experiments", "run"] for command in launched)
    assert runs["hessian"][:3] == ["--full", "--threads", "1"]
    assert runs["engine_overhead"][:3] == ["--full", "--threads", "1"]
    assert runs["digits_training"][:2] == ["--threads", "0"]
    assert runs["stream_semantics"][:2] == ["--threads", "1"]
    assert all(["--out", str(tmp_path)] == run[-3:-1] for run in runs.values())
    assert status == 1, "an experiment that exited with an error fails the reproduction"


def test_threads_given_replace_the_declared_ones_and_the_default_out_is_not_written_out(
    launched: list[list[str]],
) -> None:
    cli.main(["reproduce", "--no-progress", "--threads", "2"])
    runs = _by_name(launched)
    assert runs["digits_training"][:2] == ["--threads", "2"]
    assert all("--out" not in run for run in runs.values())


def test_a_size_given_runs_everything_here_at_that_size(
    launched: list[list[str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ran: list[tuple[str, str]] = []
    monkeypatch.setattr(cli, "_run", lambda e, options, out: ran.append((e.name, options.mode))
                        or True)
    assert cli.main(["reproduce", "--quick", "--no-progress", "--out", str(tmp_path)]) == 0
    assert launched == []
    assert ran == [(name, "quick") for name in registry.experiments()]


def test_quick_and_full_are_one_choice() -> None:
    with pytest.raises(SystemExit):
        cli.main(["reproduce", "--quick", "--full"])
