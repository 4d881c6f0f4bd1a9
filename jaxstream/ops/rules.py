"""The op table: for every op a forward kernel and one vjp per input, on one line.

Kernels take the array namespace `xp` (array API) and arrays (`XP.exp` is the
array API's `exp` as a kernel). A vjp takes the output gradient `g` and an
`OpContext` (`ctx.inputs`, `ctx.output`, `ctx.params`, `ctx.shapes`; see
`opdef.py`) and returns one input's gradient; the node calls only the vjps
some path needs. Vjps are written in jaxstream ops (Tensor's operators and
methods, or `apply` of another entry here), so that `create_graph=True`
differentiates them again; that is why they never import the public op
functions (`functional.py` imports this table). A broadcast input may get a
gradient of the broadcast shape: the engine sums it back (`validate_outputs`).
A kernel or vjp too long for its op's line is a named helper above the table
(three ops still take more than a line: their names are long).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.special

from ..tensor import Tensor, tensor
from .dispatch import apply
from .opdef import OpContext, OpDef
from .shapes import (
    inverse_permutation,
    kept_shape,
    reduced_count,
    split_bounds,
    summed_axes,
    swapped_axes,
)


def fused(fn: Callable) -> Callable:
    """A kernel of several elementwise steps; on JAX it is compiled once, so XLA fuses
    the steps into one pass instead of dispatching each eagerly."""
    jitted = jax.jit(functools.partial(fn, jnp))

    @functools.wraps(fn)
    def kernel(xp: Any, *arrays: Any) -> Any:
        return jitted(*arrays) if xp is jnp else fn(xp, *arrays)

    return kernel


class _ArrayAPIKernels:
    """`XP.exp` is the kernel `lambda xp, *arrays, **params: xp.exp(*arrays, **params)`."""

    def __getattr__(self, name: str) -> Callable:
        def kernel(xp: Any, *arrays: Any, **params: Any) -> Any:
            return getattr(xp, name)(*arrays, **params)

        kernel.__name__ = kernel.__qualname__ = name
        setattr(self, name, kernel)
        return kernel


XP = _ArrayAPIKernels()


# ------------------------------------------------------------------ kernels
@fused
def _sigmoid(xp: Any, a: Any) -> Any:
    return (xp.tanh(a * 0.5) + 1) * 0.5


@fused
def _tanh_bw(xp: Any, g: Any, y: Any) -> Any:
    return g * (1 - y * y)


@fused
def _sigmoid_bw(xp: Any, g: Any, y: Any) -> Any:
    return g * (1 - y) * y


def _relu(xp: Any, a: Any) -> Any:
    return xp.where(a > 0, a, xp.zeros_like(a))


def _softplus(xp: Any, a: Any) -> Any:
    return xp.logaddexp(a, xp.zeros_like(a))


def _copy(xp: Any, a: Any, src: Any) -> Any:
    return xp.broadcast_to(xp.astype(src, a.dtype), a.shape)


def _sum_to(xp: Any, a: Any, shape: tuple) -> Any:
    return xp.reshape(xp.sum(a, axis=summed_axes(a.shape, shape), keepdims=True), shape)


def _concat(xp: Any, *arrays: Any, axis: int) -> Any:
    return xp.concat(arrays, axis=axis)


def _stack(xp: Any, *arrays: Any, axis: int) -> Any:
    return xp.stack(arrays, axis=axis)


def _swapaxes(xp: Any, a: Any, axis1: int, axis2: int) -> Any:
    return xp.permute_dims(a, swapped_axes(a.ndim, axis1, axis2))


def _scatter_add(backend: Any, g: Any, index: Any, shape: tuple) -> Any:
    return backend.scatter_add(shape, g.dtype, index, g)


def _matmul(xp: Any, a: Any, b: Any) -> Any:
    y = xp.matmul(a, b)
    # Keep the operands' dtype (NumPy promotes bfloat16 products to float32).
    return y if y.dtype == a.dtype else xp.astype(y, a.dtype)


def _linear(xp: Any, x: Any, w: Any, b: Any = None) -> Any:
    y = _matmul(xp, x, xp.matrix_transpose(w))
    return y if b is None else xp.add(y, b)


# Cephes' rational approximations of erf (|x| <= 1) and erfc (1 < |x|; past 27 erfc
# underflows): accurate to a few ulp in float64, for the backends (NumPy) whose namespace
# has no erf.
_ERF_T = (9.60497373987051638749e0, 9.00260197203842689217e1, 2.23200534594684319226e3,
          7.00332514112805075473e3, 5.55923013010394962768e4)
_ERF_U = (1.0, 3.35617141647503099647e1, 5.21357949780152679795e2, 4.59432382970980127987e3,
          2.26290000613890934246e4, 4.92673942608635921086e4)
_ERFC_P = (2.46196981473530512524e-10, 5.64189564831068821977e-1, 7.46321056442269912687e0,
           4.86371970985681366614e1, 1.96520832956077098242e2, 5.26445194995477358631e2,
           9.34528527171957607540e2, 1.02755188689515710272e3, 5.57535335369399327526e2)
_ERFC_Q = (1.0, 1.32281951154744992508e1, 8.67072140885989742329e1, 3.54937778887819891062e2,
           9.75708501743205489753e2, 1.82390916687909736289e3, 2.24633760818710981792e3,
           1.65666309194161350182e3, 5.57535340817727675546e2)


def _polynomial(coefficients: tuple, x: Any) -> Any:
    """Horner's rule, highest power first."""
    acc = coefficients[0]
    for c in coefficients[1:]:
        acc = acc * x + c
    return acc


