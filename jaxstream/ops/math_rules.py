"""The op table of PyTorch's elementwise math functions beyond the basic ones: the
trigonometric and hyperbolic functions and their inverses, ceil/trunc/frac, log2, log10,
exp2, erfc, lgamma, digamma, polygamma, logit, sinc, sgn, xlogy, hypot, logaddexp(2), fmod,
fmax/fmin, copysign, nextafter, heaviside, float_power and the tests isnan, isinf, ....

Same conventions as `rules.py`. Each vjp is PyTorch's formula for the gradient, in the form
that gives PyTorch's values where the limits do not decide them: an inverse square root at
the ends of asin's domain, the masks of xlogy and copysign at zero, the selects of sinc and
logit, the exponent-zero test of float_power.

Note [Special functions on the host]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
NumPy has no lgamma, digamma or polygamma, and JAX's polygamma is wrong for negative
arguments, so they are built here from the standard series, as `special.py` builds erf: the
recurrence of the gamma function moves the argument above `_SHIFT`, where Stirling's series
(lgamma) and the asymptotic series of the polygamma functions (from Bernoulli numbers) are
good to a few ulp, and the reflection formulas take negative arguments. On the host they
run in float64 and round to the input's dtype; on JAX (lgamma and digamma from
`jax.scipy.special` there) in the input's own. The poles are PyTorch's: lgamma is +inf,
digamma -inf at +0, +inf at -0 and NaN at the negative integers, and the trigamma function
takes the reflection with the unreduced `sin(pi * x)`, as PyTorch does, so its "poles" are
as large and finite as PyTorch's.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..tensor import Tensor
from .dispatch import apply
from .opdef import OpContext, OpDef
from .pointwise_rules import MASKED_FILL, RSQRT
from .rules import WHERE, XP, same
from .special import erf, erfc_tail, polynomial

_LN2, _LN10 = math.log(2.0), math.log(10.0)
_DEG2RAD, _RAD2DEG = math.pi / 180.0, 180.0 / math.pi
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_SHIFT = 10  # the recurrence moves the argument to at least this (plus n for polygamma n)
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510)
# Stirling's series, B_2k / (2k (2k - 1)), and digamma's, B_2k / 2k, highest power first.
_STIRLING = tuple(b / (2 * k * (2 * k - 1)) for k, b in enumerate(_BERNOULLI, 1))[::-1]
_DIGAMMA = tuple(b / (2 * k) for k, b in enumerate(_BERNOULLI, 1))[::-1]


# ------------------------------------------------------------------ special functions
def _on_host(fn: Any) -> Any:
    """`fn(xp, a, ...)` in float64 on the host, rounded to `a`'s dtype, without NumPy's
    warnings (its infinities and NaNs are the values); on JAX, where x64 may be off, in
    `a`'s dtype."""

    def kernel(xp: Any, a: Any, **params: Any) -> Any:
        if xp is jnp:
            return fn(xp, a, **params)
        with np.errstate(all="ignore"):
            return xp.astype(fn(xp, xp.astype(a, xp.float64), **params), a.dtype)

    kernel.__name__ = kernel.__qualname__ = fn.__name__.lstrip("_")
    return kernel


def _pole(xp: Any, x: Any) -> Any:
    """The non-positive integers, -inf among them (the poles of the gamma function)."""
    return (x <= 0) & (x == xp.floor(x))


def _from_nearest_integer(xp: Any, x: Any) -> Any:
    """`x` less its nearest integer, exactly: sin and tan of pi times it are those of pi x."""
    return x - xp.round(x)


def _cot_pi(xp: Any, x: Any) -> Any:
    """cot(pi x), from the tangent of pi times the exact distance to the nearest integer (near
    it) or to the nearest half (near that), so that it is 0 at the halves, in float32 too."""
    r = _from_nearest_integer(xp, x)
    to_half = xp.where(r < 0, -0.5, 0.5) - r
    return xp.where(xp.abs(r) < 0.25, 1.0 / xp.tan(math.pi * r), xp.tan(math.pi * to_half))


def _lgamma_positive(xp: Any, x: Any) -> Any:
    product = xp.ones_like(x)
    for _ in range(_SHIFT):
        low = x < _SHIFT
        product = xp.where(low, product * x, product)
        x = xp.where(low, x + 1.0, x)
    r = 1.0 / x
    series = r * polynomial(_STIRLING, r * r)
    return (x - 0.5) * xp.log(x) - x + _HALF_LOG_2PI + series - xp.log(product)


