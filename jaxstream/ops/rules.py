"""The op table of the elementwise ops, comparisons and indexing, and what every table shares.

Every table (this one, `reduction_rules`, `shape_rules`, `linalg_rules`,
`neural_rules`) gives each op a forward kernel and one vjp per input, on one
line. Kernels take the array namespace `xp` (array API) and arrays (`XP.exp` is
the array API's `exp` as a kernel). A vjp takes the output gradient `g` and an
`OpContext` (`ctx.inputs`, `ctx.output`, `ctx.params`, `ctx.shapes`; see
`opdef.py`) and returns one input's gradient; the node calls only the vjps
some path needs. Vjps are written in jaxstream ops (Tensor's operators and
methods, or `apply` of another table entry), so that `create_graph=True`
differentiates them again; that is why they never import the public op
functions (which import the tables). A broadcast input may get a gradient of
the broadcast shape: the engine sums it back (`validate_outputs`). A kernel or
vjp too long for its op's line is a named helper above the table. A vjp may
carry a one-kernel twin for backward without create_graph (`fused_vjp`,
`with_array_twin`: twins.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..tensor import Tensor
from .dispatch import apply
from .opdef import PASS_THROUGH, OpContext, OpDef
from .special import erf, normal_cdf
from .twins import fused, fused_vjp, kept_or_zero, with_array_twin


class _ArrayAPIKernels:
    """`XP.exp` is the kernel `lambda xp, *arrays, **params: xp.exp(*arrays, **params)`."""

    def __getattr__(self, name: str) -> Callable:
        def kernel(xp: Any, *arrays: Any, **params: Any) -> Any:
            return getattr(xp, name)(*arrays, **params)

        kernel.__name__ = kernel.__qualname__ = name
        kernel.array_api_name = name  # `OpDef.bind` calls `xp.<name>` itself
        setattr(self, name, kernel)
        return kernel


XP = _ArrayAPIKernels()


# ------------------------------------------------------------------ kernels
@fused
def _sigmoid(xp: Any, a: Any) -> Any:
    return (xp.tanh(a * 0.5) + 1) * 0.5


# Note [The form of tanh's backward]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# `g * (1 - y**2)` is computed as `t + t * y` with `t = g * (1 - y)`, the form jax.grad's
# own tanh rule takes. Both are the same product up to a few roundings (of values no
# larger than 2|g|; tests/test_tanh_backward.py), but in a compiled step they pack
# differently. XLA lets an elementwise fusion write its result over an operand
# that dies there, and picks the first such operand; the fusion's operands come nearest
# the root first (as seen with jaxlib 0.10), so `y` is first only where it sits one op
# below the root, as in `t + t * y`, and not two, as in `1 - y * y`. Then each
# second-order tanh backward writes over the forward activation it read, which dies
# there, as in jax.jit's program; with `g * (1 - y * y)` it wrote over the incoming
# gradient instead and left a gap in the temp buffer. On the hessian
# workload (experiments/compiled) at batch 10,000 that was 14 slots of 10,000x64 floats
# (35.8 MB) against jax.jit's 13 (33.3 MB): over glibc's largest mmap threshold
# (32 MiB), so every call mapped and faulted in fresh pages, ~1.8x slower.
# On the host's arrays, which can be written in place, the kernel is PyTorch's own form,
# `g * (1 - y * y)`, in one new array: three passes and one allocation instead of four
# of each, 116 -> 54 us on 2,000x64 float32 out of cache.
def _tanh_bw_in_place(xp: Any, g: Any, y: Any) -> Any:
    t = y * y
    if not t.ndim or t.shape != g.shape or t.dtype != g.dtype:
        return _tanh_bw_steps(xp, g, y)  # a 0-d result is a scalar; or g broadcasts or promotes
    xp.subtract(1, t, out=t)
    t *= g
    return t


def _dtanh_bw_y_in_place(xp: Any, g: Any, dy: Any, y: Any) -> Any:
    """`g * dy * y * -2.0` in one new array: `g * dy` has the shape and dtype of the
    backward's output (`g` is its gradient), which `y` broadcasts and casts into."""
    t = g * dy
    t *= y
    t *= -2.0
    return t


