"""Moves and casts: `to(device, backend=)` (and, with the dtype work, `to(dtype)`)."""

from __future__ import annotations

from typing import Any

from ..backends import get_backend
from ..devices import Device
from ..devices import device as to_device
from ..tensor import Tensor
from . import functional as F


def to(t: Tensor, device: str | Device | None = None, *, backend: str | None = None) -> Tensor:
    """A differentiable copy on another device and/or backend (`t` itself when nothing changes)."""
    target_backend = get_backend(backend) if backend is not None else t.array_backend
    target_device = to_device(device) if device is not None else t.device
    if target_backend is t.array_backend and target_device == t.device:
        return t
    return F.convert(t, target_backend, target_device)


METHODS: dict[str, Any] = {
    "to": to,
}