def _erf_near_zero(xp: Any, a: Any) -> Any:
    z = a * a
    return a * _polynomial(_ERF_T, z) / _polynomial(_ERF_U, z)


def _erfc_tail(xp: Any, x: Any) -> Any:
    """erfc(|x|) for |x| >= 1 (held at 1 below)."""
    x = xp.clip(xp.abs(x), 1.0, 27.0)
    return xp.exp(-x * x) * _polynomial(_ERFC_P, x) / _polynomial(_ERFC_Q, x)


def _erf(xp: Any, a: Any) -> Any:
    if xp is jnp:
        return jax.scipy.special.erf(a)
    return xp.where(xp.abs(a) <= 1, _erf_near_zero(xp, a), xp.sign(a) * (1 - _erfc_tail(xp, a)))


def _normal_cdf(xp: Any, a: Any) -> Any:
    """Phi(a), computed from erfc in the lower tail, where 1 + erf(a / sqrt 2) cancels."""
    if xp is jnp:
        return jax.scipy.special.ndtr(a)
    z = a * math.sqrt(0.5)
    tail = _erfc_tail(xp, z) * 0.5
    central = 0.5 + 0.5 * _erf_near_zero(xp, z)
    return xp.where(xp.abs(z) <= 1, central, xp.where(z > 0, 1 - tail, tail))


_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_GELU_CUBIC = 0.044715


def _gelu(xp: Any, a: Any, approximate: str) -> Any:
    if approximate == "tanh":
        return 0.5 * a * (1 + xp.tanh(_SQRT_2_OVER_PI * (a + _GELU_CUBIC * a * a * a)))
    return a * _normal_cdf(xp, a)


@fused
def _silu(xp: Any, a: Any) -> Any:
    return a * _sigmoid(xp, a)


def _leaky_relu(xp: Any, a: Any, negative_slope: float) -> Any:
    return xp.where(a > 0, a, a * negative_slope)


def _einsum(xp: Any, *arrays: Any, subscripts: str) -> Any:
    return xp.einsum(subscripts, *arrays, optimize=True)


# ------------------------------------------------------------------ node names
def _by_axis(all_axes: str, some_axes: str) -> Callable[[tuple, dict], str]:
    """A reduction's node name: one for a reduction over all axes, one for some."""
    return lambda args, params: all_axes if params["axis"] is None else some_axes


