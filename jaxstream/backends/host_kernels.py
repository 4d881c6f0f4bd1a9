"""The NumPy backend's array namespace: NumPy's array API with products and sums that reach
BLAS.

Note [Host products that reach BLAS]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
NumPy's `matmul` hands a product of float or complex matrices to BLAS only where each
operand has one axis of unit stride and the other a stride no shorter than a row (column);
elsewhere it runs its own loop of one multiply-add at a time, and it does so too for an
inner dimension of 1 (a column times a row). The backward of a sum hands the products
exactly those operands: `y.sum()`'s gradient is a ones array broadcast with zero strides,
so the hessian workload's (2000, 1) @ (1, 64) took 220-400 us and its (2000, 16) @ (16, 64)
of a zero-stride left operand 80-100 us, where one row's product repeated takes ~30 us
(float32, one BLAS thread). `matmul` here takes for 2-D float and complex operands of one
dtype:
* a left operand whose rows are one row seen again (row stride 0): that row's product,
  repeated for each row; a right operand whose columns are one column, the same by columns;
* an inner dimension of 1: the broadcast multiply, one rounding per element as in BLAS;
* any other operand that BLAS cannot read: a contiguous copy of it first;
and NumPy's `matmul` for everything else. What it returns is always a new writeable array,
as NumPy's is, since the kernels downstream may write in place. The values are the same
sums of products, taken in BLAS's order instead of NumPy's loop's (float rounding; PyTorch
takes BLAS's too). `namespace` is `array_api_compat.numpy` with `matmul` and `sum` replaced,
built once with static attributes, so every kernel that calls `xp.matmul` or `xp.sum` on the
NumPy backend gets them and CuPy's and JAX's namespaces keep theirs.

Note [Host sums over leading axes]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
NumPy sums the leading axis of a C-contiguous matrix one row at a time into the output:
a pass of the row's length per row (64 elements for a layer's bias gradient), and a
rounding error that grows with the number of rows. The same sum is the product of a
vector of ones with the matrix, which BLAS runs in blocks: 65 -> 16 us for 2,000x64
float32, and nearer the exact sum (PyTorch's sum is nearer still: its own cascade). `sum`
takes that product for float32 and float64 arrays summed over their leading axes (a
bias's gradient, a broadcast gradient summed back) into at least two sums of at least
`MIN_SUMMED_ROWS` terms, and NumPy's sum for everything else.
"""

from __future__ import annotations

import math
import types
from typing import Any

import array_api_compat.numpy as xnp
import numpy as np

BLAS_KINDS = "fdFD"
"""The dtype characters NumPy's matmul hands to BLAS: float32, float64, complex64/128."""


def _blas_ready(x: np.ndarray) -> np.ndarray:
    """`x` itself where BLAS can read it as a matrix (NumPy's own test), else a C copy."""
    row, column = x.strides
    rows, columns = x.shape
    size = x.itemsize
    if (column == size and row % size == 0 and row >= columns * size) or (
        row == size and column % size == 0 and column >= rows * size
    ):
        return x
    return np.ascontiguousarray(x)


def matmul(x1: Any, x2: Any, /, **kwargs: Any) -> Any:
    """NumPy's matmul, by BLAS or without a product where NumPy's would loop
    (Note [Host products that reach BLAS])."""
    if (
        kwargs
        or type(x1) is not np.ndarray
        or type(x2) is not np.ndarray
        or x1.ndim != 2
        or x2.ndim != 2
        or x1.dtype != x2.dtype
        or x1.dtype.char not in BLAS_KINDS
    ):
        return np.matmul(x1, x2, **kwargs)
    (rows, inner), (inner2, columns) = x1.shape, x2.shape
    if inner != inner2 or not (rows and inner and columns):
        return np.matmul(x1, x2)  # NumPy's error, or its zeros for an empty product
    if rows > 1 and x1.strides[0] == 0:
        return np.repeat(matmul(x1[:1], x2), rows, axis=0)
    if columns > 1 and x2.strides[1] == 0:
        return np.repeat(matmul(x1, x2[:, :1]), columns, axis=1)
    if inner == 1:
        return np.multiply(x1, x2, out=np.empty((rows, columns), dtype=x1.dtype))
    return np.matmul(_blas_ready(x1), _blas_ready(x2))


MIN_SUMMED_ROWS = 128
"""Below this many rows NumPy's own sum is as fast or faster (16x64 float32: 7 against
8 us), as it is for a single column (one contiguous pass)."""


def _leading_axes(axis: Any) -> int:
    """How many leading axes `axis` (counted from 0) names, or 0 where it names others."""
    if type(axis) is int:
        return 1 if axis == 0 else 0
    if type(axis) is tuple and sorted(axis) == list(range(len(axis))):
        return len(axis)
    return 0


def sum(  # noqa: A001
    x: Any, /, *, axis: Any = None, dtype: Any = None, keepdims: bool = False, **kwargs: Any
) -> Any:
    """NumPy's sum, over the leading axes of a C-contiguous float array as a product with a
    vector of ones (Note [Host sums over leading axes])."""
    if (
        kwargs
        or dtype is not None
        or type(x) is not np.ndarray
        or x.dtype.char not in "fd"
        or not x.size
        or not x.flags.c_contiguous
    ):
        return np.sum(x, axis=axis, dtype=dtype, keepdims=keepdims, **kwargs)
    lead = _leading_axes(axis)
    if not 0 < lead < x.ndim:
        return np.sum(x, axis=axis, keepdims=keepdims)
    kept = x.shape[lead:]
    columns = math.prod(kept)
    rows = x.size // columns
    if rows < MIN_SUMMED_ROWS or columns < 2:  # NumPy's own sum is as fast
        return np.sum(x, axis=axis, keepdims=keepdims)
    total = np.matmul(np.ones(rows, dtype=x.dtype), x.reshape(rows, -1))
    return total.reshape((1,) * lead + kept if keepdims else kept)


def _namespace() -> types.ModuleType:
    """`array_api_compat.numpy`'s public names, `matmul` and `sum` replaced, as a module of
    its own."""
    space = types.ModuleType(__name__ + ".namespace", "NumPy's array API, host products, sums.")
    for name in (*xnp.__all__, "__array_api_version__"):
        setattr(space, name, getattr(xnp, name))
    space.matmul = matmul
    space.sum = sum
    return space


namespace = _namespace()