@_on_host
def _lgamma(xp: Any, x: Any) -> Any:
    sine = xp.abs(xp.sin(math.pi * _from_nearest_integer(xp, x)))
    reflected = xp.log(math.pi / sine) - _lgamma_positive(xp, xp.where(x < 0, 1.0 - x, 1.0))
    out = xp.where(x < 0, reflected, _lgamma_positive(xp, xp.where(x < 0, 1.0, x)))
    out = xp.where((x == 1) | (x == 2), 0.0, out)
    return xp.where(_pole(xp, x) | (x == math.inf), math.inf, out)


def _digamma_positive(xp: Any, x: Any) -> Any:
    total = xp.zeros_like(x)
    for _ in range(_SHIFT):
        low = x < _SHIFT
        total = total + xp.where(low, 1.0 / x, 0.0)
        x = xp.where(low, x + 1.0, x)
    r2 = 1.0 / (x * x)
    return xp.log(x) - 0.5 / x - r2 * polynomial(_DIGAMMA, r2) - total


def _zero_pole(xp: Any, x: Any, out: Any) -> Any:
    """digamma at zero as PyTorch's: -inf at +0, +inf at -0."""
    return xp.where(x == 0, xp.copysign(xp.full_like(x, math.inf), -x), out)


@_on_host
def _digamma(xp: Any, x: Any) -> Any:
    reflected = _digamma_positive(xp, xp.where(x < 0, 1.0 - x, 1.0)) - math.pi * _cot_pi(xp, x)
    out = xp.where(x < 0, reflected, _digamma_positive(xp, xp.where(x < 0, 1.0, x)))
    return _zero_pole(xp, x, xp.where(_pole(xp, x), math.nan, out))


def _polygamma_positive(xp: Any, x: Any, n: int) -> Any:
    """psi^(n)(x), n >= 1, for x > 0: the recurrence, then the asymptotic series."""
    total = xp.zeros_like(x)
    for _ in range(_SHIFT + n):
        low = x < _SHIFT + n
        total = total + xp.where(low, x ** -(n + 1), 0.0)
        x = xp.where(low, x + 1.0, x)
    r = 1.0 / x
    terms = tuple(b * math.factorial(2 * k + n - 1) / math.factorial(2 * k)
                  for k, b in enumerate(_BERNOULLI, 1))[::-1]
    series = math.factorial(n - 1) + math.factorial(n) / 2 * r + r * r * polynomial(terms, r * r)
    return (-1) ** (n + 1) * (r**n * series + math.factorial(n) * total)


def _cot_derivative(n: int) -> tuple:
    """P with (d/du)^n cot(u) = P(cot u), highest power first: P_0(c) = c and
    P_k+1(c) = -(1 + c^2) P_k'(c)."""
    p = [0.0, 1.0]  # lowest power first
    for _ in range(n):
        slope = [i * c for i, c in enumerate(p)][1:]
        p = [0.0] * (len(slope) + 2)
        for i, c in enumerate(slope):
            p[i] -= c
            p[i + 2] -= c
    return tuple(p[::-1])


@_on_host
def _polygamma_of_order(xp: Any, x: Any, n: int) -> Any:
    """psi^(n)(x) for n >= 1; the trigamma function reflects with PyTorch's sin(pi x)."""
    inner = _polygamma_positive(xp, xp.where(x > 0, x, 1.0 - x), n)
    if n == 1:
        return xp.where(x > 0, inner, math.pi**2 / xp.sin(math.pi * x) ** 2 - inner)
    cot = _cot_pi(xp, x)
    reflected = (-1) ** n * inner - math.pi ** (n + 1) * polynomial(_cot_derivative(n), cot)
    out = xp.where(_pole(xp, x), (-1) ** (n + 1) * math.inf, xp.where(x > 0, inner, reflected))
    return xp.where(x == math.inf, math.nan, out)


@_on_host
def _erfc_on_host(xp: Any, a: Any) -> Any:
    tail = erfc_tail(xp, a)
    out = xp.where(xp.abs(a) <= 1, 1.0 - erf(xp, a), xp.where(a > 0, tail, 2.0 - tail))
    return xp.where(a > 27, 0.0, out)  # past 27 erfc underflows


def _lgamma_kernel(xp: Any, a: Any) -> Any:
    return jax.scipy.special.gammaln(a) if xp is jnp else _lgamma(xp, a)