def _linear_name(args: tuple, params: dict) -> str:
    """PyTorch's node for linear: addmm/mm on a matrix, a view of it on other ranks."""
    with_bias = len(args) == 3
    if args[0].ndim == 2:
        return "AddmmBackward0" if with_bias else "MmBackward0"
    if with_bias:
        return "ViewBackward0"
    return "SqueezeBackward4" if args[0].ndim == 1 else "UnsafeViewBackward0"


def _squeeze_name(args: tuple, params: dict) -> str:
    axis = params["axis"]
    return "SqueezeBackward0" if axis is None else f"SqueezeBackward{1 + isinstance(axis, tuple)}"


def _remainder_name(args: tuple, params: dict) -> str:
    return "RemainderBackward1" if type(args[1]) is Tensor else "RemainderBackward0"


def _matmul_name(args: tuple, params: dict) -> str:
    names = {(2, 2): "MmBackward0", (2, 1): "MvBackward0", (1, 1): "DotBackward0"}
    return names.get((args[0].ndim, args[1].ndim), "MatmulBackward0")


# ------------------------------------------------------------------ vjps
# `_d<op>_<input>`: the gradient of that input. Inputs are a, b, ... in order (g, y for the
# *_backward ops, x, w, b for linear); `_d<op>` for an op of one input.
_same = lambda g, ctx: g
_negated = lambda g, ctx: -g
_zeroed = lambda g, ctx: g * 0.0
_dmul_a = lambda g, ctx: g * ctx.inputs[1]
_dmul_b = lambda g, ctx: g * ctx.inputs[0]
_ddiv_a = lambda g, ctx: g / ctx.inputs[1]
_ddiv_b = lambda g, ctx: -g * ctx.inputs[0] / (ctx.inputs[1] * ctx.inputs[1])
_dpow_a = lambda g, ctx: g * ctx.inputs[1] * ctx.inputs[0] ** (ctx.inputs[1] - 1)
_dpow_scalar_a = lambda g, ctx: _dpow_a(g, ctx) if ctx.inputs[1] != 0 else g * 0.0
_drpow_b = lambda g, ctx: g * ctx.output * math.log(ctx.inputs[0])
_dwhere_a = lambda g, ctx: apply(WHERE, ctx.inputs[0], g, 0.0)
_dwhere_b = lambda g, ctx: apply(WHERE, ctx.inputs[0], 0.0, g)
_dsin = lambda g, ctx: g * ctx.inputs[0].cos()
_dcos = lambda g, ctx: g * -ctx.inputs[0].sin()
_dtanh = lambda g, ctx: apply(TANH_BW, g, ctx.output)
_dtanh_bw_g = lambda g, ctx: apply(TANH_BW, g, ctx.inputs[1])
_dtanh_bw_y = lambda g, ctx: g * ctx.inputs[0] * ctx.inputs[1] * -2.0
_dsigmoid = lambda g, ctx: apply(SIGMOID_BW, g, ctx.output)
_dsigmoid_bw_g = lambda g, ctx: apply(SIGMOID_BW, g, ctx.inputs[1])
_dsigmoid_bw_y = lambda g, ctx: g * ctx.inputs[0] * (1 - 2 * ctx.inputs[1])
_drelu = lambda g, ctx: apply(WHERE, ctx.output > 0, g, 0.0)
_dsoftplus = lambda g, ctx: g * ctx.inputs[0].sigmoid()
_dsqrt = lambda g, ctx: g / (2 * ctx.output)
_dabs = lambda g, ctx: g * apply(SIGN, ctx.inputs[0])
_dpermute = lambda g, ctx: g.transpose(inverse_permutation(ctx.params["axes"]))
_dswapaxes = lambda g, ctx: g.swapaxes(ctx.params["axis1"], ctx.params["axis2"])
_dindex = lambda g, ctx: apply(INDEX_ADD, g, index=ctx.params["index"], shape=ctx.shapes[0])
_dindex_add = lambda g, ctx: g[ctx.params["index"]]
_dreshape = lambda g, ctx: g.reshape(ctx.shapes[0])
_dlinear_x = lambda g, ctx: g @ ctx.inputs[1]
_dsquare = lambda g, ctx: g * ctx.inputs[0] * 2.0
_dlog1p = lambda g, ctx: g / (ctx.inputs[0] + 1.0)
_dexpm1 = lambda g, ctx: g * (ctx.output + 1.0)
_dmaximum_a = lambda g, ctx: g * _winner_share(ctx.inputs[0], ctx.inputs[1], g.dtype)
_dmaximum_b = lambda g, ctx: g * _winner_share(ctx.inputs[1], ctx.inputs[0], g.dtype)
_dminimum_a = _dmaximum_b
_dminimum_b = _dmaximum_a
_dclip = lambda g, ctx: apply(WHERE, _within_bounds(ctx.inputs[0], **ctx.params), g, 0.0)
_derf = lambda g, ctx: g * (-ctx.inputs[0] * ctx.inputs[0]).exp() * (2 / math.sqrt(math.pi))
_dleaky_relu = lambda g, ctx: apply(
    WHERE, ctx.inputs[0] > 0, g, g * ctx.params["negative_slope"]
)
_dremainder_b = lambda g, ctx: g * -apply(FLOOR_DIVIDE, ctx.inputs[0], ctx.inputs[1])
_dflip = lambda g, ctx: apply(FLIP, g, axis=ctx.params["axis"])
_dcumsum = lambda g, ctx: _dflip(apply(CUMSUM, _dflip(g, ctx), axis=ctx.params["axis"]), ctx)


