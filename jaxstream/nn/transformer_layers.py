"""PyTorch's `TransformerEncoderLayer` and `TransformerDecoderLayer`: attention blocks and a
feed-forward block, each with a residual connection and a LayerNorm after it (or before
it, `norm_first`), with PyTorch's arguments, submodule names and order (so that a torch
state_dict loads, key for key), forward arguments and reprs.

Differences from PyTorch: there is no fused inference fast path (torch's gives the same
values); a query whose every key is masked out gets zeros from the attention where
PyTorch's gives NaN (see MultiheadAttention); `is_causal` is a hint that the mask is
causal, checked as PyTorch's (the mask must be given) but the mask is always applied.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..devices import Device
from ..tensor import Tensor
from .attention import MultiheadAttention
from .functional import gelu, relu
from .init import split_key
from .layers import Dropout, LayerNorm, Linear
from .module import Module

_ACTIVATIONS = {"relu": relu, "gelu": gelu}


def _activation(activation: str | Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    """The feed-forward block's activation: "relu" or "gelu" by name, or any callable."""
    if isinstance(activation, str):
        if activation not in _ACTIVATIONS:
            raise RuntimeError(f"activation should be relu/gelu, not {activation}")
        return _ACTIVATIONS[activation]
    if not callable(activation):
        raise TypeError(f"activation should be 'relu', 'gelu' or a callable (a function or a "
                        f"Module), not {type(activation).__name__}")
    return activation


class _TransformerLayer(Module):
    """What both layers hold, in PyTorch's order: one MultiheadAttention per name in
    `_ATTENTIONS`, the feed-forward block (`linear1`, `dropout`, `linear2`), then one
    LayerNorm and one Dropout per block (`norm1`.., `dropout1`..), then the activation
    (registered when it is a Module, as in PyTorch)."""

    _ATTENTIONS: tuple[str, ...] = ()

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable[[Tensor], Tensor] = relu,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, *, key: Any = None,
                 dtype: Any = None, backend: str | None = None,
                 device: str | Device | None = None) -> None:
        super().__init__()
        factory = {"dtype": dtype, "backend": backend, "device": device}
        *attention_keys, key1, key2 = split_key(key, len(self._ATTENTIONS) + 2)
        for name, attention_key in zip(self._ATTENTIONS, attention_keys, strict=True):
            setattr(self, name, MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                   batch_first=batch_first, key=attention_key,
                                                   **factory))
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, key=key1, **factory)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, key=key2, **factory)
        self.norm_first = norm_first
        blocks = range(1, len(self._ATTENTIONS) + 2)
        for index in blocks:
            setattr(self, f"norm{index}",
                    LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory))
        for index in blocks:
            setattr(self, f"dropout{index}", Dropout(dropout))
        self.activation = _activation(activation)

    def _block(self, index: int, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        """Block `index` around `sublayer`: `x + dropout(sublayer(norm(x)))` with
        `norm_first`, else `norm(x + dropout(sublayer(x)))` (Fig. 1 of arXiv:2002.04745)."""
        norm, drop = getattr(self, f"norm{index}"), getattr(self, f"dropout{index}")
        if self.norm_first:
            return x + drop(sublayer(norm(x)))
        return norm(x + drop(sublayer(x)))

    @staticmethod
    def _attend(attention: MultiheadAttention, x: Tensor, memory: Tensor, mask: Any,
                padding: Any, is_causal: bool) -> Tensor:
        return attention(x, memory, memory, key_padding_mask=padding, need_weights=False,
                         attn_mask=mask, is_causal=is_causal)[0]

    def _feed_forward(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(self.activation(self.linear1(x))))


class TransformerEncoderLayer(_TransformerLayer):
    """Self-attention then feed-forward. Inputs (S, N, E), or (N, S, E) with `batch_first`,
    or (S, E) unbatched."""

    _ATTENTIONS = ("self_attn",)

    def forward(self, src: Tensor, src_mask: Any = None, src_key_padding_mask: Any = None,
                is_causal: bool = False) -> Tensor:
        """A bool mask is True where attention is not allowed; a float one is added."""
        x = self._block(1, src, lambda y: self._attend(
            self.self_attn, y, y, src_mask, src_key_padding_mask, is_causal))
        return self._block(2, x, self._feed_forward)


class TransformerDecoderLayer(_TransformerLayer):
    """Self-attention over `tgt`, attention to `memory` (the encoder's output), then
    feed-forward. Inputs (T, N, E) and (S, N, E), or batch first, or unbatched."""

    _ATTENTIONS = ("self_attn", "multihead_attn")

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Any = None,
                memory_mask: Any = None, tgt_key_padding_mask: Any = None,
                memory_key_padding_mask: Any = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> Tensor:
        """Masks as TransformerEncoderLayer's: True (or -inf) where not allowed."""
        x = self._block(1, tgt, lambda y: self._attend(
            self.self_attn, y, y, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self._block(2, x, lambda y: self._attend(
            self.multihead_attn, y, memory, memory_mask, memory_key_padding_mask,
            memory_is_causal))
        return self._block(3, x, self._feed_forward)
