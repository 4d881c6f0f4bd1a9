"""The op table of the losses PyTorch computes in one kernel of their own: binary cross
entropy (of probabilities and of logits), smooth L1 and Huber.

Same conventions as `rules.py`. Note [Pointwise losses]: each is a loss per element
of the broadcast inputs, then `reduction` ("none", "sum" or "mean" over every element).
So each input's vjp is the loss's derivative in that input, written in jaxstream ops
(differentiable again), times the output gradient spread back over the elements
(`_spread`: divided by their count under "mean"). A weight multiplies the loss per
element and gets no gradient (PyTorch's rule: `losses.py` refuses one that requires grad).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..tensor import Tensor
from .dispatch import apply
from .opdef import OpContext, OpDef
from .rules import SIGN, SOFTPLUS, WHERE

LOG_FLOOR = -100.0
"""binary_cross_entropy's floor under each log (PyTorch's), so that a certain wrong answer
costs 100, not inf."""
_PRODUCT_FLOOR = 1e-12
"""The floor under `x * (1 - x)` in binary_cross_entropy's gradient (PyTorch's)."""


# ------------------------------------------------------------------ kernels
def _reduced(xp: Any, loss: Any, reduction: str) -> Any:
    return loss if reduction == "none" else getattr(xp, reduction)(loss)


def _weighted(loss: Any, weight: Any) -> Any:
    return loss if weight is None else loss * weight


def _bce(xp: Any, x: Any, t: Any, weight: Any, reduction: str) -> Any:
    with np.errstate(divide="ignore"):  # log(0) is -inf, then the floor: no warning
        log_x = xp.maximum(xp.log(x), LOG_FLOOR)
        log_1mx = xp.maximum(xp.log1p(-x), LOG_FLOOR)
    return _reduced(xp, _weighted(-(t * log_x + (1 - t) * log_1mx), weight), reduction)


def _bce_with_logits(xp: Any, x: Any, t: Any, weight: Any, pos_weight: Any,
                     reduction: str) -> Any:
    """`(1 - t) * x + (1 + (pos_weight - 1) * t) * softplus(-x)`: the log-sigmoids as
    softplus, finite for logits of any size."""
    softplus = xp.logaddexp(-x, xp.zeros_like(x))
    positive = softplus if pos_weight is None else (1 + (pos_weight - 1) * t) * softplus
    return _reduced(xp, _weighted((1 - t) * x + positive, weight), reduction)


def _smooth_l1(xp: Any, x: Any, t: Any, reduction: str, beta: float) -> Any:
    """For beta > 0 (0 is the L1 loss: `losses.smooth_l1_loss`)."""
    d = xp.abs(x - t)
    return _reduced(xp, xp.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta), reduction)


def _huber(xp: Any, x: Any, t: Any, reduction: str, delta: float) -> Any:
    d = xp.abs(x - t)
    return _reduced(xp, xp.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta)), reduction)


# ------------------------------------------------------------------ vjps
def _spread(g: Tensor, ctx: OpContext) -> Tensor:
    """The output gradient per element of the loss (Note [Pointwise losses])."""
    if ctx.params["reduction"] != "mean":
        return g
    return g / math.prod(np.broadcast_shapes(*(s for s in ctx.shapes if s is not None)))


def _spread_weighted(g: Tensor, ctx: OpContext) -> Tensor:
    weight = ctx.inputs[2]
    g = _spread(g, ctx)
    return g if weight is None else g * weight


def _dbce_x(g: Tensor, ctx: OpContext) -> Tensor:
    x, t = ctx.inputs[0], ctx.inputs[1]
    return _spread_weighted(g, ctx) * (x - t) / (x * (1.0 - x)).clamp_min(_PRODUCT_FLOOR)


def _dbce_t(g: Tensor, ctx: OpContext) -> Tensor:
    x = ctx.inputs[0]
    return _spread_weighted(g, ctx) * ((-x).log1p() - x.log())


def _positive_factor(ctx: OpContext) -> Tensor | float:
    """`pos_weight - 1`, the extra weight of the positive term, or 0.0 without one."""
    pos_weight = ctx.inputs[3]
    return 0.0 if pos_weight is None else pos_weight - 1.0


def _dbce_with_logits_x(g: Tensor, ctx: OpContext) -> Tensor:
    """`sigmoid(x) - t` without a pos_weight; `(1 - t) - (1 + (pw - 1) t) sigmoid(-x)` with."""
    x, t = ctx.inputs[0], ctx.inputs[1]
    extra = _positive_factor(ctx)
    return _spread_weighted(g, ctx) * ((1.0 - t) - (t * extra + 1.0) * (-x).sigmoid())


def _dbce_with_logits_t(g: Tensor, ctx: OpContext) -> Tensor:
    x = ctx.inputs[0]
    extra = _positive_factor(ctx)
    return _spread_weighted(g, ctx) * (apply(SOFTPLUS, -x) * extra - x)


def _dsmooth_l1_x(g: Tensor, ctx: OpContext) -> Tensor:
    d, beta = ctx.inputs[0] - ctx.inputs[1], ctx.params["beta"]
    return _spread(g, ctx) * apply(WHERE, d.abs() < beta, d / beta, apply(SIGN, d))


def _dhuber_x(g: Tensor, ctx: OpContext) -> Tensor:
    d, delta = ctx.inputs[0] - ctx.inputs[1], ctx.params["delta"]
    return _spread(g, ctx) * apply(WHERE, d.abs() < delta, d, apply(SIGN, d) * delta)


def _against(dx: Any) -> Any:
    """The vjp of the target of a loss of `x - t`: minus the input's."""
    return lambda g, ctx: -dx(g, ctx)


# ------------------------------------------------------------------ the table
# fmt: off
BCE = OpDef("binary_cross_entropy", "BinaryCrossEntropyBackward0", _bce, _dbce_x, _dbce_t, None,
            save_inputs=(0, 1, 2))
BCE_WITH_LOGITS = OpDef("binary_cross_entropy_with_logits", "BinaryCrossEntropyWithLogitsBackward0",
                        _bce_with_logits, _dbce_with_logits_x, _dbce_with_logits_t, None, None,
                        save_inputs=(0, 1, 2, 3))
SMOOTH_L1 = OpDef("smooth_l1_loss", "SmoothL1LossBackward0", _smooth_l1, _dsmooth_l1_x,
                  _against(_dsmooth_l1_x), save_inputs=(0, 1))
HUBER = OpDef("huber_loss", "HuberLossBackward0", _huber, _dhuber_x, _against(_dhuber_x),
              save_inputs=(0, 1))
# fmt: on
