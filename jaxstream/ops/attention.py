"""Scaled dot-product attention with PyTorch's arguments, masks and checks, composed of the
ops (matmul, softmax, dropout), so that it is differentiable to any order.

Note [Rows that attend to nothing]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A query whose every key is masked out (a row of -inf after the mask) would get
`softmax` of -inf everywhere: 0/0. PyTorch gives such a row zero weights, a zero
output and a zero gradient. Here its scores are replaced by zeros before the softmax
(`masked_fill`, which passes no gradient there) and its weights by zeros after: the
softmax stays finite, so no NaN reaches the gradient of the other rows either.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..tensor import Tensor, is_floating
from . import neural
from .creation import zeros_like
from .operands import as_tensor, astype
from .pointwise import masked_fill


def additive_mask(mask: Any, like: Tensor, keep_where_true: bool) -> Tensor | None:
    """`mask` as numbers added to the scores: a bool mask gives 0 where a key takes part and
    -inf where it does not (True means "takes part" for `scaled_dot_product_attention`,
    "masked out" for `MultiheadAttention`'s masks); a float mask is added as it is."""
    if mask is None:
        return None
    mask = as_tensor(mask, like)
    if mask.dtype == np.bool_:
        blocked = ~mask if keep_where_true else mask
        return masked_fill(zeros_like(mask, dtype=like.dtype), blocked, float("-inf"))
    if not is_floating(mask.dtype):
        raise RuntimeError(
            f"Expected attn_mask dtype to be bool or float or to match query dtype, but got "
            f"attn_mask.dtype: {mask.dtype} and query.dtype: {like.dtype} instead (mask of "
            f"shape {mask.shape}); compare to make a bool mask, e.g. mask != 0"
        )
    return astype(mask, like.dtype)


def causal_mask(length: int, source_length: int, like: Tensor) -> Tensor:
    """The additive mask of `is_causal`: query i attends to keys 0..i (the top-left
    triangle, as PyTorch's, also when the lengths differ)."""
    keep = np.tril(np.ones((length, source_length), dtype=bool))
    return additive_mask(as_tensor(keep, like), like, keep_where_true=True)


def attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None,
              dropout_p: float, scale: float) -> tuple[Tensor, Tensor]:
    """`(softmax(q @ k.T * scale + mask) @ v, the weights)`, the weights dropped out with
    probability `dropout_p` (from the current draw source); rows that attend to nothing get
    zeros (Note [Rows that attend to nothing])."""
    scores = (query @ key.transpose(-2, -1)) * scale
    if mask is None:
        weights = neural.softmax(scores, -1)
    else:
        scores = scores + mask
        nothing = (scores == float("-inf")).all(axis=-1, keepdims=True)
        weights = masked_fill(neural.softmax(masked_fill(scores, nothing, 0.0), -1), nothing, 0.0)
    if dropout_p > 0.0:
        weights = neural.dropout(weights, dropout_p)
    return weights @ value, weights


def repeat_heads(t: Tensor, times: int) -> Tensor:
    """Each head (axis -3) of `t` repeated `times` times in place, as `repeat_interleave`."""
    if times == 1:
        return t
    *batch, heads, length, size = t.shape
    expanded = t.unsqueeze(-3).expand(*batch, heads, times, length, size)
    return expanded.reshape(*batch, heads * times, length, size)


def _check_shapes(query: Tensor, key: Tensor, value: Tensor) -> None:
    if min(t.ndim for t in (query, key, value)) < 2 or query.shape[-1] != key.shape[-1] or (
            key.shape[-2] != value.shape[-2]):
        raise RuntimeError(
            f"scaled_dot_product_attention: expected query (..., L, E), key (..., S, E) and "
            f"value (..., S, Ev), got shapes {query.shape}, {key.shape} and {value.shape}"
        )


def _grouped(query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
    """`key` and `value` with their heads repeated to the query's (`enable_gqa`)."""
    if query.ndim < 3:
        return key, value
    heads = query.shape[-3]
    if heads % key.shape[-3] or heads % value.shape[-3]:
        raise RuntimeError(
            f"Number of heads in key and value must divide the number of heads in query "
            f"(query {query.shape}, key {key.shape}, value {value.shape}: heads on axis -3)"
        )
    return (repeat_heads(key, heads // key.shape[-3]),
            repeat_heads(value, heads // value.shape[-3]))


def scaled_dot_product_attention(query: Tensor, key: Any, value: Any, attn_mask: Any = None,
                                 dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None, enable_gqa: bool = False) -> Tensor:
    """`softmax(q @ k.T * scale + mask) @ v` over the last two axes, batch axes broadcast:
    `scale` defaults to 1/sqrt(E); a bool `attn_mask` is True where a query may attend to a
    key, a float one is added; `is_causal` masks each query's later keys; `enable_gqa` lets
    key and value have fewer heads (axis -3) than the query, each shared by a group."""
    query = as_tensor(query)
    key, value = as_tensor(key, query), as_tensor(value, query)
    _check_shapes(query, key, value)
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set "
                           "when is_causal=True; fold the causal triangle into the mask instead")
    if enable_gqa:
        key, value = _grouped(query, key, value)
    mask = (causal_mask(query.shape[-2], key.shape[-2], query) if is_causal
            else additive_mask(attn_mask, query, keep_where_true=True))
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    return attention(query, key, value, mask, dropout_p, scale)[0]
