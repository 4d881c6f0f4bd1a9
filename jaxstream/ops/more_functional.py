"""PyTorch's functionals that are compositions of the ops: group and RMS normalization,
channel dropout, adaptive pooling, pixel (un)shuffle, bilinear, and the margin, divergence
and likelihood losses.

Each is built from differentiable ops (reshape, reductions, matmul, gather, pointwise), so
values and gradients of every order are PyTorch's while the graph records the ops' nodes
rather than a node of its own. Signatures are `torch.nn.functional`'s, legacy
`size_average=`/`reduce=` included.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..tensor import Tensor
from .distances import pairwise_distance
from .functional import clamp, exp, log, minimum, relu, where
from .inplace import apply_inplace
from .linalg import matmul
from .math_functions import xlogy
from .neural import check_reduction
from .operands import as_tensor, astype, floating, host_values
from .pointwise import rsqrt
from .random import bernoulli_mask


def reduced_loss(loss: Tensor, reduction: str) -> Tensor:
    check_reduction(reduction)
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


def legacy_reduction(size_average: bool | None, reduce: bool | None, reduction: str) -> str:
    """The reduction the deprecated `size_average`/`reduce` ask for, with PyTorch's warning."""
    if size_average is None and reduce is None:
        return reduction
    legacy = "none" if reduce is False else "sum" if size_average is False else "mean"
    warnings.warn(f"size_average and reduce args will be deprecated, please use "
                  f"reduction='{legacy}' instead.", UserWarning, stacklevel=3)
    return legacy


def _constant(values: np.ndarray, like: Tensor) -> Tensor:
    """A host array as a constant beside `like`, in its dtype."""
    wide = str(like.dtype) == "float64"
    return astype(as_tensor(values.astype(np.float64 if wide else np.float32), like), like.dtype)


# ------------------------------------------------------------------ normalization
def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,  # noqa: A002
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise each of `num_groups` groups of channels of (N, C, *) over its channels and
    positions (biased variance), then scale and shift per channel."""
    x = input
    if x.ndim < 2 or x.shape[1] % num_groups:
        raise RuntimeError(f"group_norm: expected an input of shape (N, C, *) with C divisible "
                           f"by num_groups, but got input of shape {list(x.shape)} and "
                           f"num_groups={num_groups}; pick num_groups dividing C")
    grouped = x.reshape((x.shape[0], num_groups, -1))
    mean = grouped.mean(-1, keepdim=True)
    var = grouped.var(-1, unbiased=False, keepdim=True)
    y = ((grouped - mean) * rsqrt(var + eps)).reshape(x.shape)
    per_channel = (x.shape[1],) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(per_channel)
    if bias is not None:
        y = y + bias.reshape(per_channel)
    return y


def rms_norm(input: Tensor, normalized_shape: int | Sequence[int],  # noqa: A002
             weight: Tensor | None = None, eps: float | None = None) -> Tensor:
    """`x / sqrt(mean(x**2) + eps)` over the trailing `normalized_shape` axes, times `weight`;
    `eps=None` is the machine epsilon of the input's dtype."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    n = len(shape)
    if not shape or tuple(input.shape[input.ndim - n:]) != shape or input.ndim < n:
        raise RuntimeError(f"rms_norm: normalized_shape={list(shape)} must be the trailing "
                           f"dims of the input, but got input of shape {list(input.shape)}")
    eps = float(np.finfo(np.dtype(str(input.dtype))).eps) if eps is None else eps
    axes = tuple(range(input.ndim - n, input.ndim))
    y = input * rsqrt((input * input).mean(axes, keepdim=True) + eps)
    return y if weight is None else y * weight


# ------------------------------------------------------------------ channel dropout
_DROPOUT2D_3D = (
    "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
    "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel "
    "dim. This behavior will change in a future release to interpret the input as one without "
    "a batch dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout "
    "behavior, please switch to using dropout1d instead.")
_DROPOUT2D_RANK = (
    "dropout2d: Received a {}-D input to dropout2d, which is deprecated and will result in an "
    "error in a future release. To retain the behavior and silence this warning, please use "
    "dropout instead. Note that dropout2d exists to provide channel-wise dropout on inputs "
    "with 2 spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 3D "
    "or 4D inputs).")


