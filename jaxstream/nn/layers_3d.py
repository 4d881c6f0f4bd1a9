"""PyTorch's layers of volumes (three spatial axes) besides the convolutions and the
max and average pools (convolution.py): the adaptive pools, BatchNorm3d, Dropout3d and
the pads of the last three axes.

Each is its 1-d or 2-d sibling's class with three axes: the same constructor arguments,
checks and repr as PyTorch's.
"""

from __future__ import annotations

from typing import Any

from ..ops import functional_3d
from ..tensor import Tensor
from .more_layers import (
    ZeroPad1d,
    _AdaptiveMaxPool,
    _AdaptivePool,
    _ChannelDropout,
    _CircularPad,
    _ConstantPad,
    _Pad,
)
from .normalization import _BatchNorm


class AdaptiveAvgPool3d(_AdaptivePool):
    """The mean of each of `output_size` windows over the last three axes."""

    def forward(self, x: Tensor) -> Tensor:
        return functional_3d.adaptive_avg_pool3d(x, self.output_size)


class AdaptiveMaxPool3d(_AdaptiveMaxPool):
    """The maximum of each of `output_size` windows over the last three axes."""

    def forward(self, x: Tensor) -> Any:
        return functional_3d.adaptive_max_pool3d(x, self.output_size, self.return_indices)


class BatchNorm3d(_BatchNorm):
    """Batch normalization of (N, C, D, H, W) inputs over all axes but the channels."""

    input_ranks = (5,)


class Dropout3d(_ChannelDropout):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) inputs; the mask comes from
    the call's `key=` (pure) or the current draw source."""

    def forward(self, x: Tensor, key: Any = None) -> Tensor:
        return functional_3d.volume_dropout(x, self.p, self.training, self.inplace, key)


class ZeroPad3d(ZeroPad1d):
    """Pad the last three axes with zeros."""

    dims = 3


class ConstantPad3d(_ConstantPad):
    """Pad the last three axes with `value`."""

    dims = 3


class ReflectionPad3d(_Pad):
    dims, mode = 3, "reflect"


class ReplicationPad3d(_Pad):
    dims, mode = 3, "replicate"


class CircularPad3d(_CircularPad):
    dims = 3
