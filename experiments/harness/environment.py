"""Where and with what a result was produced, so a table can be traced back."""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = (
    "numpy", "jax", "jaxlib", "optax", "torch", "scikit-learn", "matplotlib", "threadpoolctl",
    "array-api-compat", "jaxstream",
)
"""The packages every record names, imported by the run or not."""


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
    """Python's version and each of ``PACKAGES``'; "n/a" for one that is not installed."""
    found = {"python": platform.python_version()}
    found.update({package: _version(package) or "n/a" for package in PACKAGES})
    return found


def imported_versions() -> dict[str, str]:
    """Every package the process imported, by distribution name: the modules in
    ``sys.modules`` that importlib.metadata maps to a distribution, or else carry a
    ``__version__``; the standard library and private modules left out."""
    distributions = metadata.packages_distributions()
    found: dict[str, str] = {}
    for name, module in list(sys.modules.items()):
        if "." in name or name.startswith("_") or name in sys.stdlib_module_names:
            continue
        for distribution in distributions.get(name, []):
            found[distribution] = _version(distribution) or "n/a"
        own = getattr(module, "__version__", None)
        if name not in distributions and isinstance(own, str):
            found[name] = own
    return dict(sorted(found.items(), key=lambda item: item[0].lower()))


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None
