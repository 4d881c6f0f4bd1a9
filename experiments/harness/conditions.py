"""The conditions a run met: the settings that steer threads and allocators, memory and load.

A timing depends on more than the code: how many threads each library may start
and how its allocator behaves (read from the environment when it loads), how
much memory was free and how busy the machine was. A record keeps the variables
of ``VARIABLE_PREFIXES`` as the run saw them, and the memory and load average at
the start and at the end of the run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

VARIABLE_PREFIXES = ("OMP_", "MKL_", "OPENBLAS_", "XLA_FLAGS", "JAX_", "MALLOC_", "JAXSTREAM_")
_REPOSITORY_ROOT = Path(__file__).resolve().parents[2]


def variables() -> dict[str, str]:
    """The thread and allocator variables that are set, with machine paths written relative."""
    return {
        name: _scrub(value)
        for name, value in sorted(os.environ.items())
        if name.startswith(VARIABLE_PREFIXES)
    }


def _scrub(text: str) -> str:
    """``text`` with the repository's path written as `.` and the home directory as `~`."""
    text = text.replace(str(_REPOSITORY_ROOT), ".")
    home = os.path.expanduser("~")
    return text.replace(home, "~") if home not in ("", "/") else text


def snapshot() -> dict[str, Any]:
    """Memory (bytes; None where the platform does not say) and the 1, 5 and 15 minute
    load averages, now."""
    memory = _meminfo()
    return {
        "memory_total_bytes": memory.get("MemTotal"),
        "memory_available_bytes": memory.get("MemAvailable"),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def _meminfo() -> dict[str, int]:
    """/proc/meminfo's fields in bytes; empty where there is none."""
    try:
        lines = Path("/proc/meminfo").read_text(encoding="utf-8").splitlines()
    except OSError:
        return {}
    found = {}
    for line in lines:
        name, _, value = line.partition(":")
        number, _, unit = value.strip().partition(" ")
        if number.isdigit():
            found[name] = int(number) * (1024 if unit == "kB" else 1)
    return found


def conditions(at_start: dict[str, Any] | None) -> dict[str, Any]:
    """The record's ``environment``: the variables, and the snapshots at start and end."""
    return {"variables": variables(), "at_start": at_start, "at_end": snapshot()}