def _digamma_kernel(xp: Any, a: Any) -> Any:
    return _zero_pole(xp, a, jax.scipy.special.digamma(a)) if xp is jnp else _digamma(xp, a)


def _polygamma(xp: Any, a: Any, n: int) -> Any:
    return _digamma_kernel(xp, a) if n == 0 else _polygamma_of_order(xp, a, n=n)


def _erfc(xp: Any, a: Any) -> Any:
    return jax.scipy.special.erfc(a) if xp is jnp else _erfc_on_host(xp, a)


# ------------------------------------------------------------------ other kernels
def _frac(xp: Any, a: Any) -> Any:
    return a - xp.trunc(a)


def _sgn(xp: Any, a: Any) -> Any:
    """The sign, 0 at NaN (PyTorch's; NumPy's sign of NaN is NaN)."""
    return xp.where(xp.isnan(a), xp.zeros_like(a), xp.sign(a))


def _logit(xp: Any, a: Any, eps: float | None) -> Any:
    """`log(a / (1 - a))`, `a` first held to [eps, 1 - eps] in its dtype (below eps tested
    first, as PyTorch does, for an eps above 1/2)."""
    if eps is not None:
        low = xp.asarray(eps, dtype=a.dtype)
        a = xp.where(a < low, low, xp.where(a > 1 - low, 1 - low, a))
    return xp.log(a / (1 - a))


def _sinc(xp: Any, a: Any) -> Any:
    product = math.pi * xp.where(a == 0, 1.0, a)
    return xp.where(a == 0, 1.0, xp.sin(product) / product)


def _xlogy(xp: Any, a: Any, b: Any) -> Any:
    """`a * log(b)`, 0 where `a` is 0 unless `b` is NaN (not `0 * log(0)`, NaN)."""
    return xp.where(xp.isnan(b), b, xp.where(a == 0, 0.0, a * xp.log(b)))


def _heaviside(xp: Any, a: Any, values: Any) -> Any:
    """0 below 0 (and at NaN, as PyTorch's), `values` at 0, 1 above."""
    return xp.where(a == 0, values, xp.astype(a > 0, a.dtype))


def _with_tensor_other(name: str) -> Any:
    """PyTorch's overloads of a tensor and a number (`{name}0`) or two tensors (`{name}1`)."""
    return lambda args, params: f"{name}{int(type(args[1]) is Tensor)}"


def _copysign_name(args: tuple, params: dict) -> str:
    return f"CopysignBackward{int(type(args[1]) is not Tensor)}"


# ------------------------------------------------------------------ vjps
# `_d<op>_<input>`: the gradient of that input (a, b); `_d<op>` for an op of one input.
_dtan = lambda g, ctx: g * (ctx.output.square() + 1.0)
_dasin = lambda g, ctx: g * apply(RSQRT, 1.0 - ctx.inputs[0].square())
_dacos = lambda g, ctx: g * -apply(RSQRT, 1.0 - ctx.inputs[0].square())
_datan = lambda g, ctx: g / (ctx.inputs[0].square() + 1.0)
_dsinh = lambda g, ctx: g * apply(COSH, ctx.inputs[0])
_dcosh = lambda g, ctx: g * apply(SINH, ctx.inputs[0])
_dasinh = lambda g, ctx: g * apply(RSQRT, ctx.inputs[0].square() + 1.0)
_dacosh = lambda g, ctx: g * apply(RSQRT, ctx.inputs[0].square() - 1.0)
_datanh = lambda g, ctx: g / (1.0 - ctx.inputs[0].square())
_dlog2 = lambda g, ctx: g / (ctx.inputs[0] * _LN2)
_dlog10 = lambda g, ctx: g / (ctx.inputs[0] * _LN10)
_dexp2 = lambda g, ctx: g * ctx.output * _LN2
_derfc = lambda g, ctx: g * (-ctx.inputs[0].square()).exp() * -_TWO_OVER_SQRT_PI
_dlgamma = lambda g, ctx: g * apply(DIGAMMA, ctx.inputs[0])
_ddigamma = lambda g, ctx: g * apply(POLYGAMMA, ctx.inputs[0], n=1)
_dpolygamma = lambda g, ctx: g * apply(POLYGAMMA, ctx.inputs[0], n=ctx.params["n"] + 1)
_dxlogy_b = lambda g, ctx: g * ctx.inputs[0] / ctx.inputs[1]
_dhypot_a = lambda g, ctx: g * ctx.inputs[0] / ctx.output
_dhypot_b = lambda g, ctx: g * ctx.inputs[1] / ctx.output
_dlogaddexp_a = lambda g, ctx: g / ((ctx.inputs[1] - ctx.inputs[0]).exp() + 1.0)
_dlogaddexp_b = lambda g, ctx: g / ((ctx.inputs[0] - ctx.inputs[1]).exp() + 1.0)
_dlogaddexp2_a = lambda g, ctx: g / (apply(EXP2, ctx.inputs[1] - ctx.inputs[0]) + 1.0)
_dlogaddexp2_b = lambda g, ctx: g / (apply(EXP2, ctx.inputs[0] - ctx.inputs[1]) + 1.0)
_dfmod_b = lambda g, ctx: -g * apply(DIV_TRUNC, ctx.inputs[0], ctx.inputs[1])
_dnextafter_a = lambda g, ctx: apply(MASKED_FILL, g, ctx.inputs[0] == ctx.inputs[1], 0.0)
# PyTorch's zero gradient of a piecewise constant op: zeros, whatever `g` holds (`g * 0` is
# NaN where `g` is infinite, which a second backward may well give).
_zeros = lambda g, ctx: apply(ZEROS, g)


