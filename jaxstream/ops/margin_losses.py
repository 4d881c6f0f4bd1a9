"""PyTorch's margin and hinge losses: soft_margin_loss, multi_margin_loss,
multilabel_margin_loss, multilabel_soft_margin_loss, hinge_embedding_loss and
triplet_margin_with_distance_loss, with `torch.nn.functional`'s signatures (legacy
`size_average=`/`reduce=` included), values, gradients and errors.

Each is composed of differentiable ops (pointwise, gather, comparisons, reductions), so its
gradients of every order come from theirs and the graph records the ops' nodes, not
PyTorch's single loss node. Honest differences: class-index targets may be any integer
dtype (PyTorch asks for int64, which JAX without x64 does not have), and an integer input
is refused with one message of ours rather than each kernel's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..tensor import Tensor, is_floating
from .activations import logsigmoid
from .distances import pairwise_distance
from .dtype_names import scalar_type
from .functional import clamp, exp, log1p, minimum, relu, where
from .more_functional import legacy_reduction, reduced_loss
from .neural import check_reduction
from .operands import as_tensor, host_values
from .shapes import broadcast_shapes


# ------------------------------------------------------------------ shared checks
def _floating_input(op: str, x: Any) -> Tensor:
    """`x` as a tensor, refused unless floating (PyTorch's loss kernels are float-only)."""
    x = as_tensor(x)
    if not is_floating(x.dtype):
        raise RuntimeError(f"{op}: expected a floating input, but got a tensor of dtype "
                           f"{x.dtype} and shape {list(x.shape)}; cast it first, e.g. "
                           f"input.float()")
    return x


def _not_differentiable_in(op: str, name: str, t: Tensor) -> Tensor:
    """`t`, refused where it requires grad: PyTorch's loss has no gradient for it."""
    if t.requires_grad:
        raise RuntimeError(f"The function '{op}' is not differentiable with respect to "
                           f"argument '{name}'. This input cannot have requires_grad True. "
                           f"Pass {name}.detach() instead")
    return t


def _class_indices(op: str, target: Any, x: Tensor) -> Tensor:
    """`target` as an integer tensor beside `x`, else PyTorch's dtype error."""
    target = as_tensor(target, x)
    if np.dtype(target.dtype).kind not in "iu":
        raise RuntimeError(f"expected scalar type Long but found {scalar_type(target.dtype)} "
                           f"({op}'s target holds class indices: cast it, e.g. "
                           f"target.long())")
    return target


def _samples(x: Tensor) -> Tensor:
    """`x` as (N, C): one sample for a vector, one sample of one class for a scalar; PyTorch's
    error for another rank or for no classes."""
    if x.ndim > 2 or (x.ndim and x.shape[-1] == 0):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch "
                           f"size, but got: {list(x.shape)}")
    return x.reshape((1, 1)) if x.ndim == 0 else x.reshape((-1, x.shape[-1]))


def _in_range(target: Tensor, low: int, high: int, message: str) -> None:
    """PyTorch's refusal of a target value outside [low, high), where values are known."""
    values = host_values(target)
    if values is not None and values.size and not ((values >= low) & (values < high)).all():
        bad = values[(values < low) | (values >= high)].flat[0]
        raise RuntimeError(f"{message} (a target holds {bad}; each must be in [{low}, "
                           f"{high}))")


def _classes(count: int, like: Tensor) -> Tensor:
    """0, 1, ..., count - 1 beside `like`, to compare class indices with."""
    return as_tensor(np.arange(count), like)


