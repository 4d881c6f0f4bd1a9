"""layer_norm and batch_norm with PyTorch's arguments, checks, node names and running
statistics (Note [One kernel for layer and batch norm] in normalization_rules.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..autograd.grad_mode import no_grad
from ..tensor import Tensor, is_floating
from . import normalization_rules as N
from .dispatch import apply
from .operands import as_tensor


def _floating_input(op: str, x: Tensor) -> None:
    if not is_floating(x.dtype):
        raise NotImplementedError(
            f"{op}: the input must be floating point, got {x.dtype} (shape {x.shape}); cast "
            f"it first, e.g. x.float()"
        )


def _parameter(op: str, name: str, t: Any, x: Tensor, shape: tuple) -> Tensor | None:
    """The optional weight, bias or running statistic `t` beside `x`, of `shape` and `x`'s
    dtype, or None."""
    if t is None:
        return None
    t = as_tensor(t, x)
    if tuple(t.shape) != shape:
        told = (f"{name} should contain {shape[0]} elements not {t.numel()}" if op == "batch_norm"
                else f"Expected {name} to be of same shape as normalized_shape, but got {name} "
                     f"of shape {list(t.shape)} and normalized_shape = {list(shape)}")
        raise RuntimeError(f"{told} ({op} of an input of shape {x.shape})")
    if t.dtype != x.dtype:
        raise RuntimeError(
            f"mixed dtype: all inputs must share same datatype ({op} of a {x.dtype} input of "
            f"shape {x.shape} with a {t.dtype} {name}); cast it first, e.g. "
            f"{name}.to('{x.dtype}')"
        )
    return t


def layer_norm(x: Tensor, normalized_shape: int | Sequence[int], weight: Any = None,
               bias: Any = None, eps: float = 1e-5) -> Tensor:
    """`x` standardized over its trailing `normalized_shape` axes (biased variance), then
    scaled by `weight` and shifted by `bias` (each of that shape, or None)."""
    x = as_tensor(x)
    shape = ((int(normalized_shape),) if isinstance(normalized_shape, int)
             else tuple(int(n) for n in normalized_shape))
    _floating_input("layer_norm", x)
    if not shape or x.ndim < len(shape) or tuple(x.shape[x.ndim - len(shape):]) != shape:
        raise RuntimeError(
            f"Given normalized_shape={list(shape)}, expected input with shape "
            f"[*, {', '.join(map(str, shape))}], but got input of size {list(x.shape)}"
        )
    weight = _parameter("layer_norm", "weight", weight, x, shape)
    bias = _parameter("layer_norm", "bias", bias, x, shape)
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    return apply(N.LAYER_NORM, x, weight, bias, axes=axes, eps=float(eps), param_shape=shape)


def batch_norm(x: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Any = None, bias: Any = None, training: bool = False,
               momentum: float | Tensor = 0.1, eps: float = 1e-5) -> Tensor:
    """`x` of shape (N, C, ...) standardized per channel: over the batch (biased variance)
    in training, which also moves the running statistics `momentum` (a number, or a 0-d
    tensor) of the way to the batch's mean and unbiased variance, in place and outside the
    graph; with the running statistics otherwise. Then scaled by `weight` and shifted by
    `bias`."""
    x = as_tensor(x)
    _floating_input("batch_norm", x)
    if x.ndim < 2:
        raise RuntimeError(f"batch_norm: expected an input of shape (N, C, ...), got one of "
                           f"shape {x.shape}; add a batch axis, e.g. x.unsqueeze(0)")
    channels = x.shape[1]
    shape = (channels,)
    running_mean = _parameter("batch_norm", "running_mean", running_mean, x, shape)
    running_var = _parameter("batch_norm", "running_var", running_var, x, shape)
    weight = _parameter("batch_norm", "weight", weight, x, shape)
    bias = _parameter("batch_norm", "bias", bias, x, shape)
    axes = (0, *range(2, x.ndim))
    params = {"axes": axes, "eps": float(eps), "param_shape": (channels,) + (1,) * (x.ndim - 2)}
    if training:
        if x.numel() <= channels:
            raise ValueError(
                f"Expected more than 1 value per channel when training, got input size "
                f"{list(x.shape)}; give a larger batch, or call with training=False"
            )
        _update_running_stats(x.detach(), running_mean, running_var, axes, momentum)
        return apply(N.BATCH_NORM, x, weight, bias, **params)
    for name, stat in (("running_mean", running_mean), ("running_var", running_var)):
        if stat is None:
            raise RuntimeError(f"{name} must be defined in evaluation mode (batch_norm of an "
                               f"input of shape {x.shape} with training=False)")
    return apply(N.BATCH_NORM_BY, x, weight, bias, running_mean.detach(), running_var.detach(),
                 **params)


def _update_running_stats(x: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
                          axes: tuple, momentum: float | Tensor) -> None:
    """`stat = (1 - momentum) * stat + momentum * batch_stat` in place, unbiased variance
    (PyTorch's rule), recorded in no graph."""
    with no_grad():
        if running_mean is not None:
            running_mean.copy_(running_mean * (1.0 - momentum) + x.mean(axis=axes) * momentum)
        if running_var is not None:
            batch_var = x.var(axis=axes, correction=1)
            running_var.copy_(running_var * (1.0 - momentum) + batch_var * momentum)
