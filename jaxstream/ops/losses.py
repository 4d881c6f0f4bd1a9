"""Binary cross entropy (of probabilities and of logits), L1, smooth L1 and Huber losses with
PyTorch's arguments, checks and node names (Note [Pointwise losses] in loss_rules.py).

L1 is PyTorch's composite, `|x - t|` then the reduction, so its nodes are the ops'
(`AbsBackward0`, `MeanBackward0`, `SumBackward0`); the others are one node each.
"""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import loss_rules as L
from .dispatch import apply
from .neural import check_reduction
from .operands import as_tensor, astype, floating, host_values, operands
from .shapes import broadcast_shapes


def _pair(op: str, x: Any, target: Any, same_shape: str | None = None) -> tuple[Tensor, Tensor]:
    """The input and the target as floating tensors of one dtype, on one backend and device,
    whose shapes broadcast, or are the same, with `same_shape`'s error otherwise."""
    x = as_tensor(x)
    target = as_tensor(target, x)
    if same_shape is not None and tuple(target.shape) != tuple(x.shape):
        raise ValueError(same_shape.format(target=list(target.shape), input=list(x.shape)))
    x, target = (floating(t) for t in operands(x, target))
    broadcast_shapes(op, x.shape, target.shape)
    return x, target


def _constant_weight(op: str, name: str, weight: Any, x: Tensor) -> Tensor | None:
    """An optional weight beside `x`, in its dtype: one that requires grad is refused, as
    PyTorch refuses it (the loss is not differentiable in it)."""
    if weight is None:
        return None
    weight = as_tensor(weight, x)
    if weight.requires_grad:
        raise RuntimeError(
            f"The function '{op}' is not differentiable with respect to argument '{name}'. "
            f"This input cannot have requires_grad True. Pass {name}.detach() instead"
        )
    broadcast_shapes(op, x.shape, weight.shape)
    return astype(weight, x.dtype)


def binary_cross_entropy(x: Any, target: Any, weight: Any = None,
                         reduction: str = "mean") -> Tensor:
    """`-(t * log(x) + (1 - t) * log(1 - x))` of probabilities `x` (each log floored at
    -100), times `weight`, reduced; `target` of `x`'s shape."""
    check_reduction(reduction)
    x, target = _pair("binary_cross_entropy", x, target,
                      "Using a target size ({target}) that is different to the input size "
                      "({input}) is deprecated. Please ensure they have the same size.")
    values = host_values(x)
    if values is not None and not ((values >= 0) & (values <= 1)).all():
        raise RuntimeError(
            f"all elements of input should be between 0 and 1 (binary_cross_entropy of an "
            f"input of shape {x.shape}, which takes probabilities); for logits use "
            f"binary_cross_entropy_with_logits"
        )
    weight = _constant_weight("binary_cross_entropy", "weight", weight, x)
    return apply(L.BCE, x, target, weight, reduction=reduction)


def binary_cross_entropy_with_logits(x: Any, target: Any, weight: Any = None,
                                     reduction: str = "mean", pos_weight: Any = None) -> Tensor:
    """binary_cross_entropy of `sigmoid(x)`, computed from the logits `x` so that it is finite
    at any size; `pos_weight` weighs the positive term (broadcast along the last axis)."""
    check_reduction(reduction)
    op = "binary_cross_entropy_with_logits"
    x, target = _pair(op, x, target, "Target size ({target}) must be the same as input size "
                                     "({input})")
    weight = _constant_weight(op, "weight", weight, x)
    pos_weight = _constant_weight(op, "pos_weight", pos_weight, x)
    return apply(L.BCE_WITH_LOGITS, x, target, weight, pos_weight, reduction=reduction)


def l1_loss(x: Any, target: Any, reduction: str = "mean") -> Tensor:
    """`|x - target|` (broadcast), reduced: PyTorch's composite and its nodes."""
    check_reduction(reduction)
    x, target = _pair("l1_loss", x, target)
    loss = (x - target).abs()
    return loss if reduction == "none" else getattr(loss, reduction)()


def smooth_l1_loss(x: Any, target: Any, reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """`0.5 * d**2 / beta` where `d = |x - target| < beta`, else `d - 0.5 * beta`, reduced;
    `beta=0` is the L1 loss, and its nodes (PyTorch's rule)."""
    check_reduction(reduction)
    if beta < 0:
        raise RuntimeError(f"smooth_l1_loss does not support negative values for beta (got "
                           f"beta={beta}); use beta=0 for the L1 loss")
    if beta == 0:
        return l1_loss(x, target, reduction)
    x, target = _pair("smooth_l1_loss", x, target)
    return apply(L.SMOOTH_L1, x, target, reduction=reduction, beta=float(beta))


def huber_loss(x: Any, target: Any, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    """`0.5 * d**2` where `d = |x - target| < delta`, else `delta * (d - 0.5 * delta)`,
    reduced: smooth L1 scaled by `delta`."""
    check_reduction(reduction)
    if not delta > 0:
        raise RuntimeError(f"huber_loss does not support non-positive values for delta (got "
                           f"delta={delta})")
    x, target = _pair("huber_loss", x, target)
    return apply(L.HUBER, x, target, reduction=reduction, delta=float(delta))