def _tanh_bw_steps(xp: Any, g: Any, y: Any) -> Any:
    t = g * (1 - y)
    return t + t * y


_tanh_bw = fused(_tanh_bw_steps, host=_tanh_bw_in_place)


@fused
def _sigmoid_bw(xp: Any, g: Any, y: Any) -> Any:
    return g * (1 - y) * y


def _relu(xp: Any, a: Any) -> Any:
    return xp.maximum(a, 0)  # NaN stays NaN, as in PyTorch


def _softplus(xp: Any, a: Any) -> Any:
    return xp.logaddexp(a, xp.zeros_like(a))


def _copy(xp: Any, a: Any, src: Any) -> Any:
    return xp.broadcast_to(xp.astype(src, a.dtype), a.shape)


def _scatter_add(backend: Any, g: Any, index: Any, shape: tuple) -> Any:
    return backend.scatter_add(shape, g.dtype, index, g)


_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_GELU_CUBIC = 0.044715
_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)


def _gelu(xp: Any, a: Any, approximate: str) -> Any:
    if approximate == "tanh":
        return 0.5 * a * (1 + xp.tanh(_SQRT_2_OVER_PI * (a + _GELU_CUBIC * a * a * a)))
    return a * normal_cdf(xp, a)


@fused
def _silu(xp: Any, a: Any) -> Any:
    return a * _sigmoid(xp, a)


def _leaky_relu(xp: Any, a: Any, negative_slope: float) -> Any:
    return xp.where(a > 0, a, a * negative_slope)


# The fused twins of composite vjps (Note [Fused vjps without create_graph] in twins.py): the
# gradient, then what the op saved.
def _sin_backward(xp: Any, g: Any, a: Any) -> Any:
    return g * xp.cos(a)


def _cos_backward(xp: Any, g: Any, a: Any) -> Any:
    return g * -xp.sin(a)


def _relu_backward(xp: Any, g: Any, y: Any) -> Any:
    return xp.where(y <= 0, xp.zeros_like(g), g)


def _relu_backward_host(xp: Any, g: Any, y: Any) -> Any:
    return kept_or_zero(xp, ~(y <= 0), g)


def _sqrt_backward(xp: Any, g: Any, y: Any) -> Any:
    return g / (2 * y)


def _abs_backward(xp: Any, g: Any, a: Any) -> Any:
    return g * xp.sign(a)


def _log1p_backward(xp: Any, g: Any, a: Any) -> Any:
    return g / (a + 1.0)


def _softplus_backward(xp: Any, g: Any, a: Any) -> Any:
    return g * _sigmoid(xp, a)


def _silu_backward(xp: Any, g: Any, a: Any) -> Any:
    s = _sigmoid(xp, a)
    return g * s * (1.0 + a * (1.0 - s))


def _erf_backward(xp: Any, g: Any, a: Any) -> Any:
    return g * xp.exp(-a * a) * _TWO_OVER_SQRT_PI


def _div_backward_b(xp: Any, g: Any, a: Any, b: Any) -> Any:
    return -g * a / (b * b)


def _pow_backward_a(xp: Any, g: Any, a: Any, b: Any) -> Any:
    return g * b * a ** (b - 1)


def _maximum_backward_a(xp: Any, g: Any, a: Any, b: Any) -> Any:
    return g * _winner_share_of(xp, a, b, g.dtype)


def _maximum_backward_b(xp: Any, g: Any, a: Any, b: Any) -> Any:
    return g * _winner_share_of(xp, b, a, g.dtype)


def _winner_share_of(xp: Any, a: Any, b: Any, dtype: Any) -> Any:
    return xp.astype(a > b, dtype) + xp.astype(a == b, dtype) * 0.5


