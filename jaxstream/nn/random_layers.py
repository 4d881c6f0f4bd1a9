"""PyTorch's modules that draw: RReLU (random negative slopes in training, their mean
outside it), AlphaDropout and FeatureAlphaDropout (SELU's self-normalizing dropout; the
identity outside training).

Each forward is the functional of the same name (ops/random_functional.py) with the module's
`training` flag. The draw comes from the call's `key=` (pure), else from the current draw
source (Note [Random keys] in ops/random.py); the key is given per call, not kept, as
Dropout's. As PyTorch's, the alpha dropouts print `inplace=` but never drop in place.
"""

from __future__ import annotations

from typing import Any

from ..ops import random_functional as R
from ..tensor import Tensor
from .activations import inplace_flag
from .module import Module
from .more_layers import _ChannelDropout


class RReLU(Module):
    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
                 inplace: bool = False) -> None:
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, x: Tensor, key: Any = None) -> Tensor:
        return R.rrelu(x, self.lower, self.upper, self.training, self.inplace, key=key)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}{inplace_flag(self.inplace)}"


class AlphaDropout(_ChannelDropout):
    """Alpha dropout of each element with probability `p` (`F.alpha_dropout`)."""

    def forward(self, x: Tensor, key: Any = None) -> Tensor:
        return R.alpha_dropout(x, self.p, self.training, key=key)


class FeatureAlphaDropout(_ChannelDropout):
    """Alpha dropout of whole channels of (N, C, *) (`F.feature_alpha_dropout`)."""

    def forward(self, x: Tensor, key: Any = None) -> Tensor:
        return R.feature_alpha_dropout(x, self.p, self.training, key=key)
