"""PyTorch's functionals of volumes (three spatial axes) that compose the 1-d and 2-d ones:
the adaptive poolings and channel dropout.

Adaptive pooling is separable: each output's window is a box, a range along each axis,
so a volume pools its planes (height, width) first, then the result along the depth.
For the maximum the first maximum of the planes' first maxima is the box's first in
row-major order, PyTorch's choice, so gradients and indices land where PyTorch's do.
The graph records the 1-d and 2-d functionals' ops, not PyTorch's
`AdaptiveAvgPool3DBackward0` / `AdaptiveMaxPool3DBackward0` nodes.
"""

from __future__ import annotations

import warnings
from typing import Any

from ..tensor import Tensor
from .inplace import apply_inplace
from .more_functional import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    adaptive_sizes,
    channel_dropout,
)

_DROPOUT3D_RANK = (
    "dropout3d: Received a {}-D input to dropout3d, which is deprecated and will result in an "
    "error in a future release. To retain the behavior and silence this warning, please use "
    "dropout instead. Note that dropout3d exists to provide channel-wise dropout on inputs "
    "with 3 spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 4D "
    "or 5D inputs).")


def _depth_last(t: Tensor) -> Tensor:
    """(B, D, h, w) as (B, h * w, D): each plane position a row along the depth."""
    return t.reshape(t.shape[:2] + (-1,)).swapaxes(-1, -2)


def _as_volumes(t: Tensor, lead: tuple, sizes: tuple) -> Tensor:
    """(B, h * w, d) back to `lead + (d, h, w)`."""
    return t.swapaxes(-1, -2).reshape(lead + sizes)


def adaptive_avg_pool3d(input: Tensor, output_size: Any) -> Tensor:  # noqa: A002
    """The mean of each of `output_size` windows over the last three axes (None keeps the
    input's size along that axis)."""
    sizes = adaptive_sizes("adaptive_avg_pool3d", input, output_size, 3)
    planes = adaptive_avg_pool2d(input.reshape((-1,) + input.shape[-3:]), sizes[1:])
    return _as_volumes(adaptive_avg_pool1d(_depth_last(planes), sizes[0]), input.shape[:-3],
                       sizes)


def adaptive_max_pool3d(input: Tensor, output_size: Any,  # noqa: A002
                        return_indices: bool = False) -> Any:
    """The maximum of each window over the last three axes (and its flat index in its
    volume, depth * H * W + row * W + column)."""
    sizes = adaptive_sizes("adaptive_max_pool3d", input, output_size, 3)
    lead = input.shape[:-3]
    planes, in_plane = adaptive_max_pool2d(input.reshape((-1,) + input.shape[-3:]), sizes[1:],
                                           True)
    best, depth = adaptive_max_pool1d(_depth_last(planes), sizes[0], True)
    values = _as_volumes(best, lead, sizes)
    if not return_indices:
        return values
    flat = _depth_last(in_plane).gather(-1, depth) + depth * (input.shape[-2] * input.shape[-1])
    return values, _as_volumes(flat, lead, sizes)


def volume_dropout(x: Tensor, p: float, training: bool, inplace: bool,
                   key: Any = None) -> Tensor:
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) inputs with probability `p`
    and scale the rest by 1/(1-p); another rank warns as PyTorch's and takes its first
    axis as the channels. The mask comes from `key` (pure) or the current draw source."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if x.ndim not in (4, 5):
        warnings.warn(_DROPOUT3D_RANK.format(x.ndim), UserWarning, stacklevel=3)
    if x.ndim == 0:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input (got a "
                           "0-D input to dropout3d); pass (N, C, D, H, W) or (C, D, H, W)")
    if not training or p == 0.0:
        return x
    channels = x.shape[:2] if x.ndim == 5 else x.shape[:1]

    def drop(t: Tensor) -> Tensor:  # each channel's elements as one row, as dropout1d's
        rows = t.reshape(channels + (-1,))
        return channel_dropout("dropout1d", rows, p, True, False, key).reshape(t.shape)

    return apply_inplace(x, drop, "dropout3d_") if inplace else drop(x)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True,  # noqa: A002
              inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, D, H, W) inputs (`nn.Dropout3d` takes `key=`)."""
    return volume_dropout(input, p, training, inplace)
