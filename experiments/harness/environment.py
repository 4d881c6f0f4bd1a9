"""Where and with what a result was produced, so a table can be traced back."""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

_PACKAGES = ("numpy", "jax", "jaxlib", "torch", "jaxstream")
_REPOSITORY_ROOT = Path(__file__).resolve().parents[2]


def command_line() -> str:
    """The command as typed, with the interpreter named by its file name only."""
    argv = list(getattr(sys, "orig_argv", sys.argv))
    argv[0] = Path(argv[0]).name
    return shlex.join(argv)


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _processor_model() -> str:
    """``platform.processor()`` is empty on most Linux systems; cpuinfo names the model."""
    model = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return model or "unknown"


def machine() -> dict[str, Any]:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": _processor_model(),
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable,
    }


def versions() -> dict[str, str]:
    """Installed versions; "n/a" for a package that is not installed."""
    found = {"python": platform.python_version()}
    for package in _PACKAGES:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "n/a"
    return found


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    """A read-only git query (optional locks off, so not even the index is refreshed)."""
    return subprocess.run(
        ["git", *args],
        cwd=_REPOSITORY_ROOT,
        capture_output=True,
        text=True,
        timeout=10,
        env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
    )


def revision() -> str | None:
    """The checked-out commit (with "-dirty" for tracked changes), or None outside git."""
    try:
        commit = _git("rev-parse", "--short", "HEAD")
        if commit.returncode != 0:
            return None
        changed = _git("diff-index", "--quiet", "HEAD", "--").returncode != 0
    except (OSError, subprocess.SubprocessError):
        return None
    return commit.stdout.strip() + ("-dirty" if changed else "")
