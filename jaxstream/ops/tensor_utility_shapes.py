"""PyTorch's everyday shape and selection utilities: `ravel`, `narrow`, `select`, `movedim`
(`moveaxis`), `diagonal`, `diag_embed`, `fliplr`, `flipud`, `rot90`, `tensor_split`,
`unflatten`, `take`, `take_along_dim`, `masked_select` and `repeat_interleave`.

Each keeps PyTorch's meaning, errors and node name, composing the ops that exist
(`reshape`, `permute_dims`, `flip`, `gather`, `index_select`, ...) where PyTorch records
the same nodes, and an op of tensor_utility_rules.py where its node is one of its own.
As in PyTorch, `ravel`, `narrow`, `select`, `movedim`, `diagonal`, `unflatten` and the
pieces of `tensor_split` are views of their input: an in-place op on one changes the input
(Note [Views and in-place ops] in views.py). Values an op must know to shape its result
(the repeats of `repeat_interleave`, a mask, a tensor of split indices) are read on the
host, so inside a trace they must be fixed, as for `x[mask]`.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from ..tensor import Tensor
from . import shape_ops as S
from . import tensor_utility_rules as U
from .boolean_masks import refuse_traced_masks
from .creation import arange
from .dispatch import apply
from .dtype_names import scalar_type
from .functional import clone
from .indexing import gather, index_of, index_select
from .operands import as_tensor
from .shapes import broadcast_shapes, normalize_axis


def ravel(x: Tensor) -> Tensor:
    """`x` as a vector (a view, node ViewBackward0)."""
    return S.reshape(x, (-1,))


def _slice(x: Tensor, axis: int, start: int | None, stop: int | None) -> Tensor:
    return apply(U.SLICE, x, index=(slice(None),) * axis + (slice(start, stop),))


def _not_a_scalar(op: str, x: Tensor, error: type = RuntimeError) -> None:
    if not x.ndim:
        raise error(f"{op}() cannot be applied to a 0-dim tensor. Give a tensor of at least "
                    "one dim, e.g. x.reshape(1)")


def narrow(x: Tensor, dim: int, start: Any, length: int) -> Tensor:
    """Elements `start` to `start + length` of `x` along `dim` (a view, node
    SliceBackward0); a negative `start` counts from the end."""
    _not_a_scalar("narrow", x)
    axis = normalize_axis("narrow", dim, x.shape)
    size, start, length = x.shape[axis], int(start), int(length)
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], "
                         f"but got {start}) (narrow of dim {dim} of a tensor of shape {x.shape})")
    start += size if start < 0 else 0
    if length < 0:
        raise RuntimeError(f"narrow(): length must be non-negative. (got {length})")
    if start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size "
                           f"({size}). (narrow of dim {dim} of a tensor of shape {x.shape})")
    return _slice(x, axis, start, start + length)


def select(x: Tensor, dim: int, index: Any) -> Tensor:
    """`x` at `index` along `dim`, that dim removed (a view, node SelectBackward0)."""
    _not_a_scalar("select", x, IndexError)
    axis = normalize_axis("select", dim, x.shape)
    size, index = x.shape[axis], int(index)
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(x.shape)} at dimension {dim}; indices lie in [{-size}, {size})")
    return apply(U.SELECT, x, index=(slice(None),) * axis + (index % size,))


def _dims(op: str, x: Tensor, dims: Any, what: str) -> tuple:
    given = (dims,) if isinstance(dims, int) else tuple(dims)
    axes = tuple(normalize_axis(op, d, x.shape) for d in given)
    if len(set(axes)) != len(axes):
        raise RuntimeError(f"{op}: repeated dim in `{what}` ({list(given)}) (tensor of shape "
                           f"{x.shape}); name each dim once")
    return axes


def movedim(x: Tensor, source: int | Sequence[int], destination: int | Sequence[int]
            ) -> Tensor:
    """`x` with the dims `source` moved to the places `destination`, the others keeping
    their order (a view, node PermuteBackward0)."""
    src = _dims("movedim", x, source, "source")
    dst = _dims("movedim", x, destination, "destination")
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({list(src)} "
                           f"dims) should contain the same number of dims as destination "
                           f"({list(dst)} dims)")
    order: list[int | None] = [None] * x.ndim
    for s, d in zip(src, dst, strict=True):
        order[d] = s
    rest = iter(d for d in range(x.ndim) if d not in src)
    return S.permute_dims(x, [next(rest) if o is None else o for o in order])


moveaxis = movedim


def _two_dims(op: str, shape: tuple, dim1: int, dim2: int) -> tuple:
    d1, d2 = normalize_axis(op, dim1, shape), normalize_axis(op, dim2, shape)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2} ({op} of a "
                           f"tensor of {len(shape)} dims); name two different dims")
    return d1, d2


def diagonal(x: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The `offset` diagonal (above the main one for offset > 0) of the matrices along
    `dim1` and `dim2`, as a last dim after the others (a view, node DiagonalBackward0)."""
    d1, d2 = _two_dims("diagonal", x.shape, dim1, dim2)
    return apply(U.DIAGONAL, x, offset=int(offset), dim1=d1, dim2=d2)


