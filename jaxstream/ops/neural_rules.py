"""The op table of the neural-net functions (softmax, log_softmax, logsumexp, the losses).

Same conventions as `rules.py`: kernels take the array namespace `xp`, vjps are
written in jaxstream ops so that every gradient is differentiable again. The
composite losses (cross_entropy, label smoothing) are built in `neural.py` from
these entries, the way PyTorch builds them, so that their nodes carry PyTorch's
names.

Note [Stable softmax]: every kernel that exponentiates subtracts the maximum
along the reduced axes first (a non-finite maximum is replaced by 0, so that
rows of -inf or +inf stay what they are instead of turning into NaN); the
vjps only read the saved output, which is finite wherever the input was.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..tensor import Tensor
from .dispatch import apply
from .opdef import OpContext, OpDef
from .reduction_rules import kept
from .rules import WHERE
from .shapes import kept_shape
from .twins import with_array_twin


def class_axis(ndim: int) -> int:
    """The axis of the classes in a loss's input: 1, or 0 for a single sample (PyTorch's rule)."""
    return 1 if ndim >= 2 else 0


# ------------------------------------------------------------------ kernels
def _shifted(xp: Any, a: Any, axis: Any) -> tuple[Any, Any]:
    """`a` minus its maximum along `axis` (kept), and that maximum (Note [Stable softmax])."""
    m = xp.max(a, axis=axis, keepdims=True)
    m = xp.where(xp.isfinite(m), m, xp.zeros_like(m))
    return a - m, m


def _logsumexp(xp: Any, a: Any, axis: Any, keepdims: bool) -> Any:
    z, m = _shifted(xp, a, axis)
    s = xp.sum(xp.exp(z), axis=axis, keepdims=keepdims)
    return xp.log(s) + xp.reshape(m, s.shape)


def _softmax(xp: Any, a: Any, axis: int) -> Any:
    e = xp.exp(_shifted(xp, a, axis)[0])
    return e / xp.sum(e, axis=axis, keepdims=True)


def _log_softmax(xp: Any, a: Any, axis: int) -> Any:
    if type(a) is np.ndarray:
        return _log_softmax_host(a, axis)
    return _log_softmax_array_api(xp, a, axis)


def _log_softmax_array_api(xp: Any, a: Any, axis: int) -> Any:
    z = _shifted(xp, a, axis)[0]
    return z - xp.log(xp.sum(xp.exp(z), axis=axis, keepdims=True))


# Note [Host forms of the softmax losses]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# On tiny host arrays (a classifier's (128, 10) logits) each NumPy call costs more than its
# arithmetic, and the array API forms take a dozen of them, each making a fresh array: the
# maximum replaced where it is not finite, the target replaced where it is ignored, zeros to
# select against, an index made by `take_along_axis` in Python. On NumPy arrays log_softmax,
# nll_loss and their vjps' array twins take the same steps in the same order (so the same
# values, bit for bit), but test once whether a replacement has anything to replace, call
# NumPy itself rather than the array API's wrappers, read and put each sample's value by one
# fancy index, and put one value per sample where the vjp rule builds a one-hot mask over
# every class. JAX compiles the array API forms into one program, where calls cost nothing.
def _log_softmax_host(a: np.ndarray, axis: Any) -> np.ndarray:
    m = _kept_max(a, axis)
    finite = np.isfinite(m)
    if not finite.all():
        m = np.where(finite, m, np.zeros_like(m))
    z = a - m
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


SHORT_ROW = 64
"""The longest rows whose maximum `_kept_max` takes down the columns instead."""


def _kept_max(a: np.ndarray, axis: Any) -> np.ndarray:
    """`np.max(a, axis, keepdims=True)`. NumPy reduces short rows one inner loop per row
    (17 us for (128, 10) float32, 440 for (4096, 10)), so a matrix of short rows is
    reduced as its transposed copy, by whole columns (6 and 40): the same maximum."""
    if axis != 1 or a.ndim != 2 or a.shape[1] > SHORT_ROW or not a.size:
        return a.max(axis=axis, keepdims=True)
    return np.ascontiguousarray(a.T).max(axis=0)[:, None]


def _at_targets(target: np.ndarray, axis: int) -> tuple:
    """The index of each target's class in an array of the classes on `axis` (the index
    `take_along_axis` builds, at a fraction of its cost for one sample axis)."""
    if axis == 1 and target.ndim == 1:
        return (np.arange(target.shape[0]), target)
    grid = np.indices(target.shape, sparse=True)
    return (*grid[:axis], target, *grid[axis:])


def _counted_targets(target: np.ndarray, ignore_index: int) -> tuple[np.ndarray, np.ndarray]:
    """Which targets count, and the targets with class 0 in place of the others."""
    counted = target != ignore_index
    if counted.all():
        return counted, target
    return counted, np.where(counted, target, np.zeros_like(target))


def _class_hits(xp: Any, target: Any, num_classes: int, axis: int, ignore_index: Any = None) -> Any:
    """Booleans with a class axis inserted at `axis`: True where the class is the target
    (one-hot), False throughout where the target is `ignore_index`."""
    classes = xp.reshape(xp.arange(num_classes), (num_classes,) + (1,) * (target.ndim - axis))
    labels = xp.expand_dims(target, axis=axis)
    hits = labels == classes
    return hits if ignore_index is None else hits & (labels != ignore_index)


def _one_hot(xp: Any, labels: Any, num_classes: int) -> Any:
    classes = xp.arange(num_classes)  # of the backend's default integer dtype, as the result
    return xp.astype(_class_hits(xp, labels, num_classes, labels.ndim), classes.dtype)


def _reduced(xp: Any, loss: Any, reduction: str) -> Any:
    return loss if reduction == "none" else getattr(xp, reduction)(loss)


def _nll_loss(xp: Any, log_probs: Any, target: Any, weight: Any, reduction: str,
              ignore_index: int) -> Any:
    if type(log_probs) is np.ndarray and type(target) is np.ndarray:
        return _nll_loss_host(log_probs, target, weight, reduction, ignore_index)
    return _nll_loss_array_api(xp, log_probs, target, weight, reduction, ignore_index)


def _nll_loss_array_api(xp: Any, log_probs: Any, target: Any, weight: Any, reduction: str,
                        ignore_index: int) -> Any:
    """Minus each target's log-probability (times its class's weight), read by index (one
    value per sample, not a one-hot product over every class); an ignored target reads
    class 0 and counts 0. "mean" divides by the counted targets' total weight."""
    axis = class_axis(log_probs.ndim)
    counted = target != ignore_index
    safe = xp.where(counted, target, xp.zeros_like(target))
    picked = xp.squeeze(
        xp.take_along_axis(log_probs, xp.expand_dims(safe, axis=axis), axis=axis), axis=axis
    )
    zeros = xp.zeros_like(picked)
    if weight is None:
        loss, counts = -xp.where(counted, picked, zeros), xp.astype(counted, log_probs.dtype)
    else:
        counts = xp.where(counted, xp.reshape(xp.take(weight, xp.reshape(safe, (-1,))),
                                              safe.shape), zeros)
        loss = -xp.where(counted, picked * counts, zeros)
    if reduction != "mean":
        return _reduced(xp, loss, reduction)
    return xp.sum(loss) / xp.sum(counts)