# ------------------------------------------------------------------ the losses
def soft_margin_loss(input: Tensor, target: Any, size_average: bool | None = None,  # noqa: A002
                     reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """`log(1 + exp(-target * input))` (PyTorch's formula: infinite where it overflows);
    like PyTorch's, it takes no gradient in the target."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    x = _floating_input("soft_margin_loss", input)
    target = _not_differentiable_in("soft_margin_loss", "target", as_tensor(target, x))
    return reduced_loss(log1p(exp(-x * target)), reduction)


def _multi_margin_weight(weight: Any, x: Tensor, classes: int) -> Tensor:
    """The per-class weight of multi_margin_loss, with PyTorch's checks."""
    weight = as_tensor(weight, x)
    if weight.numel() != classes:
        raise RuntimeError(f"inconsistent weight size, expected {classes} but got "
                           f"{list(weight.shape)} (multi_margin_loss takes one weight per "
                           f"class)")
    if weight.dtype != x.dtype:
        raise RuntimeError(f"expected scalar type {scalar_type(x.dtype)} but found "
                           f"{scalar_type(weight.dtype)} (the weight's dtype must be the "
                           f"input's, {x.dtype}; cast the weight)")
    return _not_differentiable_in("multi_margin_loss", "weight", weight)


def multi_margin_loss(input: Tensor, target: Any, p: int = 1,  # noqa: A002
                      margin: float = 1.0, weight: Any = None,
                      size_average: bool | None = None, reduce: bool | None = None,
                      reduction: str = "mean") -> Tensor:
    """For each sample, the mean over the classes i other than its target y of
    `max(0, margin - x[y] + x[i]) ** p`, times `weight[y]` (p is 1 or 2)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and as_tensor(weight).ndim != 1:
        raise ValueError("weight must be one-dimensional")
    check_reduction(reduction)
    x = _samples(_floating_input("multi_margin_loss", input))
    count, classes = x.shape
    target = _class_indices("multi_margin_loss", target, x)
    if target.ndim > 1 or target.numel() != count:
        raise RuntimeError(
            f"multi_margin_loss: target tensor should be 1-D with size equal to the number of "
            f"input samples (batch size). Expected target size [{count}], but got "
            f"{list(target.shape)}. Input has shape {list(as_tensor(input).shape)}.")
    _in_range(target, 0, classes, "target out of range")
    chosen = target.reshape((count, 1))
    hinge = relu(margin - x.gather(1, chosen) + x)
    hinge = where(chosen != _classes(classes, x), hinge if p == 1 else hinge * hinge, 0.0)
    if weight is not None:
        hinge = hinge * _multi_margin_weight(weight, x, classes).reshape(-1)[chosen]
    loss = hinge.sum(1) / classes
    return reduced_loss(loss if target.ndim else loss.reshape(()), reduction)


def multilabel_margin_loss(input: Tensor, target: Any,  # noqa: A002
                           size_average: bool | None = None, reduce: bool | None = None,
                           reduction: str = "mean") -> Tensor:
    """For each sample, the sum over its target classes j (the target's entries before its
    first -1) and the classes i not among them of `max(0, 1 - (x[j] - x[i]))`, over C."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_reduction(reduction)
    shape = as_tensor(input).shape
    x = _samples(_floating_input("multilabel_margin_loss", input))
    target = _class_indices("multilabel_margin_loss", target, x)
    if tuple(target.shape) != tuple(shape):
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of "
                           f"size: {list(shape)}")
    classes = x.shape[1]
    _in_range(target, -1, classes, "argument #2 'target' is out of range")
    target = target.reshape(x.shape)
    listed = (target == -1).cumsum(-1) == 0
    safe = where(listed, target, 0)
    is_target = ((safe.unsqueeze(-1) == _classes(classes, x)) & listed.unsqueeze(-1)).any(-2)
    hinge = relu(1.0 - (x.gather(1, safe).unsqueeze(-1) - x.unsqueeze(-2)))
    counted = listed.unsqueeze(-1) & ~is_target.unsqueeze(-2)
    loss = where(counted, hinge, 0.0).sum((-2, -1)) / classes
    return reduced_loss(loss if len(shape) == 2 else loss.reshape(()), reduction)


def multilabel_soft_margin_loss(input: Tensor, target: Any, weight: Any = None,  # noqa: A002
                                size_average: bool | None = None, reduce: bool | None = None,
                                reduction: str = "mean") -> Tensor:
    """The binary cross entropy of `sigmoid(input)` against `target`, times `weight`, averaged
    over the classes (the last axis); PyTorch's composition, so the target and the weight
    take gradients too."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    x = _floating_input("multilabel_soft_margin_loss", input)
    target = as_tensor(target, x)
    loss = -(target * logsigmoid(x) + (1 - target) * logsigmoid(-x))
    if weight is not None:
        loss = loss * as_tensor(weight, x)
    loss = loss.sum(x.ndim - 1) / x.shape[-1]
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not valid (multilabel_soft_margin_loss's reduction "
                         f"is 'none', 'mean' or 'sum')")
    return reduced_loss(loss, reduction)


def hinge_embedding_loss(input: Tensor, target: Any, margin: float = 1.0,  # noqa: A002
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Tensor:
    """`input` where the target is 1, `max(0, margin - input)` where it is -1 (PyTorch adds
    both for any other target value)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_reduction(reduction)
    x = _floating_input("hinge_embedding_loss", input)
    target = as_tensor(target, x)
    broadcast_shapes("hinge_embedding_loss", target.shape, x.shape)
    below_margin = where(target != 1, clamp(margin - x, min=0), 0.0)
    return reduced_loss(below_margin + where(target != -1, x, 0.0), reduction)


def triplet_margin_with_distance_loss(
        anchor: Tensor, positive: Tensor, negative: Tensor, *,
        distance_function: Callable[[Tensor, Tensor], Tensor] | None = None,
        margin: float = 1.0, swap: bool = False, reduction: str = "mean") -> Tensor:
    """`max(0, d(a, p) - d(a, n) + margin)` for any distance `d` (pairwise_distance by
    default); `swap` takes d(p, n) where it is smaller than d(a, n)."""
    check_reduction(reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    ranks = [as_tensor(t).ndim for t in (anchor, positive, negative)]
    if len(set(ranks)) != 1:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have "
                           f"the same number of dimensions, but got: anchor {ranks[0]}D, "
                           f"positive {ranks[1]}D, and negative {ranks[2]}D inputs")
    distance = pairwise_distance if distance_function is None else distance_function
    near, far = distance(anchor, positive), distance(anchor, negative)
    if swap:
        far = minimum(far, distance(positive, negative))
    return reduced_loss(clamp(margin + near - far, min=0), reduction)
