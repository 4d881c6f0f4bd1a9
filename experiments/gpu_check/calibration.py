"""The host side of virtual time, calibrated from device_overhead's record.

device_overhead times jaxstream's chain of tanh and multiply per op of its
forward and per node of its backward in every place a machine has. On a GPU
(its cuda rows) those are what jaxstream's host spends per op on CuPy and on
JAX, the driver's launch call included; less that call (the profile charges it
itself), they are the figures virtual time charges the host (Note [Virtual
time] in jaxstream/devices/virtual_time.py). The GPU check stores them under the
GPU's profile before streaming_backward predicts; the "default" entry is the
same computed from a CPU's record (sim with the checks off, cuda over the
stand-in), where no driver is called.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from experiments.device_overhead.peers import CUDA_PLACES, PLACES
from experiments.gpu_check.commands import relative
from experiments.workloads import tanh_mul_chain as chain

CALIBRATING = "device_overhead"
"""The experiment whose record calibrates the host."""
CALIBRATED = ("streaming_backward",)
"""The experiments that predict with it, so run after it."""
GPU_PLACES = {"cupy": "cuda-cupy", "jax": "cuda-jax"}
CPU_PLACES = {"numpy": "sim-numpy", "jax": "sim-jax", "cupy": "cuda-stand-in"}
"""Per backend, the place whose times are its host costs: on a GPU, and on a CPU."""
COUNTED_LENGTH = 8


def backward_ops_per_node() -> float:
    """How many kernel-launching ops a node of the chain's backward dispatches, counted on
    sim under a virtual clock (as the clock charges them: the copy of the loss's gradient is
    a copy, not an op)."""
    import jaxstream as js
    from jaxstream.devices.virtual_host import HostCosts

    start = js.tensor(chain.start(), device="sim:0", requires_grad=True)
    loss = chain.tape_chain(start, COUNTED_LENGTH).sum()
    counting = HostCosts(op_s=0.0, node_s=1.0, ops_per_node=1.0)
    with js.sim.virtual_time(host_costs=counting, profile="h100") as clock:
        loss.backward()
    js.autograd.shutdown_engine_threads()
    launches = sum(span.ops for span in clock.host_spans)
    copies = sum(kernel.details["engine"] == "copy" for kernel in clock.kernels)
    return (launches - copies) / COUNTED_LENGTH


def host_costs_of(record: dict[str, Any], on_gpu: bool, launch_s: float,
                  ops_per_node: float) -> dict[str, Any]:
    """Per backend, its host costs from device_overhead's ``record``: its GPU places' times
    less ``launch_s`` per launch (``on_gpu``), or its CPU places' as they are."""
    from jaxstream.devices.virtual_host import HostCosts

    labels = {place.peer: place.label for place in (*PLACES, *CUDA_PLACES)}
    places = GPU_PLACES if on_gpu else CPU_PLACES
    driver = launch_s if on_gpu else 0.0
    found = {}
    for backend, peer in places.items():
        times = {
            row["pass"]: row.get("jaxstream_us")
            for row in record["rows"] if row["place"] == labels[peer]
        }
        if times.get("forward") is None or times.get("backward") is None:
            continue  # not measured in this run (a place that could not run)
        found[backend] = HostCosts(
            op_s=max(0.0, times["forward"] * 1e-6 - driver),
            node_s=max(0.0, times["backward"] * 1e-6 - ops_per_node * driver),
            ops_per_node=ops_per_node,
        )
    return found


def source_of(record: dict[str, Any], gpu: str | None) -> str:
    """Where a calibration was measured, for the file and the report."""
    where = gpu or record["machine"]["processor"]
    return (f"device_overhead ({record['mode']} mode, --device {record['device']}) on {where}, "
            f"{record['date_utc']}, revision {record['revision'] or 'unknown'}")


def calibrate(record_path: Path, *, device: str, gpu: str | None,
              records: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """Store the host costs of device_overhead's record at ``record_path`` under the GPU's
    profile; the report's account of it, and the environment the calibrated experiments run
    in. On cuda they go to the calibration file beside the profiles; a rehearsal stores its
    CPU-measured ones in a copy of that file among its ``records`` and points
    ``JAXSTREAM_HOST_COSTS`` at it, so that the source tree is never changed."""
    from jaxstream.devices import profiles, virtual_host

    on_gpu = device == "cuda"
    profile = profiles.profile_for_gpu(gpu) if gpu else profiles.PROFILES[profiles.DEFAULT_PROFILE]
    if profile is None:
        return {"stored": False, "reason": f"no device profile describes {gpu}, so the "
                "predictions used the default profile and calibration"}, {}
    if not record_path.exists():
        return {"stored": False, "reason": f"{CALIBRATING} wrote no record"}, {}
    record = json.loads(record_path.read_text(encoding="utf-8"))
    costs = host_costs_of(record, on_gpu, profile.host_launch_s, backward_ops_per_node())
    if not costs:
        return {"stored": False, "reason": f"{CALIBRATING} timed none of the places that "
                "calibrate the host"}, {}
    target = virtual_host.costs_file()
    if not on_gpu:
        target = shutil.copyfile(target, records / virtual_host.HOST_COSTS_FILE.name)
    source = source_of(record, gpu)
    virtual_host.store_calibration(profile.name, costs, source, target)
    details = {
        "stored": True, "profile": profile.name, "file": str(relative(target)), "source": source,
        "backends": {backend: found.to_json() for backend, found in costs.items()},
    }
    return details, {} if on_gpu else {virtual_host.HOST_COSTS_ENV: str(target)}


def calibration_markdown(details: dict[str, Any], table: Any) -> list[str]:
    """The report's account of the calibration; ``table`` renders a Markdown table."""
    if not details["stored"]:
        return [f"Host calibration: not stored ({details['reason']}).", ""]
    rows = [(backend, f"{found['op_us']:.1f}", f"{found['node_us']:.1f}",
             f"{found['ops_per_node']:g}") for backend, found in details["backends"].items()]
    return [
        f"Host calibration of virtual time, stored under the {details['profile']} profile in "
        f"`{details['file']}` (measured by {details['source']}), without the driver's launch "
        "call:",
        "",
        table(("backend", "us per op", "us per backward node", "ops per node"), rows),
        "",
    ]
