"""The op table of the matrix decompositions: slogdet, cholesky, qr, svd and pinv, each its
backend's own `xp.linalg` kernel.

Same conventions as `rules.py`, and PyTorch's backward formulas (FunctionsManual.cpp), in
jaxstream ops. Note [One op per factor]: a decomposition with several factors is one op
per factor (each kernel computes the decomposition and returns its factor; the node of each
is PyTorch's node of the decomposition). A decomposition's backward is linear in the
factors' gradients, so the sum of each factor's share, which the engine forms at the input,
is PyTorch's gradient. Each share reads the factors as ops of the saved input, so that it is
differentiable again: gradients go to any order.
"""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import matrix_rules as M
from . import shape_ops as S
from . import structure_rules as T
from .creation import zeros_like
from .dispatch import apply
from .matrix_rules import matrix_transpose
from .opdef import OpContext, OpDef
from .tensor_utility_shapes import diag_embed


def _solve(a: Tensor, b: Tensor) -> Tensor:
    return apply(M.SOLVE, a, b, vector=False)


def _tril(t: Tensor, k: int = 0) -> Tensor:
    return apply(T.TRIL, t, k=k)


# ------------------------------------------------------------------ kernels
def _cholesky(xp: Any, a: Any, upper: bool, node: str) -> Any:
    lower = xp.linalg.cholesky(a)
    return xp.matrix_transpose(lower) if upper else lower


def _svd_factor(xp: Any, a: Any, factor: int, full_matrices: bool) -> Any:
    return xp.linalg.svd(a, full_matrices=full_matrices)[factor]


def _pinv(xp: Any, a: Any, atol: float, rtol: float) -> Any:
    """The pseudo-inverse from the SVD, singular values at most max(atol, rtol * largest)
    taken as zero."""
    u, s, vh = xp.linalg.svd(a, full_matrices=False)
    largest = xp.max(s, axis=-1, keepdims=True) if s.shape[-1] else s
    kept = s > xp.maximum(largest * rtol, atol)
    inverse = xp.where(kept, 1 / xp.where(kept, s, 1), 0)
    return xp.matmul(xp.matrix_transpose(vh) * inverse[..., None, :], xp.matrix_transpose(u))


# ------------------------------------------------------------------ vjps
def _dlogabsdet(g: Tensor, ctx: OpContext) -> Tensor:
    return g.reshape(tuple(g.shape) + (1, 1)) * matrix_transpose(apply(M.INV, ctx.inputs[0]))


def _dcholesky(g: Tensor, ctx: OpContext) -> Tensor:
    """L^-T Phi(L^T gL) L^-1, Phi the lower triangle with half the diagonal, made symmetric
    (PyTorch's cholesky_backward)."""
    upper = ctx.params["upper"]
    lower = matrix_transpose(ctx.output) if upper else ctx.output
    g = matrix_transpose(g) if upper else g
    phi = _tril(matrix_transpose(lower) @ g)
    phi = (phi + matrix_transpose(_tril(phi, -1))) * 0.5
    left = _solve(matrix_transpose(lower), phi)  # L^-T Phi
    return matrix_transpose(_solve(matrix_transpose(lower), matrix_transpose(left)))  # ... L^-1


def _qr_factors(a: Tensor, mode: str) -> tuple[Tensor, Tensor]:
    return apply(QR_Q, a, mode=mode), apply(QR_R, a, mode=mode)


def _copyltu(m: Tensor) -> Tensor:
    """The symmetric matrix whose lower triangle is m's."""
    return _tril(m) + matrix_transpose(_tril(m, -1))


def _qr_tall(g_q: Tensor | None, g_r: Tensor | None, q: Tensor, r: Tensor) -> Tensor:
    """The gradient of A = QR with R square: (gQ + Q copyltu(M)) R^-T, M = R gR^T - gQ^T Q."""
    m = (r @ matrix_transpose(g_r) if g_r is not None else 0) - \
        (matrix_transpose(g_q) @ q if g_q is not None else 0)
    term = q @ _copyltu(m)
    term = term + g_q if g_q is not None else term
    return matrix_transpose(_solve(r, matrix_transpose(term)))


def _qr_share(g_q: Tensor | None, g_r: Tensor | None, ctx: OpContext) -> Tensor:
    """A's gradient from Q's or R's gradient (Note [One op per factor])."""
    mode = ctx.params["mode"]
    a = ctx.inputs[0]
    rows, cols = a.shape[-2], a.shape[-1]
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed "
                           "when mode='r'. Please use linalg.qr(A, mode='reduced') if you are "
                           "going to differentiate through linalg.qr.")
    if mode == "complete" and rows > cols:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' "
                           "and nrows > ncols.")
    q, r = _qr_factors(a, mode)
    if rows >= cols:
        return _qr_tall(g_q, g_r, q, r)
    # A = [X | Y] with X = QU square, R = [U | V]: Y = QV.
    y, u = a[..., rows:], r[..., :rows]
    g_u, g_v = (None, None) if g_r is None else (g_r[..., :rows], g_r[..., rows:])
    g_q = y @ matrix_transpose(g_v) if g_q is None else g_q if g_v is None else \
        g_q + y @ matrix_transpose(g_v)
    g_x = _qr_tall(g_q, g_u, q, u)
    g_y = q @ g_v if g_v is not None else zeros_like(y)
    return S.concat([g_x, g_y], -1)


