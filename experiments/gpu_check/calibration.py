"""The host side of virtual time, calibrated from device_overhead's record.

device_overhead times jaxstream's chain of tanh and multiply per op of its
forward and per node of its backward in every place a machine has, a chain of
matrix products per op, and a stream's host work (an event record, a wait, a
stream switch) per call. On a GPU (its cuda rows) those are what jaxstream's
host spends on CuPy and on JAX, the driver's launch call included; less that
call for the ops (the profile charges it itself), they are the figures virtual
time charges the host (Note [Virtual time] in jaxstream/devices/virtual_time.py).
The GPU check stores them under the GPU's profile before streaming_backward
predicts; the "default" entry is the same computed from a CPU's record (sim with
the checks off, cuda over the stand-in), where no driver is called.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from experiments.device_overhead.calibrating import PRODUCT_PASS, STREAM_WORK
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
GPU_STREAM_PLACES = {"cupy": "cuda-cupy", "jax": "cuda-cupy"}
CPU_STREAM_PLACES = {"numpy": "sim-numpy", "jax": "sim-numpy", "cupy": "cuda-stand-in"}
"""Per backend, the place whose stream work is its device's (a stream's host work depends on
the device, not on the arrays' backend)."""
COUNTED_LENGTH = 8


def backward_ops_per_node() -> float:
    """How many kernel-launching ops a node of the chain's backward dispatches, counted on
    sim under a virtual clock (as the clock charges them: the copy of the loss's gradient is
    a copy, not an op)."""
    import jaxstream as js
    from jaxstream.devices.virtual_host import LAUNCH, HostCosts

    start = js.tensor(chain.start(), device="sim:0", requires_grad=True)
    loss = chain.tape_chain(start, COUNTED_LENGTH).sum()
    counting = HostCosts(op_s=0.0, node_s=1.0, ops_per_node=1.0)
    with js.sim.virtual_time(host_costs=counting, profile="h100") as clock:
        loss.backward()
    js.autograd.shutdown_engine_threads()
    launches = sum(span.ops for span in clock.host_spans if span.kind == LAUNCH)
    copies = sum(kernel.details["engine"] == "copy" for kernel in clock.kernels)
    return (launches - copies) / COUNTED_LENGTH


def _times(record: dict[str, Any], label: str) -> dict[str, float | None]:
    """The jaxstream us of `label`'s rows of ``record``, by pass."""
    return {row["pass"]: row.get("jaxstream_us") for row in record["rows"]
            if row["place"] == label}


def host_costs_of(record: dict[str, Any], on_gpu: bool, launch_s: float,
                  ops_per_node: float) -> dict[str, Any]:
    """Per backend, its host costs from device_overhead's ``record``: its GPU places' times
    less ``launch_s`` per launch (``on_gpu``), or its CPU places' as they are; a product or
    stream work figure the record lacks is left out (virtual time fills it)."""
    from jaxstream.devices.virtual_host import HostCosts

    labels = {place.peer: place.label for place in (*PLACES, *CUDA_PLACES)}
    places, streams = ((GPU_PLACES, GPU_STREAM_PLACES) if on_gpu
                       else (CPU_PLACES, CPU_STREAM_PLACES))
    driver = launch_s if on_gpu else 0.0
    found = {}
    for backend, peer in places.items():
        times = _times(record, labels[peer])
        if times.get("forward") is None or times.get("backward") is None:
            continue  # not measured in this run (a place that could not run)
        work = _times(record, labels[streams[backend]])
        product = times.get(PRODUCT_PASS)
        found[backend] = HostCosts(
            op_s=max(0.0, times["forward"] * 1e-6 - driver),
            node_s=max(0.0, times["backward"] * 1e-6 - ops_per_node * driver),
            ops_per_node=ops_per_node,
            product_op_s=None if product is None else max(0.0, product * 1e-6 - driver),
            **{f"{name}_s": work[pass_] * 1e-6 for name, pass_ in STREAM_WORK.items()
               if work.get(pass_) is not None},
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


def store_default(record_path: Path) -> Path:
    """Store the host costs of a CPU's device_overhead record (at ``record_path``) as the
    calibration file's "default" entry, the one a GPU never measured falls back to:
    ``python -c "from experiments.gpu_check.calibration import store_default;
    store_default(...)"`` after ``python -m experiments run device_overhead``."""
    from jaxstream.devices import virtual_host

    record = json.loads(record_path.read_text(encoding="utf-8"))
    if record["device"] == "cuda":
        raise ValueError(f"{record_path} was measured on cuda: the GPU check stores it under "
                         "its GPU's profile, not as the CPU's default")
    costs = host_costs_of(record, False, 0.0, backward_ops_per_node())
    return virtual_host.store_calibration(virtual_host.DEFAULT_ENTRY, costs,
                                          source_of(record, None))


def calibration_markdown(details: dict[str, Any], table: Any) -> list[str]:
    """The report's account of the calibration; ``table`` renders a Markdown table."""
    if not details["stored"]:
        return [f"Host calibration: not stored ({details['reason']}).", ""]
    figures = ("op_us", "product_op_us", "node_us", "record_us", "wait_us", "switch_us")
    rows = [(backend, *(_us(found.get(name)) for name in figures), f"{found['ops_per_node']:g}")
            for backend, found in details["backends"].items()]
    return [
        f"Host calibration of virtual time, stored under the {details['profile']} profile in "
        f"`{details['file']}` (measured by {details['source']}), without the driver's launch "
        "call; a figure not measured (n/a) is filled as Note [Virtual time] says:",
        "",
        table(("backend", "us per op", "us per product", "us per backward node",
               "us per event record", "us per wait", "us per stream switch", "ops per node"),
              rows),
        "",
    ]


def _us(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"
