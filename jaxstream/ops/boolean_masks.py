"""Boolean-mask indexing of traced values: refused by name, before JAX refuses it.

`x[mask]` has as many elements as `mask` has True values. Inside a trace
(`to_jax` under `jax.jit`, `js.compile`) a mask computed from the inputs is a
tracer whose values, and so the result's shape, are not known until the program
runs, and XLA needs every shape when it compiles. JAX says only that boolean
indices must be concrete; this says which op, which shapes, and what keeps the
shape static. A mask whose values are known (a NumPy array, a constant made in
the function, anything under a trace that does not stage values) still indexes.
"""

from __future__ import annotations

from typing import Any

import jax

from ..tensor import Tensor


class TracedBooleanMaskError(IndexError):
    """A boolean mask whose values a trace does not know indexed a tensor."""


def _unknown_mask(part: Any) -> bool:
    if isinstance(part, Tensor):
        part = part.array
    return (
        isinstance(part, jax.core.Tracer)
        and part.dtype == bool
        and part.to_concrete_value() is None
    )


def refuse_traced_masks(op: str, shape: tuple, index: Any) -> None:
    """Raise if `index` (of tensors or arrays) holds a mask whose values a trace does not know."""
    for part in index if type(index) is tuple else (index,):
        if _unknown_mask(part):
            raise TracedBooleanMaskError(
                f"{op}: a boolean mask of shape {tuple(part.shape)} indexes a tensor of shape "
                f"{tuple(shape)} inside a trace (to_jax under jax.jit, js.compile), where the "
                f"mask's values, and so the shape of the result, are not known. Keep the "
                f"shape instead: js.where(mask, x, 0) and then reduce (js.where(mask, x, "
                f"0).sum() for x[mask].sum()), or x = js.where(mask, value, x) for x[mask] = "
                f"value; or index with a mask whose values are fixed (a NumPy array, or a "
                f"static argument of to_jax)"
            )