def _svd_share(g_u: Tensor | None, g_s: Tensor | None, g_vh: Tensor | None,
               ctx: OpContext) -> Tensor:
    """A's gradient from one factor's (PyTorch's svd_backward; Note [One op per factor])."""
    a = ctx.inputs[0]
    u, s, vh = (apply(factor, a, full_matrices=False) for factor in (SVD_U, SVD_S, SVD_VH))
    k = s.shape[-1]
    if ctx.params["full_matrices"]:
        g_u = None if g_u is None else g_u[..., :k]
        g_vh = None if g_vh is None else g_vh[..., :k, :]
    rows, cols = a.shape[-2], a.shape[-1]
    if g_s is not None:
        return u @ (g_s.unsqueeze(-1) * vh) if rows >= cols else (u * g_s.unsqueeze(-2)) @ vh
    squares = s * s
    gaps = squares.unsqueeze(-2) - squares.unsqueeze(-1)
    gaps = gaps + diag_embed(squares * 0 + 1)  # 1 on the diagonal, where the numerators are 0
    if g_u is not None:
        inner = matrix_transpose(u) @ g_u
        core = (inner - matrix_transpose(inner)) * s.unsqueeze(-2) / gaps
        if rows > cols:
            scaled = g_u / s.unsqueeze(-2)
            return (u @ core + scaled - u @ (matrix_transpose(u) @ scaled)) @ vh
    else:
        inner = vh @ matrix_transpose(g_vh)
        core = s.unsqueeze(-1) * (inner - matrix_transpose(inner)) / gaps
        if rows < cols:
            scaled = g_vh / s.unsqueeze(-1)
            return u @ (core @ vh + scaled - (scaled @ matrix_transpose(vh)) @ vh)
    return u @ (core @ vh)


def _dpinv(g: Tensor, ctx: OpContext) -> Tensor:
    """PyTorch's pinv_backward, in the form whose products are smallest."""
    a, p = ctx.inputs[0], ctx.output
    ph, gh = matrix_transpose(p), matrix_transpose(g)
    if a.shape[-2] <= a.shape[-1]:
        k = gh @ p
        kph = k @ ph
        return -matrix_transpose(p @ k) + kph - (a @ p) @ kph + (ph @ p) @ (gh - k @ a)
    k = p @ gh
    phk = ph @ k
    return -matrix_transpose(k @ p) + (gh - a @ k) @ p @ ph + phk - phk @ p @ a


# fmt: off
SLOGDET_SIGN = OpDef("linalg.slogdet", None, lambda xp, a: xp.linalg.slogdet(a)[0])
SLOGDET_LOGABS = OpDef("linalg.slogdet", "LinalgSlogdetBackward0",
                       lambda xp, a: xp.linalg.slogdet(a)[1], _dlogabsdet, save_inputs=(0,))
CHOLESKY = OpDef("linalg.cholesky", lambda args, params: params["node"], _cholesky, _dcholesky,
                 save_output=True)
QR_Q = OpDef("linalg.qr", "LinalgQrBackward0", lambda xp, a, mode: xp.linalg.qr(a, mode=mode)[0],
             lambda g, ctx: _qr_share(g, None, ctx), save_inputs=(0,))
QR_R = OpDef("linalg.qr", "LinalgQrBackward0",
             lambda xp, a, mode: xp.linalg.qr(a, mode="reduced" if mode == "r" else mode)[1],
             lambda g, ctx: _qr_share(None, g, ctx), save_inputs=(0,))
SVD_U = OpDef("linalg.svd", "LinalgSvdBackward0",
              lambda xp, a, full_matrices: _svd_factor(xp, a, 0, full_matrices),
              lambda g, ctx: _svd_share(g, None, None, ctx), save_inputs=(0,))
SVD_S = OpDef("linalg.svd", "LinalgSvdBackward0",
              lambda xp, a, full_matrices: _svd_factor(xp, a, 1, full_matrices),
              lambda g, ctx: _svd_share(None, g, None, ctx), save_inputs=(0,))
SVD_VH = OpDef("linalg.svd", "LinalgSvdBackward0",
               lambda xp, a, full_matrices: _svd_factor(xp, a, 2, full_matrices),
               lambda g, ctx: _svd_share(None, None, g, ctx), save_inputs=(0,))
PINV = OpDef("linalg.pinv", "LinalgPinvBackward0", _pinv, _dpinv, save_inputs=(0,),
             save_output=True)
# fmt: on