def _nll_loss_host(log_probs: np.ndarray, target: np.ndarray, weight: np.ndarray | None,
                   reduction: str, ignore_index: int) -> Any:
    """`_nll_loss_array_api` on NumPy arrays (Note [Host forms of the softmax losses])."""
    counted, index = _counted_targets(target, ignore_index)
    picked = log_probs[_at_targets(index, class_axis(log_probs.ndim))]
    if weight is not None:
        counts = weight[index] if index is target else np.where(counted, weight[index], 0)
        picked = picked * counts
    loss = -(picked if index is target else np.where(counted, picked, np.zeros_like(picked)))
    if reduction != "mean":
        return _reduced(np, loss, reduction)
    return loss.sum() / (counted.astype(log_probs.dtype) if weight is None else counts).sum()


def _mse_loss(xp: Any, a: Any, b: Any, reduction: str) -> Any:
    return _reduced(xp, xp.square(a - b), reduction)


# ------------------------------------------------------------------ vjps
def _dlogsumexp(g: Tensor, ctx: OpContext) -> Tensor:
    return kept(g, ctx) * (ctx.inputs[0] - kept(ctx.output, ctx)).exp()


def _dsoftmax(g: Tensor, ctx: OpContext) -> Tensor:
    y = ctx.output
    return y * (g - (g * y).sum(axis=ctx.params["axis"], keepdims=True))


def _dlog_softmax_host(xp: Any, g: Any, y: Any, shapes: tuple, params: dict) -> Any:
    """`_dlog_softmax` on the host's arrays."""
    return g - np.exp(y) * g.sum(axis=params["axis"], keepdims=True)


