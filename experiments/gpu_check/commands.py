"""A step's subprocess, run within its wall-time budget, whose output the report may quote.

Each command runs in a process group of its own, so that a timeout ends it with
every process it started (pytest's workers, an experiment's worker processes).
Its output goes to a log file; the report quotes only its tail, with the
machine's own paths (the repository, the home directory) written as `.` and
`~`, so that a report says nothing about the machine it ran on beyond what the
environment step records.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
TAIL_LINES = 15


@dataclass(frozen=True)
class CommandResult:
    """How a command ended: its exit status (None if its budget ran out), its wall time."""

    returncode: int | None
    wall_s: float
    log: Path

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def tail(self, lines: int = TAIL_LINES) -> str:
        """The last ``lines`` lines of the output, with the machine's paths scrubbed."""
        text = self.log.read_text(encoding="utf-8", errors="replace")
        return scrub("\n".join(text.rstrip().splitlines()[-lines:]))


def scrub(text: str) -> str:
    """``text`` with the repository's path written as `.` and the home directory as `~`."""
    text = text.replace(str(REPOSITORY_ROOT), ".")
    home = os.path.expanduser("~")
    return text.replace(home, "~") if home not in ("", "/") else text


def relative(path: Path) -> Path:
    """``path`` relative to the repository where it lies in it (a record names its command,
    and a command run in the repository needs no machine path)."""
    try:
        return path.resolve().relative_to(REPOSITORY_ROOT)
    except ValueError:
        return path


def run_command(
    argv: Sequence[str], *, timeout_s: float, log: Path, env: dict[str, str]
) -> CommandResult:
    """Run ``argv`` in the repository, output to ``log``; end its process group at the budget."""
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(
            list(argv), cwd=REPOSITORY_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
        try:
            returncode: int | None = process.wait(timeout=max(timeout_s, 0.0))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            returncode = None
    return CommandResult(returncode, time.perf_counter() - start, log)
