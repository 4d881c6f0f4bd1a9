"""Devices: where an array lives, and which engine worker serves it.

`cpu` work runs on the thread that called backward. Each accelerator device
index (`cuda:N` and `sim:N` share indices, as CUDA and XLA share them in
PyTorch's engine) is served by one long-lived worker thread.

What differs between the device types (streams, events, XLA's stream, the
device guard, the sanitizer's policy, the virtual clock) is supplied by each
type's `DeviceKind` object, `Device.kind`; see jaxstream/devices/kind.py and
its Note [Device guards]. Each thread's current device is kept in current.py.
"""

from __future__ import annotations

import os
from typing import Any

from .cuda import CUPY_MISSING, GPU_STACK, CudaKind, cuda_device_count, require_cupy
from .kind import STREAM_CHECK_ENV, CpuKind, DeviceGuardError, DeviceKind
from .simulated import SimDevices, SimKind, sim
from .xla import TWIN_ENV, jax_gpus, twin

KINDS: dict[str, DeviceKind] = {kind.name: kind for kind in (CpuKind(), SimKind(), CudaKind())}
DEVICE_TYPES = tuple(KINDS)
ACCELERATOR_TYPES = tuple(name for name, kind in KINDS.items() if kind.has_streams)


_DEVICES: dict[tuple[str, int | None], Device] = {}
"""(type, index) -> the one Device object of that device."""


class Device:
    """An immutable (type, index) pair; `index` is None for the cpu.

    `kind` is the type's `DeviceKind`, which supplies what differs between types;
    `is_accelerator` (it has streams, and an engine worker thread per index) is
    kept as a field because every op on every device reads it.

    There is one object per device (`Device("sim", 0) is device("sim:0")`), so that
    a dictionary keyed by devices, such as each thread's current streams, finds one by
    identity, with no hash or comparison written in Python: every op on an accelerator
    looks one up (Note [An op on an accelerator] in ops/dispatch.py).

    `venues` holds the op venue of each backend's arrays on the device (Note [Deciding
    once where an op runs] in ops/venues.py), where an op finds its own by one lookup.
    """

    __slots__ = ("type", "index", "kind", "is_accelerator", "venues")

    def __new__(cls, type: str, index: int | None = None) -> Device:
        kind = KINDS.get(type)
        if kind is None:
            raise ValueError(
                f"unknown device type {type!r}; expected one of {', '.join(DEVICE_TYPES)}"
            )
        if not kind.has_streams:
            index = None  # there is one host
        elif index is None:
            index = 0
        elif not isinstance(index, int) or index < 0:
            raise ValueError(f"device index must be a non-negative int, got {index!r}")
        found = _DEVICES.get((type, index))
        if found is not None:
            return found
        made = object.__new__(cls)
        object.__setattr__(made, "type", type)
        object.__setattr__(made, "index", index)
        object.__setattr__(made, "kind", kind)
        object.__setattr__(made, "is_accelerator", kind.has_streams)
        object.__setattr__(made, "venues", {})
        return _DEVICES.setdefault((type, index), made)  # one object, whichever thread won

    def __reduce__(self) -> tuple:
        return (Device, (self.type, self.index))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Device is immutable")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = device(other)
        return self is other

    __hash__ = object.__hash__  # one object per device: identity is equality

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return f"device({str(self)!r})"


CPU = Device("cpu")


def forget_venues() -> None:
    """Drop every device's op venues, to be made again at the next op of each: a venue reads
    its backend's flags once (Note [Deciding once where an op runs] in ops/venues.py), so a
    change to them (a test running JAX's kernels uncompiled) takes effect only after this."""
    for known in tuple(_DEVICES.values()):
        known.venues.clear()


def device(spec: str | Device | None) -> Device:
    """Parse `"cpu"`, `"cuda:0"`, `"sim:1"` (or pass a Device through)."""
    if isinstance(spec, Device):
        return spec
    if spec is None:
        return CPU
    if not isinstance(spec, str):
        raise TypeError(f"a device is a string like 'cpu' or 'sim:0', got {type(spec).__name__}")
    type_name, _, idx = spec.partition(":")
    if idx and not idx.isdigit():
        raise ValueError(f"bad device string {spec!r}: the index must be a non-negative int")
    return Device(type_name, int(idx) if idx else None)


def device_of_jax(jax_device: Any) -> Device:
    """The jaxstream device whose JAX arrays `jax_device` holds (Note [JAX devices of
    jaxstream devices] in xla.py)."""
    gpus = jax_gpus()
    if jax_device in gpus:
        return Device("cuda", gpus.index(jax_device))
    index = twin.sim_index(jax_device)
    if index is not None:
        return Device("sim", index)
    if jax_device.platform == "cpu":
        return CPU
    raise RuntimeError(f"jaxstream does not support JAX arrays on {jax_device.platform!r} devices")


if os.environ.get(TWIN_ENV) == "1":
    twin.start(sim.device_count())  # Note [The GPU twin] in xla.py

sim_device_count = sim.device_count
set_sim_device_count = sim.set_device_count

__all__ = [
    "ACCELERATOR_TYPES",
    "CPU",
    "CUPY_MISSING",
    "DEVICE_TYPES",
    "KINDS",
    "STREAM_CHECK_ENV",
    "CpuKind",
    "CudaKind",
    "Device",
    "DeviceGuardError",
    "DeviceKind",
    "GPU_STACK",
    "SimDevices",
    "SimKind",
    "cuda_device_count",
    "device",
    "device_of_jax",
    "jax_gpus",
    "require_cupy",
    "set_sim_device_count",
    "sim",
    "sim_device_count",
    "twin",
]
