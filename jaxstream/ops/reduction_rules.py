"""The op table of the reductions: sum, mean, max/min, prod, var/std, norms, cumsum, argmax.

Same conventions as `rules.py`. Every reduction takes `axis` (None: all axes,
an int or a tuple, already counted from 0) and `keepdims`; its vjp broadcasts
the gradient back over the reduced axes (`_dsum`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np

from ..tensor import Tensor
from .dispatch import apply
from .opdef import OpContext, OpDef
from .rules import SIGN, WHERE, XP
from .shape_rules import FLIP
from .shapes import kept_shape, reduced_count, summed_axes
from .special import logcumsumexp


# ------------------------------------------------------------------ kernels
def _sum_to(xp: Any, a: Any, shape: tuple) -> Any:
    return xp.reshape(xp.sum(a, axis=summed_axes(a.shape, shape), keepdims=True), shape)


def _var(xp: Any, a: Any, axis: Any, keepdims: bool, correction: float) -> Any:
    """The variance over the element count less `correction`. Where that count is not
    positive the result is inf, or NaN for a constant slice, as in PyTorch, which warns once
    (`reductions.var` does); NumPy's floating-point warnings are kept in."""
    centered = a - xp.mean(a, axis=axis, keepdims=True)
    dof = max(reduced_count(a.shape, axis) - correction, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return xp.sum(centered * centered, axis=axis, keepdims=keepdims) / dof


def _std(xp: Any, a: Any, axis: Any, keepdims: bool, correction: float) -> Any:
    return xp.sqrt(_var(xp, a, axis, keepdims, correction))


def _vector_norm(xp: Any, a: Any, **params: Any) -> Any:
    """The array API's vector_norm; a zero under a negative ord is 1/0 on the way to the
    result, 0, which NumPy would warn of."""
    with np.errstate(divide="ignore"):
        return xp.linalg.vector_norm(a, **params)


def _cumprod(xp: Any, a: Any, axis: int) -> Any:
    """Running products along `axis` (a 0-d `a` is its own)."""
    return xp.cumulative_prod(a, axis=axis) if a.ndim else a * 1


def _hits(xp: Any, indices: Any, axis: int, length: int) -> Any:
    """True at each of `indices` (kept dims) along `axis` of length `length`, else False."""
    shape = tuple(length if i == axis else 1 for i in range(indices.ndim))
    return xp.reshape(xp.arange(length), shape) == indices


def _by_axis(all_axes: str, some_axes: str) -> Callable[[tuple, dict], str]:
    """A reduction's node name: one for a reduction over all axes, one for some."""
    return lambda args, params: all_axes if params["axis"] is None else some_axes


# ------------------------------------------------------------------ vjps
def kept(t: Tensor, ctx: OpContext) -> Tensor:
    """A reduction's output (or its gradient) with the reduced axes kept, so that it
    broadcasts against the input."""
    if ctx.params["keepdims"]:
        return t
    return t.reshape(kept_shape(ctx.shapes[0], ctx.params["axis"]))


def _dsum(g: Tensor, ctx: OpContext) -> Tensor:
    """Broadcast the gradient of a reduction back to the reduced input's shape."""
    return kept(g, ctx).broadcast_to(ctx.shapes[0])


def _dmean(g: Tensor, ctx: OpContext) -> Tensor:
    return _dsum(g, ctx) / reduced_count(ctx.shapes[0], ctx.params["axis"])


def _dextremum(g: Tensor, ctx: OpContext) -> Tensor:
    """The gradient of max or min: ties share it evenly (as torch.amax and torch.amin)."""
    hits = ctx.inputs[0] == kept(ctx.output, ctx)
    share = hits.astype(g.dtype).sum(axis=ctx.params["axis"], keepdims=True)
    return apply(WHERE, hits, _dsum(g, ctx) / share, 0.0)


def _dselected(g: Tensor, ctx: OpContext) -> Tensor:
    """The gradient of max or min along a dim: all of it to the element at the index (the
    second input), as PyTorch's MaxBackward0; amax's ties share it instead."""
    axis = ctx.params["axis"]
    if axis is None:  # a 0-d input, its one element
        return g
    indices = kept(ctx.inputs[1], ctx)
    hits = apply(HITS, indices, axis=axis, length=ctx.shapes[0][axis])
    return apply(WHERE, hits, kept(g, ctx), 0.0)


def _dprod(g: Tensor, ctx: OpContext) -> Tensor:
    """g times the product of the other elements, zeros included (PyTorch's rule).

    Away from zeros that product is y / x. At a zero it is the product P of the slice's
    nonzero elements if the zero is alone, P times the other zero if there are two, else
    0: written so that second derivatives are right too (third ones need fewer than three
    zeros in a slice).
    """
    x, axis = ctx.inputs[0], ctx.params["axis"]
    zero = x == 0.0
    nonzero = apply(WHERE, zero, 1.0, x)
    zeros = zero.astype(x.dtype).sum(axis=axis, keepdims=True)
    other_zero = apply(WHERE, zero, x, 0.0).sum(axis=axis, keepdims=True) - x
    others_at_zero = apply(PROD, nonzero, axis=axis, keepdims=True) * apply(
        WHERE, zeros == 1.0, 1.0, apply(WHERE, zeros == 2.0, other_zero, 0.0)
    )
    return _dsum(g, ctx) * apply(WHERE, zero, others_at_zero, kept(ctx.output, ctx) / nonzero)


def _centered(ctx: OpContext) -> Tensor:
    """x minus its mean over the reduced axes, over the count less the correction (NaN
    where that count is not positive: the forward is inf or NaN there)."""
    x, axis = ctx.inputs[0], ctx.params["axis"]
    dof = reduced_count(ctx.shapes[0], axis) - ctx.params["correction"]
    return (x - x.mean(axis=axis, keepdims=True)) * (1 / dof if dof > 0 else math.nan)


def _dvar(g: Tensor, ctx: OpContext) -> Tensor:
    return _dsum(g, ctx) * _centered(ctx) * 2.0


def _dstd(g: Tensor, ctx: OpContext) -> Tensor:
    """0 where the deviation is 0 (PyTorch's subgradient)."""
    y = kept(ctx.output, ctx)
    flat = y == 0.0
    return apply(WHERE, flat, 0.0, _dsum(g, ctx) * _centered(ctx) / apply(WHERE, flat, 1.0, y))


def _dvector_norm(g: Tensor, ctx: OpContext) -> Tensor | None:
    """PyTorch's gradients: none for ord 0 (a count), ties of the +-inf norms share evenly,
    and else sign(x) |x|^(ord-1) / y^(ord-1), 0 where x is 0 or the norm y is 0 (it is 0
    for a negative ord with a zero). |x| and y are kept off 0 where the next order would
    divide by them, so that second derivatives are PyTorch's where finite, and 0 for its
    NaNs at zeros."""
    x, order = ctx.inputs[0], ctx.params["ord"]
    if order == 0:
        return None
    if order == 1:
        return _dsum(g, ctx) * apply(SIGN, x)
    y = kept(ctx.output, ctx)
    if math.isinf(order):
        hits = x.abs() == y
        share = hits.astype(g.dtype).sum(axis=ctx.params["axis"], keepdims=True)
        return apply(WHERE, hits, _dsum(g, ctx) * apply(SIGN, x) / share, 0.0)
    at_zero = y == 0.0
    y = apply(WHERE, at_zero, 1.0, y)
    if order == 2:
        return apply(WHERE, at_zero, 0.0, _dsum(g, ctx) * x / y)
    powered = apply(SIGN, x) * apply(WHERE, x == 0.0, 1.0, x.abs()) ** (order - 1)
    return apply(WHERE, at_zero, 0.0, _dsum(g, ctx) * powered * y ** (1 - order))


def _reversed(scan: OpDef, t: Tensor, axis: int) -> Tensor:
    """`scan` run from the end of `axis` back to its start."""
    return apply(FLIP, apply(scan, apply(FLIP, t, axis=axis), axis=axis), axis=axis)


def _dcumsum(g: Tensor, ctx: OpContext) -> Tensor:
    """The reversed running sums of the reversed gradient."""
    return _reversed(CUMSUM, g, ctx.params["axis"])


# Note [cumprod's gradient at zeros]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The gradient of y_k = x_0 ... x_k at x_i is the sum over k >= i of g_k times the product
# of x_0..x_k but x_i. Before a slice's first zero, at z, that product is y_k / x_i: the
# gradient is the reversed running sum of g * y, over x_i. At z it is that sum of g times
# the running products that skip x_z. Past z every such product holds x_z, so the gradient
# is x_z (which is 0) times the same sum with x_z and x_i both skipped: over x_i where x_i
# is not 0, from running products that skip the second zero too where x_i is that zero,
# and 0 past the second zero. Written so, in differentiable ops, each piece has its
# derivatives too, and second derivatives are right with any number of zeros, as PyTorch's
# and jax.grad's are.
def _dcumprod(g: Tensor, ctx: OpContext) -> Tensor:
    x, axis = ctx.inputs[0], ctx.params["axis"]
    if not x.ndim:
        return g
    zero = x == 0.0
    zeros_so_far = apply(CUMSUM, zero.astype(x.dtype), axis=axis)
    before, first = zeros_so_far == 0.0, zero & (zeros_so_far == 1.0)
    second = zero & (zeros_so_far == 2.0)
    nonzero = apply(WHERE, zero, 1.0, x)
    before_zero = _skipping_sum(g, ctx.output, axis) / nonzero
    skip_first = _skipping_sum(g, apply(CUMPROD, apply(WHERE, first, 1.0, x), axis=axis), axis)
    skip_both = apply(CUMPROD, apply(WHERE, first | second, 1.0, x), axis=axis)
    the_zero = apply(WHERE, first, x, 0.0).sum(axis=axis, keepdims=True)
    past_zero = the_zero * apply(WHERE, second, _skipping_sum(g, skip_both, axis),
                                 skip_first / nonzero)
    return apply(WHERE, before, before_zero, apply(WHERE, first, skip_first, past_zero))


def _skipping_sum(g: Tensor, products: Tensor, axis: int) -> Tensor:
    """sum over k >= i of g_k * products_k, at each i (Note [cumprod's gradient at zeros])."""
    return _reversed(CUMSUM, g * products, axis)


def _dlogcumsumexp(g: Tensor, ctx: OpContext) -> Tensor:
    """sum over k >= i of g_k exp(x_i - y_k), as PyTorch computes it: the positive and the
    negative parts of g each through a reversed running logsumexp, every exponent <= 0.
    The log of a part is the dtype's lowest value, not -inf, where the part is 0, so that
    the next order never meets -inf - -inf."""
    x, axis = ctx.inputs[0], ctx.params["axis"]
    if not x.ndim:
        return g
    lowest = float(jnp.finfo(g.dtype).min)
    parts = []
    for part in (g > 0.0, g < 0.0):
        log_part = apply(WHERE, part, apply(WHERE, part, g.abs(), 1.0).log(), lowest)
        parts.append((_reversed(LOGCUMSUMEXP, log_part - ctx.output, axis) + x).exp())
    return parts[0] - parts[1]


# ------------------------------------------------------------------ the table
# fmt: off
SUM = OpDef("sum", _by_axis("SumBackward0", "SumBackward1"), XP.sum, _dsum)
MEAN = OpDef("mean", _by_axis("MeanBackward0", "MeanBackward1"), XP.mean, _dmean)
AMAX = OpDef("max", "AmaxBackward0", XP.max, _dextremum, save_inputs=(0,), save_output=True)
AMIN = OpDef("min", "AminBackward0", XP.min, _dextremum, save_inputs=(0,), save_output=True)
MAX = OpDef("max", "MaxBackward1", XP.max, _dextremum, save_inputs=(0,), save_output=True)
MIN = OpDef("min", "MinBackward1", XP.min, _dextremum, save_inputs=(0,), save_output=True)
# max/min along a dim read their indices (the second input) in backward, not in forward
MAX_DIM = OpDef("max", "MaxBackward0", lambda xp, a, i, **p: xp.max(a, **p), _dselected, None,
                save_inputs=(1,))
MIN_DIM = OpDef("min", "MinBackward0", lambda xp, a, i, **p: xp.min(a, **p), _dselected, None,
                save_inputs=(1,))
PROD = OpDef(
    "prod", _by_axis("ProdBackward0", "ProdBackward1"), XP.prod, _dprod, save_inputs=(0,),
    save_output=True,
)
VAR = OpDef("var", "VarBackward0", _var, _dvar, save_inputs=(0,))
STD = OpDef("std", "StdBackward0", _std, _dstd, save_inputs=(0,), save_output=True)
CUMSUM = OpDef("cumsum", "CumsumBackward0", XP.cumulative_sum, _dcumsum)
CUMPROD = OpDef("cumprod", "CumprodBackward0", _cumprod, _dcumprod, save_inputs=(0,),
                save_output=True)
LOGCUMSUMEXP = OpDef("logcumsumexp", "LogcumsumexpBackward0", logcumsumexp, _dlogcumsumexp,
                     save_inputs=(0,), save_output=True)
VECTOR_NORM = OpDef("vector_norm", "LinalgVectorNormBackward0", _vector_norm, _dvector_norm,
                    save_inputs=(0,), save_output=True)
SUM_TO = OpDef("sum_to", "SumBackward1", _sum_to, lambda g, ctx: g.broadcast_to(ctx.shapes[0]))
# fmt: on

# Not differentiable: no vjp, no node.
ARGMAX = OpDef("argmax", None, XP.argmax)
ARGMIN = OpDef("argmin", None, XP.argmin)
HITS = OpDef("hits", None, _hits)
ISNAN_ANY = OpDef("isnan_any", None, lambda xp, a: xp.any(xp.isnan(a)))
