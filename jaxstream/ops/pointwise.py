"""The elementwise ops PyTorch models use beyond the basic ones: sign, floor, round, rsqrt,
atan2, lerp, erfinv, nan_to_num, clamp_min/clamp_max, isclose, masked_fill, any and all.

Each has PyTorch's arguments, defaults and result dtypes: the rounding ops and nan_to_num
give an integer tensor back as a copy, the float-only ones (rsqrt, atan2, erfinv) make an
integer tensor floating first, and lerp refuses integers and operands of two dtypes.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ..tensor import Tensor, is_floating
from . import inplace
from . import pointwise_rules as P
from . import rules as R
from .creation import full_like
from .dispatch import apply
from .dtype_names import scalar_type
from .functional import clip
from .operands import as_tensor, floating, operand, operands, promoted, torch_spelling
from .shapes import broadcast_shapes, normalize_axes


def kernel_lacks(kernel: str, x: Tensor, fix: str) -> NotImplementedError:
    """PyTorch's error for a dtype its kernel has no loop for."""
    return NotImplementedError(
        f"\"{kernel}\" not implemented for '{scalar_type(x.dtype)}' (a tensor of shape "
        f"{x.shape}); {fix}"
    )


def floating_only(op: str, kernel: str, x: Tensor) -> None:
    """PyTorch's error for an integer or bool tensor given to an op with only float kernels."""
    if not is_floating(x.dtype):
        raise kernel_lacks(kernel, x, f"{op} needs a floating tensor: cast it first, e.g. "
                           f"t.float()")


def sign(x: Tensor) -> Tensor:
    """-1, 0 or 1 by the sign of each element (a bool tensor comes back as it is); its
    gradient is zero."""
    return apply(R.CLONE if x.dtype == np.bool_ else R.SIGN, x)


def floor(x: Tensor) -> Tensor:
    """The largest integer not above each element; an integer tensor is its own floor."""
    if x.dtype == np.bool_:
        raise kernel_lacks("floor_vml_cpu", x, "cast it first, e.g. t.float()")
    return apply(R.FLOOR if is_floating(x.dtype) else R.CLONE, x)


def round(x: Tensor, *, decimals: int = 0) -> Tensor:  # noqa: A001  (PyTorch's name)
    """Each element rounded half to even at `decimals` places (negative: left of the point);
    an integer tensor is its own round (with decimals=0 only, as in PyTorch)."""
    if x.dtype == np.bool_:
        raise kernel_lacks("round_vml_cpu", x, "cast it first, e.g. t.float()")
    if is_floating(x.dtype):
        return apply(R.ROUND, x, decimals=int(decimals))
    if decimals:
        raise kernel_lacks("round_cpu", x, "round with decimals= needs a floating tensor, "
                            "e.g. t.float().round(decimals=...)")
    return apply(R.CLONE, x)


def rsqrt(x: Tensor) -> Tensor:
    """`1 / sqrt(x)`; an integer tensor becomes floating first."""
    return apply(P.RSQRT, floating(x))


def atan2(a: Any, b: Any) -> Tensor:
    """The angle of the point (b, a), in (-pi, pi]; integers become floating first."""
    return apply(P.ATAN2, *map(floating, operands(a, b)))


arctan2 = atan2


def erfinv(x: Tensor) -> Tensor:
    """The inverse of erf on [-1, 1] (+-inf at +-1, NaN outside); integers become floating."""
    return apply(P.ERFINV, floating(x))


def lerp(start: Tensor, end: Any, weight: Any) -> Tensor:
    """`start + weight * (end - start)` (all three broadcast): `start` and `end` of one
    floating dtype, `weight` a number or a tensor of that dtype (or a 0-d one)."""
    end = operand(end, start)
    for name, t in (("end", end), ("weight", weight)):
        if isinstance(t, Tensor) and t.dtype != start.dtype and (name == "end" or t.ndim):
            raise RuntimeError(
                f"expected dtype {scalar_type(start.dtype).lower()} for `{name}` but got dtype "
                f"{scalar_type(t.dtype).lower()} (lerp of a {start.dtype} tensor of shape "
                f"{start.shape}); cast it first, e.g. {name}.to('{start.dtype}')"
            )
    weight = operand(weight, start)
    if not is_floating(start.dtype):
        kernel = "lerp_kernel_tensor" if isinstance(weight, Tensor) else "lerp_kernel_scalar"
        raise kernel_lacks(kernel, start, "cast the operands first, e.g. t.float()")
    if isinstance(weight, Tensor) and weight.dtype != start.dtype:  # a 0-d weight
        weight = weight.astype(start.dtype)
    shape = broadcast_shapes("lerp", start.shape, end.shape)
    if isinstance(weight, Tensor):
        broadcast_shapes("lerp", shape, weight.shape)
    return apply(P.LERP, start, end, weight)


