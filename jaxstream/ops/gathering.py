"""A scatter-add to positions known before the values (a gradient's, where the op's
geometry fixes where each element came from) computed as a gather and a sum.

Note [Scatter-adds as gathers]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The adjoint of a gather adds each value back at the position it was read from. Where the
positions depend only on the op's params (a pad's mirrored edges, nearest or linear
interpolation's neighbours, the taps of a pooling window), the table of which values land
on each position is computed once on the host (`gathering_table`), and the adjoint is
`take` of those values (a zero past the end fills the shorter lists) summed over the
table's width: array-API functions only, so that JAX compiles it as one kernel, with no
product by a zero (an infinite gradient stays where it is), and no scatter primitive.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def gathering_table(sources: np.ndarray, size: int) -> np.ndarray:
    """(size, width): row `i` lists, in order, the positions `p` with `sources[p] == i`
    (a negative source goes nowhere), filled out with `len(sources)` (the zero past the end).
    Callers cache it per geometry: it is host work on every call otherwise."""
    kept = np.flatnonzero(sources >= 0)
    order = kept[np.argsort(sources[kept], kind="stable")]
    counts = np.bincount(sources[kept], minlength=size)
    table = np.full((size, max(int(counts.max(initial=0)), 1)), len(sources), dtype=np.int64)
    rank = np.arange(len(order)) - np.repeat(np.cumsum(counts) - counts, counts)
    table[sources[order], rank] = order
    return table


def scatter_as_gather(xp: Any, values: Any, table: np.ndarray, axis: int) -> Any:
    """The sum, at each position `i` along `axis`, of the `values` that `table[i]` lists
    (Note [Scatter-adds as gathers])."""
    zero = xp.zeros(values.shape[:axis] + (1,) + values.shape[axis + 1:], dtype=values.dtype)
    picked = xp.take(xp.concat([values, zero], axis=axis), xp.asarray(table.reshape(-1)),
                     axis=axis)
    picked = xp.reshape(picked, values.shape[:axis] + table.shape + values.shape[axis + 1:])
    return xp.sum(picked, axis=axis + 1)