def not_implemented_vjp(error: type, op: str, message: str = "") -> Any:
    """The vjp of an op PyTorch records but cannot differentiate: its error, when reached."""
    message = message or f"derivative for aten::{op} is not implemented"

    def vjp(g: Tensor, ctx: OpContext) -> Tensor:
        raise error(f"{message} (a gradient of shape {g.shape} reached {op}); detach its "
                    f"input, or use a differentiable op there")

    return vjp


def _not_implemented_in_place(op: str) -> Any:
    message = f"the derivative for 'inplace version of {op}' is not implemented."
    return not_implemented_vjp(NotImplementedError, f"{op}_", message)


def _dxlogy_a(g: Tensor, ctx: OpContext) -> Tensor:
    """`log(b)` even where `a` is 0, but 0 where `b` is not positive there."""
    a, b = ctx.inputs
    return apply(MASKED_FILL, apply(XLOGY, g, b), (a == 0) & (b <= 0), 0.0)


def _fmax_keeps_a(ctx: OpContext) -> Tensor:
    """Where fmax takes its first input: the larger, a tie, or the other NaN."""
    a, b = ctx.inputs
    return (a >= b) | apply(ISNAN, b)


def _fmin_keeps_a(ctx: OpContext) -> Tensor:
    a, b = ctx.inputs
    return (a <= b) | apply(ISNAN, b)


_dfmax_a = lambda g, ctx: apply(MASKED_FILL, g, ~_fmax_keeps_a(ctx), 0.0)
_dfmax_b = lambda g, ctx: apply(MASKED_FILL, g, _fmax_keeps_a(ctx), 0.0)
_dfmin_a = lambda g, ctx: apply(MASKED_FILL, g, ~_fmin_keeps_a(ctx), 0.0)
_dfmin_b = lambda g, ctx: apply(MASKED_FILL, g, _fmin_keeps_a(ctx), 0.0)


def _dcopysign(g: Tensor, ctx: OpContext) -> Tensor:
    """`g * result / a`, 0 where `a` is 0 (the sign copied onto 0 has no slope)."""
    a = ctx.inputs[0]
    return g * apply(MASKED_FILL, ctx.output / a, a == 0, 0.0)


def _dlogit(g: Tensor, ctx: OpContext) -> Tensor:
    """`g / (x (1 - x))`: NaN outside [0, 1] without eps, 0 outside [eps, 1 - eps] with."""
    x, eps = ctx.inputs[0], ctx.params["eps"]
    slope = g / (x * (1.0 - x))
    if eps is None:
        return apply(WHERE, (x < 0.0) | (x > 1.0), math.nan, slope)
    low = np.asarray(eps, dtype=x.dtype)
    return apply(WHERE, (x >= low.item()) & (x <= (1 - low).item()), slope, 0.0)


def _dsinc(g: Tensor, ctx: OpContext) -> Tensor:
    """`g (pi x cos(pi x) - sin(pi x)) / (pi x^2)`, 0 where `pi x^2` is 0."""
    x = ctx.inputs[0]
    x_pi, squared_pi = x * math.pi, x * x * math.pi
    slope = g * (x_pi * x_pi.cos() - x_pi.sin()) / squared_pi
    return apply(WHERE, squared_pi == 0.0, 0.0, slope)