def _winner_share(a: Tensor, b: Tensor, dtype: Any) -> Tensor:
    """1 where `a` wins a maximum against `b`, 1/2 on ties, else 0 (PyTorch's rule)."""
    return (a > b).astype(dtype) + (a == b).astype(dtype) * 0.5


def _within_bounds(x: Tensor, min: float | None, max: float | None) -> Tensor:  # noqa: A002
    """Where clip passes the gradient: min <= x <= max (PyTorch's rule at the bounds)."""
    if min is None:
        return x <= max
    return x >= min if max is None else (x >= min) & (x <= max)


def _dsilu(g: Tensor, ctx: OpContext) -> Tensor:
    x = ctx.inputs[0]
    s = x.sigmoid()
    return g * s * (1.0 + x * (1.0 - s))


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


def _dsum(g: Tensor, ctx: OpContext) -> Tensor:
    """Broadcast the gradient of a reduction back to the reduced input's shape."""
    shape, axis = ctx.shapes[0], ctx.params["axis"]
    if not ctx.params["keepdims"]:
        g = g.reshape(kept_shape(shape, axis))
    return g.broadcast_to(shape)


def _dmean(g: Tensor, ctx: OpContext) -> Tensor:
    return _dsum(g, ctx) / reduced_count(ctx.shapes[0], ctx.params["axis"])


def _kept_output(ctx: OpContext) -> Tensor:
    """A reduction's output with the reduced axes kept, so that it broadcasts against the input."""
    if ctx.params["keepdims"]:
        return ctx.output
    return ctx.output.reshape(kept_shape(ctx.shapes[0], ctx.params["axis"]))


def _dextremum(g: Tensor, ctx: OpContext) -> Tensor:
    """The gradient of max or min: ties share it evenly (as torch.amax and torch.amin)."""
    hits = ctx.inputs[0] == _kept_output(ctx)
    share = hits.astype(g.dtype).sum(axis=ctx.params["axis"], keepdims=True)
    return apply(WHERE, hits, _dsum(g, ctx) / share, 0.0)


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
    return _dsum(g, ctx) * apply(WHERE, zero, others_at_zero, _kept_output(ctx) / nonzero)


def _centered(ctx: OpContext) -> Tensor:
    """x minus its mean over the reduced axes, over the count less the correction."""
    x, axis = ctx.inputs[0], ctx.params["axis"]
    dof = reduced_count(ctx.shapes[0], axis) - ctx.params["correction"]
    return (x - x.mean(axis=axis, keepdims=True)) / dof


def _dvar(g: Tensor, ctx: OpContext) -> Tensor:
    return _dsum(g, ctx) * _centered(ctx) * 2.0


