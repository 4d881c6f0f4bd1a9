"""The op table of the products: matmul, bmm, linear (`x @ w.T + b`), addmm and baddbmm
(`beta * c + alpha * a @ b`), and einsum.

Same conventions as `rules.py`. Node names follow the kernel PyTorch picks for the
operands' ranks (`MmBackward0`, `MvBackward0`, `AddmmBackward0`, ...). On JAX every
product runs at `js.get_float32_matmul_precision()` (Note [Float32 matrix products] in
precision.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp

from ..precision import jax_precision
from ..tensor import Tensor, tensor
from .dispatch import apply
from .opdef import OpContext, OpDef
from .twins import with_array_twin


# ------------------------------------------------------------------ kernels
def _matmul(xp: Any, a: Any, b: Any) -> Any:
    y = jnp.matmul(a, b, precision=jax_precision()) if xp is jnp else xp.matmul(a, b)
    # Keep the operands' dtype (NumPy promotes bfloat16 products to float32).
    return y if y.dtype == a.dtype else xp.astype(y, a.dtype)


def _linear(xp: Any, x: Any, w: Any, b: Any = None) -> Any:
    """`x @ w.T + b`; off JAX the bias is added into the product's own new array (which no
    one else holds yet), sparing the host an allocation the size of the output."""
    y = _matmul(xp, x, xp.matrix_transpose(w))
    if b is None:
        return y
    if xp is jnp or not y.ndim or b.ndim != 1 or b.dtype != y.dtype:
        return xp.add(y, b)
    return xp.add(y, b, out=y)


def _add_product(xp: Any, c: Any, a: Any, b: Any, beta: float, alpha: float) -> Any:
    """`beta * c + alpha * (a @ b)` in the product's dtype; `c` is left out, NaN and all, where
    beta is 0 (PyTorch's rule)."""
    y = _matmul(xp, a, b)
    y = y if alpha == 1 else y * alpha
    if beta:
        y = y + (c if beta == 1 else c * beta)
    return y if y.dtype == a.dtype else xp.astype(y, a.dtype)


def _einsum(xp: Any, *arrays: Any, subscripts: str) -> Any:
    if xp is jnp:
        return jnp.einsum(subscripts, *arrays, optimize=True, precision=jax_precision())
    return xp.einsum(subscripts, *arrays, optimize=True)


def _linear_name(args: tuple, params: dict) -> str:
    """PyTorch's node for linear: addmm/mm on a matrix, a view of it on other ranks."""
    with_bias = len(args) == 3
    if args[0].ndim == 2:
        return "AddmmBackward0" if with_bias else "MmBackward0"
    if with_bias:
        return "ViewBackward0"
    return "SqueezeBackward4" if args[0].ndim == 1 else "UnsafeViewBackward0"


def _matmul_name(args: tuple, params: dict) -> str:
    names = {(2, 2): "MmBackward0", (2, 1): "MvBackward0", (1, 1): "DotBackward0"}
    return names.get((args[0].ndim, args[1].ndim), "MatmulBackward0")


# ------------------------------------------------------------------ vjps
# Note [Product vjps on the host]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# matmul's and linear's vjps carry array twins (Note [Array vjps on the host] in twins.py):
# each is the rule's own kernels on the arrays (`_matmul`, the array API's transpose,
# multiply and sum) in the rule's order, so the values are the rule's, without the
# dispatch of a transpose and a product per gradient. matmul's twins read the operands'
# ranks from the node's shapes, as the rules do, since an operand is saved only where the
# other one's gradient needs it.
# Inputs are a, b for matmul and x, w, b for linear.
_dlinear_x = with_array_twin(lambda xp, g, x, w: _matmul(xp, g, w))(
    lambda g, ctx: g @ ctx.inputs[1]
)


def _matmul_grad_a(xp: Any, g: Any, a: Any, b: Any, shapes: list, params: dict) -> Any:
    """`_dmatmul_a` on the arrays (Note [Product vjps on the host])."""
    a_ndim = len(shapes[0])
    if a_ndim == 1 and b.ndim == 1:
        return g * b
    if a_ndim == 1:
        g = xp.reshape(g, g.shape[:-1] + (1, g.shape[-1]))
        return _matmul(xp, g, xp.matrix_transpose(b))
    if b.ndim == 1:
        return xp.reshape(g, g.shape + (1,)) * b
    return _matmul(xp, g, xp.matrix_transpose(b))


@with_array_twin(_matmul_grad_a, reads_params=True)
def _dmatmul_a(g: Tensor, ctx: OpContext) -> Tensor:
    b = ctx.inputs[1]
    a_ndim = len(ctx.shapes[0])  # `a` itself is not saved unless `b` requires grad
    if a_ndim == 1 and b.ndim == 1:
        return g * b
    if a_ndim == 1:
        return g.reshape(g.shape[:-1] + (1, g.shape[-1])) @ b.swapaxes(-1, -2)
    if b.ndim == 1:
        return g.reshape(g.shape + (1,)) * b
    return g @ b.swapaxes(-1, -2)


def _matmul_grad_b(xp: Any, g: Any, a: Any, b: Any, shapes: list, params: dict) -> Any:
    """`_dmatmul_b` on the arrays (Note [Product vjps on the host])."""
    b_ndim = len(shapes[1])
    if a.ndim == 1 and b_ndim == 1:
        return g * a
    if a.ndim == 1:
        return xp.reshape(a, (-1, 1)) * xp.reshape(g, g.shape[:-1] + (1, g.shape[-1]))
    if b_ndim == 1:
        return xp.sum(a * xp.reshape(g, g.shape + (1,)), axis=a.ndim - 2)
    return _matmul(xp, xp.matrix_transpose(a), g)


@with_array_twin(_matmul_grad_b, reads_params=True)
def _dmatmul_b(g: Tensor, ctx: OpContext) -> Tensor:
    a = ctx.inputs[0]
    b_ndim = len(ctx.shapes[1])  # `b` itself is not saved unless `a` requires grad
    if a.ndim == 1 and b_ndim == 1:
        return g * a
    if a.ndim == 1:
        return a.reshape((-1, 1)) * g.reshape(g.shape[:-1] + (1, g.shape[-1]))
    if b_ndim == 1:
        return (a * g.reshape(g.shape + (1,))).sum(axis=-2)
    return a.swapaxes(-1, -2) @ g


def scaled_by(t: Tensor, factor: float) -> Tensor:
    """`t * factor`, or `t` itself for a factor of 1 (no node)."""
    return t if factor == 1 else t * factor


# Inputs are c, a, b for addmm and baddbmm (`beta * c + alpha * a @ b`).
_dadd_product_c = lambda g, ctx: scaled_by(g, ctx.params["beta"])
_dadd_product_a = lambda g, ctx: scaled_by(g @ ctx.inputs[2].swapaxes(-1, -2), ctx.params["alpha"])
_dadd_product_b = lambda g, ctx: scaled_by(ctx.inputs[1].swapaxes(-1, -2) @ g, ctx.params["alpha"])


def _rows(t: Tensor, width: int) -> Tensor:
    """`t` as a matrix of rows of `width` (itself when it is one: no op to record)."""
    return t if t.ndim == 2 else t.reshape((-1, width))


def _array_rows(xp: Any, a: Any) -> Any:
    """`_rows` on an array: a matrix of its rows (itself when it is one)."""
    return a if a.ndim == 2 else xp.reshape(a, (-1, a.shape[-1]))


@with_array_twin(
    lambda xp, g, x, w: _matmul(xp, xp.matrix_transpose(_array_rows(xp, g)), _array_rows(xp, x))
)
def _dlinear_w(g: Tensor, ctx: OpContext) -> Tensor:
    out_features, in_features = ctx.shapes[1]
    return _rows(g, out_features).T @ _rows(ctx.inputs[0], in_features)


@with_array_twin(lambda xp, g, x, w: xp.sum(_array_rows(xp, g), axis=0))
def _dlinear_b(g: Tensor, ctx: OpContext) -> Tensor:
    return _rows(g, ctx.shapes[1][0]).sum(axis=0)


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


# ------------------------------------------------------------------ the table
# A variadic op that saves all its inputs lists every position an op may have.
_EVERY_INPUT = tuple(range(64))

# fmt: off
MATMUL = OpDef("matmul", _matmul_name, _matmul, _dmatmul_a, _dmatmul_b, save_for=((1,), (0,)))
BMM = OpDef("bmm", "BmmBackward0", _matmul, _dmatmul_a, _dmatmul_b, save_for=((1,), (0,)))
ADDMM = OpDef("addmm", "AddmmBackward0", _add_product, _dadd_product_c, _dadd_product_a,
              _dadd_product_b, save_for=((), (2,), (1,)))
BADDBMM = OpDef("baddbmm", "BaddbmmBackward0", _add_product, _dadd_product_c, _dadd_product_a,
                _dadd_product_b, save_for=((), (2,), (1,)))
EINSUM = OpDef("einsum", "EinsumBackward0", _einsum, joint_grads=_deinsum, save_inputs=_EVERY_INPUT)
LINEAR = OpDef(
    "linear", _linear_name, _linear, _dlinear_x, _dlinear_w, _dlinear_b, save_for=((1,), (0,), ())
)
# fmt: on
