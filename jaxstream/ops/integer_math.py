"""Integer and floating-point bookkeeping with PyTorch's names: gcd, lcm, ldexp, frexp, i0,
mvlgamma and the shifts bitwise_left_shift / bitwise_right_shift (and `<<`, `>>`), with
their in-place forms.

gcd, lcm and the shifts are integer kernels, not differentiable. A shift by a negative
amount or by the dtype's width or more gives what PyTorch's gives: 0 to the left, the sign
(0 or -1) to the right. lcm is |a / gcd(a, b) * b|, wrapping on overflow as PyTorch's.
ldexp (`input * 2 ** other`), i0 (bessel.py) and mvlgamma (a sum of lgammas) compose
differentiable ops; frexp's mantissa is one op under PyTorch's `FrexpBackward0`, whose
gradient is g / 2 ** exponent.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..dtypes import get_default_dtype, python_dtype
from ..tensor import Tensor, is_floating
from . import return_types
from .bessel import i0 as bessel_i0
from .creation import arange
from .dispatch import apply
from .dtype_names import scalar_type
from .functional import pow as power
from .inplace import in_place_method
from .math_functions import lgamma
from .opdef import OpContext, OpDef
from .operands import as_tensor, floating, operands

__all__ = [
    "bitwise_left_shift", "bitwise_right_shift", "frexp", "gcd", "i0", "lcm", "ldexp",
    "mvlgamma",
]


# ------------------------------------------------------------------ kernels
def _lcm(xp: Any, a: Any, b: Any) -> Any:
    g = xp.gcd(a, b)
    return xp.where(g == 0, 0, xp.abs(a // xp.where(g == 0, 1, g) * b))


def _shifted(xp: Any, a: Any, b: Any, left: bool) -> Any:
    """`a` shifted by `b` bits, as PyTorch shifts: a shift outside [0, width) gives 0 to the
    left and the sign to the right."""
    dtype = xp.result_type(a, b)
    a, b = xp.astype(a, dtype), xp.astype(b, dtype)
    outside = (b < 0) | (b >= np.dtype(dtype).itemsize * 8)
    b = xp.where(outside, 0, b)
    if left:
        return xp.where(outside, 0, xp.bitwise_left_shift(a, b))
    zeros = a * 0
    return xp.where(outside, xp.where(a < 0, zeros - 1, zeros), xp.bitwise_right_shift(a, b))


def _dmantissa(g: Tensor, ctx: OpContext) -> Tensor:
    exponent = apply(EXPONENT, ctx.inputs[0])
    return g / power(2.0, exponent).astype(g.dtype)


GCD = OpDef("gcd", None, lambda xp, a, b: xp.gcd(a, b))
LCM = OpDef("lcm", None, _lcm)
SHIFT = OpDef("bitwise_shift", None, _shifted)
EXPONENT = OpDef("frexp", None, lambda xp, x: xp.frexp(x)[1])
MANTISSA = OpDef("frexp", "FrexpBackward0", lambda xp, x: xp.frexp(x)[0], _dmantissa,
                 save_inputs=(0,))


# ------------------------------------------------------------------ gcd, lcm
def _integer_tensors(op: str, kernel: str, input: Any, other: Any) -> tuple:  # noqa: A002
    """gcd's and lcm's operands: two integer tensors, or PyTorch's error."""
    if not isinstance(other, Tensor):
        raise TypeError(f"{op}(): argument 'other' (position 2) must be Tensor, not "
                        f"{type(other).__name__}")
    a, b = as_tensor(input, other), other
    for t in (a, b):
        if t.dtype.kind not in "iu":
            raise NotImplementedError(f"\"{kernel}\" not implemented for "
                                      f"'{scalar_type(t.dtype)}' ({op} of {a.dtype} and "
                                      f"{b.dtype}); {op} takes integer tensors")
    return operands(a, b)


def gcd(input: Any, other: Tensor) -> Tensor:  # noqa: A002
    """The greatest common divisor of each pair of elements (non-negative; gcd(0, 0) = 0)."""
    return apply(GCD, *_integer_tensors("gcd", "gcd_cpu", input, other))


def lcm(input: Any, other: Tensor) -> Tensor:  # noqa: A002
    """The least common multiple of each pair of elements (non-negative; 0 with a 0)."""
    return apply(LCM, *_integer_tensors("lcm", "lcm_cpu", input, other))


