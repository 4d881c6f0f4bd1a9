"""embedding and embedding_bag with PyTorch's arguments and checks.

`embedding` is one op (`EmbeddingBackward0`, indexing_rules.py). `embedding_bag` is
composed of it: Note [Bags as a padded matrix]: every form of its input (a 2-D batch of
equal bags, or 1-D indices cut into bags by `offsets`) becomes a (B, L) matrix of indices
with a (B, L) mask of the places that count (inside the bag, not `padding_idx`), so that
the sum, mean and max are masked reductions over axis 1. The offsets are read on the host
to build the matrix (as PyTorch checks them there); the 2-D form needs no host values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tensor import Tensor
from . import indexing_rules as I
from .dispatch import apply
from .indexing import check_bounds, index_of
from .operands import as_tensor, astype, host_values
from .pointwise import masked_fill

BAG_MODES = ("sum", "mean", "max")


def checked_padding_idx(padding_idx: int | None, rows: int,
                        spelling: str = "Padding_idx") -> int | None:
    """`padding_idx` of a table of `rows` rows counted from 0 (a negative one from the end),
    or None; out of range, PyTorch's AssertionError (Embedding's spells it `Padding_idx`,
    EmbeddingBag's `padding_idx`)."""
    if padding_idx is None:
        return None
    if not -rows <= padding_idx < rows:
        raise AssertionError(f"{spelling} must be within num_embeddings (padding_idx="
                             f"{padding_idx} for a weight of {rows} rows)")
    return padding_idx % rows


def _unsupported(op: str, max_norm: Any, scale_grad_by_freq: bool) -> None:
    if max_norm is not None or scale_grad_by_freq:
        raise NotImplementedError(
            f"{op}: max_norm= and scale_grad_by_freq= are not supported (max_norm renormalizes "
            f"the weight in place); renormalize the weight under no_grad first, or scale the "
            f"gradient yourself"
        )


def _lookup(op: str, indices: Any, weight: Tensor, padding_idx: int | None) -> Tensor:
    """The rows of `weight` at `indices` (the weight 2-D, each index within its rows)."""
    if weight.ndim != 2:
        raise RuntimeError(f"'weight' must be 2-D ({op} got a weight of shape {weight.shape})")
    indices = index_of(op, indices, weight, "Long, Int")
    check_bounds(op, indices, weight.shape[0], 0, IndexError)
    return apply(I.EMBEDDING, weight, indices, padding_idx=padding_idx)