def diag_embed(x: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Matrices along `dim1` and `dim2` of the result, zero but for the `offset` diagonal,
    which holds `x`'s last dim (the adjoint of `diagonal`)."""
    n = (x.shape[-1] if x.ndim else 1) + abs(int(offset))
    d1, d2 = _two_dims("diag_embed", (n,) * (x.ndim + 1), dim1, dim2)
    batch = iter(x.shape[:-1])
    shape = tuple(n if d in (d1, d2) else next(batch) for d in range(x.ndim + 1))
    return apply(U.EMBED_DIAGONAL, x, offset=int(offset), dim1=d1, dim2=d2, shape=shape)


def fliplr(x: Tensor) -> Tensor:
    """`x` reversed along dim 1 (a copy, node FlipBackward0)."""
    if x.ndim < 2:
        raise RuntimeError(f"Input must be >= 2-d. (fliplr of a tensor of shape {x.shape}); "
                           "for a vector use x.flip(0)")
    return S.flip(x, (1,))


def flipud(x: Tensor) -> Tensor:
    """`x` reversed along dim 0 (a copy, node FlipBackward0)."""
    if x.ndim < 1:
        raise RuntimeError("Input must be >= 1-d. (flipud of a 0-dim tensor)")
    return S.flip(x, (0,))


def rot90(x: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
    """`x` turned `k` quarter turns in the plane of `dims`, from the first dim towards the
    second (a copy, node Rot90Backward0)."""
    dims = tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)} "
                           f"(rot90 of a tensor of shape {x.shape})")
    if x.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {x.ndim} (rot90 of "
                           f"a tensor of shape {x.shape})")
    axes = tuple(normalize_axis("rot90", d, x.shape) for d in dims)
    if axes[0] == axes[1]:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {dims[0]} "
                           f"and dim1 = {dims[1]} (rot90 of a tensor of shape {x.shape})")
    return apply(U.ROT90, x, k=int(k), dims=axes)


def _split_points(spec: Any) -> int | list[int]:
    """tensor_split's sections (an int) or indices (a list), from a tensor too."""
    if not isinstance(spec, Tensor):
        return int(spec) if isinstance(spec, numbers.Integral) else [int(i) for i in spec]
    if spec.ndim > 1:
        raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to be a "
                           f"zero-dimensional or one-dimensional tensor, but got a tensor with "
                           f"{spec.ndim} dims")
    if spec.dtype.kind not in "iu":
        raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to have dtype of "
                           f"long, but got {scalar_type(spec.dtype)}; cast it, e.g. t.long()")
    return spec.item() if not spec.ndim else spec.tolist()


