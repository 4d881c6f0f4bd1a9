"""The environment step: what this install sees, asked in a process of its own.

The probe runs as ``python -m experiments.gpu_check.probe`` and prints one JSON
object: the GPU (name, driver, CUDA versions), JAX's and CuPy's versions and
devices, torch's and whether it sees CUDA, and jaxstream's revision. A process
of its own keeps the check's own process free of a GPU context, and a hung
driver within the step's budget.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from typing import Any

from experiments.harness.revision import revision

CUDA_PACKAGES = tuple(
    f"{package}-cuda{generation}{suffix}"
    for generation in ("12", "13")
    for package, suffix in (("cupy", "x"), ("jax", "-plugin"), ("jax", "-pjrt"))
)
"""The packages of the `cuda12` and `cuda13` extras, whose installed versions a report names."""


def _cuda_version(number: int) -> str:
    """CUDA's integer version (12040) as it is written (12.4)."""
    return f"{number // 1000}.{number % 1000 // 10}"


def _nvidia_smi() -> dict[str, Any]:
    try:
        completed = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return {"error": f"nvidia-smi: {type(error).__name__}"}
    rows = [line.split(", ") for line in completed.stdout.strip().splitlines() if ", " in line]
    return {"gpus": [{"name": name, "driver_version": driver} for name, driver in rows]}


def _jax() -> dict[str, Any]:
    import jax

    try:
        gpus = [str(device) for device in jax.devices("gpu")]
    except RuntimeError:
        gpus = []
    return {
        "version": jax.__version__,
        "jaxlib": metadata.version("jaxlib"),
        "default_backend": jax.default_backend(),
        "devices": [str(device) for device in jax.devices()],
        "gpus": gpus,
    }


def _cupy() -> dict[str, Any]:
    try:
        import cupy
    except ImportError:
        return {"version": "not installed", "devices": []}
    runtime = cupy.cuda.runtime
    try:
        count = runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as error:
        return {"version": cupy.__version__, "devices": [], "error": str(error)}
    names = [runtime.getDeviceProperties(index)["name"] for index in range(count)]
    return {
        "version": cupy.__version__,
        "devices": [name.decode() if isinstance(name, bytes) else str(name) for name in names],
        "cuda_runtime": _cuda_version(runtime.runtimeGetVersion()),
        "cuda_driver_api": _cuda_version(runtime.driverGetVersion()),
    }


def _torch() -> dict[str, Any]:
    try:
        import torch
    except ImportError:
        return {"version": "not installed", "cuda_available": False}
    return {
        "version": torch.__version__,
        "cuda_available": torch.cuda.is_available(),
        "cuda": torch.version.cuda,
    }


def _jaxstream() -> dict[str, Any]:
    import jaxstream as js
    from jaxstream.devices import twin
    from jaxstream.streams import cuda_device_count

    return {
        "version": js.__version__,  # also where the checkout is run from the path
        "revision": revision(),
        "cuda_devices": cuda_device_count(),
        "gpu_twin": twin.enabled,
        "sim0_jax_device": str(js.device("sim:0").kind.jax_device(0)),
    }


def _packages() -> dict[str, str]:
    """The installed ones of ``CUDA_PACKAGES``, with their versions."""
    found = {}
    for package in CUDA_PACKAGES:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return found


def gpu_name(facts: dict[str, Any]) -> str | None:
    """The first GPU's name, as CuPy, nvidia-smi or JAX reports it; None without one."""
    named = [
        *facts["cupy"]["devices"],
        *(gpu["name"] for gpu in facts["nvidia_smi"].get("gpus", [])),
    ]
    return named[0] if named else None


def probe() -> dict[str, Any]:
    # jaxstream first: the GPU twin must give JAX its devices before JAX runs anything.
    found_jaxstream = _jaxstream()
    facts = {
        "python": sys.version.split()[0],
        "nvidia_smi": _nvidia_smi(),
        "jax": _jax(),
        "cupy": _cupy(),
        "torch": _torch(),
        "jaxstream": found_jaxstream,
        "cuda_packages": _packages(),
    }
    facts["gpu_name"] = gpu_name(facts)
    return facts


if __name__ == "__main__":
    print(json.dumps(probe()))
