"""The README's GPU section, run as a user would: each command of its code blocks.

The section is read from README.md each time, so the check follows it as it
changes. Each command is run as written, on the check's device (a rehearsal
writes ``--device sim`` for ``--device cuda``), with the budget shared between
them, except where another step already runs it (``pytest -m cuda``, an
experiment) or it installs packages (``pip install``, whose result the
environment step records): only ``python`` commands run, so that the check never
installs, nor starts itself or a whole reproduction again. A Python block runs
in a process of its own.
"""

from __future__ import annotations

import re
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.gpu_check.commands import REPOSITORY_ROOT, run_command
from experiments.gpu_check.steps import FAILED, OK, TIMED_OUT, StepResult

README = REPOSITORY_ROOT / "README.md"
SECTION = "## Running on a GPU"
_BLOCK = re.compile(r"```(bash|sh|python)\n(.*?)```", re.S)


@dataclass(frozen=True)
class Command:
    """One command of the section: its text, and how the check treats it."""

    text: str
    language: str

    @property
    def covered_by(self) -> str | None:
        """Why the step does not run it itself, or None."""
        if self.language == "python":
            return None
        words = self.text.split()
        for prefixes, reason in COVERED:
            if any(words[: len(prefix)] == prefix for prefix in prefixes):
                return reason
        return None if words[:1] == ["python"] else "the check runs python commands only"


COVERED = (
    ((["pip", "install"],), "installs packages: the environment step shows what is installed"),
    ((["make", "gpu-check"], ["python", "-m", "experiments.gpu_check"]), "this check itself"),
    ((["pytest"], ["make", "test"]), "run by the pytest steps (pytest -m cuda, the whole suite)"),
    ((["python", "-m", "experiments"], ["make", "reproduce"]), "run by the experiments step"),
)
"""Commands another step runs, or that the check must not (by their first words)."""


def section_text(readme: Path = README) -> str:
    """The GPU section of the README, up to the next section."""
    text = readme.read_text(encoding="utf-8")
    start = text.find(SECTION)
    if start < 0:
        raise ValueError(f"README.md has no section {SECTION!r}")
    end = text.find("\n## ", start + len(SECTION))
    return text[start : end if end >= 0 else len(text)]


def commands(readme: Path = README) -> list[Command]:
    """Every command of the section's shell blocks (comments dropped), and its Python blocks."""
    found = []
    for language, body in _BLOCK.findall(section_text(readme)):
        if language == "python":
            found.append(Command(body, language))
            continue
        for line in body.splitlines():
            text = line.split(" #", 1)[0].strip()
            if text and not text.startswith("#"):
                found.append(Command(text, "bash"))
    return found


def _argv(command: Command, device: str) -> list[str]:
    if command.language == "python":
        return [sys.executable, "-c", command.text]
    words = shlex.split(command.text.replace("--device cuda", f"--device {device}"))
    return [sys.executable, *words[1:]]


def _run(
    command: Command, device: str, timeout_s: float, env: dict[str, str], log: Path
) -> dict[str, Any]:
    entry: dict[str, Any] = {"command": command.text}
    reason = command.covered_by
    if reason is not None:
        return {**entry, "status": "not run here", "reason": reason}
    argv = _argv(command, device)
    ran = shlex.join(["python" if word == sys.executable else word for word in argv])
    if command.language != "python" and ran != command.text:
        entry["ran_as"] = ran
    result = run_command(argv, timeout_s=timeout_s, log=log, env=env)
    status = TIMED_OUT if result.timed_out else OK if result.returncode == 0 else FAILED
    entry.update(status=status, wall_s=result.wall_s)
    if status != OK:
        entry["output_tail"] = result.tail()
    return entry


def run_readme(device: str, *, timeout_s: float, env: dict[str, str], logs: Path) -> StepResult:
    """Run the section's commands in order, sharing ``timeout_s`` between those run here."""
    start = time.perf_counter()
    found = commands()
    to_run = sum(command.covered_by is None for command in found)
    ran: list[dict[str, Any]] = []
    for index, command in enumerate(found):
        left = timeout_s - (time.perf_counter() - start)
        share = left / max(to_run - sum("wall_s" in entry for entry in ran), 1)
        ran.append(_run(command, device, share, env, logs / f"readme-{index}.log"))
    bad = [entry for entry in ran if entry["status"] in (FAILED, TIMED_OUT)]
    status = TIMED_OUT if any(e["status"] == TIMED_OUT for e in bad) else FAILED if bad else OK
    summary = (
        f"{to_run - len(bad)} of {to_run} commands ran cleanly; "
        f"{len(found) - to_run} not run here (other steps run them, or they install)"
    )
    return StepResult(
        "readme", f"README: {SECTION.removeprefix('## ')}", status,
        time.perf_counter() - start, timeout_s, summary, {"commands": ran},
    )
