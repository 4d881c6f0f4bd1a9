"""Neural-net functions: softmax, log_softmax, logsumexp, the losses, one_hot, dropout.

The losses follow PyTorch's definitions to the node: `cross_entropy` is
`nll_loss(log_softmax(x))` for class indices (plus a smoothing term, summed
in, under `label_smoothing`) and `-(log_softmax(x) * target)` reduced for class
probabilities, so that `grad_fn` names what PyTorch's would.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tensor import Tensor
from . import neural_rules as N
from . import random
from .dispatch import apply
from .dtype_names import scalar_type
from .functional import where
from .neural_rules import class_axis
from .operands import as_tensor, floating, host_values, operands, torch_spelling
from .shapes import normalize_axes

_REDUCTIONS = ("mean", "sum", "none")


# ------------------------------------------------------------------ argument checks
def check_reduction(reduction: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(
            f"{reduction!r} is not a valid value for reduction; use one of {_REDUCTIONS}"
        )


def _is_integer(t: Tensor) -> bool:
    return np.dtype(t.dtype).kind in "iu"


def _check_class_indices(op: str, log_probs: Tensor, target: Tensor, ignore_index: int) -> None:
    """An integer target of the input's shape without its class axis, each in [0, C)."""
    axis = class_axis(log_probs.ndim)
    expected = log_probs.shape[:axis] + log_probs.shape[axis + 1:]
    if not _is_integer(target):
        raise RuntimeError(
            f"{op}: expected scalar type Long (integer class indices) but found {target.dtype} "
            f"for a target of shape {target.shape} and an input of shape {log_probs.shape}; "
            f"cast the target with .astype('int64'), or give class probabilities of shape "
            f"{log_probs.shape}"
        )
    if tuple(target.shape) != tuple(expected):
        raise ValueError(
            f"{op}: expected target shape {expected} (class indices) for an input of shape "
            f"{log_probs.shape}, but got {target.shape}"
        )
    values = host_values(target)
    num_classes = log_probs.shape[axis]
    if values is None or not values.size or (values.min() >= 0 and values.max() < num_classes):
        return  # two reductions on the host, where finding the first wrong one takes five
    wrong = values[((values < 0) | (values >= num_classes)) & (values != ignore_index)]
    if wrong.size:
        raise IndexError(
            f"{op}: Target {wrong.flat[0]} is out of bounds: the input of shape "
            f"{log_probs.shape} has {num_classes} classes (on axis {axis})"
        )


def _check_class_probabilities(logits: Tensor, target: Tensor) -> None:
    if _is_integer(target) or target.dtype == np.bool_:
        raise RuntimeError(
            f"cross_entropy: Expected floating point type for target with class probabilities, "
            f"got {target.dtype} (target and logits both of shape {logits.shape}); class "
            f"indices have the shape without the class axis"
        )