def embedding(indices: Any, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """The rows of `weight` at `indices`, in the indices' shape plus the row's; the row at
    `padding_idx` gets no gradient. (`sparse` is accepted; the gradient is dense.)"""
    _unsupported("embedding", max_norm, scale_grad_by_freq)
    return _lookup("embedding", indices, weight, checked_padding_idx(padding_idx, weight.shape[0]))


def _bag_positions(offsets: np.ndarray, length: int, include_last_offset: bool
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Where each bag's places lie in the 1-D input, as a (B, L) matrix, and which of them
    are inside their bag (Note [Bags as a padded matrix])."""
    if offsets.ndim != 1:
        raise ValueError(f"offsets has to be a 1D Tensor (got one of shape {offsets.shape})")
    if offsets.dtype.kind not in "iu":
        raise RuntimeError(f"embedding_bag: expected integer offsets, got {offsets.dtype}; "
                           f"cast them first, e.g. offsets.long()")
    offsets = offsets.astype(np.int64)
    if offsets.size and offsets[0] != 0:
        raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the mini-batch "
                           f"has to start from position 0. However, got {offsets[0]}")
    if offsets.size and offsets[-1] > length:
        raise RuntimeError(f"offsets[-1] can not be greater than input's length {length} but "
                           f"got offsets[-1] of {offsets[-1]}")
    starts = offsets[:-1] if include_last_offset else offsets
    ends = np.append(starts[1:], length)  # the last bag runs to the end, as PyTorch's
    if np.any(ends < starts):
        raise RuntimeError(f"embedding_bag: offsets must not decrease, got {offsets.tolist()}")
    width = max(int((ends - starts).max(initial=0)), 1)
    positions = starts[:, None] + np.arange(width)
    inside = positions < ends[:, None]
    return np.where(inside, positions, 0), inside


def _as_bags(indices: Tensor, offsets: Any, weights: Tensor | None,
             include_last_offset: bool) -> tuple[Tensor, Tensor, Tensor | None]:
    """The (B, L) indices, mask and per-sample weights of the bags (Note [Bags as a padded
    matrix])."""
    if indices.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated "
                             "is a mini-batch of fixed length sequences. However, found offsets "
                             f"of type {type(offsets).__name__}")
        return indices, as_tensor(np.ones(indices.shape, dtype=bool), indices), weights
    if indices.ndim != 1 or offsets is None:
        raise ValueError(f"offsets has to be a 1D Tensor but got None (embedding_bag of 1-D "
                         f"input), or input has to be 2D (got an input of shape "
                         f"{indices.shape})")
    values = host_values(offsets) if isinstance(offsets, Tensor) else np.asarray(offsets)
    if values is None:
        raise RuntimeError("embedding_bag: offsets must be known on the host to cut the input "
                           "into bags, not traced by JAX; give them as a list or a NumPy array "
                           "(constants of the program), or a 2-D input of equal bags")
    positions, inside = _bag_positions(values, indices.shape[0], include_last_offset)
    return (indices[positions], as_tensor(inside, indices),
            None if weights is None else weights[positions])


def _per_sample_weights(weights: Any, mode: str, indices: Tensor, weight: Tensor
                        ) -> Tensor | None:
    if weights is None:
        return None
    if mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. "
                                  f"per_sample_weights is only supported for mode='sum' (got "
                                  f"mode='{mode}')")
    weights = as_tensor(weights, weight)
    if tuple(weights.shape) != tuple(indices.shape):
        raise ValueError(f"embedding_bag: If per_sample_weights ({weights.shape}) is not None, "
                         f"then it must have the same shape as the input ({indices.shape})")
    return astype(weights, weight.dtype)


def _reduced_bags(rows: Tensor, inside: Tensor, weights: Tensor | None, mode: str) -> Tensor:
    """The (B, D) sum, mean or max over axis 1 of the (B, L, D) `rows` where `inside`;
    an empty bag gives zeros."""
    outside = ~inside.unsqueeze(-1)
    if mode == "max":
        best = masked_fill(rows, outside, float("-inf")).amax(axis=1)
        return masked_fill(best, ~inside.any(axis=1, keepdims=True), 0.0)
    if weights is not None:
        rows = rows * weights.unsqueeze(-1)
    total = masked_fill(rows, outside, 0.0).sum(axis=1)
    if mode == "sum":
        return total
    count = astype(inside.sum(axis=1, keepdims=True), rows.dtype).clamp_min(1.0)
    return total / count


def embedding_bag(indices: Any, weight: Tensor, offsets: Any = None, max_norm: float | None = None,
                  norm_type: float = 2, scale_grad_by_freq: bool = False, mode: str = "mean",
                  sparse: bool = False, per_sample_weights: Any = None,
                  include_last_offset: bool = False, padding_idx: int | None = None) -> Tensor:
    """The sum, mean or max of the rows of `weight` in each bag of indices: the rows of a 2-D
    input, or the pieces of a 1-D input that start at `offsets` (with
    `include_last_offset`, its last entry is the end of the last bag). Indices equal to
    `padding_idx` are left out (a mean counts the others); an empty bag gives zeros;
    `per_sample_weights` (mode "sum") scale each row first."""
    _unsupported("embedding_bag", max_norm, scale_grad_by_freq)
    if mode not in BAG_MODES:
        raise ValueError(f"mode has to be one of sum, mean or max (got {mode!r})")
    indices = index_of("embedding_bag", indices, weight, "Long, Int")
    weights = _per_sample_weights(per_sample_weights, mode, indices, weight)
    padding_idx = checked_padding_idx(padding_idx, weight.shape[0])
    bags, inside, weights = _as_bags(indices, offsets, weights, include_last_offset)
    if padding_idx is not None:
        inside = inside & (bags != padding_idx)
    return _reduced_bags(_lookup("embedding_bag", bags, weight, None), inside, weights, mode)
