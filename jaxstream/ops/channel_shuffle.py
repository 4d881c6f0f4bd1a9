"""PyTorch's channel_shuffle: the channels of (N, C, *) regrouped, as ShuffleNet mixes the
groups of a grouped convolution.

A reshape, a transpose and a reshape, so the gradient is the inverse shuffle and the graph
records those ops' nodes rather than PyTorch's single one.
"""

from __future__ import annotations

import numbers

from ..tensor import Tensor
from .operands import as_tensor


def channel_shuffle(input: Tensor, groups: int) -> Tensor:  # noqa: A002
    """(N, g * k, *) to (N, k * g, *): channel `i * k + j` moves to `j * g + i`."""
    if not isinstance(groups, numbers.Integral) or isinstance(groups, bool):
        raise TypeError(f"channel_shuffle(): argument 'groups' (position 2) must be int, not "
                        f"{type(groups).__name__}")
    x = as_tensor(input)
    if x.ndim <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with "
                           f"sizes {list(x.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of "
                           f"groups:{groups}")
    channels = x.shape[1]
    if channels % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {channels} "
                           f"channels and {groups} groups.")
    grouped = x.reshape((x.shape[0], int(groups), channels // groups, *x.shape[2:]))
    return grouped.transpose(1, 2).reshape(x.shape)
