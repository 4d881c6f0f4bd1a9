"""More products with PyTorch's names, arguments and checks: cross (and `js.linalg.cross`),
tensordot, block_diag, addmv, addr, addbmm (`beta=`, `alpha=`), chain_matmul,
matrix_power, matrix_exp and vander.

cross, addmv, addr, addbmm, block_diag and matrix_exp are one op each, under PyTorch's node
(product_rules.py); the others compose matmul, inv, cumprod and the shape ops as PyTorch
does. chain_matmul multiplies left to right, where PyTorch's multi_dot picks the cheapest
order: the same product up to rounding.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import numpy as np

from ..dtypes import python_dtype
from ..tensor import Tensor, is_floating
from . import product_rules as P
from . import shape_ops as S
from .creation import eye, ones, zeros
from .dispatch import apply
from .dtype_names import scalar_type
from .inplace import FILL, in_place_method
from .linalg import matmul
from .matrices import check_matrices, inv
from .operands import as_tensor, astype, autocast, host_values
from .promotion import promote_types
from .reductions import cumprod
from .shapes import broadcast_shapes, expanded_shape, normalize_axis

__all__ = [
    "addbmm", "addmv", "addr", "block_diag", "chain_matmul", "cross", "matrix_exp",
    "matrix_power", "tensordot", "vander",
]

_CROSS_DEFAULT = ("Using torch.cross without specifying the dim arg is deprecated.\nPlease "
                  "either pass the dim explicitly or simply use torch.linalg.cross.\nThe "
                  "default value of dim will change to agree with that of linalg.cross in a "
                  "future release.")


def _tensors(*xs: Any) -> list[Tensor]:
    """The operands as tensors beside the first tensor among them."""
    like = next((x for x in xs if isinstance(x, Tensor)), None)
    return [as_tensor(x, like) for x in xs]


# ------------------------------------------------------------------ cross
def _crossed(op: str, a: Tensor, b: Tensor, dim: int) -> Tensor:
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected scalar type {scalar_type(a.dtype)} but found "
                           f"{scalar_type(b.dtype)} ({op} of shapes {a.shape} and {b.shape}); "
                           f"cast one first, e.g. other.to('{a.dtype}')")
    shape = broadcast_shapes(op, a.shape, b.shape)
    axis = normalize_axis(op, dim, shape)
    if a.shape[axis - len(shape)] != 3 or b.shape[axis - len(shape)] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{a.shape[axis - len(shape)]} and {b.shape[axis - len(shape)]}")
    return apply(P.CROSS, a, b, axis=axis - len(shape))


def linalg_cross(input: Any, other: Any, *, dim: int = -1) -> Tensor:  # noqa: A002
    """The cross product of 3-vectors along `dim` (broadcast together), as
    `torch.linalg.cross`."""
    a, b = _tensors(input, other)
    if a.ndim != b.ndim:
        raise RuntimeError(f"linalg.cross: inputs must have the same number of dimensions. "
                           f"(got shapes {a.shape} and {b.shape})")
    return _crossed("linalg.cross", a, b, dim)


def cross(input: Any, other: Any, dim: int | None = None) -> Tensor:  # noqa: A002
    """`torch.cross`: the cross product along `dim`; without it (deprecated, with PyTorch's
    warning) along the first dim of size 3."""
    a, b = _tensors(input, other)
    if dim is None:
        warnings.warn(_CROSS_DEFAULT, UserWarning, stacklevel=2)
        shape = broadcast_shapes("cross", a.shape, b.shape)
        dim = next((i for i, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise RuntimeError(f"no dimension of size 3 in input (shapes {a.shape} and "
                               f"{b.shape})")
    return _crossed("cross", a, b, dim)


# ------------------------------------------------------------------ tensordot
def _contracted(a: Tensor, b: Tensor, dims: Any) -> tuple[list[int], list[int]]:
    """The dims of `a` and of `b` that tensordot sums over, from `dims` as PyTorch reads it."""
    if isinstance(dims, Tensor):
        dims = dims.numpy().tolist()
    if isinstance(dims, list | tuple):
        first, second = dims
        first = [first] if isinstance(first, int) else list(first)
        second = [second] if isinstance(second, int) else list(second)
        if len(first) != len(second):
            raise RuntimeError("both dimension lists should have same length")
        return first, second
    if dims < 0:
        raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
    if dims > min(a.ndim, b.ndim):
        raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
    return list(range(-dims, 0)), list(range(dims))


def _summed_ones(a: Tensor, b: Tensor, first: list[int], second: list[int]) -> tuple:
    """`a` and `b` with each contracted dim of size 1 against a longer one summed out on the
    other side, as PyTorch broadcasts them; or PyTorch's error for sizes that differ."""
    for i, j in zip(first, second, strict=True):
        s1, s2 = a.shape[normalize_axis("tensordot", i, a.shape)], \
            b.shape[normalize_axis("tensordot", j, b.shape)]
        if s1 == s2:
            continue
        if s2 == 1:
            a = a.sum(axis=i, keepdims=True)
        elif s1 == 1:
            b = b.sum(axis=j, keepdims=True)
        else:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {s1} "
                               f"in dim {i} and second has size {s2} in dim {j}")
    return a, b


