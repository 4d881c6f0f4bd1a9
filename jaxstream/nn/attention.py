"""MultiheadAttention with PyTorch's arguments, parameter names (so that its state_dict loads
from torch's), initialisation, masks and results."""

from __future__ import annotations

import math
from typing import Any

from ..devices import Device
from ..ops.attention import additive_mask, attention
from ..ops.creation import zeros
from ..ops.functional import linear
from ..ops.random import uniform
from ..tensor import Tensor
from .init import split_key
from .layers import Linear
from .module import Module
from .parameter import Parameter


def _xavier_uniform(shape: tuple[int, int], key: Any, factory: dict) -> Parameter:
    """U(-a, a) with a = sqrt(6 / (fan_in + fan_out)): torch's `xavier_uniform_`."""
    bound = math.sqrt(6.0 / (shape[0] + shape[1]))
    return Parameter(uniform(shape, -bound, bound, key=key, **factory))


class NonDynamicallyQuantizableLinear(Linear):
    """A Linear by PyTorch's name for MultiheadAttention's `out_proj`, so that reprs match."""


class MultiheadAttention(Module):
    """Attention over `num_heads` heads of size `embed_dim // num_heads`: the query, key and
    value projected (`in_proj_weight`, or `q/k/v_proj_weight` where `kdim`/`vdim` differ
    from `embed_dim`), attended per head, joined and projected by `out_proj`. Inputs are
    (L, N, E), or (N, L, E) with `batch_first`, or (L, E) unbatched."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, *, key: Any = None,
                 dtype: Any = None, backend: str | None = None,
                 device: str | Device | None = None) -> None:
        super().__init__()
        if embed_dim % num_heads:
            raise AssertionError(f"embed_dim must be divisible by num_heads (embed_dim="
                                 f"{embed_dim}, num_heads={num_heads})")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv and add_zero_attn are "
                                      "not supported; append the extra key and value rows "
                                      "yourself")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.head_dim, self.batch_first = embed_dim // num_heads, batch_first
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        factory = {"dtype": dtype, "backend": backend, "device": device}
        keys = split_key(key, 4)
        if self.kdim == embed_dim and self.vdim == embed_dim:
            self.in_proj_weight = _xavier_uniform((3 * embed_dim, embed_dim), keys[0], factory)
        else:  # PyTorch's names: in_proj_weight None, one weight per projection
            self.in_proj_weight = None
            self.q_proj_weight = _xavier_uniform((embed_dim, embed_dim), keys[0], factory)
            self.k_proj_weight = _xavier_uniform((embed_dim, self.kdim), keys[1], factory)
            self.v_proj_weight = _xavier_uniform((embed_dim, self.vdim), keys[2], factory)
        self.in_proj_bias = Parameter(zeros((3 * embed_dim,), **factory)) if bias else None
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias,
                                                        key=keys[3], **factory)
        if bias:
            self.out_proj.bias = Parameter(zeros((embed_dim,), **factory))

    def _projections(self) -> list[tuple[Tensor, Tensor | None]]:
        """The (weight, bias) of the query's, the key's and the value's projection."""
        weights = (self.in_proj_weight.chunk(3) if self.in_proj_weight is not None
                   else (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight))
        biases = (None,) * 3 if self.in_proj_bias is None else self.in_proj_bias.chunk(3)
        return list(zip(weights, biases, strict=True))

    def _heads(self, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        """(L, N, E_in) projected and split into heads: (N, H, L, head_dim)."""
        length, batch = x.shape[:2]
        y = linear(x, weight, bias).reshape(length, batch, self.num_heads, self.head_dim)
        return y.permute(1, 2, 0, 3)

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Any = None, need_weights: bool = True, attn_mask: Any = None,
                average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        """`(output, weights)`: weights (N, L, S) averaged over the heads, or (N, H, L, S),
        or None without `need_weights`. A bool mask is True where a key is masked out, a
        float one is added; `is_causal` is a hint that `attn_mask` is causal (it is needed)."""
        if query.shape[-1] != self.embed_dim:
            raise AssertionError(f"was expecting embedding dimension of {self.embed_dim}, but "
                                 f"got {query.shape[-1]} (query of shape {query.shape})")
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint (is_causal is "
                               "a hint: give the causal mask as attn_mask too)")
        batched = query.ndim == 3
        inputs = [t.transpose(0, 1) if self.batch_first else t for t in (query, key, value)]
        if not batched:
            inputs = [t.unsqueeze(1) for t in inputs]
        q, k, v = (self._heads(t, *p) for t, p in zip(inputs, self._projections(), strict=True))
        mask = self._mask(q, key_padding_mask, attn_mask)
        dropout_p = self.dropout if self.training else 0.0
        out, weights = attention(q, k, v, mask, dropout_p, 1.0 / math.sqrt(self.head_dim))
        batch, _, length, _ = out.shape
        out = self.out_proj(out.permute(2, 0, 1, 3).reshape(length, batch, self.embed_dim))
        if self.batch_first and batched:
            out = out.transpose(0, 1)
        if not need_weights:
            return (out if batched else out.squeeze(1)), None
        if average_attn_weights:
            weights = weights.mean(axis=1)
        return (out, weights) if batched else (out.squeeze(1), weights.squeeze(0))

    def _mask(self, q: Tensor, key_padding_mask: Any, attn_mask: Any) -> Tensor | None:
        """The two masks as one added to the (N, H, L, S) scores, or None."""
        batch, heads, length, _ = q.shape
        masks = []
        if key_padding_mask is not None:
            padding = additive_mask(key_padding_mask, q, keep_where_true=False)
            masks.append(padding.reshape(batch, 1, 1, padding.shape[-1]))
        if attn_mask is not None:
            mask = additive_mask(attn_mask, q, keep_where_true=False)
            masks.append(mask if mask.ndim == 2 else mask.reshape(batch, heads, length, -1))
        if not masks:
            return None
        return masks[0] if len(masks) == 1 else masks[0] + masks[1]
