"""Ops on a tensor's structure with PyTorch's names and arguments: tril, triu, roll, tile,
diag, trace, outer and kron. Each result is a copy, as in PyTorch; `tile` is `repeat` and
`outer` and `kron` are products of reshaped operands, whose nodes PyTorch records too
(RepeatBackward0, MulBackward0).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..tensor import Tensor
from . import shape_ops as S
from . import structure_rules as T
from .dispatch import apply
from .functional import mul
from .operands import as_tensor
from .shapes import flat_sizes, normalize_axis


def _at_least_matrix(op: str, x: Tensor) -> None:
    if x.ndim < 2:
        raise RuntimeError(
            f"{op}: input tensor must have at least 2 dimensions (got shape {x.shape}); "
            f"make it a matrix first, e.g. x.unsqueeze(0)"
        )


def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dims: elements on and below the `diagonal`-th
    diagonal (above the main one for diagonal > 0), zeros elsewhere."""
    _at_least_matrix("tril", x)
    return apply(T.TRIL, x, k=int(diagonal))


def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dims: elements on and above the `diagonal`-th
    diagonal, zeros elsewhere."""
    _at_least_matrix("triu", x)
    return apply(T.TRIU, x, k=int(diagonal))


def _ints(value: int | Sequence[int]) -> tuple:
    return (int(value),) if isinstance(value, int) else tuple(int(v) for v in value)


def roll(x: Tensor, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None
         ) -> Tensor:
    """`x` shifted by `shifts` along `dims` (one shift per dim), elements past the end coming
    back at the start; without dims, the flattened tensor is rolled and keeps its shape."""
    shifts = _ints(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(
                f"roll: shifts and dimensions must align. shifts: {len(shifts)}, dims:0 "
                f"(tensor of shape {x.shape}); give one dim per shift"
            )
        return apply(T.ROLL, x, shifts=shifts, dims=None)
    dims = _ints(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(
            f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)} (roll "
            f"of a tensor of shape {x.shape}); give one shift per dim"
        )
    dims = tuple(normalize_axis("roll", d, x.shape) for d in dims)
    return apply(T.ROLL, x, shifts=shifts, dims=dims)


def tile(x: Tensor, dims: Sequence[int]) -> Tensor:
    """`x` repeated `dims` times along each dim; a `dims` shorter than `x.ndim` is padded
    with leading ones (PyTorch's `tile`; it then is `repeat`)."""
    reps = _ints(dims)
    return S.repeat(x, (1,) * (x.ndim - len(reps)) + reps)


def diag(x: Tensor, diagonal: int = 0) -> Tensor:
    """For a vector, the square matrix with it on the `diagonal`-th diagonal; for a matrix,
    that diagonal as a vector (above the main one for diagonal > 0)."""
    k = int(diagonal)
    if x.ndim == 1:
        n = x.shape[0] + abs(k)
        return apply(T.DIAG_EMBED, x, offset=k, shape=(n, n))
    if x.ndim == 2:
        return apply(T.DIAGONAL, x, offset=k)
    raise RuntimeError(
        f"diag(): Supports 1D or 2D tensors. Got {x.ndim}D (shape {x.shape}); for the "
        f"diagonals of a batch of matrices take them one matrix at a time"
    )


def trace(x: Tensor) -> Tensor:
    """The sum of the main diagonal of a matrix (integers sum in the default integer dtype,
    as with `sum`)."""
    if x.ndim != 2:
        raise RuntimeError(
            f"trace: expected a matrix, but got tensor with dim {x.ndim} (shape {x.shape})"
        )
    return apply(T.TRACE, x)


def outer(a: Any, b: Any) -> Tensor:
    """The outer product of two vectors: `a[i] * b[j]` at (i, j), promoted as `*` is."""
    like = a if isinstance(a, Tensor) else b
    a, b = as_tensor(a, like), as_tensor(b, like)
    for name, t in (("self", a), ("vec2", b)):
        if t.ndim != 1:
            raise RuntimeError(
                f"outer: Expected 1-D argument {name}, but got {t.ndim}-D (shape {t.shape})"
            )
    return mul(S.reshape(a, (-1, 1)), b)


ger = outer


def kron(a: Any, b: Any) -> Tensor:
    """The Kronecker product: along each dim (the operands' leading dims padded with ones),
    every element of `a` times the whole of `b`, so the sizes multiply."""
    like = a if isinstance(a, Tensor) else b
    a, b = as_tensor(a, like), as_tensor(b, like)
    n = max(a.ndim, b.ndim)
    sa, sb = (1,) * (n - a.ndim) + a.shape, (1,) * (n - b.ndim) + b.shape
    spread_a = S.reshape(a, tuple(d for size in sa for d in (size, 1)))
    spread_b = S.reshape(b, tuple(d for size in sb for d in (1, size)))
    return S.reshape(mul(spread_a, spread_b), tuple(x * y for x, y in zip(sa, sb, strict=True)))


METHODS: dict[str, Any] = {
    "tril": tril,
    "triu": triu,
    "roll": roll,
    "tile": lambda x, *dims: tile(x, flat_sizes(dims)),
    "diag": diag,
    "trace": trace,
    "outer": outer,
    "ger": outer,
    "kron": kron,
}