def tensor_split(x: Tensor, indices_or_sections: Any, dim: int = 0) -> tuple:
    """Views of `x` along `dim`: `n` sections (the first `size % n` one longer), or the
    pieces between the given indices (Python's slice bounds), in a tuple."""
    if not x.ndim:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a "
                           "tensor with 0 dims")
    axis = normalize_axis("tensor_split", dim, x.shape)
    points = _split_points(indices_or_sections)
    if isinstance(points, int):
        if points <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {points}")
        size, extra = divmod(x.shape[axis], points)
        points = list(itertools.accumulate([size + 1] * extra + [size] * (points - extra)))[:-1]
    bounds = zip([0, *points], [*points, None], strict=True)
    return tuple(_slice(x, axis, start, stop) for start, stop in bounds)


def unflatten(x: Tensor, dim: int, sizes: Sequence[int]) -> Tensor:
    """`x` with dim `dim` split into dims of `sizes` (one may be -1, worked out), a view."""
    axis = normalize_axis("unflatten", dim, x.shape)
    sizes, size = tuple(int(s) for s in sizes), x.shape[axis]
    if not sizes:
        raise RuntimeError(f"unflatten: sizes must be non-empty (dim {dim} of a tensor of shape "
                           f"{x.shape})")
    known = math.prod(s for s in sizes if s != -1)
    inferred = -1 in sizes and sizes.count(-1) == 1 and known > 0 and size % known == 0
    if not inferred and (-1 in sizes or known != size):
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the "
                           f"size of dim {dim} ({size}) in the input tensor (shape {x.shape}); "
                           "at most one size may be -1")
    return S.reshape(x, x.shape[:axis] + sizes + x.shape[axis + 1:])


def take(x: Tensor, index: Any) -> Tensor:
    """The elements of `x`, read as a vector, at `index`, in `index`'s shape (negative
    indices count from the end; node TakeBackward0)."""
    index = index_of("take", index, x)
    n = x.numel()
    if not isinstance(index.array, jax.core.Tracer) and index.numel():
        values = np.asarray(index.numpy())
        wrong = values[(values < -n) | (values >= n)]
        if wrong.size:
            raise IndexError(f"out of range: tried to access index {wrong.flat[0]} on a tensor "
                             f"of {n} elements. (take of an index of shape {index.shape} from a "
                             f"tensor of shape {x.shape})")
    source = x if x.ndim else S.reshape(x, (1,))
    flat = index.array % max(n, 1)
    strides = [math.prod(source.shape[d + 1:]) for d in range(source.ndim)]
    coords = tuple(flat // stride % max(size, 1) for stride, size in zip(
        strides, source.shape, strict=True))
    return apply(U.TAKE, source, index=coords)


def take_along_dim(x: Tensor, indices: Any, dim: int | None = None) -> Tensor:
    """`gather` of `x` along `dim` with `indices` broadcast against `x` in the other dims;
    without `dim`, of both read as vectors (node GatherBackward0)."""
    indices = index_of("take_along_dim", indices, x)
    if dim is None:
        return gather(ravel(x), 0, ravel(indices))
    axis = normalize_axis("take_along_dim", dim, x.shape)
    if indices.ndim != x.ndim:
        raise RuntimeError(f"torch.take_along_dim(): input and indices should have the same "
                           f"number of dimensions, but got {x.ndim} dimensions for input, and "
                           f"{indices.ndim} dimensions for indices")
    common = list(broadcast_shapes("take_along_dim", _one_at(x.shape, axis),
                                   _one_at(indices.shape, axis)))
    expanded = []
    for t in (x, indices):
        common[axis] = t.shape[axis]
        expanded.append(t if t.shape == tuple(common) else S.expand(t, common))
    return gather(expanded[0], axis, expanded[1])


def _one_at(shape: tuple, axis: int) -> tuple:
    return shape[:axis] + (1,) + shape[axis + 1:]


