"""EmbeddingBag: a lookup table whose rows are summed, averaged or maxed per bag of
indices (`F.embedding_bag`), with PyTorch's arguments, initialisation N(0, 1), repr and
`from_pretrained`.

`max_norm` and `scale_grad_by_freq` are kept and printed, but `F.embedding_bag` refuses
them when the layer is called (NotImplementedError, saying what to do instead); `sparse`
is accepted and the gradient is dense.
"""

from __future__ import annotations

from typing import Any

from ..autograd.grad_mode import no_grad
from ..devices import Device
from ..ops.embedding import checked_padding_idx, embedding_bag
from ..tensor import Tensor
from .init import standard_normal
from .module import Module
from .parameter import Parameter


class EmbeddingBag(Module):
    """`num_embeddings` vectors of size `embedding_dim`; each bag of indices gives the sum,
    mean or max of its rows. The row at `padding_idx` starts at zero and is left out of
    its bags."""

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                 sparse: bool = False, _weight: Tensor | None = None,
                 include_last_offset: bool = False, padding_idx: int | None = None, *,
                 key: Any = None, dtype: Any = None, backend: str | None = None,
                 device: str | Device | None = None) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.padding_idx = checked_padding_idx(padding_idx, num_embeddings, "padding_idx")
        if _weight is None:
            self.weight = standard_normal((num_embeddings, embedding_dim), key=key,
                                          dtype=dtype, backend=backend, device=device)
            if self.padding_idx is not None:
                with no_grad():
                    self.weight[self.padding_idx] = 0.0
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise AssertionError(f"Shape of weight does not match num_embeddings and "
                                     f"embedding_dim (a weight of shape {tuple(_weight.shape)} "
                                     f"for ({num_embeddings}, {embedding_dim}))")
            self.weight = Parameter(_weight)
        self.mode, self.sparse = mode, sparse
        self.include_last_offset = include_last_offset

    def forward(self, input: Any, offsets: Any = None,  # noqa: A002  (PyTorch's names)
                per_sample_weights: Any = None) -> Tensor:
        return embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                             self.scale_grad_by_freq, self.mode, self.sparse,
                             per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings!r}, {self.embedding_dim!r}"
        if self.max_norm is not None:
            text += f", max_norm={self.max_norm!r}"
        if self.norm_type != 2:
            text += f", norm_type={self.norm_type!r}"
        if self.scale_grad_by_freq is not False:
            text += f", scale_grad_by_freq={self.scale_grad_by_freq!r}"
        text += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx!r}"
        return text

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True,
                        max_norm: float | None = None, norm_type: float = 2.0,
                        scale_grad_by_freq: bool = False, mode: str = "mean",
                        sparse: bool = False, include_last_offset: bool = False,
                        padding_idx: int | None = None) -> EmbeddingBag:
        """A layer holding `embeddings` (2-D, shared, not copied), frozen unless `freeze`
        is False; its padding row is left as it is."""
        if embeddings.ndim != 2:
            raise AssertionError(f"Embeddings parameter is expected to be 2-dimensional (got "
                                 f"one of shape {tuple(embeddings.shape)})")
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
                  embeddings, include_last_offset, padding_idx)
        bag.weight.requires_grad = not freeze
        return bag