# ------------------------------------------------------------------ softmax and logsumexp
@torch_spelling
def logsumexp(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """`log(sum(exp(x)))` over `axis` (None: all), stable at any magnitude."""
    x = as_tensor(x)
    return apply(N.LOGSUMEXP, floating(x), axis=normalize_axes("logsumexp", axis, x.shape),
                 keepdims=keepdims)


@torch_spelling
def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """`exp(x)` normalized to sum to 1 along `axis`."""
    x = as_tensor(x)
    return apply(N.SOFTMAX, floating(x), axis=normalize_axes("softmax", axis, x.shape))


@torch_spelling
def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    """`x - logsumexp(x, axis)`: log-probabilities, finite for any finite `x`."""
    x = as_tensor(x)
    return apply(N.LOG_SOFTMAX, floating(x), axis=normalize_axes("log_softmax", axis, x.shape))


# ------------------------------------------------------------------ losses
def class_weight(op: str, weight: Any, log_probs: Tensor) -> Tensor | None:
    """PyTorch's rescaling weight of each class for the softmax losses: one per class, of
    the input's dtype, and not one that requires grad (neither loss is differentiable in
    it), with PyTorch's errors."""
    if weight is None:
        return None
    weight = as_tensor(weight, log_probs)
    num_classes = log_probs.shape[class_axis(log_probs.ndim)]
    if tuple(weight.shape) != (num_classes,):
        raise RuntimeError(
            f"{op}: weight tensor should be defined either for all {num_classes} classes or no "
            f"classes but got weight tensor of shape: {list(weight.shape)}"
        )
    if weight.dtype != log_probs.dtype:
        raise RuntimeError(
            f"{op}: expected scalar type {scalar_type(log_probs.dtype)} but found "
            f"{scalar_type(weight.dtype)} (the weight's dtype must be the input's, "
            f"{log_probs.dtype}; cast the weight)"
        )
    if weight.requires_grad:
        raise RuntimeError(
            f"The function '{op}' is not differentiable with respect to argument 'weight'. "
            f"This input cannot have requires_grad True. Pass weight.detach() instead"
        )
    return weight


def nll_loss(log_probs: Tensor, target: Tensor, reduction: str = "mean",
             ignore_index: int = -100, weight: Any = None) -> Tensor:
    """Minus the log-probability of each target class (classes on axis 1, or 0 for one sample),
    times the class's `weight`; targets equal to `ignore_index` count for nothing, in the
    loss and in the mean, which divides by the counted targets' total weight."""
    check_reduction(reduction)
    log_probs = floating(as_tensor(log_probs))
    weight = class_weight("nll_loss", weight, log_probs)
    return _nll_loss(log_probs, as_tensor(target, log_probs), reduction, ignore_index, weight)


def _nll_loss(log_probs: Tensor, target: Tensor, reduction: str, ignore_index: int,
              weight: Tensor | None) -> Tensor:
    """`nll_loss` of a floating tensor and a tensor, the reduction and weight checked."""
    _check_class_indices("nll_loss", log_probs, target, ignore_index)
    return apply(N.NLL_LOSS, log_probs, target, weight, reduction=reduction,
                 ignore_index=ignore_index)


def _along_classes(weight: Tensor, ndim: int) -> Tensor:
    """The class weights shaped to broadcast along the class axis of an `ndim` input."""
    return weight.reshape((-1,) + (1,) * (ndim - class_axis(ndim) - 1))


def _smoothing_term(log_probs: Tensor, target: Tensor, reduction: str, ignore_index: int,
                    weight: Tensor | None) -> Tensor:
    """Label smoothing's uniform-target part (before its factor): minus the (weighted) sum
    of the log-probabilities over the classes, zero at ignored targets, reduced like the
    loss, PyTorch's "mean" dividing by the counted targets' total weight."""
    counted = target != ignore_index
    if weight is not None:
        log_probs = log_probs * _along_classes(weight, log_probs.ndim)
    loss = where(counted, -log_probs.sum(axis=class_axis(log_probs.ndim)), 0.0)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if weight is None:
        return loss.sum() / counted.astype(log_probs.dtype).sum()
    return loss.sum() / where(counted, weight[where(counted, target, 0)], 0.0).sum()


def cross_entropy(logits: Tensor, target: Tensor, reduction: str = "mean",
                  label_smoothing: float = 0.0, ignore_index: int = -100,
                  weight: Any = None) -> Tensor:
    """Softmax cross-entropy of `logits` (classes on axis 1, or 0 for one sample) against
    integer class indices or class probabilities of the logits' shape, each class's term
    times its `weight`, as PyTorch's. Targets may be arrays or lists: they join the logits'
    backend and device."""
    check_reduction(reduction)
    logits = as_tensor(logits)
    target = as_tensor(target, logits)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    axis = class_axis(logits.ndim)
    num_classes = logits.shape[axis]
    log_probs = log_softmax(logits, axis)
    weight = class_weight("cross_entropy", weight, log_probs)
    if tuple(target.shape) == tuple(logits.shape):
        _check_class_probabilities(logits, target)
        if label_smoothing:
            target = target * (1 - label_smoothing) + label_smoothing / num_classes
        if weight is not None:
            target = target * _along_classes(weight, logits.ndim)
        loss = -(log_probs * target).sum(axis=axis if reduction == "none" else None)
        if reduction != "mean":
            return loss
        return apply(N.DIV_SCALAR, loss, divisor=logits.numel() / num_classes)
    loss = _nll_loss(log_probs, target, reduction, ignore_index, weight)
    if not label_smoothing:
        return loss
    smooth = _smoothing_term(log_probs, target, reduction, ignore_index, weight)
    return (1 - label_smoothing) * loss + smooth * (label_smoothing / num_classes)


def mse_loss(a: Tensor, b: Tensor, reduction: str = "mean") -> Tensor:
    """The squared difference of `a` and `b` (broadcast), reduced."""
    check_reduction(reduction)
    return apply(N.MSE_LOSS, *map(floating, operands(a, b)), reduction=reduction)


# ------------------------------------------------------------------ one_hot and dropout
def one_hot(labels: Tensor, num_classes: int = -1) -> Tensor:
    """A (not differentiable) integer tensor with a last axis of `num_classes`: 1 at each
    label, 0 elsewhere. `num_classes=-1` takes the largest label plus one."""
    labels = as_tensor(labels)
    if not _is_integer(labels):
        raise RuntimeError(
            f"one_hot is only applicable to index tensor of integer type, got {labels.dtype} "
            f"(shape {labels.shape}); cast the labels with .astype('int64')"
        )
    values = host_values(labels)
    if values is not None:
        num_classes = _checked_num_classes(values, num_classes)
    elif num_classes < 0:
        raise RuntimeError("one_hot: num_classes=-1 needs concrete labels; give num_classes")
    return apply(N.ONE_HOT, labels, num_classes=num_classes)


def _checked_num_classes(values: np.ndarray, num_classes: int) -> int:
    """`num_classes` (-1: the largest label plus one), once every label is known to fit it."""
    if num_classes == -1:
        if not values.size:
            raise RuntimeError("one_hot: Can not infer total number of classes from empty tensor.")
        num_classes = int(values.max()) + 1
    if values.size and values.min() < 0:
        raise RuntimeError(f"one_hot: Class values must be non-negative, got {values.min()}")
    if values.size and values.max() >= num_classes:
        raise RuntimeError(
            f"one_hot: Class values must be smaller than num_classes. Got {values.max()} "
            f"with num_classes={num_classes}"
        )
    return num_classes


def dropout(x: Tensor, p: float = 0.5, training: bool = True, key: Any = None) -> Tensor:
    """Zero each element with probability `p` and scale the rest by 1/(1-p) (the identity
    outside training). The mask comes from `key` (an int, a JAX key or a tensor holding one:
    pure) or else the current draw source (Note [Random keys] in random.py)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    x = as_tensor(x)
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    keep = random.bernoulli_mask(x.shape, 1.0 - p, key=key, backend=x.backend, device=x.device)
    return x * (keep.astype(x.dtype) * (1.0 / (1.0 - p)))


METHODS: dict[str, Any] = {
    "softmax": softmax,
    "log_softmax": log_softmax,
    "logsumexp": logsumexp,
}
