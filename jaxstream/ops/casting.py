"""Moves and casts: `to(device, dtype, backend=)`, and `float()`, `double()`, `half()`, ...

Every one is differentiable (node `ToCopyBackward0`): the gradient goes back to
the source's device, backend and dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import transfer
from ..devices import DEVICE_TYPES, Device
from ..tensor import Tensor
from . import functional as F
from .operands import astype


def _is_device(spec: Any) -> bool:
    """Whether a positional argument of `to` names a device ("cpu", "sim:1", a Device)."""
    return isinstance(spec, Device) or (
        isinstance(spec, str) and spec.partition(":")[0] in DEVICE_TYPES
    )


def _move(t: Tensor, device: Any, backend: str | None) -> Tensor:
    target_backend, target_device = transfer.target_of(t.array_backend, t.device, device, backend)
    if target_backend is t.array_backend and target_device == t.device:
        return t
    return F.convert(t, target_backend, target_device)


def to(t: Tensor, *args: Any, dtype: Any = None, device: str | Device | None = None,
       backend: str | None = None, copy: bool = False) -> Tensor:
    """A differentiable copy with another device, dtype and/or backend (`t` if nothing changes).

    As PyTorch's `Tensor.to`: `to("sim:1")`, `to("float32")`, `to(np.float32)`,
    `to(device, dtype)`, `to(other)` (other's device, backend and dtype), and the
    keywords. `copy=True` copies even when nothing changes.
    """
    if len(args) > 2:
        raise TypeError(f"to: expected at most a device and a dtype, got {len(args)} arguments")
    for arg in args:
        if isinstance(arg, Tensor):
            dtype, device, backend = arg.dtype, arg.device, arg.backend
        elif _is_device(arg):
            device = arg
        else:
            dtype = arg
    # Cast where the data is smaller: before a move to a narrower dtype, after one to a wider.
    narrowing = dtype is not None and np.dtype(dtype).itemsize <= t.dtype.itemsize
    out = t
    if narrowing:
        out = astype(out, dtype)
    out = _move(out, device, backend)
    if dtype is not None and not narrowing:
        out = astype(out, dtype)
    return F.clone(out) if copy and out is t else out


def _cast_method(dtype: str) -> Any:
    def cast(t: Tensor) -> Tensor:
        return astype(t, dtype)

    cast.__name__ = cast.__qualname__ = f"to_{dtype}"
    cast.__doc__ = f"`t.to({dtype!r})` (differentiable between floating dtypes)."
    return cast


METHODS: dict[str, Any] = {
    "to": to,
    "float": _cast_method("float32"),
    "double": _cast_method("float64"),
    "half": _cast_method("float16"),
    "long": _cast_method("int64"),
    "int": _cast_method("int32"),
    "bool": _cast_method("bool"),
}
