"""PyTorch's elementwise math functions beyond the basic ones, as `js.` functions, Tensor
methods and in-place methods (`tan_`, `ceil_`, ...): the trigonometric and hyperbolic
functions and their `arc*` aliases, ceil/trunc/fix/frac, log2, log10, exp2, erfc, lgamma,
digamma, polygamma, logit, sinc, deg2rad/rad2deg, sgn, xlogy, hypot, logaddexp(2), fmod,
fmax/fmin, copysign, nextafter, heaviside, float_power, and the tests signbit, isnan, isinf,
isfinite, isposinf, isneginf and isreal.

Each has PyTorch's arguments and result dtypes: the float-only functions make integer and
bool tensors floating first, ceil and trunc give an integer tensor back as a copy,
float_power computes in float64, the tests give bool tensors; where PyTorch has no kernel
for a dtype, or takes tensors only, its error is raised.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from ..tensor import Tensor, is_floating, tensor
from . import functional as F
from . import math_rules as M
from . import pointwise_rules as P
from . import rules as R
from .dispatch import apply
from .dtype_names import scalar_type
from .inplace import apply_inplace, in_place_method
from .opdef import OpDef
from .operands import astype, floating, operands
from .pointwise import kernel_lacks
from .shapes import broadcast_shapes


def _floating_unary(op: OpDef, doc: str) -> Callable[[Tensor], Tensor]:
    """An elementwise function that makes integer and bool tensors floating first."""

    def fn(input: Tensor) -> Tensor:
        return apply(op, floating(input))

    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = doc
    return fn


def _test(op: OpDef, doc: str) -> Callable[[Tensor], Tensor]:
    """A bool test of each element, for every dtype (an integer is never NaN or infinite)."""

    def fn(input: Tensor) -> Tensor:
        return apply(op, input)

    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = doc
    return fn


tan = _floating_unary(M.TAN, "The tangent of each element (in radians).")
asin = _floating_unary(M.ASIN, "The arcsine of each element, NaN outside [-1, 1].")
acos = _floating_unary(M.ACOS, "The arccosine of each element, NaN outside [-1, 1].")
atan = _floating_unary(M.ATAN, "The arctangent of each element, in (-pi/2, pi/2).")
sinh = _floating_unary(M.SINH, "The hyperbolic sine of each element.")
cosh = _floating_unary(M.COSH, "The hyperbolic cosine of each element.")
asinh = _floating_unary(M.ASINH, "The inverse hyperbolic sine of each element.")
acosh = _floating_unary(M.ACOSH, "The inverse hyperbolic cosine of each element, NaN below 1.")
atanh = _floating_unary(M.ATANH, "The inverse hyperbolic tangent, +-inf at +-1, NaN beyond.")
arcsin, arccos, arctan = asin, acos, atan
arcsinh, arccosh, arctanh = asinh, acosh, atanh
log2 = _floating_unary(M.LOG2, "The base-2 logarithm of each element.")
log10 = _floating_unary(M.LOG10, "The base-10 logarithm of each element.")
exp2 = _floating_unary(M.EXP2, "2 to the power of each element.")
erfc = _floating_unary(M.ERFC, "1 - erf, computed without the cancellation in the tails.")
lgamma = _floating_unary(M.LGAMMA, "log |Gamma(x)|: +inf at 0 and the negative integers.")
digamma = _floating_unary(M.DIGAMMA, "The derivative of lgamma: -inf at +0, +inf at -0, NaN "
                          "at the negative integers.")
sinc = _floating_unary(M.SINC, "The normalized sinc, sin(pi x) / (pi x), 1 at 0.")
deg2rad = _floating_unary(M.DEG2RAD, "Degrees to radians.")
rad2deg = _floating_unary(M.RAD2DEG, "Radians to degrees.")
isnan = _test(M.ISNAN, "Where each element is NaN.")
isinf = _test(M.ISINF, "Where each element is +inf or -inf.")
isfinite = _test(P.ISFINITE, "Where each element is neither NaN nor infinite.")
isposinf = _test(M.ISPOSINF, "Where each element is +inf.")
isneginf = _test(M.ISNEGINF, "Where each element is -inf.")
isreal = _test(M.ISREAL, "Where each element is real: everywhere, for a real tensor.")
signbit = _test(M.SIGNBIT, "Where the sign bit is set: -0.0 and negative NaNs included.")
absolute = F.abs


def _rounded(op: OpDef, x: Tensor, kernel: str) -> Tensor:
    if x.dtype == np.bool_:
        raise kernel_lacks(kernel, x, "cast it first, e.g. t.float()")
    return apply(op if is_floating(x.dtype) else R.CLONE, x)


def ceil(input: Tensor) -> Tensor:
    """The smallest integer not below each element; an integer tensor is its own (a copy)."""
    return _rounded(M.CEIL, input, "ceil_vml_cpu")


def trunc(input: Tensor) -> Tensor:
    """Each element rounded toward zero; an integer tensor is its own (a copy)."""
    return _rounded(M.TRUNC, input, "trunc_vml_cpu")


fix = trunc


def frac(input: Tensor) -> Tensor:
    """Each element less its integer part, with its sign; floating tensors only."""
    if not is_floating(input.dtype):
        raise kernel_lacks("frac_cpu", input, "cast it first, e.g. t.float()")
    return apply(M.FRAC, input)


def sgn(input: Tensor) -> Tensor:
    """-1, 0 or 1 by the sign of each element, 0 at NaN; a bool tensor comes back as it is."""
    return apply(R.CLONE if input.dtype == np.bool_ else M.SGN, input)


def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """`log(x / (1 - x))`, `x` first held to [eps, 1 - eps] where `eps` is given (the
    gradient is then 0 outside that range; without eps it is NaN outside [0, 1])."""
    return apply(M.LOGIT, floating(input), eps=None if eps is None else float(eps))


def polygamma(n: int, input: Tensor) -> Tensor:
    """The n-th derivative of digamma (n = 0: digamma itself)."""
    return _polygamma(M.POLYGAMMA, n, input)


def _polygamma(op: OpDef, n: int, input: Tensor) -> Tensor:
    if not isinstance(n, numbers.Integral) or isinstance(n, bool):
        raise TypeError(f"polygamma(): argument 'n' (position 1) must be int, not "
                        f"{type(n).__name__} (input of shape {input.shape}); e.g. "
                        f"js.polygamma(1, x) for the trigamma function")
    if n < 0:
        raise RuntimeError(f"polygamma(n, x) does not support negative n. (n = {n}, input of "
                           f"shape {input.shape}); use n >= 0 (n = 0 is digamma)")
    return apply(op, floating(input), n=int(n))


def _tensors(op: str, input: Any, other: Any, name: str = "other") -> tuple[Tensor, Tensor]:
    """Both operands, promoted, where PyTorch takes tensors only: a number is its TypeError
    (an array joins the tensor's backend, as everywhere)."""
    for position, (argument, value) in enumerate((("input", input), (name, other)), 1):
        if isinstance(value, numbers.Number) and not isinstance(value, Tensor):
            raise TypeError(
                f"{op}(): argument '{argument}' (position {position}) must be Tensor, not "
                f"{type(value).__name__}; make it one of the other operand's shape, e.g. "
                f"js.full_like(x, {value!r})"
            )
    return operands(input, other)


def _floating_binary(op: OpDef, kernel: str, doc: str) -> Callable[[Any, Any], Tensor]:
    """A function of two tensors that PyTorch has for floating dtypes only."""

    def fn(input: Any, other: Any) -> Tensor:
        a, b = _tensors(op.name, input, other)
        if not is_floating(a.dtype):
            raise kernel_lacks(kernel, a, "cast the operands first, e.g. t.float()")
        return apply(op, a, b)

    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = doc
    return fn


hypot = _floating_binary(M.HYPOT, "hypot_cpu", "`sqrt(a^2 + b^2)` without overflow.")
logaddexp = _floating_binary(M.LOGADDEXP, "logaddexp_cpu",
                             "`log(exp(a) + exp(b))` without overflow.")
logaddexp2 = _floating_binary(M.LOGADDEXP2, "logaddexp2_cpu",
                              "`log2(2^a + 2^b)` without overflow.")
nextafter = _floating_binary(M.NEXTAFTER, "nextafter_cpu",
                             "The next representable value after `a` toward `b`.")


def fmax(input: Any, other: Any) -> Tensor:
    """The larger of each pair, ignoring a NaN where the other is a number (ties and the
    gradient go to `input`)."""
    return apply(M.FMAX, *_tensors("fmax", input, other))


def fmin(input: Any, other: Any) -> Tensor:
    """The smaller of each pair, ignoring a NaN where the other is a number (ties and the
    gradient go to `input`)."""
    return apply(M.FMIN, *_tensors("fmin", input, other))


def _tensor_first(op: str, input: Any, other: Any) -> tuple[Any, Any]:
    """The operands of an op that takes a number as its second operand only."""
    if not isinstance(input, Tensor):
        raise TypeError(
            f"{op}() received an invalid combination of arguments - got "
            f"({type(input).__name__}, {type(other).__name__}); the first operand must be a "
            f"Tensor, e.g. js.{op}(js.tensor({input!r}), other)"
        )
    return operands(input, other)


def fmod(input: Tensor, other: Any) -> Tensor:
    """C's remainder: `a - trunc(a / b) * b`, with the sign of `a` (integers stay integers)."""
    a, b = _tensor_first("fmod", input, other)
    if a.dtype == np.bool_ and (isinstance(b, bool) or getattr(b, "dtype", None) == np.bool_):
        raise kernel_lacks("fmod_cpu", a, "cast the operands first, e.g. t.int()")
    F.refuse_integer_division_by_zero("fmod", a, b)
    return apply(M.FMOD, a, b)


def copysign(input: Tensor, other: Any) -> Tensor:
    """`|a|` with the sign of `b` (-0.0 and NaN signs included); integers become floating."""
    a, b = _tensor_first("copysign", input, other)
    return apply(M.COPYSIGN, floating(a), floating(b))


def xlogy(input: Any, other: Any) -> Tensor:
    """`x * log(y)`, 0 where x is 0 (unless y is NaN); integers become floating."""
    a, b = map(floating, operands(input, other))
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise TypeError(f"xlogy() needs a Tensor operand, got {a!r} and {b!r}; make one a "
                        f"tensor, e.g. js.xlogy(js.tensor({a!r}), {b!r})")
    if not isinstance(a, Tensor):
        return apply(M.XLOGY_NUMBER_SELF, tensor(a, backend=b.backend, device=b.device,
                                                 dtype=b.dtype), b)
    if not isinstance(b, Tensor):
        return apply(M.XLOGY_NUMBER_OTHER, a, tensor(b, backend=a.backend, device=a.device,
                                                     dtype=a.dtype))
    return apply(M.XLOGY, a, b)


def heaviside(input: Tensor, values: Any) -> Tensor:
    """0 below 0, `values` at 0, 1 above (and 0 at NaN), in the one dtype of both tensors.
    It has no gradient: a backward through it raises, as PyTorch's."""
    return _heaviside(M.HEAVISIDE, input, values)


def _heaviside(op: OpDef, input: Tensor, values: Any) -> Tensor:
    a, v = _tensors("heaviside", input, values, "values")
    if a.dtype != v.dtype:
        raise RuntimeError(
            f"heaviside is not yet implemented for tensors with different dtypes. (input "
            f"{a.dtype} of shape {a.shape}, values {v.dtype} of shape {v.shape}); cast one "
            f"first, e.g. values.to('{a.dtype}')"
        )
    broadcast_shapes("heaviside", a.shape, v.shape)
    return apply(op, a, v)


def float_power(input: Any, exponent: Any) -> Tensor:
    """`input ** exponent` in float64 (a float64 tensor on the JAX backend needs x64)."""
    a, b = operands(input, exponent)
    a, b = (astype(v, np.float64) if isinstance(v, Tensor) else float(v) for v in (a, b))
    if not isinstance(a, Tensor):
        return apply(M.FLOAT_RPOW, a, b)
    return apply(M.FLOAT_POW if isinstance(b, Tensor) else M.FLOAT_POW_SCALAR, a, b)


def float_power_(t: Tensor, exponent: Any) -> Tensor:
    """`float_power` in place, for a float64 tensor only (PyTorch's rule)."""
    if t.dtype != np.float64:
        raise RuntimeError(
            f"the base given to float_power_ has dtype {scalar_type(t.dtype)} but the "
            f"operation's result requires dtype Double (a tensor of shape {t.shape}); use "
            f"t.double() first, or the out-of-place js.float_power"
        )
    return apply_inplace(t, lambda v: float_power(v, exponent), "float_power_")


# The methods whose in-place variant runs the same op.
_WITH_IN_PLACE = {
    "tan": tan, "asin": asin, "acos": acos, "atan": atan, "sinh": sinh, "cosh": cosh,
    "arcsin": asin, "arccos": acos, "arctan": atan, "ceil": ceil, "trunc": trunc, "fix": trunc,
    "frac": frac, "log2": log2, "log10": log10, "exp2": exp2, "erfc": erfc, "lgamma": lgamma,
    "digamma": digamma, "logit": logit, "sinc": sinc, "deg2rad": deg2rad, "rad2deg": rad2deg,
    "sgn": sgn, "absolute": absolute, "xlogy": xlogy, "hypot": hypot, "fmod": fmod,
    "copysign": copysign, "nextafter": nextafter,
}
# PyTorch's in-place inverse hyperbolic functions record a node of their own, which it cannot
# differentiate.
_OWN_IN_PLACE = {"asinh": M.ASINH_IN_PLACE, "acosh": M.ACOSH_IN_PLACE, "atanh": M.ATANH_IN_PLACE}
METHODS: dict[str, Any] = {
    **_WITH_IN_PLACE,
    "asinh": asinh, "acosh": acosh, "atanh": atanh, "arcsinh": asinh, "arccosh": acosh,
    "arctanh": atanh, "logaddexp": logaddexp, "logaddexp2": logaddexp2, "fmax": fmax,
    "fmin": fmin, "float_power": float_power, "heaviside": heaviside, "signbit": signbit,
    "isnan": isnan, "isinf": isinf, "isfinite": isfinite, "isposinf": isposinf,
    "isneginf": isneginf, "isreal": isreal,
    "polygamma": lambda t, n: polygamma(n, t),  # the tensor first, as PyTorch's method
    **{f"{name}_": in_place_method(fn, f"{name}_") for name, fn in _WITH_IN_PLACE.items()},
    **{f"{spelling}_": in_place_method(_floating_unary(op, op.name), f"{spelling}_")
       for name, op in _OWN_IN_PLACE.items() for spelling in (name, "arc" + name[1:])},
    "polygamma_": in_place_method(lambda t, n: _polygamma(M.POLYGAMMA_IN_PLACE, n, t),
                                  "polygamma_"),
    "heaviside_": in_place_method(lambda t, v: _heaviside(M.HEAVISIDE_IN_PLACE, t, v),
                                  "heaviside_"),
    "float_power_": float_power_,
}