def masked_select(x: Tensor, mask: Any) -> Tensor:
    """The elements of `x` where the bool `mask` is true (the two broadcast), as a vector
    (node MaskedSelectBackward0)."""
    mask = as_tensor(mask, x)
    if mask.dtype.kind != "b":
        raise RuntimeError(f"masked_select: expected BoolTensor for mask (got {mask.dtype} of "
                           f"shape {mask.shape}); cast it first, e.g. mask.bool() or mask != 0")
    shape = broadcast_shapes("masked_select", mask.shape, x.shape)
    picks = mask.array
    if mask.shape != shape:
        picks = mask.array_backend.xp.broadcast_to(picks, shape)
    refuse_traced_masks("masked_select", shape, picks)
    return apply(U.MASKED_SELECT, x if x.shape == shape else S.broadcast_to(x, shape),
                 index=picks)


def repeat_interleave(x: Tensor, repeats: Any = None, dim: int | None = None, *,
                      output_size: int | None = None) -> Tensor:
    """Each slice of `x` along `dim` repeated `repeats` times (an int, or a count per slice)
    in place; without `dim`, of `x` read as a vector. `repeat_interleave(counts)` alone
    repeats each index `counts[i]` times."""
    if repeats is None:
        counts = as_tensor(x)
        return repeat_interleave(arange(counts.numel(), backend=counts.backend,
                                        device=counts.device), counts, 0)
    x = ravel(x) if dim is None or not x.ndim else x
    axis = normalize_axis("repeat_interleave", 0 if dim is None else dim, x.shape)
    if isinstance(repeats, numbers.Integral):
        return _repeated(x, axis, int(repeats), output_size)
    counts = _counts(as_tensor(repeats, x), x.shape[axis], axis)
    total = int(counts.sum())
    if output_size is not None and output_size != total:
        raise RuntimeError(f"repeat_interleave: Invalid output_size, expected {total} but got "
                           f"{output_size}")
    return index_select(x, axis, np.repeat(np.arange(x.shape[axis]), counts))


def _repeated(x: Tensor, axis: int, repeats: int, output_size: int | None) -> Tensor:
    """Every slice repeated `repeats` times: a copy of the slices broadcast side by side,
    read in `x`'s shape (as PyTorch records it: a view of a clone of an expand)."""
    if repeats < 0:
        raise RuntimeError(f"Repeats must be non-negative (repeat_interleave of {repeats})")
    size = x.shape[axis] * repeats
    if output_size is not None and output_size != size:
        raise RuntimeError(f"repeat_interleave: Invalid output_size, expected {size} but got "
                           f"{output_size}")
    spread = S.expand(S.unsqueeze(x, axis + 1),
                      x.shape[:axis + 1] + (repeats,) + x.shape[axis + 1:])
    return S.reshape(clone(spread), x.shape[:axis] + (size,) + x.shape[axis + 1:])


def _counts(repeats: Tensor, size: int, axis: int) -> np.ndarray:
    """The repeats of each of `size` slices, on the host, or PyTorch's error."""
    if repeats.ndim > 1:
        raise RuntimeError(f"repeats must be 0-dim or 1-dim tensor (got shape {repeats.shape})")
    if repeats.dtype.kind not in "iu":
        raise NotImplementedError(f"\"repeat_interleave_cpu\" not implemented for "
                                  f"'{scalar_type(repeats.dtype)}'; give integer repeats")
    counts = np.asarray(repeats.numpy()).reshape(-1)
    if counts.size == 1:
        counts = np.broadcast_to(counts, (size,))
    if counts.size != size:
        raise RuntimeError(f"repeats must have the same size as input along dim, but got "
                           f"repeats.size(0) = {counts.size} and input.size({axis}) = {size}")
    if (counts < 0).any():
        raise RuntimeError(f"repeats can not be negative (got {counts.tolist()})")
    return counts


METHODS: dict[str, Any] = {
    "ravel": ravel,
    "narrow": narrow,
    "select": select,
    "movedim": movedim,
    "moveaxis": moveaxis,
    "diagonal": diagonal,
    "diag_embed": diag_embed,
    "fliplr": fliplr,
    "flipud": flipud,
    "rot90": rot90,
    "tensor_split": tensor_split,
    "unflatten": unflatten,
    "take": take,
    "take_along_dim": take_along_dim,
    "masked_select": masked_select,
    "repeat_interleave": repeat_interleave,
}