@with_array_twin(_dlog_softmax_host, reads_output=True, reads_params=True)
def _dlog_softmax(g: Tensor, ctx: OpContext) -> Tensor:
    return g - ctx.output.exp() * g.sum(axis=ctx.params["axis"], keepdims=True)


def _dnll_loss_host(xp: Any, g: Any, target: Any, weight: Any, shapes: tuple,
                    params: dict) -> Any:
    """`_dnll_loss` on the host's arrays: each sample's one value put at its target's class
    in zeros, where the rule selects with a one-hot mask over every class (Note [Host forms
    of the softmax losses])."""
    shape = shapes[0]
    counted, index = _counted_targets(target, params["ignore_index"])
    counts = counted.astype(g.dtype) if weight is None else np.where(counted, weight[index], 0)
    if params["reduction"] == "mean":
        g = g / counts.sum()
    value = -g if weight is None else -g * counts  # one per sample, or one for all
    if index is not target:
        value = np.where(counted, value, np.zeros_like(value))
    out = np.zeros(shape, g.dtype)
    out[_at_targets(index, class_axis(len(shape)))] = value
    return out


@with_array_twin(_dnll_loss_host, reads_params=True)
def _dnll_loss(g: Tensor, ctx: OpContext) -> Tensor:
    """Minus the gradient (times the class's weight) at each target's class, zero elsewhere
    and at ignored targets; "mean" divides by the counted targets' total weight."""
    shape, reduction, weight = ctx.shapes[0], ctx.params["reduction"], ctx.inputs[2]
    axis = class_axis(len(shape))
    hits = apply(
        CLASS_HITS, ctx.inputs[1], num_classes=shape[axis], axis=axis,
        ignore_index=ctx.params["ignore_index"],
    )
    if reduction == "none":
        g = g.reshape(kept_shape(shape, axis))
    if weight is None:
        if reduction == "mean":
            g = g / hits.astype(g.dtype).sum()
        return apply(WHERE, hits, -g, 0.0)
    weights = apply(WHERE, hits, weight.reshape((-1,) + (1,) * (len(shape) - axis - 1)), 0.0)
    if reduction == "mean":
        g = g / weights.sum()
    return apply(WHERE, hits, -g * weights, 0.0)


def _mse_scale(ctx: OpContext) -> float:
    """d(loss)/d(a - b) per unit of `(a - b)`: 2, over the element count under "mean"."""
    if ctx.params["reduction"] != "mean":
        return 2.0
    return 2.0 / math.prod(np.broadcast_shapes(*(s for s in ctx.shapes if s is not None)))


def _dmse_loss_a(g: Tensor, ctx: OpContext) -> Tensor:
    a, b = ctx.inputs
    return g * (a - b) * _mse_scale(ctx)


def _dmse_loss_b(g: Tensor, ctx: OpContext) -> Tensor:
    return -_dmse_loss_a(g, ctx)


def _nll_loss_name(args: tuple, params: dict) -> str:
    """PyTorch runs inputs with spatial axes through its 2-d kernel (and names the node so)."""
    return "NllLossBackward0" if args[0].ndim < 3 else "NllLoss2DBackward0"


# ------------------------------------------------------------------ the table
# fmt: off
LOGSUMEXP = OpDef("logsumexp", "LogsumexpBackward0", _logsumexp, _dlogsumexp, save_inputs=(0,),
                  save_output=True)
SOFTMAX = OpDef("softmax", "SoftmaxBackward0", _softmax, _dsoftmax, save_output=True)
LOG_SOFTMAX = OpDef("log_softmax", "LogSoftmaxBackward0", _log_softmax, _dlog_softmax,
                    save_output=True)
NLL_LOSS = OpDef("nll_loss", _nll_loss_name, _nll_loss, _dnll_loss, None, None,
                 save_inputs=(1, 2))
MSE_LOSS = OpDef("mse_loss", "MseLossBackward0", _mse_loss, _dmse_loss_a, _dmse_loss_b,
                 save_inputs=(0, 1))
# A tensor divided by a Python number: PyTorch's `div.Scalar`, whose node is DivBackward1.
DIV_SCALAR = OpDef("div", "DivBackward1", lambda xp, a, divisor: a / divisor,
                   lambda g, ctx: g / ctx.params["divisor"])
# fmt: on

# Not differentiable: no vjp, no node.
CLASS_HITS = OpDef("class_hits", None, _class_hits)
ONE_HOT = OpDef("one_hot", None, _one_hot)
