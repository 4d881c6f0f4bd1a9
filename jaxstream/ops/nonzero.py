"""The indices of the nonzero elements, as PyTorch's `nonzero` and `argwhere` (and
`where(condition)`, which is `nonzero(condition, as_tuple=True)`): not differentiable.

How many rows the result has depends on the input's values, so they are read on the host
(`host_values`, as `one_hot` reads its labels), where NumPy finds the indices, and the
indices go to the input's backend and device as the backend's integers (int64, or int32 on
JAX without x64, as argmax's). On JAX this compiles nothing, where `jnp.nonzero` called
eagerly compiles over a dozen small programs for each new count of nonzero elements.

Inside a JAX trace (`js.compile`, `to_jax` under `jax.jit`) the values are not known until
the program runs, and XLA needs every shape when it compiles, so the ops are refused there
by name, as boolean-mask indexing is (boolean_masks.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tensor import Tensor, tensor
from .operands import as_tensor, host_values


def values_for_shape(op: str, x: Any, advice: str = "") -> tuple[Tensor, np.ndarray]:
    """`x` as a tensor and its values on the host, for an op whose result's shape depends on
    them; inside a trace, where they are not known, the refusal of `op` (with `advice`)."""
    x = as_tensor(x)
    values = host_values(x)
    if values is None:
        raise RuntimeError(
            f"{op}: the shape of the result depends on the values of the input (shape "
            f"{x.shape}, dtype {x.dtype}), which are not known inside a trace (js.compile, "
            f"to_jax under jax.jit): XLA needs every shape when it compiles. "
            f"{advice or f'Call {op} outside the traced function'}"
        )
    return x, values


_STATIC_COUNT = ("Keep the shape static instead: js.where(x != 0, a, b), or a mask multiplied "
                 "in, or (x != 0).sum() for the count; or call it outside the traced function")


def _on(x: Tensor, indices: np.ndarray) -> Tensor:
    """Host `indices` on `x`'s backend and device."""
    return tensor(indices, backend=x.backend, device=x.device)


def nonzero(x: Any, *, as_tuple: bool = False) -> Tensor | tuple[Tensor, ...]:
    """PyTorch's nonzero: an (n, ndim) integer tensor, one row of indices per nonzero element
    of `x` in row-major order ((1, 0) or (0, 0) for a 0-d `x`); with `as_tuple=True` one 1-d
    tensor per dim instead (one for a 0-d `x`), as indexing takes them:
    `x[x.nonzero(as_tuple=True)]` is `x`'s nonzero elements."""
    x, values = values_for_shape("nonzero", x, _STATIC_COUNT)
    if as_tuple:
        return tuple(_on(x, dim) for dim in np.nonzero(np.atleast_1d(values)))
    return _on(x, np.argwhere(values))


def argwhere(x: Any) -> Tensor:
    """PyTorch's argwhere: `nonzero(x)`, the (n, ndim) indices of the nonzero elements."""
    x, values = values_for_shape("argwhere", x, _STATIC_COUNT)
    return _on(x, np.argwhere(values))