def tensordot(a: Any, b: Any, dims: Any = 2) -> Tensor:
    """The sum over the dims `dims` names of the products of `a`'s and `b`'s elements: the
    last `dims` dims of `a` with the first of `b`, or the lists `dims[0]` and `dims[1]`."""
    a, b = _tensors(a, b)
    if a.dtype != b.dtype:
        raise RuntimeError(f"both inputs should have same dtype (got {a.dtype} and {b.dtype})")
    first, second = _contracted(a, b, dims)
    a, b = _summed_ones(a, b, first, second)
    axes_a = [normalize_axis("tensordot", i, a.shape) for i in first]
    axes_b = [normalize_axis("tensordot", j, b.shape) for j in second]
    for axes in (axes_a, axes_b):
        twice = next((d for d in axes if axes.count(d) > 1), None)
        if twice is not None:
            raise RuntimeError(f"dim {twice} appears multiple times in the list of dims")
    free_a = [d for d in range(a.ndim) if d not in axes_a]
    free_b = [d for d in range(b.ndim) if d not in axes_b]
    inner = int(np.prod([a.shape[d] for d in axes_a]))
    left = S.permute_dims(a, free_a + axes_a).reshape((-1, inner))
    right = S.permute_dims(b, axes_b + free_b).reshape((inner, -1))
    shape = tuple(a.shape[d] for d in free_a) + tuple(b.shape[d] for d in free_b)
    return matmul(left, right).reshape(shape)


# ------------------------------------------------------------------ block_diag
def block_diag(*tensors: Any) -> Tensor:
    """The tensors (matrices; a vector is one row, a scalar one element) along the diagonal
    of one zero matrix, in their promoted dtype."""
    if not tensors:
        return zeros((1, 0))
    blocks = _tensors(*tensors)
    for i, t in enumerate(blocks):
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer "
                               f"dimensions. Input {i} has {t.ndim} dimensions")
    dtype = functools.reduce(promote_types, [t.dtype for t in blocks])
    matrices = [t.reshape((1, -1)) if t.ndim < 2 else t for t in blocks]
    return apply(P.BLOCK_DIAG, *matrices, dtype=dtype)


# ------------------------------------------------------------------ add a product
def _scales(beta: Any, alpha: Any) -> dict:
    return {"beta": beta, "alpha": alpha}


def addmv(input: Any, mat: Any, vec: Any, *, beta: Any = 1, alpha: Any = 1) -> Tensor:  # noqa: A002
    """`beta * input + alpha * (mat @ vec)` (input left out, NaN and all, where beta is 0)."""
    x, mat, vec = autocast(*_tensors(input, mat, vec))
    if (x.ndim > 1, mat.ndim, vec.ndim) != (False, 2, 1):
        raise RuntimeError(f"vector + matrix @ vector expected, got {x.ndim}, {mat.ndim}, "
                           f"{vec.ndim}")
    if vec.shape[0] != mat.shape[1] or x.ndim and x.shape[0] not in (1, mat.shape[0]):
        size = x.shape[0] if x.ndim else 1
        raise RuntimeError(f"size mismatch, got input ({size}), mat "
                           f"({mat.shape[0]}x{mat.shape[1]}), vec ({vec.shape[0]})")
    if not x.dtype == mat.dtype == vec.dtype:
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got "
                           f"{scalar_type(x.dtype)}, {scalar_type(mat.dtype)}, and "
                           f"{scalar_type(vec.dtype)}; cast them first, e.g. t.to('{x.dtype}')")
    return apply(P.ADDMV, x, mat, vec, **_scales(beta, alpha))


def addr(input: Any, vec1: Any, vec2: Any, *, beta: Any = 1, alpha: Any = 1) -> Tensor:  # noqa: A002
    """`beta * input + alpha * outer(vec1, vec2)` in the operands' promoted dtype (input left
    out, NaN and all, where beta is 0)."""
    x, vec1, vec2 = _tensors(input, vec1, vec2)
    for name, v in (("vec1", vec1), ("vec2", vec2)):
        if v.ndim != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {v.ndim}-D")
    dtype = functools.reduce(promote_types, (x.dtype, vec1.dtype, vec2.dtype))
    if not is_floating(dtype):
        for name, scale in (("beta", beta), ("alpha", alpha)):
            if isinstance(scale, float):
                raise RuntimeError(f"For integral input tensors, argument {name} must not be a "
                                   f"floating point number.")
    expanded_shape(x.shape, (vec1.shape[0], vec2.shape[0]))
    x, vec1, vec2 = (astype(t, dtype) for t in (x, vec1, vec2))
    return apply(P.ADDR, x, vec1, vec2, **_scales(beta, alpha))


