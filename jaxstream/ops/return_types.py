"""PyTorch's structured results: `Size`, what `t.size()` returns, and the `(values, indices)`
named tuples of `max`/`min` over a dim, `sort` and `topk` (PyTorch's `torch.return_types`).

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
