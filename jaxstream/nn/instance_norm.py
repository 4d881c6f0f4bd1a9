"""The normalizations within each sample: InstanceNorm1d/2d/3d (per sample and channel,
over the spatial axes) and LocalResponseNorm (over neighbouring channels).

InstanceNorm's affine weight and bias and its running statistics are BatchNorm's
(`affine=False` and `track_running_stats=False` by default, as in PyTorch): with
`track_running_stats` the running statistics move in training (`num_batches_tracked` is
registered but stays 0, as PyTorch's does) and normalize in eval. An input without its
batch axis is taken as a batch of one.
"""

from __future__ import annotations

import warnings
from typing import Any

from ..devices import Device
from ..ops import shape_ops as S
from ..ops.instance_norm import instance_norm
from ..ops.pool_compositions import local_response_norm
from ..tensor import Tensor
from .module import Module
from .normalization import _BatchNorm


class _InstanceNorm(_BatchNorm):
    """What InstanceNorm1d/2d/3d share; each says the rank of an input without a batch."""

    unbatched_rank = 0

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, *,
                 bias: bool = True, dtype: Any = None, backend: str | None = None,
                 device: str | Device | None = None) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, bias=bias,
                         dtype=dtype, backend=backend, device=device)

    def _check_channels(self, x: Tensor) -> None:
        """PyTorch's: an error where the channels do not fit the affine parameters, else a
        warning (`num_features` is not used without them)."""
        axis = x.ndim - self.unbatched_rank
        if x.shape[axis] == self.num_features:
            return
        if self.affine:
            raise ValueError(f"expected input's size at dim={axis} to match num_features "
                             f"({self.num_features}), but got: {x.shape[axis]}.")
        warnings.warn(f"input's size at dim={axis} does not match num_features. You can "
                      f"silence this warning by not passing in num_features, which is not used "
                      f"because affine=False", stacklevel=4)

    def forward(self, x: Tensor) -> Tensor:
        rank = self.unbatched_rank
        if x.ndim not in (rank, rank + 1):
            raise ValueError(f"expected {rank}D or {rank + 1}D input (got {x.ndim}D input)")
        self._check_channels(x)
        unbatched = x.ndim == rank
        out = instance_norm(S.unsqueeze(x, 0) if unbatched else x, self.running_mean,
                            self.running_var, self.weight, self.bias,
                            self.training or not self.track_running_stats,
                            0.0 if self.momentum is None else self.momentum, self.eps)
        return S.squeeze(out, 0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Normalize each channel of each (N, C, L) sample, or of a (C, L) input, over L."""

    unbatched_rank = 2


class InstanceNorm2d(_InstanceNorm):
    """Normalize each channel of each (N, C, H, W) sample, or of a (C, H, W) input."""

    unbatched_rank = 3


class InstanceNorm3d(_InstanceNorm):
    """Normalize each channel of each (N, C, D, H, W) sample, or of a (C, D, H, W) input."""

    unbatched_rank = 4


class LocalResponseNorm(Module):
    """Divide each element by `(k + alpha * mean of the squares over the `size` channels
    around it) ** beta` (`F.local_response_norm`)."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75,
                 k: float = 1.0) -> None:
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, x: Tensor) -> Tensor:
        return local_response_norm(x, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
