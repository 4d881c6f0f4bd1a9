"""BatchNorm1d and BatchNorm2d: batch normalization with running statistics as buffers.

In training the batch's statistics normalize and the running ones follow them (by
`momentum`, or as a cumulative average with `momentum=None`), counted in
`num_batches_tracked`; in eval the running statistics normalize. Without
`track_running_stats` the three buffers are None and the batch's statistics always
normalize, as in PyTorch.
"""

from __future__ import annotations

from typing import Any

from ..autograd.grad_mode import no_grad
from ..devices import Device
from ..ops.creation import ones, zeros
from ..ops.normalization import batch_norm
from ..tensor import Tensor, tensor
from .module import Module
from .parameter import Parameter


class _BatchNorm(Module):
    """What BatchNorm1d and BatchNorm2d share; each says which input ranks it takes."""

    input_ranks: tuple[int, ...] = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, *, bias: bool = True,
                 dtype: Any = None, backend: str | None = None,
                 device: str | Device | None = None) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.has_bias = affine and bias
        self.track_running_stats = track_running_stats
        factory = {"dtype": dtype, "backend": backend, "device": device}
        shape = (num_features,)
        self.weight = Parameter(ones(shape, **factory)) if affine else None
        self.bias = Parameter(zeros(shape, **factory)) if self.has_bias else None
        tracked = track_running_stats
        self.register_buffer("running_mean", zeros(shape, **factory) if tracked else None)
        self.register_buffer("running_var", ones(shape, **factory) if tracked else None)
        self.register_buffer("num_batches_tracked",
                             tensor(0, backend=backend, device=device) if tracked else None)

    def _momentum(self) -> float | Tensor:
        """How far the running statistics move this step: `momentum`, or 1/n at the n-th
        batch for the cumulative average (a tensor, so that no value is read on the host)."""
        if self.momentum is not None:
            return self.momentum
        return 1.0 / self.num_batches_tracked.astype(self.running_mean.dtype)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in self.input_ranks:
            ranks = " or ".join(f"{r}D" for r in self.input_ranks)
            raise ValueError(f"expected {ranks} input (got {x.ndim}D input of shape {x.shape})")
        momentum: float | Tensor = 0.0
        if self.training and self.track_running_stats:
            with no_grad():
                self.num_batches_tracked.add_(1)
            momentum = self._momentum()
        # Batch statistics in training, and always where none run (PyTorch's rule).
        use_batch = self.training or self.running_mean is None
        return batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                          use_batch, momentum, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.has_bias}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalization of (N, C) or (N, C, L) inputs over all axes but the channels."""

    input_ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization of (N, C, H, W) inputs over all axes but the channels."""

    input_ranks = (4,)
