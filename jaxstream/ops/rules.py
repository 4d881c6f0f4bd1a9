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

from ..tensor import Tensor
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


# ------------------------------------------------------------------ node names
def _by_axis(all_axes: str, some_axes: str) -> Callable[[tuple, dict], str]:
    """A reduction's node name: one for a reduction over all axes, one for some."""
    return lambda args, params: all_axes if params["axis"] is None else some_axes


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


def _damax(g: Tensor, ctx: OpContext) -> Tensor:
    """Ties share the gradient evenly (as torch.amax)."""
    shape, axis = ctx.shapes[0], ctx.params["axis"]
    y = ctx.output if ctx.params["keepdims"] else ctx.output.reshape(kept_shape(shape, axis))
    hits = ctx.inputs[0] == y
    share = hits.astype(g.dtype).sum(axis=axis, keepdims=True)
    return apply(WHERE, hits, _dsum(g, ctx) / share, 0.0)


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


def _unstack(g: Tensor, ctx: OpContext, needs: Sequence[bool]) -> list[Tensor | None]:
    """Each input's slice of the gradient of a stack (joint: any number of inputs)."""
    axis = ctx.params["axis"] % g.ndim
    return [g[(slice(None),) * axis + (i,)] if need else None for i, need in enumerate(needs)]


# ------------------------------------------------------------------ the table
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
CLONE = OpDef("clone", "CloneBackward0", lambda xp, a: xp.asarray(a, copy=True), _same)
ASTYPE = OpDef("astype", "ToCopyBackward0", lambda xp, a, dtype: xp.astype(a, dtype), _same)
ZERO = OpDef("zero_", "ZeroBackward0", XP.zeros_like, _zeroed)
COPY = OpDef("copy_", "CopyBackwards", _copy, _zeroed, _same)
SUM = OpDef("sum", _by_axis("SumBackward0", "SumBackward1"), XP.sum, _dsum)
MEAN = OpDef("mean", _by_axis("MeanBackward0", "MeanBackward1"), XP.mean, _dmean)
AMAX = OpDef("max", "AmaxBackward0", XP.max, _damax, save_inputs=(0,), save_output=True)
SUM_TO = OpDef("sum_to", "SumBackward1", _sum_to, lambda g, ctx: g.broadcast_to(ctx.shapes[0]))
RESHAPE = OpDef("reshape", "ViewBackward0", XP.reshape, _dreshape, view=True)
PERMUTE = OpDef("transpose", "PermuteBackward0", XP.permute_dims, _dpermute, view=True)
SWAPAXES = OpDef("swapaxes", "TransposeBackward0", _swapaxes, _dswapaxes, view=True)
EXPAND = OpDef("broadcast_to", "ExpandBackward0", XP.broadcast_to, _same)
INDEX = OpDef("getitem", "IndexBackward0", lambda xp, a, index: a[index], _dindex, view=True)
INDEX_ADD = OpDef("index_add", "IndexPutBackward0", _scatter_add, _dindex_add, backend_kernel=True)
CONCAT = OpDef("concatenate", "CatBackward0", _concat, joint_grads=_split)
STACK = OpDef("stack", "StackBackward0", _stack, joint_grads=_unstack)
MATMUL = OpDef("matmul", _matmul_name, _matmul, _dmatmul_a, _dmatmul_b, save_inputs=(0, 1))
LINEAR = OpDef(
    "linear", "LinearBackward0", _linear, _dlinear_x, _dlinear_w, _dlinear_b, save_inputs=(0, 1)
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
ISNAN_ANY = OpDef("isnan_any", None, lambda xp, a: xp.any(xp.isnan(a)))