def _round(xp: Any, a: Any, decimals: int) -> Any:
    """Halves to even, at `decimals` places (NumPy's and PyTorch's scaling by 10**decimals)."""
    return xp.round(a, decimals=decimals) if decimals else xp.round(a)


def _sign(xp: Any, a: Any) -> Any:
    """-1, 0 or 1; 0 for NaN, as PyTorch's (the array API's sign keeps NaN)."""
    signs = xp.sign(a)
    return xp.where(xp.isnan(a), xp.zeros_like(signs), signs) if a.dtype.kind == "f" else signs


def _remainder_name(args: tuple, params: dict) -> str:
    return "RemainderBackward1" if type(args[1]) is Tensor else "RemainderBackward0"


# ------------------------------------------------------------------ vjps
# `_d<op>_<input>`: the gradient of that input. Inputs are a, b, ... in order (g, y for the
# *_backward ops); `_d<op>` for an op of one input.
# The gradient passes through (the other tables use it too).
same = with_array_twin(PASS_THROUGH)(lambda g, ctx: g)
# The commonest vjps call `apply` themselves rather than go through Tensor's operators: a
# saved operand is already what the forward's operands became (Note [The op fast path]).
_negated = with_array_twin(lambda xp, g, *saved: -g)(lambda g, ctx: apply(NEG, g))
# A gradient of zeros: for piecewise-constant ops and draws (the other tables use it too).
zeroed = with_array_twin(lambda xp, g: g * 0.0)(lambda g, ctx: g * 0.0)
_dmul_a = with_array_twin(lambda xp, g, a, b: g * b)(lambda g, ctx: apply(MUL, g, ctx.inputs[1]))
_dmul_b = with_array_twin(lambda xp, g, a, b: g * a)(lambda g, ctx: apply(MUL, g, ctx.inputs[0]))
_ddiv_a = with_array_twin(lambda xp, g, a, b: g / b)(lambda g, ctx: g / ctx.inputs[1])
_ddiv_b = fused_vjp(
    _div_backward_b, lambda g, ctx: -g * ctx.inputs[0] / (ctx.inputs[1] * ctx.inputs[1])
)
_dpow_a = fused_vjp(
    _pow_backward_a, lambda g, ctx: g * ctx.inputs[1] * ctx.inputs[0] ** (ctx.inputs[1] - 1)
)
_dpow_scalar_a = lambda g, ctx: _dpow_a(g, ctx) if ctx.inputs[1] != 0 else g * 0.0
_drpow_b = lambda g, ctx: g * ctx.output * math.log(ctx.inputs[0])
_dwhere_a = with_array_twin(lambda xp, g, c: kept_or_zero(xp, c, g))(
    lambda g, ctx: apply(WHERE, ctx.inputs[0], g, 0.0)
)
_dwhere_b = with_array_twin(lambda xp, g, c: kept_or_zero(xp, xp.logical_not(c), g))(
    lambda g, ctx: apply(WHERE, ctx.inputs[0], 0.0, g)
)
_dsin = fused_vjp(_sin_backward, lambda g, ctx: g * ctx.inputs[0].cos())
_dcos = fused_vjp(_cos_backward, lambda g, ctx: g * -ctx.inputs[0].sin())
_dtanh = with_array_twin(_tanh_bw, reads_output=True)(lambda g, ctx: apply(TANH_BW, g, ctx.output))
# The backward ops' own vjps; their saved inputs are (the gradient, the output).
_dtanh_bw_g = with_array_twin(lambda xp, g, dy, y: _tanh_bw(xp, g, y))(
    lambda g, ctx: apply(TANH_BW, g, ctx.inputs[1])
)
_dtanh_bw_y = with_array_twin(_dtanh_bw_y_in_place)(
    lambda g, ctx: g * ctx.inputs[0] * ctx.inputs[1] * -2.0
)
_dsigmoid = with_array_twin(_sigmoid_bw, reads_output=True)(
    lambda g, ctx: apply(SIGMOID_BW, g, ctx.output)
)
_dsigmoid_bw_g = with_array_twin(lambda xp, g, dy, y: _sigmoid_bw(xp, g, y))(
    lambda g, ctx: apply(SIGMOID_BW, g, ctx.inputs[1])
)
_dsigmoid_bw_y = with_array_twin(lambda xp, g, dy, y: g * dy * (1 - 2 * y))(
    lambda g, ctx: g * ctx.inputs[0] * (1 - 2 * ctx.inputs[1])
)
# NaN passes g, as in PyTorch. With create_graph the select is an op of g and relu's output,
# as PyTorch's threshold_backward: its gradient in the output is zero, so a second grad
# reaches the input (a zero there) instead of finding it unused.
_drelu = fused_vjp(
    _relu_backward,
    lambda g, ctx: apply(RELU_BW, g, ctx.output),
    reads_output=True,
    host=_relu_backward_host,
)
_drelu_bw_g = with_array_twin(_relu_backward_host)(lambda g, ctx: apply(RELU_BW, g, ctx.inputs[1]))
_drelu_bw_y = with_array_twin(lambda xp, g, y: g * 0.0)(lambda g, ctx: g * 0.0)
_dsoftplus = fused_vjp(_softplus_backward, lambda g, ctx: g * ctx.inputs[0].sigmoid())
_dsqrt = fused_vjp(_sqrt_backward, lambda g, ctx: g / (2 * ctx.output), reads_output=True)
_dabs = fused_vjp(_abs_backward, lambda g, ctx: g * apply(SIGN, ctx.inputs[0]))
_dindex = lambda g, ctx: apply(INDEX_ADD, g, index=ctx.params["index"], shape=ctx.shapes[0])
_dindex_add = lambda g, ctx: g[ctx.params["index"]]
_dsquare = with_array_twin(lambda xp, g, a: g * a * 2.0)(lambda g, ctx: g * ctx.inputs[0] * 2.0)
_dlog1p = fused_vjp(_log1p_backward, lambda g, ctx: g / (ctx.inputs[0] + 1.0))
_dexp = with_array_twin(lambda xp, g, y: g * y, reads_output=True)(lambda g, ctx: g * ctx.output)
_dlog = with_array_twin(lambda xp, g, a: g / a)(lambda g, ctx: g / ctx.inputs[0])
_dexpm1 = with_array_twin(lambda xp, g, y: g * (y + 1.0), reads_output=True)(
    lambda g, ctx: g * (ctx.output + 1.0)
)
_dmaximum_a = fused_vjp(
    _maximum_backward_a, lambda g, ctx: g * _winner_share(ctx.inputs[0], ctx.inputs[1], g.dtype)
)
_dmaximum_b = fused_vjp(
    _maximum_backward_b, lambda g, ctx: g * _winner_share(ctx.inputs[1], ctx.inputs[0], g.dtype)
)
_dminimum_a = _dmaximum_b
_dminimum_b = _dmaximum_a
_dclip = lambda g, ctx: apply(WHERE, _within_bounds(ctx.inputs[0], **ctx.params), g, 0.0)
_derf = fused_vjp(
    _erf_backward, lambda g, ctx: g * (-ctx.inputs[0] * ctx.inputs[0]).exp() * _TWO_OVER_SQRT_PI
)
_dleaky_relu = lambda g, ctx: apply(
    WHERE, ctx.inputs[0] > 0, g, g * ctx.params["negative_slope"]
)
_dremainder_b = lambda g, ctx: g * -apply(FLOOR_DIVIDE, ctx.inputs[0], ctx.inputs[1])


