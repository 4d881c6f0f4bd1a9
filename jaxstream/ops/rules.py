"""The op table: one forward kernel and one vjp rule per op, one line where it fits.

Kernels take the array namespace `xp` (array API) and arrays; vjp rules take the
output gradient `g` and a context `c` (`c.a`, `c.b`: saved arguments, `c.y`: the
saved output, `c.p`: params, `c.shapes`: argument shapes, `c.needs`: which
argument gradients some path needs) and are written in jaxstream ops, so that
`create_graph=True` differentiates them again. A broadcast argument may get a
gradient of the broadcast shape: the engine sums it back (`validate_outputs`).
"""

from __future__ import annotations

import functools
import math

from ..dispatch import OpDef


def fused(fn):
    """A kernel of several elementwise steps; on JAX it is compiled once, so XLA fuses
    the steps into one pass instead of dispatching each eagerly."""
    compiled = {}

    def kernel(xp, *arrays):
        if getattr(xp, "__name__", "") != "jax.numpy":
            return fn(xp, *arrays)
        jitted = compiled.get(xp)
        if jitted is None:
            import jax

            jitted = compiled[xp] = jax.jit(functools.partial(fn, xp))
        return jitted(*arrays)

    return kernel


def _unreduce(g, shape, axis, keepdims):
    """Broadcast the gradient of a reduction back to the reduced input's shape."""
    if not keepdims:
        g = g.reshape(F.kept_shape(shape, axis))
    return g.broadcast_to(shape)


def _count(shape, axis):
    return math.prod(shape) // max(1, math.prod(F.kept_shape(shape, axis)))


def _matmul_name(args, params):
    dims = (args[0].ndim, args[1].ndim)
    return {(2, 2): "MmBackward0", (2, 1): "MvBackward0", (1, 1): "DotBackward0"}.get(
        dims, "MatmulBackward0"
    )


def _matmul_vjp(g, c):
    a, b = c.a, c.b
    if a.ndim == 1 and b.ndim == 1:
        return (g * b if c.needs[0] else None, g * a if c.needs[1] else None)
    if a.ndim == 1:
        ga = (g.reshape(g.shape[:-1] + (1, g.shape[-1])) @ b.swapaxes(-1, -2)) if c.needs[0] else None
        gb = (a.reshape((-1, 1)) * g.reshape(g.shape[:-1] + (1, g.shape[-1]))) if c.needs[1] else None
        return (ga, gb)
    if b.ndim == 1:
        ga = g.reshape(g.shape + (1,)) * b if c.needs[0] else None
        gb = (a * g.reshape(g.shape + (1,))).sum(axis=-2) if c.needs[1] else None
        return (ga, gb)
    return (
        g @ b.swapaxes(-1, -2) if c.needs[0] else None,
        a.swapaxes(-1, -2) @ g if c.needs[1] else None,
    )


def _linear_vjp(g, c):
    x, w = c.a, c.b
    out_features = w.shape[0]
    g2 = g.reshape((-1, out_features))
    grads = (
        g @ w if c.needs[0] else None,
        g2.T @ x.reshape((-1, w.shape[1])) if c.needs[1] else None,
    )
    if len(c.needs) == 2:
        return grads
    return grads + (g2.sum(axis=0) if c.needs[2] else None,)


def _amax_vjp(g, c):
    shape, axis, keep = c.shapes[0], c.p["axis"], c.p["keepdims"]
    y = c.y if keep else c.y.reshape(F.kept_shape(shape, axis))
    hits = c.a == y
    share = hits.astype(g.dtype).sum(axis=axis, keepdims=True)
    return (F.where(hits, _unreduce(g, shape, axis, keep) / share, 0.0),)


def _split_vjp(g, c):
    axis, out = c.p["axis"], []
    start = 0
    for shape, need in zip(c.shapes, c.needs, strict=True):
        stop = start + shape[axis]
        index = (slice(None),) * (axis % g.ndim) + (slice(start, stop),)
        out.append(g[index] if need else None)
        start = stop
    return tuple(out)


def _unstack_vjp(g, c):
    axis = c.p["axis"] % g.ndim
    return tuple(
        g[(slice(None),) * axis + (i,)] if need else None for i, need in enumerate(c.needs)
    )


def _matmul_kernel(xp, a, b):
    y = xp.matmul(a, b)
    # Keep the operands' dtype (NumPy promotes bfloat16 products to float32).
    return y if y.dtype == a.dtype else xp.astype(y, a.dtype)


def _linear_kernel(xp, x, w, b=None):
    y = _matmul_kernel(xp, x, xp.matrix_transpose(w))
    return y if b is None else xp.add(y, b)


