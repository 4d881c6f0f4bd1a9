"""The op table of the elementwise ops PyTorch models use beyond the basic ones: rsqrt,
atan2, lerp, erfinv, nan_to_num, clamp_min/clamp_max, masked_fill, and the tests isclose,
isfinite, any and all.

Same conventions as `rules.py` (sign, floor and round, whose gradient is zero, are there).
"""

from __future__ import annotations

import math
from typing import Any

from ..tensor import Tensor
from .dispatch import apply
from .opdef import OpContext, OpDef
from .rules import CLIP, WHERE, XP
from .special import erfinv


# ------------------------------------------------------------------ kernels
def _rsqrt(xp: Any, a: Any) -> Any:
    return 1.0 / xp.sqrt(a)


def _lerp(xp: Any, start: Any, end: Any, weight: Any) -> Any:
    """`start + weight * (end - start)`, from the nearer end as PyTorch computes it, so that
    weight 1 gives `end` exactly."""
    step = end - start
    return xp.where(xp.abs(weight) < 0.5, start + weight * step, end - step * (1 - weight))


def _masked_fill(xp: Any, a: Any, mask: Any, value: Any) -> Any:
    """`value`, cast to `a`'s dtype, where `mask`; `a` elsewhere (both broadcast)."""
    return xp.where(mask, xp.astype(xp.asarray(value), a.dtype), a)


def _nan_to_num(xp: Any, a: Any, nan: float, posinf: float | None, neginf: float | None) -> Any:
    return xp.nan_to_num(a, nan=nan, posinf=posinf, neginf=neginf)


def _isclose(xp: Any, a: Any, b: Any, rtol: float, atol: float, equal_nan: bool) -> Any:
    return xp.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def _with_tensor(name: str) -> Any:
    """A node name that ends in 1 where the last argument is a tensor, else 0 (PyTorch's
    overloads: `lerp(a, b, 0.5)` is LerpBackward0, `lerp(a, b, w)` LerpBackward1)."""
    return lambda args, params: f"{name}{int(type(args[-1]) is Tensor)}"


# ------------------------------------------------------------------ vjps
# Inputs: rsqrt (a); atan2 (a, b); lerp (start, end, weight); masked_fill (a, mask, value).
_drsqrt = lambda g, ctx: g * ctx.output * ctx.output * ctx.output * -0.5
_derfinv = lambda g, ctx: g * (ctx.output * ctx.output).exp() * (math.sqrt(math.pi) / 2)
_dnan_to_num = lambda g, ctx: apply(WHERE, apply(ISFINITE, ctx.inputs[0]), g, 0.0)
_dlerp_start = lambda g, ctx: g * (1.0 - ctx.inputs[2])
_dlerp_end = lambda g, ctx: g * ctx.inputs[2]
_dlerp_weight = lambda g, ctx: g * (ctx.inputs[1] - ctx.inputs[0])
_dmasked_fill_a = lambda g, ctx: apply(WHERE, ctx.inputs[1], 0.0, g)
_dmasked_fill_value = lambda g, ctx: apply(WHERE, ctx.inputs[1], g, 0.0).sum()


def _over_squares(ctx: OpContext) -> Tensor:
    a, b = ctx.inputs
    return 1.0 / (a * a + b * b)


_datan2_a = lambda g, ctx: g * ctx.inputs[1] * _over_squares(ctx)
_datan2_b = lambda g, ctx: g * -ctx.inputs[0] * _over_squares(ctx)


# ------------------------------------------------------------------ the table
# fmt: off
RSQRT = OpDef("rsqrt", "RsqrtBackward0", _rsqrt, _drsqrt, save_output=True)
ATAN2 = OpDef("atan2", "Atan2Backward0", XP.atan2, _datan2_a, _datan2_b, save_inputs=(0, 1))
LERP = OpDef("lerp", _with_tensor("LerpBackward"), _lerp, _dlerp_start, _dlerp_end, _dlerp_weight,
             save_for=((2,), (2,), (0, 1)))
ERFINV = OpDef("erfinv", "ErfinvBackward0", erfinv, _derfinv, save_output=True)
NAN_TO_NUM = OpDef("nan_to_num", "NanToNumBackward0", _nan_to_num, _dnan_to_num,
                   save_inputs=(0,))
# clip with one bound, named as PyTorch's clamp_min(x, number) and clamp_max(x, number)
CLAMP_MIN = OpDef("clamp_min", "ClampMinBackward0", XP.clip, *CLIP.grads, save_inputs=(0,))
CLAMP_MAX = OpDef("clamp_max", "ClampMaxBackward0", XP.clip, *CLIP.grads, save_inputs=(0,))
MASKED_FILL = OpDef("masked_fill", _with_tensor("MaskedFillBackward"), _masked_fill,
                    _dmasked_fill_a, None, _dmasked_fill_value, save_inputs=(1,))
# fmt: on

# Not differentiable: no vjp, no node.
ISFINITE = OpDef("isfinite", None, XP.isfinite)
ISCLOSE = OpDef("isclose", None, _isclose)
ANY = OpDef("any", None, XP.any)
ALL = OpDef("all", None, XP.all)
