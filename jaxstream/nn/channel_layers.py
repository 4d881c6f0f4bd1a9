"""PyTorch's modules over the channel axis: Softmax2d (a softmax over the channels at each
position of (N, C, H, W) or (C, H, W)) and ChannelShuffle (ops/channel_shuffle.py), with
PyTorch's checks and reprs."""

from __future__ import annotations

from ..ops.channel_shuffle import channel_shuffle
from ..ops.neural import softmax
from ..tensor import Tensor
from .module import Module


class Softmax2d(Module):
    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {x.ndim}D instead")
        return softmax(x, -3)


class ChannelShuffle(Module):
    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, x: Tensor) -> Tensor:
        return channel_shuffle(x, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