def _winner_share(a: Tensor, b: Tensor, dtype: Any) -> Tensor:
    """1 where `a` wins a maximum against `b`, 1/2 on ties, else 0 (PyTorch's rule)."""
    return (a > b).astype(dtype) + (a == b).astype(dtype) * 0.5


def _within_bounds(x: Tensor, min: float | None, max: float | None) -> Tensor:  # noqa: A002
    """Where clip passes the gradient: min <= x <= max (PyTorch's rule at the bounds)."""
    if min is None:
        return x <= max
    return x >= min if max is None else (x >= min) & (x <= max)


def _silu_composite(g: Tensor, ctx: OpContext) -> Tensor:
    x = ctx.inputs[0]
    s = x.sigmoid()
    return g * s * (1.0 + x * (1.0 - s))


_dsilu = fused_vjp(_silu_backward, _silu_composite)


def _dgelu(g: Tensor, ctx: OpContext) -> Tensor:
    x = ctx.inputs[0]
    if ctx.params["approximate"] == "tanh":
        inner = (x + x * x * x * _GELU_CUBIC) * _SQRT_2_OVER_PI
        t = inner.tanh()
        slope = (x * x * (3 * _GELU_CUBIC) + 1.0) * _SQRT_2_OVER_PI
        return g * ((t + 1.0) * 0.5 + x * (1.0 - t * t) * slope * 0.5)
    cdf = (apply(ERF, x * math.sqrt(0.5)) + 1.0) * 0.5
    pdf = (x * x * -0.5).exp() * (1 / math.sqrt(2 * math.pi))
    return g * (cdf + x * pdf)