# fmt: off
# name                     node name              kernel                                                   saves  vjp
ADD        = OpDef("add",        "AddBackward0",        lambda xp, a, b: xp.add(a, b),                           "",    lambda g, c: (g, g))
SUB        = OpDef("sub",        "SubBackward0",        lambda xp, a, b: xp.subtract(a, b),                      "",    lambda g, c: (g, -g if c.needs[1] else None))
MUL        = OpDef("mul",        "MulBackward0",        lambda xp, a, b: xp.multiply(a, b),                      "01",  lambda g, c: (g * c.b if c.needs[0] else None, g * c.a if c.needs[1] else None))
DIV        = OpDef("div",        "DivBackward0",        lambda xp, a, b: xp.divide(a, b),                        "01",  lambda g, c: (g / c.b if c.needs[0] else None, -g * c.a / (c.b * c.b) if c.needs[1] else None))
POW_SCALAR = OpDef("pow",        "PowBackward0",        lambda xp, a, p: xp.pow(a, p),                           "01",  lambda g, c: (g * c.b * c.a ** (c.b - 1) if c.b != 0 else g * 0.0, None))
POW        = OpDef("pow",        "PowBackward1",        lambda xp, a, b: xp.pow(a, b),                           "01y", lambda g, c: (g * c.b * c.a ** (c.b - 1) if c.needs[0] else None, g * F.where((c.a == 0) & (c.b >= 0), 0.0, c.y * c.a.log()) if c.needs[1] else None))
RPOW       = OpDef("pow",        "PowBackward2",        lambda xp, s, b: xp.pow(s, b),                           "0y",  lambda g, c: (None, g * c.y * math.log(c.a)))
WHERE      = OpDef("where",      "WhereBackward0",      lambda xp, m, a, b: xp.where(m, a, b),                   "0",   lambda g, c: (None, F.where(c.a, g, 0.0) if c.needs[1] else None, F.where(c.a, 0.0, g) if c.needs[2] else None))
NEG        = OpDef("neg",        "NegBackward0",        lambda xp, a: xp.negative(a),                            "",    lambda g, c: (-g,))
EXP        = OpDef("exp",        "ExpBackward0",        lambda xp, a: xp.exp(a),                                 "y",   lambda g, c: (g * c.y,))
LOG        = OpDef("log",        "LogBackward0",        lambda xp, a: xp.log(a),                                 "0",   lambda g, c: (g / c.a,))
SIN        = OpDef("sin",        "SinBackward0",        lambda xp, a: xp.sin(a),                                 "0",   lambda g, c: (g * c.a.cos(),))
COS        = OpDef("cos",        "CosBackward0",        lambda xp, a: xp.cos(a),                                 "0",   lambda g, c: (g * -c.a.sin(),))
TANH       = OpDef("tanh",       "TanhBackward0",       lambda xp, a: xp.tanh(a),                                "y",   lambda g, c: (F.tanh_backward(g, c.y),))
TANH_BW    = OpDef("tanh_backward", "TanhBackwardBackward0", fused(lambda xp, g, y: g * (1 - y * y)),         "01",  lambda g, c: (F.tanh_backward(g, c.b) if c.needs[0] else None, g * c.a * c.b * -2.0 if c.needs[1] else None))
SIGMOID    = OpDef("sigmoid",    "SigmoidBackward0",    fused(lambda xp, a: (xp.tanh(a * 0.5) + 1) * 0.5),       "y",   lambda g, c: (F.sigmoid_backward(g, c.y),))
SIGMOID_BW = OpDef("sigmoid_backward", "SigmoidBackwardBackward0", fused(lambda xp, g, y: g * (1 - y) * y),   "01",  lambda g, c: (F.sigmoid_backward(g, c.b) if c.needs[0] else None, g * c.a * (1 - 2 * c.b) if c.needs[1] else None))
RELU       = OpDef("relu",       "ReluBackward0",       lambda xp, a: xp.where(a > 0, a, xp.zeros_like(a)),      "y",   lambda g, c: (F.where(c.y > 0, g, 0.0),))
SOFTPLUS   = OpDef("softplus",   "SoftplusBackward0",   lambda xp, a: xp.logaddexp(a, xp.zeros_like(a)),         "0",   lambda g, c: (g * c.a.sigmoid(),))
SQRT       = OpDef("sqrt",       "SqrtBackward0",       lambda xp, a: xp.sqrt(a),                                "y",   lambda g, c: (g / (2 * c.y),))
ABS        = OpDef("abs",        "AbsBackward0",        lambda xp, a: xp.abs(a),                                 "0",   lambda g, c: (g * F.sign(c.a),))
CLONE      = OpDef("clone",      "CloneBackward0",      lambda xp, a: xp.asarray(a, copy=True),                  "",    lambda g, c: (g,))
ASTYPE     = OpDef("astype",     "ToCopyBackward0",     lambda xp, a, dtype: xp.astype(a, dtype),                "",    lambda g, c: (g,))
ZERO       = OpDef("zero_",      "ZeroBackward0",       lambda xp, a: xp.zeros_like(a),                          "",    lambda g, c: (g * 0.0,))
COPY       = OpDef("copy_",      "CopyBackwards",       lambda xp, a, s: xp.broadcast_to(xp.astype(s, a.dtype), a.shape), "", lambda g, c: (g * 0.0 if c.needs[0] else None, g if c.needs[1] else None))
SUM        = OpDef("sum",        lambda a, p: "SumBackward0" if p["axis"] is None else "SumBackward1", lambda xp, a, axis, keepdims: xp.sum(a, axis=axis, keepdims=keepdims), "", lambda g, c: (_unreduce(g, c.shapes[0], c.p["axis"], c.p["keepdims"]),))
MEAN       = OpDef("mean",       lambda a, p: "MeanBackward0" if p["axis"] is None else "MeanBackward1", lambda xp, a, axis, keepdims: xp.mean(a, axis=axis, keepdims=keepdims), "", lambda g, c: (_unreduce(g, c.shapes[0], c.p["axis"], c.p["keepdims"]) / _count(c.shapes[0], c.p["axis"]),))
AMAX       = OpDef("max",        "AmaxBackward0",       lambda xp, a, axis, keepdims: xp.max(a, axis=axis, keepdims=keepdims), "0y", _amax_vjp)
SUM_TO     = OpDef("sum_to",     "SumBackward1",        lambda xp, a, shape: xp.reshape(xp.sum(a, axis=F.summed_axes(a.shape, shape), keepdims=True), shape), "", lambda g, c: (g.broadcast_to(c.shapes[0]),))
RESHAPE    = OpDef("reshape",    "ViewBackward0",       lambda xp, a, shape: xp.reshape(a, shape),               "",    lambda g, c: (g.reshape(c.shapes[0]),))
PERMUTE    = OpDef("transpose",  "PermuteBackward0",    lambda xp, a, axes: xp.permute_dims(a, axes),            "",    lambda g, c: (g.transpose(F.inverse_permutation(c.p["axes"])),))
SWAPAXES   = OpDef("swapaxes",   "TransposeBackward0",  lambda xp, a, axis1, axis2: F.swapped(xp, a, axis1, axis2), "", lambda g, c: (g.swapaxes(c.p["axis1"], c.p["axis2"]),))
EXPAND     = OpDef("broadcast_to", "ExpandBackward0",   lambda xp, a, shape: xp.broadcast_to(a, shape),          "",    lambda g, c: (g,))
INDEX      = OpDef("getitem",    "IndexBackward0",      lambda xp, a, index: a[index],                           "",    lambda g, c: (F.index_add_zeros(g, c.p["index"], c.shapes[0]),))
INDEX_ADD  = OpDef("index_add",  "IndexPutBackward0",   lambda be, g, index, shape: be.scatter_add(shape, g.dtype, index, g), "", lambda g, c: (g[c.p["index"]],), True)
CONCAT     = OpDef("concatenate", "CatBackward0",       lambda xp, *arrays, axis: xp.concat(arrays, axis=axis),  "",    _split_vjp)
STACK      = OpDef("stack",      "StackBackward0",      lambda xp, *arrays, axis: xp.stack(arrays, axis=axis),   "",    _unstack_vjp)
MATMUL     = OpDef("matmul",     _matmul_name,          _matmul_kernel,                                          "01",  _matmul_vjp)
LINEAR     = OpDef("linear",     "LinearBackward0",     _linear_kernel,                                          "01",  _linear_vjp)
# fmt: on

