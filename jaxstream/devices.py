"""Devices: where an array lives, and which engine worker serves it.

`cpu` work runs on the thread that called backward. Each accelerator device
index (`cuda:N` and `sim:N` share indices, as CUDA and XLA share them in
PyTorch's engine) is served by one long-lived worker thread.
"""

from __future__ import annotations

import os
import threading

ACCELERATOR_TYPES = ("cuda", "sim")
DEVICE_TYPES = ("cpu", *ACCELERATOR_TYPES)


class Device:
    """An immutable (type, index) pair; `index` is None for the cpu."""

    __slots__ = ("type", "index", "_hash")

    def __init__(self, type: str, index: int | None = None) -> None:
        if type not in DEVICE_TYPES:
            raise ValueError(
                f"unknown device type {type!r}; expected one of {', '.join(DEVICE_TYPES)}"
            )
        if type == "cpu":
            index = None
        elif index is None:
            index = 0
        elif not isinstance(index, int) or index < 0:
            raise ValueError(f"device index must be a non-negative int, got {index!r}")
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "_hash", hash((type, index)))

    def __reduce__(self) -> tuple:
        return (Device, (self.type, self.index))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Device is immutable")

    @property
    def is_accelerator(self) -> bool:
        return self.type != "cpu"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = device(other)
        return (
            isinstance(other, Device) and self.type == other.type and self.index == other.index
        )

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return f"device({str(self)!r})"


CPU = Device("cpu")


def device(spec: str | Device | None) -> Device:
    """Parse `"cpu"`, `"cuda:0"`, `"sim:1"` (or pass a Device through)."""
    if isinstance(spec, Device):
        return spec
    if spec is None:
        return CPU
    if not isinstance(spec, str):
        raise TypeError(f"a device is a string like 'cpu' or 'sim:0', got {type(spec).__name__}")
    kind, _, idx = spec.partition(":")
    if idx and not idx.isdigit():
        raise ValueError(f"bad device string {spec!r}: the index must be a non-negative int")
    return Device(kind, int(idx) if idx else None)


class _SimDevices:
    """How many simulated accelerators exist (`JAXSTREAM_SIM_DEVICES`, default 2)."""

    def __init__(self) -> None:
        self.count = int(os.environ.get("JAXSTREAM_SIM_DEVICES", "2"))
        self.lock = threading.Lock()


_sim = _SimDevices()


def sim_device_count() -> int:
    return _sim.count


def set_sim_device_count(n: int) -> None:
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"the sim device count must be a non-negative int, got {n!r}")
    with _sim.lock:
        _sim.count = n