def _dfloat_pow_a(g: Tensor, ctx: OpContext) -> Tensor:
    """`g b a^(b - 1)`, 0 where `b` is 0 (not `0 * 0^-1`)."""
    a, b = ctx.inputs
    return apply(WHERE, b == 0.0, 0.0, g * (b * apply(FLOAT_POW, a, b - 1.0)))


def _dfloat_pow_b(g: Tensor, ctx: OpContext) -> Tensor:
    a, b = ctx.inputs
    return g * apply(WHERE, (a == 0.0) & (b >= 0.0), 0.0, ctx.output * a.log())


def _dfloat_pow_scalar(g: Tensor, ctx: OpContext) -> Tensor:
    a, exponent = ctx.inputs
    if exponent == 0:
        return g * 0.0
    return g * (exponent * apply(FLOAT_POW_SCALAR, a, exponent - 1.0))


def _dfloat_rpow(g: Tensor, ctx: OpContext) -> Tensor:
    """`g * result * log(base)`, 0 where the base is 0 and the exponent not negative."""
    base, b = ctx.inputs
    if base == 0:
        return g * apply(WHERE, b >= 0.0, 0.0, ctx.output * -math.inf)
    return g * (ctx.output * (math.log(base) if base > 0 else math.nan))


# ------------------------------------------------------------------ the table
# fmt: off
TAN = OpDef("tan", "TanBackward0", XP.tan, _dtan, save_output=True)
ASIN = OpDef("asin", "AsinBackward0", XP.asin, _dasin, save_inputs=(0,))
ACOS = OpDef("acos", "AcosBackward0", XP.acos, _dacos, save_inputs=(0,))
ATAN = OpDef("atan", "AtanBackward0", XP.atan, _datan, save_inputs=(0,))
SINH = OpDef("sinh", "SinhBackward0", XP.sinh, _dsinh, save_inputs=(0,))
COSH = OpDef("cosh", "CoshBackward0", XP.cosh, _dcosh, save_inputs=(0,))
ASINH = OpDef("asinh", "AsinhBackward0", XP.asinh, _dasinh, save_inputs=(0,))
ACOSH = OpDef("acosh", "AcoshBackward0", XP.acosh, _dacosh, save_inputs=(0,))
ATANH = OpDef("atanh", "AtanhBackward0", XP.atanh, _datanh, save_inputs=(0,))
LOG2 = OpDef("log2", "Log2Backward0", XP.log2, _dlog2, save_inputs=(0,))
LOG10 = OpDef("log10", "Log10Backward0", XP.log10, _dlog10, save_inputs=(0,))
EXP2 = OpDef("exp2", "Exp2Backward0", XP.exp2, _dexp2, save_output=True)
ERFC = OpDef("erfc", "ErfcBackward0", _erfc, _derfc, save_inputs=(0,))
LGAMMA = OpDef("lgamma", "LgammaBackward0", _lgamma_kernel, _dlgamma, save_inputs=(0,))
DIGAMMA = OpDef("digamma", "DigammaBackward0", _digamma_kernel, _ddigamma, save_inputs=(0,))
POLYGAMMA = OpDef("polygamma", "PolygammaBackward0", _polygamma, _dpolygamma, save_inputs=(0,))
LOGIT = OpDef("logit", "LogitBackward0", _logit, _dlogit, save_inputs=(0,))
SINC = OpDef("sinc", "SincBackward0", _sinc, _dsinc, save_inputs=(0,))
DEG2RAD = OpDef("deg2rad", "Deg2RadBackward0", lambda xp, a: a * _DEG2RAD,
                lambda g, ctx: g * _DEG2RAD)
RAD2DEG = OpDef("rad2deg", "Rad2DegBackward0", lambda xp, a: a * _RAD2DEG,
                lambda g, ctx: g * _RAD2DEG)
FRAC = OpDef("frac", "FracBackward0", _frac, same)
# Piecewise constant: a gradient of zeros, as PyTorch's (the result requires grad).
CEIL = OpDef("ceil", "CeilBackward0", XP.ceil, _zeros)
TRUNC = OpDef("trunc", "TruncBackward0", XP.trunc, _zeros)
SGN = OpDef("sgn", "SgnBackward0", _sgn, _zeros)
DIV_TRUNC = OpDef("div", "DivBackward2", lambda xp, a, b: xp.trunc(a / b), _zeros, _zeros)
# xlogy of two tensors, of a number and a tensor, of a tensor and a number (the number a 0-d
# tensor of the result's dtype, which needs no gradient).
XLOGY = OpDef("xlogy", "XlogyBackward0", _xlogy, _dxlogy_a, _dxlogy_b, save_inputs=(0, 1))
XLOGY_NUMBER_SELF = OpDef("xlogy", "XlogyBackward1", _xlogy, None, _dxlogy_b, save_inputs=(0, 1))
XLOGY_NUMBER_OTHER = OpDef("xlogy", "XlogyBackward2", _xlogy, _dxlogy_a, None,
                           save_inputs=(0, 1))