def _dpow_b(g: Tensor, ctx: OpContext) -> Tensor:
    a, b = ctx.inputs
    return g * apply(WHERE, (a == 0) & (b >= 0), 0.0, ctx.output * a.log())


# ------------------------------------------------------------------ the table
def _index(xp: Any, a: Any, index: Any) -> Any:
    return a[index]


# OpDef(name, node name, kernel, vjp of input 0, vjp of input 1, ..., what the vjps read)
# fmt: off
ADD = OpDef("add", "AddBackward0", XP.add, same, same)
SUB = OpDef("sub", "SubBackward0", XP.subtract, same, _negated)
MUL = OpDef("mul", "MulBackward0", XP.multiply, _dmul_a, _dmul_b, save_for=((1,), (0,)))
DIV = OpDef("div", "DivBackward0", XP.divide, _ddiv_a, _ddiv_b, save_for=((1,), (0, 1)))
POW_SCALAR = OpDef("pow", "PowBackward0", XP.pow, _dpow_scalar_a, None, save_inputs=(0, 1))
POW = OpDef("pow", "PowBackward1", XP.pow, _dpow_a, _dpow_b, save_inputs=(0, 1), save_output=True)
RPOW = OpDef("pow", "PowBackward2", XP.pow, None, _drpow_b, save_inputs=(0,), save_output=True)
WHERE = OpDef("where", "WhereBackward0", XP.where, None, _dwhere_a, _dwhere_b, save_inputs=(0,))
NEG = OpDef("neg", "NegBackward0", XP.negative, _negated)
EXP = OpDef("exp", "ExpBackward0", XP.exp, _dexp, save_output=True)
LOG = OpDef("log", "LogBackward0", XP.log, _dlog, save_inputs=(0,))
SIN = OpDef("sin", "SinBackward0", XP.sin, _dsin, save_inputs=(0,))
COS = OpDef("cos", "CosBackward0", XP.cos, _dcos, save_inputs=(0,))
TANH = OpDef("tanh", "TanhBackward0", XP.tanh, _dtanh, save_output=True)
TANH_BW = OpDef(
    "tanh_backward", "TanhBackwardBackward0", _tanh_bw, _dtanh_bw_g, _dtanh_bw_y, save_inputs=(0, 1)
)
SIGMOID = OpDef("sigmoid", "SigmoidBackward0", _sigmoid, _dsigmoid, save_output=True)
SIGMOID_BW = OpDef(
    "sigmoid_backward", "SigmoidBackwardBackward0", _sigmoid_bw, _dsigmoid_bw_g, _dsigmoid_bw_y,
    save_inputs=(0, 1),
)
RELU = OpDef("relu", "ReluBackward0", _relu, _drelu, save_output=True)
RELU_BW = OpDef("threshold_backward", "ThresholdBackwardBackward0", _relu_backward, _drelu_bw_g,
                _drelu_bw_y, save_for=((1,), (1,)))