def _mask_shape(op: str, x: Tensor) -> tuple:
    """The shape of `op`'s mask: one draw per channel, with PyTorch's rank checks (dropout1d)
    and deprecation warnings (dropout2d: a 3D input is taken as (N, C, L))."""
    if op == "dropout1d":
        if x.ndim not in (2, 3):
            raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {x.ndim}D "
                               f"input of shape {list(x.shape)}; pass (N, C, L) or (C, L)")
        return x.shape[:-1] + (1,)
    if x.ndim == 3:
        warnings.warn(_DROPOUT2D_3D, UserWarning, stacklevel=4)
    elif x.ndim != 4:
        warnings.warn(_DROPOUT2D_RANK.format(x.ndim), UserWarning, stacklevel=4)
    return x.shape[:2] + (1,) * (x.ndim - 2)


def channel_dropout(op: str, x: Tensor, p: float, training: bool, inplace: bool,
                    key: Any = None) -> Tensor:
    """`op` ("dropout1d" or "dropout2d"): zero whole channels with probability `p` and scale
    the rest by 1/(1-p); the mask comes from `key` (pure) or the current draw source."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    mask_shape = _mask_shape(op, x)
    if not training or p == 0.0:
        return x

    def drop(t: Tensor) -> Tensor:
        if p == 1.0:
            return t * 0.0
        keep = bernoulli_mask(mask_shape, 1.0 - p, key=key, backend=t.backend, device=t.device)
        return t * (keep.astype(t.dtype) * (1.0 / (1.0 - p)))

    return apply_inplace(x, drop, f"{op}_") if inplace else drop(x)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True,  # noqa: A002
              inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, L) or (C, L) inputs (`nn.Dropout1d` takes `key=`)."""
    return channel_dropout("dropout1d", input, p, training, inplace)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True,  # noqa: A002
              inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, H, W) inputs (`nn.Dropout2d` takes `key=`)."""
    return channel_dropout("dropout2d", input, p, training, inplace)


# ------------------------------------------------------------------ adaptive pooling
def _bounds(n_in: int, n_out: int) -> list[tuple[int, int]]:
    """Window i covers [floor(i*n_in/n_out), ceil((i+1)*n_in/n_out)), PyTorch's windows."""
    return [((i * n_in) // n_out, -(-((i + 1) * n_in) // n_out)) for i in range(n_out)]


def adaptive_sizes(op: str, x: Tensor, output_size: Any, n: int) -> tuple[int, ...]:
    """The output size per spatial axis (None keeps the input's), checked."""
    if x.ndim not in (n + 1, n + 2) or 0 in x.shape[-n:]:
        raise RuntimeError(f"{op}: expected a {n + 1}D or {n + 2}D input with non-zero spatial "
                           f"sizes, but got input of shape {list(x.shape)}")
    sizes = (output_size,) * n if output_size is None or isinstance(output_size, int) \
        else tuple(output_size)
    if len(sizes) != n:
        raise ValueError(f"{op}: output_size must be {n} ints, but got {output_size!r}")
    sizes = tuple(x.shape[x.ndim - n + i] if s is None else s for i, s in enumerate(sizes))
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"{op}: output_size must be non-negative, but got {output_size!r}")
    return sizes


def _averaging(n_in: int, n_out: int) -> np.ndarray:
    """The (n_in, n_out) matrix whose column i averages window i."""
    matrix = np.zeros((n_in, n_out))
    for i, (start, end) in enumerate(_bounds(n_in, n_out)):
        matrix[start:end, i] = 1.0 / (end - start)
    return matrix


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:  # noqa: A002
    """The mean of each of `output_size` windows along the last axis."""
    (size,) = adaptive_sizes("adaptive_avg_pool1d", input, output_size, 1)
    return matmul(input, _constant(_averaging(input.shape[-1], size), input))


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:  # noqa: A002
    """The mean of each of `output_size` windows over the last two axes."""
    height, width = adaptive_sizes("adaptive_avg_pool2d", input, output_size, 2)
    rows = _constant(_averaging(input.shape[-2], height).T, input)
    cols = _constant(_averaging(input.shape[-1], width), input)
    return matmul(matmul(rows, input), cols)


def _taps(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    """Each window's positions, padded with its last one to the longest window, and starts."""
    bounds = _bounds(n_in, n_out)
    longest = max((end - start for start, end in bounds), default=1)
    taps = np.array([[min(start + k, end - 1) for k in range(longest)] for start, end in bounds],
                    dtype=np.int64).reshape(n_out, longest)
    return taps, np.array([start for start, _ in bounds], dtype=np.int64)


def adaptive_max_pool1d(input: Tensor, output_size: Any,  # noqa: A002
                        return_indices: bool = False) -> Any:
    """The maximum of each window along the last axis (and its index along that axis)."""
    (size,) = adaptive_sizes("adaptive_max_pool1d", input, output_size, 1)
    taps, starts = _taps(input.shape[-1], size)
    best = input[..., taps].max(-1)
    if not return_indices:
        return best.values
    return best.values, best.indices + as_tensor(starts, input)


def adaptive_max_pool2d(input: Tensor, output_size: Any,  # noqa: A002
                        return_indices: bool = False) -> Any:
    """The maximum of each window over the last two axes (and its flat index h * W + w)."""
    height, width = adaptive_sizes("adaptive_max_pool2d", input, output_size, 2)
    rows, row_starts = _taps(input.shape[-2], height)
    cols, col_starts = _taps(input.shape[-1], width)
    windows = input[..., rows[:, None, :, None], cols[None, :, None, :]]
    best = windows.reshape(windows.shape[:-2] + (-1,)).max(-1)
    if not return_indices:
        return best.values
    row = best.indices // cols.shape[1] + as_tensor(row_starts[:, None], input)
    col = best.indices % cols.shape[1] + as_tensor(col_starts[None, :], input)
    return best.values, row * input.shape[-1] + col


# ------------------------------------------------------------------ shuffles and bilinear
def _check_factor(op: str, name: str, factor: int) -> None:
    if factor <= 0:
        raise RuntimeError(f"{op}: {name} must be greater than 0, but got {factor}")


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:  # noqa: A002
    """(*, C*r*r, H, W) to (*, C, H*r, W*r): channels become sub-pixel positions."""
    r, x = upscale_factor, input
    _check_factor("pixel_shuffle", "upscale_factor", r)
    if x.ndim < 3 or x.shape[-3] % (r * r):
        raise RuntimeError(f"pixel_shuffle: expected an input of shape (*, C*r*r, H, W) with "
                           f"r={r}, but got input of shape {list(x.shape)}")
    *lead, c, h, w = x.shape
    y = x.reshape((*lead, c // (r * r), r, r, h, w))
    k = len(lead)
    y = y.permute(*range(k), k, k + 3, k + 1, k + 4, k + 2)
    return y.reshape((*lead, c // (r * r), h * r, w * r))


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:  # noqa: A002
    """(*, C, H*r, W*r) to (*, C*r*r, H, W), the inverse of pixel_shuffle."""
    r, x = downscale_factor, input
    _check_factor("pixel_unshuffle", "downscale_factor", r)
    if x.ndim < 3 or x.shape[-2] % r or x.shape[-1] % r:
        raise RuntimeError(f"pixel_unshuffle: expected an input of shape (*, C, H*r, W*r) with "
                           f"r={r}, but got input of shape {list(x.shape)}")
    *lead, c, h, w = x.shape
    y = x.reshape((*lead, c, h // r, r, w // r, r))
    k = len(lead)
    y = y.permute(*range(k), k, k + 2, k + 4, k + 1, k + 3)
    return y.reshape((*lead, c * r * r, h // r, w // r))


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor,
             bias: Tensor | None = None) -> Tensor:
    """`y[..., o] = input1 @ weight[o] @ input2 + bias[o]`, weight (out, in1, in2)."""
    out, in1, in2 = weight.shape
    if input1.shape[-1] != in1 or input2.shape[-1] != in2 or input1.shape[:-1] != \
            input2.shape[:-1]:
        raise RuntimeError(f"bilinear: inputs of shapes {list(input1.shape)} and "
                           f"{list(input2.shape)} do not fit weight of shape "
                           f"{list(weight.shape)} (need (*, {in1}) and (*, {in2}))")
    mixed = matmul(input2, weight.reshape((out * in1, in2)).T)
    mixed = mixed.reshape(input2.shape[:-1] + (out, in1))
    y = (mixed * input1.unsqueeze(-2)).sum(-1)
    return y if bias is None else y + bias


# ------------------------------------------------------------------ losses
def kl_div(input: Tensor, target: Any, size_average: bool | None = None,  # noqa: A002
           reduce: bool | None = None, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """`target * (log(target) - input)` of log-probabilities `input` (0 where target is 0);
    with `log_target`, the target is log-probabilities too."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    target = floating(as_tensor(target, input))
    if log_target:
        loss = exp(target) * (target - input)
    else:
        loss = xlogy(target, target) - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.ndim else loss.sum()
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                      "support size.'batchmean' divides only by the batch size, and aligns with "
                      "the KL div math definition.'mean' will be changed to behave the same as "
                      "'batchmean' in the next major release.", UserWarning, stacklevel=2)
    return reduced_loss(loss, reduction)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Any, margin: float = 0,
                          size_average: bool | None = None, reduce: bool | None = None,
                          reduction: str = "mean") -> Tensor:
    """`1 - cos` where target is 1, `max(0, cos - margin)` where it is -1 (cos over the last
    axis)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    target = as_tensor(target, input1)
    dot = (input1 * input2).sum(-1)
    norms = ((input1 * input1).sum(-1) + 1e-12) * ((input2 * input2).sum(-1) + 1e-12)
    cos = dot / norms.sqrt()
    zero = cos * 0.0
    loss = (where(target == 1, 1.0 - cos, zero)
            + where(target == -1, relu(cos - margin), zero))
    return reduced_loss(loss, reduction)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Any, margin: float = 0,
                        size_average: bool | None = None, reduce: bool | None = None,
                        reduction: str = "mean") -> Tensor:
    """`max(0, -target * (input1 - input2) + margin)`."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    target = as_tensor(target, input1)
    return reduced_loss(relu(-target * (input1 - input2) + margin), reduction)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor,
                        margin: float = 1.0, p: float = 2, eps: float = 1e-6,
                        swap: bool = False, size_average: bool | None = None,
                        reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """`max(0, d(a, p) - d(a, n) + margin)`; `swap` takes d(p, n) where it is smaller."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f"triplet_margin_loss: expected margin to be greater than 0, got "
                         f"{margin} instead")
    near = pairwise_distance(anchor, positive, p, eps)
    far = pairwise_distance(anchor, negative, p, eps)
    if swap:
        far = minimum(far, pairwise_distance(positive, negative, p, eps))
    return reduced_loss(relu(margin + near - far), reduction)


def _checked_var(input: Tensor, var: Any) -> Tensor:  # noqa: A002
    """`var` broadcastable as PyTorch's gaussian_nll_loss takes it, else its error."""
    var = floating(as_tensor(var, input))
    if var.shape == input.shape:
        return var
    if input.shape[:-1] == var.shape:
        return var.unsqueeze(-1)
    if var.ndim and input.shape[:-1] == var.shape[:-1] and var.shape[-1] == 1:
        return var
    if var.ndim == 0:
        return var
    raise ValueError(f"gaussian_nll_loss: var is of incorrect size: {list(var.shape)} for "
                     f"input of shape {list(input.shape)}; give var of the input's shape, "
                     f"or with its last dim 1 or dropped")


def gaussian_nll_loss(input: Tensor, target: Any, var: Any, full: bool = False,  # noqa: A002
                      eps: float = 1e-6, reduction: str = "mean") -> Tensor:
    """`0.5 * (log(var) + (input - target)**2 / var)` (+ 0.5*log(2*pi) with `full`); var is
    floored at `eps` in value only, the gradient passing as if it were not."""
    check_reduction(reduction)
    var = _checked_var(input, var)
    values = host_values(var)
    if values is not None and (values < 0).any():
        raise ValueError("gaussian_nll_loss: var has negative entry/entries")
    floored = var + (clamp(var, min=eps) - var).detach()
    loss = 0.5 * (log(floored) + (input - as_tensor(target, input)) ** 2 / floored)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return reduced_loss(loss, reduction)


def poisson_nll_loss(input: Tensor, target: Any, log_input: bool = True,  # noqa: A002
                     full: bool = False, size_average: bool | None = None,
                     eps: float = 1e-8, reduce: bool | None = None,
                     reduction: str = "mean") -> Tensor:
    """`exp(input) - target * input` of log-rates (`input - target * log(input + eps)` of
    rates), plus Stirling's approximation of log(target!) where target > 1 with `full`."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    target = floating(as_tensor(target, input))
    loss = exp(input) - target * input if log_input else input - target * log(input + eps)
    if full:
        big = target > 1
        safe = where(big, target, target * 0.0 + 2.0)
        stirling = safe * log(safe) - safe + 0.5 * log(2 * math.pi * safe)
        loss = loss + where(big, stirling, stirling * 0.0)
    return reduced_loss(loss, reduction)