HYPOT = OpDef("hypot", "HypotBackward0", XP.hypot, _dhypot_a, _dhypot_b, save_inputs=(0, 1),
              save_output=True)
LOGADDEXP = OpDef("logaddexp", "LogaddexpBackward0", XP.logaddexp, _dlogaddexp_a,
                  _dlogaddexp_b, save_inputs=(0, 1))
LOGADDEXP2 = OpDef("logaddexp2", "Logaddexp2Backward0", XP.logaddexp2, _dlogaddexp2_a,
                   _dlogaddexp2_b, save_inputs=(0, 1))
FMOD = OpDef("fmod", _with_tensor_other("FmodBackward"), XP.fmod, same, _dfmod_b,
             save_for=((), (0, 1)))
FMAX = OpDef("fmax", "FmaxBackward0", XP.fmax, _dfmax_a, _dfmax_b, save_inputs=(0, 1))
FMIN = OpDef("fmin", "FminBackward0", XP.fmin, _dfmin_a, _dfmin_b, save_inputs=(0, 1))
COPYSIGN = OpDef("copysign", _copysign_name, XP.copysign, _dcopysign, _zeros, save_inputs=(0,),
                 save_output=True)
NEXTAFTER = OpDef("nextafter", "NextafterBackward0", XP.nextafter, _dnextafter_a, _zeros,
                  save_inputs=(0, 1))
# float_power: pow in float64, whose gradient is 0 where the exponent is 0 (PowBackward1 of
# two tensors, PowBackward0 of a tensor and a number, PowBackward2 of a number and a tensor).
FLOAT_POW = OpDef("float_power", "PowBackward1", XP.pow, _dfloat_pow_a, _dfloat_pow_b,
                  save_inputs=(0, 1), save_output=True)
FLOAT_POW_SCALAR = OpDef("float_power", "PowBackward0", XP.pow, _dfloat_pow_scalar,
                         save_inputs=(0, 1))
FLOAT_RPOW = OpDef("float_power", "PowBackward2", XP.pow, None, _dfloat_rpow, save_inputs=(0, 1),
                   save_output=True)
# fmt: on

# Recorded, as PyTorch records them, but not differentiable: a backward through one raises.
HEAVISIDE = OpDef("heaviside", "torch::autograd::NotImplemented", _heaviside,
                  *[not_implemented_vjp(RuntimeError, "heaviside")] * 2)
HEAVISIDE_IN_PLACE = OpDef("heaviside_", "torch::autograd::NotImplemented", _heaviside,
                           *[not_implemented_vjp(RuntimeError, "heaviside_")] * 2)
ASINH_IN_PLACE = OpDef("asinh_", "AsinhBackward1", XP.asinh, _not_implemented_in_place("asinh"))
ACOSH_IN_PLACE = OpDef("acosh_", "AcoshBackward1", XP.acosh, _not_implemented_in_place("acosh"))
ATANH_IN_PLACE = OpDef("atanh_", "AtanhBackward1", XP.atanh, _not_implemented_in_place("atanh"))
# polygamma_ has a node of its own name, and the gradient of polygamma.
POLYGAMMA_IN_PLACE = OpDef("polygamma_", "PolygammaBackward1", _polygamma, _dpolygamma,
                           save_inputs=(0,))

# Tests: no vjp, no node.
ZEROS = OpDef("zeros_like", None, XP.zeros_like)
ISNAN = OpDef("isnan", None, XP.isnan)
ISINF = OpDef("isinf", None, XP.isinf)
ISPOSINF = OpDef("isposinf", None, lambda xp, a: xp.isinf(a) & (a > 0))
ISNEGINF = OpDef("isneginf", None, lambda xp, a: xp.isinf(a) & (a < 0))
ISREAL = OpDef("isreal", None, XP.isreal)
SIGNBIT = OpDef("signbit", None, XP.signbit)
