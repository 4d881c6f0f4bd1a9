"""PyTorch's `TransformerEncoder`, `TransformerDecoder` (stacks of deep copies of one layer,
then an optional norm) and `Transformer` (an encoder and a decoder of the layers in
transformer_layers.py, every parameter of more than one dimension re-drawn by
`xavier_uniform_`), with PyTorch's arguments, submodule names, forward arguments, errors
and reprs.

Differences from PyTorch, besides the layers' (transformer_layers.py): nested tensors are
never used (`enable_nested_tensor` and `mask_check` are kept as attributes and
`use_nested_tensor` is False), so in inference, where PyTorch's TransformerEncoder packs
a batch with a key padding mask into a nested tensor, its outputs at the padded positions
are zeros before the final norm and ours are what its other path (training, or gradients
wanted) gives; the other positions agree. An `is_causal` of None is not worked out from
the mask: the hint changes no value here, since the mask is always applied. The initial
values are drawn from jaxstream's generator (or `key=`), from PyTorch's distributions.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from ..devices import Device
from ..ops.creation import full
from ..tensor import Tensor
from .containers import ModuleList
from .functional import relu
from .init import split_key, xavier_uniform_
from .layers import LayerNorm
from .module import Module
from .transformer_layers import TransformerDecoderLayer, TransformerEncoderLayer


class _LayerStack(Module):
    """`num_layers` independent deep copies of `layer` as `layers.0`, `layers.1`, ..., then
    `norm` (None: no final norm)."""

    def __init__(self, layer: Module, num_layers: int, norm: Module | None = None) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def _normed(self, x: Tensor) -> Tensor:
        return x if self.norm is None else self.norm(x)


class TransformerEncoder(_LayerStack):
    """A stack of encoder layers (PyTorch's arguments; Differences above)."""

    def __init__(self, encoder_layer: Module, num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True) -> None:
        super().__init__(encoder_layer, num_layers, norm)
        self.enable_nested_tensor, self.mask_check = enable_nested_tensor, mask_check
        self.use_nested_tensor = False

    def forward(self, src: Tensor, mask: Any = None, src_key_padding_mask: Any = None,
                is_causal: bool | None = None) -> Tensor:
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, is_causal=bool(is_causal),
                           src_key_padding_mask=src_key_padding_mask)
        return self._normed(output)


class TransformerDecoder(_LayerStack):
    """A stack of decoder layers, each attending to the same `memory`."""

    def __init__(self, decoder_layer: Module, num_layers: int,
                 norm: Module | None = None) -> None:
        super().__init__(decoder_layer, num_layers, norm)

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Any = None,
                memory_mask: Any = None, tgt_key_padding_mask: Any = None,
                memory_key_padding_mask: Any = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor:
        output = tgt
        for layer in self.layers:
            output = layer(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                           tgt_key_padding_mask=tgt_key_padding_mask,
                           memory_key_padding_mask=memory_key_padding_mask,
                           tgt_is_causal=bool(tgt_is_causal),
                           memory_is_causal=memory_is_causal)
        return self._normed(output)


class Transformer(Module):
    """An encoder over `src` and a decoder over `tgt` that attends to the encoder's output
    (`custom_encoder`/`custom_decoder` replace them). Inputs (S, N, E) and (T, N, E), or
    batch first, or unbatched; the output is shaped as `tgt`."""

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable[[Tensor], Tensor] = relu,
                 custom_encoder: Module | None = None, custom_decoder: Module | None = None,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, *, key: Any = None,
                 dtype: Any = None, backend: str | None = None,
                 device: str | Device | None = None) -> None:
        super().__init__()
        factory = {"dtype": dtype, "backend": backend, "device": device}
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                      batch_first, norm_first, bias)
        encoder_key, decoder_key, reset_key = split_key(key, 3)
        self.encoder = custom_encoder if custom_encoder is not None else TransformerEncoder(
            TransformerEncoderLayer(*layer_args, key=encoder_key, **factory),
            num_encoder_layers, LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory))
        self.decoder = custom_decoder if custom_decoder is not None else TransformerDecoder(
            TransformerDecoderLayer(*layer_args, key=decoder_key, **factory),
            num_decoder_layers, LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory))
        self._reset_parameters(reset_key)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Any = None, tgt_mask: Any = None,
                memory_mask: Any = None, src_key_padding_mask: Any = None,
                tgt_key_padding_mask: Any = None, memory_key_padding_mask: Any = None,
                src_is_causal: bool | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor:
        """Masks as the layers': True (or -inf) where attention is not allowed."""
        self._check_inputs(src, tgt)
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    def _check_inputs(self, src: Tensor, tgt: Tensor) -> None:
        """PyTorch's checks of the batch and feature sizes, the shapes named."""
        shapes = f"src of shape {tuple(src.shape)}, tgt of shape {tuple(tgt.shape)}"
        batch_dim = 0 if self.batch_first else 1
        if src.ndim == 3 and src.shape[batch_dim] != tgt.shape[batch_dim]:
            raise RuntimeError(f"the batch number of src and tgt must be equal ({shapes}, "
                               f"batch_first={self.batch_first})")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError(f"the feature number of src and tgt must be equal to d_model "
                               f"({shapes}, d_model={self.d_model})")

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: str | Device | None = None,
                                        dtype: Any = None, *,
                                        backend: str | None = None) -> Tensor:
        """The causal mask (sz, sz): -inf above the diagonal (a query's later keys), 0 on
        and below it."""
        return full((sz, sz), float("-inf"), dtype=dtype, backend=backend,
                    device=device).triu(1)

    def _reset_parameters(self, key: Any = None) -> None:
        """Re-draw every parameter of more than one dimension by `xavier_uniform_`."""
        matrices = [p for p in self.parameters() if p.ndim > 1]
        for matrix, matrix_key in zip(matrices, split_key(key, len(matrices)), strict=True):
            xavier_uniform_(matrix, key=matrix_key)
