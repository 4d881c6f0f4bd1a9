"""Distances and normalization by a norm, with PyTorch's arguments and checks: cdist,
pairwise_distance, cosine_similarity, normalize.

Each is composed of the ops (`vector_norm`, subtraction, division, sum), so it is
differentiable to any order; where PyTorch's has a node of its own (cdist's
CdistBackward0) these record the ops' nodes instead (README says which).
"""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from .operands import as_tensor, floating, operands
from .reductions import vector_norm
from .shapes import broadcast_shapes

COMPUTE_MODES = (
    "use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"
)
"""cdist's `compute_mode`s: each gives the exact differences here (no matrix product)."""


def _norm_order(op: str, p: float) -> float:
    """`p` where `vector_norm` takes it (>= 1, or inf), else the error that says so."""
    if p < 0:
        raise RuntimeError(f"{op} only supports non-negative p values (got p={p})")
    if not p >= 1:
        raise NotImplementedError(f"{op}: p={p} is not supported; p must be >= 1 or inf "
                                  f"(the norms vector_norm computes)")
    return float(p)


def cdist(x1: Any, x2: Any, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """The `p`-norm distance between each row of `x1` (..., P, M) and each row of `x2`
    (..., R, M), as (..., P, R), batch axes broadcast. Its gradient is 0 at distance 0."""
    x1 = as_tensor(x1)
    x1, x2 = (floating(t) for t in operands(x1, as_tensor(x2, x1)))
    for name, t in (("X1", x1), ("X2", x2)):
        if t.ndim < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {t.ndim}D "
                               f"(shape {t.shape}); add a row axis, e.g. x.unsqueeze(0)")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{x1.shape[-1]} X2: {x2.shape[-1]} (cdist of shapes {x1.shape} "
                           f"and {x2.shape})")
    if compute_mode not in COMPUTE_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode; use one of "
                         f"{COMPUTE_MODES}")
    order = _norm_order("cdist", p)
    broadcast_shapes("cdist", x1.shape[:-2], x2.shape[:-2])
    return vector_norm(x1.unsqueeze(-2) - x2.unsqueeze(-3), order, -1)


def pairwise_distance(x1: Any, x2: Any, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """The `p`-norm of `x1 - x2 + eps` over the last axis (the inputs broadcast)."""
    x1 = as_tensor(x1)
    x1, x2 = (floating(t) for t in operands(x1, as_tensor(x2, x1)))
    broadcast_shapes("pairwise_distance", x1.shape, x2.shape)
    return vector_norm(x1 - x2 + eps, _norm_order("pairwise_distance", p), -1, keepdim)


def _at_least(norm: Tensor, eps: float) -> Tensor:
    """`norm` with its values raised to `eps`, its gradient still the norm's: PyTorch
    clamps the norms outside the graph."""
    values = norm.detach()
    return norm + (values.clamp_min(eps) - values)


def cosine_similarity(x1: Any, x2: Any, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """The cosine of the angle between `x1` and `x2` along `dim` (broadcast): each divided by
    its 2-norm (at least `eps`) first, so that the result stays within [-1, 1]."""
    x1 = as_tensor(x1)
    x1, x2 = (floating(t) for t in operands(x1, as_tensor(x2, x1)))
    shape = broadcast_shapes("cosine_similarity", x1.shape, x2.shape)
    x1, x2 = x1.broadcast_to(shape), x2.broadcast_to(shape)
    n1 = _at_least(vector_norm(x1, 2, dim, True), eps)
    n2 = _at_least(vector_norm(x2, 2, dim, True), eps)
    return ((x1 / n1) * (x2 / n2)).sum(axis=dim)


def normalize(x: Any, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """`x` divided by its `p`-norm along `dim`, the norm at least `eps`."""
    x = floating(as_tensor(x))
    return x / vector_norm(x, _norm_order("normalize", p), dim, True).clamp_min(eps)
