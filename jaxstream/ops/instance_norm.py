"""instance_norm with PyTorch's arguments, checks and running statistics, as PyTorch
computes it: a batch norm of the input seen as one sample whose channels are every
(sample, channel) pair, with the weight, bias and running statistics repeated per
sample; the running statistics then take the mean over the samples of theirs."""

from __future__ import annotations

import math
from typing import Any

from ..autograd.grad_mode import no_grad
from ..tensor import Tensor
from . import shape_ops as S
from .normalization import batch_norm
from .operands import as_tensor
from .return_types import Size


def _repeated(t: Any, x: Tensor, samples: int) -> Tensor | None:
    return None if t is None else S.repeat(as_tensor(t, x), samples)


def instance_norm(input: Tensor, running_mean: Tensor | None = None,  # noqa: A002
                  running_var: Tensor | None = None, weight: Any = None, bias: Any = None,
                  use_input_stats: bool = True, momentum: float = 0.1,
                  eps: float = 1e-5) -> Tensor:
    """`input` of shape (N, C, ...) standardized per sample and channel over its spatial
    axes (biased variance), then scaled by `weight` and shifted by `bias` (per channel).
    With `use_input_stats` the running statistics, where given, move `momentum` of the
    way to the mean over the samples of their means and unbiased variances, in place and
    outside the graph; without it they normalize instead."""
    x = as_tensor(input)
    if use_input_stats and math.prod(x.shape[2:]) == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size "
                         f"{Size(x.shape)}")
    if (running_mean is None) != (running_var is None):
        raise ValueError("running_mean and running_var must either both be None or neither be "
                         "None")
    if not use_input_stats and running_mean is None:
        raise RuntimeError("Expected running_mean and running_var to be defined when "
                           "use_input_stats is false")
    if x.ndim < 2:
        raise RuntimeError(f"instance_norm: expected an input of shape (N, C, ...), got one of "
                           f"shape {x.shape}; add a batch axis, e.g. x.unsqueeze(0)")
    samples, channels = x.shape[:2]
    per_sample = S.reshape(x, (1, samples * channels, *x.shape[2:]))
    means, variances = (_repeated(running_mean, x, samples), _repeated(running_var, x, samples))
    out = batch_norm(per_sample, means, variances, _repeated(weight, x, samples),
                     _repeated(bias, x, samples), use_input_stats, momentum, eps)
    if use_input_stats and running_mean is not None:
        with no_grad():
            running_mean.copy_(S.reshape(means, (samples, channels)).mean(axis=0))
            running_var.copy_(S.reshape(variances, (samples, channels)).mean(axis=0))
    return S.reshape(out, x.shape)