# ------------------------------------------------------------------ shifts
def _shift(op: str, kernel: str, left: bool) -> Callable[[Any, Any], Tensor]:
    def shift(input: Any, other: Any) -> Tensor:  # noqa: A002
        a, b = operands(input, other)
        tensors = [t for t in (a, b) if isinstance(t, Tensor)]
        floats = [t for t in tensors if is_floating(t.dtype)] or [
            n for n in (a, b) if isinstance(n, float)]
        if floats:
            dtype = floats[0].dtype if isinstance(floats[0], Tensor) else get_default_dtype()
            raise NotImplementedError(f"\"{kernel}\" not implemented for '{scalar_type(dtype)}'"
                                      f" ({op} of {a!r:.40} and {b!r:.40}); shifts take integer "
                                      f"tensors: cast first, e.g. t.long()")
        like = tensors[0]
        integer = python_dtype("i", like.array_backend)
        number = like.dtype if like.dtype.kind in "iu" else integer  # a number is weak
        a, b = (t.astype(integer) if t.dtype == np.bool_ else t for t in (
            x if isinstance(x, Tensor) else as_tensor(x, like).astype(number) for x in (a, b)))
        return apply(SHIFT, a, b, left=left)

    shift.__name__ = shift.__qualname__ = op
    shift.__doc__ = (f"Each element shifted {'left' if left else 'right'} by the bits `other` "
                     f"gives (integer tensors; `{'<<' if left else '>>'}`).")
    return shift


bitwise_left_shift = _shift("bitwise_left_shift", "lshift_cpu", True)
bitwise_right_shift = _shift("bitwise_right_shift", "rshift_cpu", False)


# ------------------------------------------------------------------ floating
def ldexp(input: Any, other: Tensor) -> Tensor:  # noqa: A002
    """`input * 2 ** other` (floating: integers take the default dtype)."""
    if not isinstance(other, Tensor):
        raise TypeError(f"ldexp(): argument 'other' (position 2) must be Tensor, not "
                        f"{type(other).__name__}")
    return as_tensor(input, other) * power(2.0, other)


def frexp(input: Any) -> return_types.frexp:  # noqa: A002
    """The named tuple `(mantissa, exponent)` with input = mantissa * 2 ** exponent, the
    mantissa in [0.5, 1) in magnitude (0, inf and NaN as they are, exponent 0), the exponent
    int32."""
    x = as_tensor(input)
    if not is_floating(x.dtype):
        raise RuntimeError(f"torch.frexp() only supports floating-point dtypes (got "
                           f"{x.dtype}); cast first, e.g. t.float()")
    return return_types.frexp(apply(MANTISSA, x), apply(EXPONENT, x.detach()))


def i0(input: Any) -> Tensor:  # noqa: A002
    """The modified Bessel function of the first kind of order zero (bessel.py)."""
    return bessel_i0(floating(as_tensor(input)))


def mvlgamma(input: Any, p: int) -> Tensor:  # noqa: A002
    """The multivariate log-gamma function of dimension `p`: log(pi) p(p-1)/4 plus the sum
    of lgamma(input - i/2) for i in 0..p-1, as PyTorch sums it."""
    if p < 1:
        raise RuntimeError(f"p has to be greater than or equal to 1 (got p={p})")
    x = floating(as_tensor(input))
    shifts = arange(-p * 0.5 + 0.5, 0.5, 0.5, dtype=x.dtype, backend=x.backend,
                    device=x.device)
    return lgamma(shifts + x.unsqueeze(-1)).sum(-1) + p * (p - 1) * math.log(math.pi) * 0.25



_WITH_IN_PLACE = {"gcd": gcd, "lcm": lcm, "ldexp": ldexp, "i0": i0, "mvlgamma": mvlgamma,
                  "bitwise_left_shift": bitwise_left_shift,
                  "bitwise_right_shift": bitwise_right_shift}
METHODS: dict[str, Any] = {
    **_WITH_IN_PLACE, "frexp": frexp,
    **{f"{name}_": in_place_method(fn, f"{name}_") for name, fn in _WITH_IN_PLACE.items()},
    "__lshift__": bitwise_left_shift,
    "__rlshift__": lambda t, other: bitwise_left_shift(other, t),
    "__ilshift__": in_place_method(bitwise_left_shift, "__ilshift__"),
    "__rshift__": bitwise_right_shift,
    "__rrshift__": lambda t, other: bitwise_right_shift(other, t),
    "__irshift__": in_place_method(bitwise_right_shift, "__irshift__"),
}