def _dstd(g: Tensor, ctx: OpContext) -> Tensor:
    """0 where the deviation is 0 (PyTorch's subgradient)."""
    y = _kept_output(ctx)
    flat = y == 0.0
    return apply(WHERE, flat, 0.0, _dsum(g, ctx) * _centered(ctx) / apply(WHERE, flat, 1.0, y))


def _dvector_norm(g: Tensor, ctx: OpContext) -> Tensor:
    """PyTorch's subgradients: 0 where the norm is 0, ties of the inf-norm share evenly."""
    x, order = ctx.inputs[0], ctx.params["ord"]
    if order == 1:
        return _dsum(g, ctx) * apply(SIGN, x)
    y = _kept_output(ctx)
    if math.isinf(order):
        hits = x.abs() == y
        share = hits.astype(g.dtype).sum(axis=ctx.params["axis"], keepdims=True)
        return apply(WHERE, hits, _dsum(g, ctx) * apply(SIGN, x) / share, 0.0)
    at_zero = y == 0.0
    y = apply(WHERE, at_zero, 1.0, y)  # kept off 0, where the next order would divide by it
    powered = x if order == 2 else x * x.abs() ** (order - 2)
    scale = y if order == 2 else y ** (order - 1)
    return apply(WHERE, at_zero, 0.0, _dsum(g, ctx) * powered / scale)


def _dmatmul_a(g: Tensor, ctx: OpContext) -> Tensor:
    a, b = ctx.inputs
    if a.ndim == 1 and b.ndim == 1:
        return g * b
    if a.ndim == 1:
        return g.reshape(g.shape[:-1] + (1, g.shape[-1])) @ b.swapaxes(-1, -2)
    if b.ndim == 1:
        return g.reshape(g.shape + (1,)) * b
    return g @ b.swapaxes(-1, -2)


def _dmatmul_b(g: Tensor, ctx: OpContext) -> Tensor:
    a, b = ctx.inputs
    if a.ndim == 1 and b.ndim == 1:
        return g * a
    if a.ndim == 1:
        return a.reshape((-1, 1)) * g.reshape(g.shape[:-1] + (1, g.shape[-1]))
    if b.ndim == 1:
        return (a * g.reshape(g.shape + (1,))).sum(axis=-2)
    return a.swapaxes(-1, -2) @ g


def _dlinear_w(g: Tensor, ctx: OpContext) -> Tensor:
    x, w = ctx.inputs[:2]
    return g.reshape((-1, w.shape[0])).T @ x.reshape((-1, w.shape[1]))


def _dlinear_b(g: Tensor, ctx: OpContext) -> Tensor:
    return g.reshape((-1, ctx.shapes[1][0])).sum(axis=0)


def _split(g: Tensor, ctx: OpContext, needs: Sequence[bool]) -> list[Tensor | None]:
    """Each input's slice of the gradient of a concatenation (joint: offsets add up)."""
    axis = ctx.params["axis"] % g.ndim
    bounds = split_bounds(ctx.shapes, axis)
    return [
        g[(slice(None),) * axis + (slice(start, stop),)] if need else None
        for (start, stop), need in zip(bounds, needs, strict=True)
    ]


def _deinsum(g: Tensor, ctx: OpContext, needs: Sequence[bool]) -> list[Tensor | None]:
    """Each operand's gradient: an einsum of g with the other operands.

    An operand's label that appears nowhere else (summed out) is brought back by a
    vector of ones, and a repeated label (a diagonal) by an identity matrix under a
    fresh label, so that the gradient is one einsum, itself differentiable.
    """
    inputs_spec, output = ctx.params["subscripts"].split("->")
    inputs = inputs_spec.split(",")
    sizes = {c: n for labels, shape in zip(inputs, ctx.shapes, strict=True)
             for c, n in zip(labels, shape, strict=True)}
    grads: list[Tensor | None] = []
    for i, need in enumerate(needs):
        if not need:
            grads.append(None)
            continue
        operands = enumerate(zip(inputs, ctx.inputs, strict=True))
        terms = [(output, g)] + [(s, t) for j, (s, t) in operands if j != i]
        target = _einsum_target(inputs[i], terms, sizes, g)
        spec = ",".join(s for s, _ in terms) + "->" + target
        grads.append(apply(EINSUM, *[t for _, t in terms], subscripts=spec))
    return grads


