"""PyTorch's structured results: `Size`, what `t.size()` returns, and the `(values, indices)`
named tuples of `max`/`min` over a dim (PyTorch's `torch.return_types`).

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