SOFTPLUS = OpDef("softplus", "SoftplusBackward0", _softplus, _dsoftplus, save_inputs=(0,))
SQRT = OpDef("sqrt", "SqrtBackward0", XP.sqrt, _dsqrt, save_output=True)
ABS = OpDef("abs", "AbsBackward0", XP.abs, _dabs, save_inputs=(0,))
SQUARE = OpDef("square", "PowBackward0", XP.square, _dsquare, save_inputs=(0,))
LOG1P = OpDef("log1p", "Log1PBackward0", XP.log1p, _dlog1p, save_inputs=(0,))
EXPM1 = OpDef("expm1", "Expm1Backward0", XP.expm1, _dexpm1, save_output=True)
ERF = OpDef("erf", "ErfBackward0", erf, _derf, save_inputs=(0,))
GELU = OpDef("gelu", "GeluBackward0", _gelu, _dgelu, save_inputs=(0,))
SILU = OpDef("silu", "SiluBackward0", _silu, _dsilu, save_inputs=(0,))
LEAKY_RELU = OpDef("leaky_relu", "LeakyReluBackward0", _leaky_relu, _dleaky_relu, save_inputs=(0,))
CLIP = OpDef("clip", "ClampBackward1", XP.clip, _dclip, save_inputs=(0,))
MAXIMUM = OpDef(
    "maximum", "MaximumBackward0", XP.maximum, _dmaximum_a, _dmaximum_b, save_inputs=(0, 1)
)
MINIMUM = OpDef(
    "minimum", "MinimumBackward0", XP.minimum, _dminimum_a, _dminimum_b, save_inputs=(0, 1)
)
REMAINDER = OpDef(
    "remainder", _remainder_name, XP.remainder, same, _dremainder_b, save_inputs=(0, 1)
)
CLONE = OpDef("clone", "CloneBackward0", lambda xp, a: xp.asarray(a, copy=True), same)
ASTYPE = OpDef("astype", "ToCopyBackward0", lambda xp, a, dtype: xp.astype(a, dtype), same)
ZERO = OpDef("zero_", "ZeroBackward0", XP.zeros_like, zeroed)
# Piecewise constant: a gradient of zeros, as PyTorch's (not none: the result requires grad).
SIGN = OpDef("sign", "SignBackward0", _sign, zeroed)
FLOOR = OpDef("floor", "FloorBackward0", XP.floor, zeroed)
ROUND = OpDef("round", lambda args, params: f"RoundBackward{int(bool(params['decimals']))}", _round,
              zeroed)
COPY = OpDef("copy_", "CopyBackwards", _copy, zeroed, same)
INDEX = OpDef("getitem", "IndexBackward0", _index, _dindex, view=True, per_call_params=True)
TAKE_ALONG = OpDef("take_along_axis", "GatherBackward0", _index, _dindex, per_call_params=True)
INDEX_ADD = OpDef("index_add", "IndexPutBackward0", _scatter_add, _dindex_add, backend_kernel=True)
# fmt: on

# Comparisons and other non-differentiable ops: no vjp, so no node is recorded.
EQUAL = OpDef("equal", None, XP.equal)
NOT_EQUAL = OpDef("not_equal", None, XP.not_equal)
LESS = OpDef("less", None, XP.less)
LESS_EQUAL = OpDef("less_equal", None, XP.less_equal)
GREATER = OpDef("greater", None, XP.greater)
GREATER_EQUAL = OpDef("greater_equal", None, XP.greater_equal)
LOGICAL_AND = OpDef("logical_and", None, XP.logical_and)
LOGICAL_OR = OpDef("logical_or", None, XP.logical_or)
LOGICAL_NOT = OpDef("logical_not", None, XP.logical_not)
FLOOR_DIVIDE = OpDef("floor_divide", None, XP.floor_divide)
# A cast to a non-floating dtype has no gradient (PyTorch's rule): no node.
CAST_NO_GRAD = OpDef("astype", None, lambda xp, a, dtype: xp.astype(a, dtype))
