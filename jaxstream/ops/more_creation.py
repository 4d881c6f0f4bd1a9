"""More factories with PyTorch's names and arguments: tril_indices, triu_indices and logspace.

Each takes the factory keywords of creation.py (`dtype=`, `backend=`, `device=`; logspace
`requires_grad=` too, as PyTorch's) and computes its values on the host as PyTorch's cpu
kernel does (logspace's exponents in the result's dtype, from both ends towards the middle),
so that every backend gets the same values.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..devices import Device
from ..dtypes import python_dtype
from ..tensor import Tensor, is_floating
from .creation import factory_backend, made, value_dtype
from .dtype_names import scalar_type

__all__ = ["logspace", "tril_indices", "triu_indices"]


def _triangle_indices(op: str, row: int, col: int, offset: int, dtype: Any,
                      backend: str | None, device: str | Device | None) -> Tensor:
    """The (2, N) coordinates, row by row, of the lower (or upper) triangle of a row x col
    matrix, from `np.tril_indices` (or `np.triu_indices`)."""
    row, col, offset = operator.index(row), operator.index(col), operator.index(offset)
    for name, size in (("row", row), ("col", col)):
        if size < 0:
            raise RuntimeError(f"{name} must be non-negative, got{size}")
    be = factory_backend(backend, device)
    dtype = python_dtype("i", be) if dtype is None else be.dtype(dtype)
    if dtype.kind not in "iu":
        raise NotImplementedError(f"\"{op}\" not implemented for '{scalar_type(dtype)}' "
                                  f"(indices are integers: give an integer dtype, e.g. int64)")
    where = np.tril_indices if op == "tril_indices" else np.triu_indices
    values = np.stack(where(row, offset, col)).astype(dtype)
    return made(lambda: be.asarray(values), be, device, False)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None,
                 backend: str | None = None, device: str | Device | None = None) -> Tensor:
    """The coordinates of the lower triangle of a `row` x `col` matrix (on and below the
    `offset`-th diagonal) as a (2, N) tensor, row by row: int64 unless `dtype=` says."""
    return _triangle_indices("tril_indices", row, col, offset, dtype, backend, device)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None,
                 backend: str | None = None, device: str | Device | None = None) -> Tensor:
    """The coordinates of the upper triangle of a `row` x `col` matrix (on and above the
    `offset`-th diagonal) as a (2, N) tensor, row by row: int64 unless `dtype=` says."""
    return _triangle_indices("triu_indices", row, col, offset, dtype, backend, device)


def _log_steps(start: float, end: float, steps: int, base: float, dtype: np.dtype
               ) -> np.ndarray:
    """`base ** e` for `steps` exponents e evenly spaced from `start` to `end`, as PyTorch's
    cpu kernel computes them: the exponents in `dtype` (float64 for integer dtypes, from
    bounds made integers first), the first half from `start`, the rest from `end`."""
    if steps == 1:
        return np.array([np.power(np.float64(base), np.float64(start))])
    exact = dtype if is_floating(dtype) else np.dtype(np.float64)
    if not is_floating(dtype):
        start, end = int(start), int(end)
    first, last = exact.type(start), exact.type(end)
    step = (last - first) / exact.type(steps - 1)
    index = np.arange(steps)
    exponents = np.where(index < steps // 2, first + step * index.astype(exact),
                         last - step * (steps - index - 1).astype(exact))
    return np.power(np.float64(base), exponents.astype(np.float64))


def logspace(start: Any, end: Any, steps: int, base: float = 10.0, *, dtype: Any = None,
             backend: str | None = None, device: str | Device | None = None,
             requires_grad: bool = False) -> Tensor:
    """`steps` values from `base ** start` to `base ** end`, their exponents evenly spaced
    (in the default dtype unless `dtype=` says)."""
    steps = operator.index(steps)
    if steps < 0:
        raise RuntimeError(f"number of steps must be non-negative (logspace({start}, {end}, "
                           f"{steps}))")
    be = factory_backend(backend, device)
    dtype = value_dtype(be, 1.0, dtype)
    values = _log_steps(float(start), float(end), steps, float(base), np.dtype(dtype))
    return made(lambda: be.asarray(values.astype(dtype)), be, device, requires_grad)