def addbmm(input: Any, batch1: Any, batch2: Any, *, beta: Any = 1, alpha: Any = 1) -> Tensor:  # noqa: A002
    """`beta * input + alpha * sum_b batch1[b] @ batch2[b]` (input left out, NaN and all,
    where beta is 0)."""
    x, batch1, batch2 = autocast(*_tensors(input, batch1, batch2))
    for name, t in (("batch1", batch1), ("batch2", batch2)):
        if t.ndim != 3:
            raise RuntimeError(f"{name} must be a 3D tensor (addbmm: got shape {t.shape})")
    if batch1.shape[0] != batch2.shape[0]:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got "
                           f"{batch1.shape[0]} and {batch2.shape[0]}")
    if batch1.shape[2] != batch2.shape[1]:
        raise RuntimeError(f"Incompatible matrix sizes for bmm ({batch1.shape[1]}x"
                           f"{batch1.shape[2]} and {batch2.shape[1]}x{batch2.shape[2]})")
    expanded_shape(x.shape, (batch1.shape[1], batch2.shape[2]))
    for first, second, names in ((x, batch2, "self and mat2"), (batch1, batch2, "mat1 and mat2")):
        if first.dtype != second.dtype:
            raise RuntimeError(f"{names} must have the same dtype, but got "
                               f"{scalar_type(first.dtype)} and {scalar_type(second.dtype)}")
    return apply(P.ADDBMM, x, batch1, batch2, **_scales(beta, alpha))


# ------------------------------------------------------------------ matrix functions
def chain_matmul(*matrices: Any) -> Tensor:
    """The product of the matrices, left to right (PyTorch's deprecated multi_dot)."""
    if len(matrices) == 1 and isinstance(matrices[0], list | tuple):
        matrices = tuple(matrices[0])
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    tensors = _tensors(*matrices)
    for t in tensors:
        if t.ndim != 2:
            raise RuntimeError(f"Tensor dimension is {t.ndim}, expected 2 instead.")
    if len(tensors) == 1:
        return tensors[0].clone()
    for i, (a, b) in enumerate(zip(tensors[:-1], tensors[1:], strict=True)):
        if a.dtype != b.dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but "
                               f"tensor 0 is {a.dtype} and tensor {i + 1} {b.dtype}")
        if a.shape[1] != b.shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes "
                               f"{list(a.shape)} and {list(b.shape)} cannot be multiplied")
    return functools.reduce(matmul, tensors)


def matrix_power(input: Any, n: int) -> Tensor:  # noqa: A002
    """The n-th power of each square matrix: the identity for n = 0, powers of the inverse
    for n < 0, by repeated squaring as PyTorch multiplies."""
    a = as_tensor(input)
    check_matrices("linalg.matrix_power", a, floating=False)
    if n == 0:  # the identity, whose gradient is zero: a fill of a's shape, plus eye
        identity = eye(a.shape[-1], dtype=a.dtype, backend=a.backend, device=a.device)
        return apply(FILL, a, value=0) + identity
    if n < 0:
        a, n = inv(a), -n
    if n == 1:
        return a.clone()
    power, square = None, None
    while n:
        n, bit = divmod(n, 2)
        square = a if square is None else matmul(square, square)
        if bit:
            power = square if power is None else matmul(power, square)
    return power


def matrix_exp(input: Any) -> Tensor:  # noqa: A002
    """exp(A) of each square matrix, sum_k A^k / k!: Higham's scaling and squaring (Note [The
    matrix exponential by scaling and squaring] in product_rules.py)."""
    a = as_tensor(input)
    check_matrices("linalg.matrix_exp", a)
    return apply(P.MATRIX_EXP, a, squarings=P.squarings(host_values(a)))


def vander(x: Any, N: int | None = None, increasing: bool = False) -> Tensor:  # noqa: N803
    """The Vandermonde matrix of the 1-d `x`: its columns the powers x^(N-1) ... x^0 (x^0 ...
    x^(N-1) with `increasing`); integers and bools become int64, as PyTorch's cumprod makes
    them."""
    x = as_tensor(x)
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    dtype = promote_types(x.dtype, python_dtype("i", x.array_backend))
    x = astype(x, dtype)
    columns = [ones((x.shape[0], min(n, 1)), dtype=dtype, backend=x.backend, device=x.device)]
    if n > 1:
        columns.append(cumprod(x.unsqueeze(1).broadcast_to((x.shape[0], n - 1)), 1))
    result = S.concat(columns, 1)
    return result if increasing else result.flip(1)


METHODS: dict[str, Any] = {
    "cross": cross, "addmv": addmv, "addr": addr, "addbmm": addbmm,
    "addmv_": in_place_method(addmv, "addmv_"), "addr_": in_place_method(addr, "addr_"),
    "addbmm_": in_place_method(addbmm, "addbmm_"), "matrix_power": matrix_power,
    "matrix_exp": matrix_exp,
}
