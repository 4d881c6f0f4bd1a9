"""PyTorch's deprecated spellings of `interpolate`: `upsample`, `upsample_nearest` and
`upsample_bilinear` (align_corners=True), each with PyTorch's deprecation warning."""

from __future__ import annotations

import warnings
from typing import Any

from ..tensor import Tensor
from .interpolation import interpolate


def _deprecated(name: str) -> None:
    """PyTorch's warning, pointing at the caller of the deprecated function."""
    warnings.warn(f"`nn.functional.{name}` is deprecated. Use `nn.functional.interpolate` "
                  f"instead.", stacklevel=3)


def upsample(input: Tensor, size: Any = None, scale_factor: Any = None,  # noqa: A002
             mode: str = "nearest", align_corners: bool | None = None) -> Tensor:
    """`interpolate(input, size, scale_factor, mode, align_corners)`."""
    _deprecated("upsample")
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size: Any = None,  # noqa: A002
                     scale_factor: Any = None) -> Tensor:
    """`interpolate(input, size, scale_factor, mode="nearest")`."""
    _deprecated("upsample_nearest")
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size: Any = None,  # noqa: A002
                      scale_factor: Any = None) -> Tensor:
    """`interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)`."""
    _deprecated("upsample_bilinear")
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