# Comparisons and other non-differentiable ops: no vjp, so no node is recorded.
EQUAL = OpDef("equal", None, lambda xp, a, b: xp.equal(a, b))
NOT_EQUAL = OpDef("not_equal", None, lambda xp, a, b: xp.not_equal(a, b))
LESS = OpDef("less", None, lambda xp, a, b: xp.less(a, b))
LESS_EQUAL = OpDef("less_equal", None, lambda xp, a, b: xp.less_equal(a, b))
GREATER = OpDef("greater", None, lambda xp, a, b: xp.greater(a, b))
GREATER_EQUAL = OpDef("greater_equal", None, lambda xp, a, b: xp.greater_equal(a, b))
LOGICAL_AND = OpDef("logical_and", None, lambda xp, a, b: xp.logical_and(a, b))
LOGICAL_OR = OpDef("logical_or", None, lambda xp, a, b: xp.logical_or(a, b))
LOGICAL_NOT = OpDef("logical_not", None, lambda xp, a: xp.logical_not(a))
SIGN = OpDef("sign", None, lambda xp, a: xp.sign(a))
ISNAN_ANY = OpDef("isnan_any", None, lambda xp, a: xp.any(xp.isnan(a)))

from . import functional as F  # noqa: E402  (rules call public ops at backward time)
