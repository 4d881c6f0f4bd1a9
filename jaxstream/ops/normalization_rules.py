"""The op table of the normalizations: layer_norm and batch_norm (PyTorch's native kernels).

Same conventions as `rules.py`. Note [One kernel for layer and batch norm]: both
standardize `x` over some axes (`axes`: the trailing ones for layer_norm, all but the
channel axis for batch_norm) and then scale and shift by a weight and a bias, which
broadcast against `x` once viewed at `param_shape` (layer_norm's `normalized_shape`;
`(C, 1, ..., 1)` for batch_norm). So one kernel and one set of vjps serve both, under
PyTorch's two node names. Their inputs are `(x, weight, bias)`, None for a missing
weight or bias (its vjp never runs). The vjps recompute the mean and the variance from
the saved `x` in jaxstream ops, so that they are differentiable again. Batch norm
outside training standardizes with the running statistics instead, given as two more
inputs that get no gradient (PyTorch's rule): an affine map of `x`.
"""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from .dispatch import apply
from .opdef import OpContext, OpDef
from .reduction_rules import SUM_TO


# ------------------------------------------------------------------ kernels
def _affine(xp: Any, y: Any, w: Any, b: Any, param_shape: tuple) -> Any:
    """`y * w + b`, each of `w` and `b` viewed at `param_shape` and left out where None."""
    if w is not None:
        y = y * xp.reshape(w, param_shape)
    return y if b is None else y + xp.reshape(b, param_shape)


def _normalized(xp: Any, x: Any, w: Any, b: Any, axes: tuple, eps: float,
                param_shape: tuple) -> Any:
    centred = x - xp.mean(x, axis=axes, keepdims=True)
    variance = xp.mean(centred * centred, axis=axes, keepdims=True)
    return _affine(xp, centred / xp.sqrt(variance + eps), w, b, param_shape)


def _normalized_by(xp: Any, x: Any, w: Any, b: Any, mean: Any, var: Any, axes: tuple,
                   eps: float, param_shape: tuple) -> Any:
    """`x` standardized with the given per-channel `mean` and `var`, then scaled and shifted."""
    y = (x - xp.reshape(mean, param_shape)) / xp.sqrt(xp.reshape(var, param_shape) + eps)
    return _affine(xp, y, w, b, param_shape)


# ------------------------------------------------------------------ vjps
def _param(t: Tensor, ctx: OpContext) -> Tensor:
    return t.reshape(ctx.params["param_shape"])


def _summed_to_param(t: Tensor, ctx: OpContext, position: int) -> Tensor:
    """`t` (of x's shape) summed over the axes the weight broadcasts along, in the shape of
    input `position` (the weight's or the bias's)."""
    return apply(SUM_TO, t, shape=ctx.params["param_shape"]).reshape(ctx.shapes[position])


def _standardized(ctx: OpContext) -> tuple[Tensor, Tensor]:
    """`(x - mean) / sqrt(var + eps)` over the op's axes, and the factor `1 / sqrt(var + eps)`,
    from the saved `x` (Note [One kernel for layer and batch norm])."""
    x, axes = ctx.inputs[0], ctx.params["axes"]
    centred = x - x.mean(axis=axes, keepdims=True)
    scale = ((centred * centred).mean(axis=axes, keepdims=True) + ctx.params["eps"]).rsqrt()
    return centred * scale, scale


def _scaled_gradient(g: Tensor, ctx: OpContext) -> Tensor:
    """The gradient of the standardized `x`: `g` times the weight, where there is one."""
    w = ctx.inputs[1]
    return g if w is None else g * _param(w, ctx)


def _dnormalized_x(g: Tensor, ctx: OpContext) -> Tensor:
    """`scale * (gy - mean(gy) - xhat * mean(gy * xhat))`: the gradient through the mean and
    the variance as well as the division."""
    xhat, scale = _standardized(ctx)
    gy, axes = _scaled_gradient(g, ctx), ctx.params["axes"]
    return scale * (gy - gy.mean(axis=axes, keepdims=True)
                    - xhat * (gy * xhat).mean(axis=axes, keepdims=True))


def _dnormalized_w(g: Tensor, ctx: OpContext) -> Tensor:
    return _summed_to_param(g * _standardized(ctx)[0], ctx, 1)


def _dshift(g: Tensor, ctx: OpContext) -> Tensor:
    return _summed_to_param(g, ctx, 2)


def _running_scale(ctx: OpContext) -> Tensor:
    """`1 / sqrt(running_var + eps)` at `param_shape`."""
    return (_param(ctx.inputs[4], ctx) + ctx.params["eps"]).rsqrt()


def _dnormalized_by_x(g: Tensor, ctx: OpContext) -> Tensor:
    return _scaled_gradient(g, ctx) * _running_scale(ctx)


def _dnormalized_by_w(g: Tensor, ctx: OpContext) -> Tensor:
    xhat = (ctx.inputs[0] - _param(ctx.inputs[3], ctx)) * _running_scale(ctx)
    return _summed_to_param(g * xhat, ctx, 1)


# ------------------------------------------------------------------ the table
# fmt: off
_NORMALIZED = (_normalized, _dnormalized_x, _dnormalized_w, _dshift)
_READS = ((0, 1), (0,), ())
LAYER_NORM = OpDef("layer_norm", "NativeLayerNormBackward0", *_NORMALIZED, save_for=_READS)
BATCH_NORM = OpDef("batch_norm", "NativeBatchNormBackward0", *_NORMALIZED, save_for=_READS)
BATCH_NORM_BY = OpDef("batch_norm", "NativeBatchNormBackward0", _normalized_by, _dnormalized_by_x,
                      _dnormalized_by_w, _dshift, None, None,
                      save_for=((1, 4), (0, 3, 4), (), (), ()))
# fmt: on