def nan_to_num(
    x: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None
) -> Tensor:
    """NaN, +inf and -inf replaced by `nan`, `posinf` and `neginf` (the infinities by the
    dtype's largest and smallest finite values unless given); integers come back as they
    are. The gradient passes where the element was finite."""
    if not is_floating(x.dtype):
        return apply(R.CLONE, x)
    return apply(P.NAN_TO_NUM, x, nan=float(nan), posinf=None if posinf is None
                 else float(posinf), neginf=None if neginf is None else float(neginf))


def clamp_min(x: Tensor, min: Any) -> Tensor:  # noqa: A002  (PyTorch's name)
    """`x` limited from below by `min` (a number, or a tensor that broadcasts)."""
    return _clamp_one_side(P.CLAMP_MIN, x, min, "min")


def clamp_max(x: Tensor, max: Any) -> Tensor:  # noqa: A002  (PyTorch's name)
    """`x` limited from above by `max` (a number, or a tensor that broadcasts)."""
    return _clamp_one_side(P.CLAMP_MAX, x, max, "max")


def _clamp_one_side(op: Any, x: Tensor, bound: Any, side: str) -> Tensor:
    if not isinstance(bound, numbers.Number):
        return clip(x, **{side: bound})
    x = promoted(x, bound)[0]
    bounds = {"min": None, "max": None, side: bound}
    return apply(op, x, **bounds)


def isclose(
    a: Tensor, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> Tensor:
    """Where `|a - b| <= atol + rtol * |b|` (or `a == b`, for infinities), as a bool tensor;
    `a` and `b` of one dtype (a number `b` takes `a`'s)."""
    b = full_like(a, b) if isinstance(b, numbers.Number) else as_tensor(b, a)
    if a.dtype != b.dtype:
        raise RuntimeError(
            f"{scalar_type(a.dtype)} did not match {scalar_type(b.dtype)} (isclose of a "
            f"{a.dtype} tensor of shape {a.shape} and a {b.dtype} tensor of shape {b.shape}); "
            f"cast one first, e.g. b.to('{a.dtype}')"
        )
    broadcast_shapes("isclose", a.shape, b.shape)
    return apply(P.ISCLOSE, a, b, rtol=float(rtol), atol=float(atol), equal_nan=bool(equal_nan))


def masked_fill(x: Tensor, mask: Any, value: Any) -> Tensor:
    """`value` (a number, or a 0-d tensor, which gets a gradient) where the bool `mask` is
    True, `x` elsewhere; `x` and `mask` broadcast, and the result has `x`'s dtype."""
    mask = as_tensor(mask, x)
    if mask.dtype != np.bool_:
        raise RuntimeError(
            f"masked_fill_ only supports boolean masks, but got mask with dtype "
            f"{scalar_type(mask.dtype).lower()} (shape {mask.shape}, tensor of shape "
            f"{x.shape}); compare to make one, e.g. mask != 0"
        )
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(
            f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
            f"{value.ndim} dimension(s). (value of shape {value.shape}); use js.where(mask, "
            f"value, x) to fill from a tensor"
        )
    broadcast_shapes("masked_fill", x.shape, mask.shape)
    return apply(P.MASKED_FILL, x, mask, operand(value, x))


def masked_fill_(x: Tensor, mask: Any, value: Any) -> Tensor:
    """`masked_fill` in place (`x` keeps its shape: the mask must broadcast to it)."""
    return inplace.apply_inplace(x, lambda t: masked_fill(t, mask, value), "masked_fill_")


def _truth(op: Any, x: Tensor, axis: Any, keepdims: bool) -> Tensor:
    out = apply(op, x, axis=normalize_axes(op.name, axis, x.shape), keepdims=bool(keepdims))
    return out.astype(np.uint8) if x.dtype == np.uint8 else out  # PyTorch keeps uint8


@torch_spelling
def any(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Whether any element over `axis` (an int, a tuple, or None: all) is nonzero."""
    return _truth(P.ANY, x, axis, keepdims)


@torch_spelling
def all(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Whether every element over `axis` (an int, a tuple, or None: all) is nonzero."""
    return _truth(P.ALL, x, axis, keepdims)


METHODS: dict[str, Any] = {
    "sign": sign,
    "floor": floor,
    "round": round,
    "rsqrt": rsqrt,
    "atan2": atan2,
    "arctan2": atan2,
    "erfinv": erfinv,
    "lerp": lerp,
    "nan_to_num": nan_to_num,
    "clamp_min": clamp_min,
    "clamp_max": clamp_max,
    "isclose": isclose,
    "masked_fill": masked_fill,
    "masked_fill_": masked_fill_,
    "any": any,
    "all": all,
}