def _einsum_target(labels: str, terms: list, sizes: dict, like: Tensor) -> str:
    """The subscripts of an operand's gradient; appends to `terms` the constant ones and
    identities (see `_deinsum`) that produce the labels `terms` lack."""
    free = iter(c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                if c not in sizes)
    present = set("".join(s for s, _ in terms))
    xp = like.array_backend.xp
    target = ""
    for c in labels:
        if c in target:
            fresh = next(free)
            eye = xp.eye(sizes[c], dtype=like.dtype)
            terms.append((c + fresh, tensor(eye, device=like.device)))
            target += fresh
            continue
        if c not in present:
            ones = xp.ones((sizes[c],), dtype=like.dtype)
            terms.append((c, tensor(ones, device=like.device)))
        target += c
    return target


def _unstack(g: Tensor, ctx: OpContext, needs: Sequence[bool]) -> list[Tensor | None]:
    """Each input's slice of the gradient of a stack (joint: any number of inputs)."""
    axis = ctx.params["axis"] % g.ndim
    return [g[(slice(None),) * axis + (i,)] if need else None for i, need in enumerate(needs)]


# ------------------------------------------------------------------ the table
# A variadic op that saves all its inputs lists every position an op may have.
_EVERY_INPUT = tuple(range(64))

# OpDef(name, node name, kernel, vjp of input 0, vjp of input 1, ..., what the vjps read)
# fmt: off
ADD = OpDef("add", "AddBackward0", XP.add, _same, _same)
SUB = OpDef("sub", "SubBackward0", XP.subtract, _same, _negated)
MUL = OpDef("mul", "MulBackward0", XP.multiply, _dmul_a, _dmul_b, save_inputs=(0, 1))
DIV = OpDef("div", "DivBackward0", XP.divide, _ddiv_a, _ddiv_b, save_inputs=(0, 1))
POW_SCALAR = OpDef("pow", "PowBackward0", XP.pow, _dpow_scalar_a, None, save_inputs=(0, 1))
POW = OpDef("pow", "PowBackward1", XP.pow, _dpow_a, _dpow_b, save_inputs=(0, 1), save_output=True)
RPOW = OpDef("pow", "PowBackward2", XP.pow, None, _drpow_b, save_inputs=(0,), save_output=True)
WHERE = OpDef("where", "WhereBackward0", XP.where, None, _dwhere_a, _dwhere_b, save_inputs=(0,))
NEG = OpDef("neg", "NegBackward0", XP.negative, _negated)
EXP = OpDef("exp", "ExpBackward0", XP.exp, lambda g, ctx: g * ctx.output, save_output=True)
LOG = OpDef("log", "LogBackward0", XP.log, lambda g, ctx: g / ctx.inputs[0], save_inputs=(0,))
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
SOFTPLUS = OpDef("softplus", "SoftplusBackward0", _softplus, _dsoftplus, save_inputs=(0,))
SQRT = OpDef("sqrt", "SqrtBackward0", XP.sqrt, _dsqrt, save_output=True)
ABS = OpDef("abs", "AbsBackward0", XP.abs, _dabs, save_inputs=(0,))
SQUARE = OpDef("square", "PowBackward0", XP.square, _dsquare, save_inputs=(0,))
LOG1P = OpDef("log1p", "Log1PBackward0", XP.log1p, _dlog1p, save_inputs=(0,))
EXPM1 = OpDef("expm1", "Expm1Backward0", XP.expm1, _dexpm1, save_output=True)
ERF = OpDef("erf", "ErfBackward0", _erf, _derf, save_inputs=(0,))
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
    "remainder", _remainder_name, XP.remainder, _same, _dremainder_b, save_inputs=(0, 1)
)
CLONE = OpDef("clone", "CloneBackward0", lambda xp, a: xp.asarray(a, copy=True), _same)
ASTYPE = OpDef("astype", "ToCopyBackward0", lambda xp, a, dtype: xp.astype(a, dtype), _same)
ZERO = OpDef("zero_", "ZeroBackward0", XP.zeros_like, _zeroed)
COPY = OpDef("copy_", "CopyBackwards", _copy, _zeroed, _same)
SUM = OpDef("sum", _by_axis("SumBackward0", "SumBackward1"), XP.sum, _dsum)
MEAN = OpDef("mean", _by_axis("MeanBackward0", "MeanBackward1"), XP.mean, _dmean)
AMAX = OpDef("max", "AmaxBackward0", XP.max, _dextremum, save_inputs=(0,), save_output=True)
AMIN = OpDef("min", "AminBackward0", XP.min, _dextremum, save_inputs=(0,), save_output=True)
PROD = OpDef(
    "prod", _by_axis("ProdBackward0", "ProdBackward1"), XP.prod, _dprod, save_inputs=(0,),
    save_output=True,
)
VAR = OpDef("var", "VarBackward0", XP.var, _dvar, save_inputs=(0,))
STD = OpDef("std", "StdBackward0", XP.std, _dstd, save_inputs=(0,), save_output=True)
CUMSUM = OpDef("cumsum", "CumsumBackward0", XP.cumulative_sum, _dcumsum)
VECTOR_NORM = OpDef(
    "vector_norm", "LinalgVectorNormBackward0", lambda xp, a, **p: xp.linalg.vector_norm(a, **p),
    _dvector_norm, save_inputs=(0,), save_output=True,
)
SUM_TO = OpDef("sum_to", "SumBackward1", _sum_to, lambda g, ctx: g.broadcast_to(ctx.shapes[0]))
RESHAPE = OpDef("reshape", "ViewBackward0", XP.reshape, _dreshape, view=True)
PERMUTE = OpDef("transpose", "PermuteBackward0", XP.permute_dims, _dpermute, view=True)
SWAPAXES = OpDef("swapaxes", "TransposeBackward0", _swapaxes, _dswapaxes, view=True)
SQUEEZE = OpDef("squeeze", _squeeze_name, XP.squeeze, _dreshape, view=True)
EXPAND_DIMS = OpDef("expand_dims", "UnsqueezeBackward0", XP.expand_dims, _dreshape, view=True)
FLIP = OpDef("flip", "FlipBackward0", XP.flip, _dflip)
EXPAND = OpDef("broadcast_to", "ExpandBackward0", XP.broadcast_to, _same)
INDEX = OpDef("getitem", "IndexBackward0", lambda xp, a, index: a[index], _dindex, view=True)
TAKE_ALONG = OpDef("take_along_axis", "GatherBackward0", lambda xp, a, index: a[index], _dindex)
INDEX_ADD = OpDef("index_add", "IndexPutBackward0", _scatter_add, _dindex_add, backend_kernel=True)
CONCAT = OpDef("concatenate", "CatBackward0", _concat, joint_grads=_split)
STACK = OpDef("stack", "StackBackward0", _stack, joint_grads=_unstack)
MATMUL = OpDef("matmul", _matmul_name, _matmul, _dmatmul_a, _dmatmul_b, save_inputs=(0, 1))
EINSUM = OpDef("einsum", "EinsumBackward0", _einsum, joint_grads=_deinsum, save_inputs=_EVERY_INPUT)
LINEAR = OpDef(
    "linear", _linear_name, _linear, _dlinear_x, _dlinear_w, _dlinear_b, save_inputs=(0, 1)
)
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
SIGN = OpDef("sign", None, XP.sign)
FLOOR_DIVIDE = OpDef("floor_divide", None, XP.floor_divide)
ARGMAX = OpDef("argmax", None, XP.argmax)
ARGMIN = OpDef("argmin", None, XP.argmin)
ISNAN_ANY = OpDef("isnan_any", None, lambda xp, a: xp.any(xp.isnan(a)))
