"""PyTorch's structured results: `Size`, what `t.size()` returns, the `(values, indices)`
named tuples of `max`/`min` over a dim, `sort` and `topk`, and those of `histogram`, `frexp`,
`slogdet`, `svd` and `qr` (and the `linalg_` ones) (PyTorch's `torch.return_types`).

Each is a tuple, so code that unpacks or indexes a result works as it does with torch's.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple


class Size(tuple):
    """A tensor's shape as PyTorch's `torch.Size`: a tuple of ints that equals the plain
    tuple (`t.size() == (2, 3)`), with `numel()`."""

    __slots__ = ()

    def numel(self) -> int:
        return math.prod(self)

    def __repr__(self) -> str:
        return f"jaxstream.Size({list(self)})"


class max(NamedTuple):  # noqa: A001  (torch.return_types.max)
    """`t.max(dim)`: the largest values along `dim` and where they are (the first, at ties)."""

    values: Any
    indices: Any


class min(NamedTuple):  # noqa: A001  (torch.return_types.min)
    """`t.min(dim)`: the smallest values along `dim` and where they are (the first, at ties)."""

    values: Any
    indices: Any


class sort(NamedTuple):  # torch.return_types.sort
    """`t.sort(dim)`: the values in order along `dim` and where each came from."""

    values: Any
    indices: Any


class topk(NamedTuple):  # torch.return_types.topk
    """`t.topk(k, dim)`: the `k` largest (or smallest) values along `dim` and where they are."""

    values: Any
    indices: Any


class histogram(NamedTuple):  # torch.return_types.histogram
    """`js.histogram(x, bins)`: the count (or weight, or density) of each bin and its edges."""

    hist: Any
    bin_edges: Any


class frexp(NamedTuple):  # torch.return_types.frexp
    """`x.frexp()`: mantissas in [0.5, 1) (or 0) and int32 exponents, x = mantissa * 2**exponent."""

    mantissa: Any
    exponent: Any


class slogdet(NamedTuple):  # torch.return_types.slogdet
    """`js.slogdet(A)`: the sign of each determinant and the log of its absolute value."""

    sign: Any
    logabsdet: Any


class linalg_slogdet(NamedTuple):  # torch.return_types.linalg_slogdet
    """`js.linalg.slogdet(A)`: as `slogdet`."""

    sign: Any
    logabsdet: Any


class svd(NamedTuple):  # torch.return_types.svd
    """`js.svd(A)`: A = U diag(S) V^T (V, not its transpose)."""

    U: Any
    S: Any
    V: Any


class linalg_svd(NamedTuple):  # torch.return_types.linalg_svd
    """`js.linalg.svd(A)`: A = U diag(S) Vh."""

    U: Any
    S: Any
    Vh: Any


class qr(NamedTuple):  # torch.return_types.qr
    """`js.qr(A)`: A = Q R, Q with orthonormal columns, R upper triangular."""

    Q: Any
    R: Any


class linalg_qr(NamedTuple):  # torch.return_types.linalg_qr
    """`js.linalg.qr(A)`: as `qr`."""

    Q: Any
    R: Any
