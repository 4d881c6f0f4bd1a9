"""The layers: Linear, LayerNorm, Embedding, Dropout, the activations, Identity and the
reshaping layers Flatten and Unflatten (the containers are in containers.py).

Each layer with parameters takes `key=` (pure initialisation; without it the
global generator draws, so that `js.manual_seed` rebuilds a model identically)
and the factory arguments `dtype=`, `backend=`, `device=`.
"""

from __future__ import annotations

import math
from typing import Any

from ..autograd.grad_mode import no_grad
from ..devices import Device
from ..ops import functional as F
from ..ops.creation import ones, zeros
from ..ops.embedding import checked_padding_idx, embedding
from ..ops.normalization import layer_norm
from ..ops.shapes import normalize_axis
from ..tensor import Tensor
from .functional import dropout, relu, silu
from .init import kaiming_uniform, split_key, standard_normal
from .module import Module
from .parameter import Parameter


def _factory(dtype: Any, backend: str | None, device: str | Device | None) -> dict[str, Any]:
    return {"dtype": dtype, "backend": backend, "device": device}


class Linear(Module):
    """`y = x @ weight.T + bias`, weight of shape (out_features, in_features), torch's init."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *,
                 key: Any = None, dtype: Any = None, backend: str | None = None,
                 device: str | Device | None = None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        factory = _factory(dtype, backend, device)
        weight_key, bias_key = split_key(key, 2)
        self.weight = kaiming_uniform((out_features, in_features), in_features,
                                      key=weight_key, **factory)
        self.bias = (
            kaiming_uniform((out_features,), in_features, key=bias_key, **factory) if bias
            else None
        )

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class LayerNorm(Module):
    """Normalise over the trailing `normalized_shape` axes (biased variance, as torch)."""

    def __init__(self, normalized_shape: int | tuple[int, ...], eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True, *, dtype: Any = None,
                 backend: str | None = None, device: str | Device | None = None) -> None:
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        shape = self.normalized_shape = tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        factory = _factory(dtype, backend, device)
        self.weight = Parameter(ones(shape, **factory)) if elementwise_affine else None
        self.bias = Parameter(zeros(shape, **factory)) if elementwise_affine and bias else None

    def forward(self, x: Tensor) -> Tensor:
        return layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine="
                f"{self.elementwise_affine}, bias={self.bias is not None}")


class Embedding(Module):
    """A lookup table of `num_embeddings` vectors of size `embedding_dim`, init N(0, 1); the
    row at `padding_idx` starts at zero and gets no gradient."""

    def __init__(self, num_embeddings: int, embedding_dim: int,
                 padding_idx: int | None = None, *, key: Any = None, dtype: Any = None,
                 backend: str | None = None, device: str | Device | None = None) -> None:
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.weight = standard_normal((num_embeddings, embedding_dim), key=key,
                                      **_factory(dtype, backend, device))
        self.padding_idx = checked_padding_idx(padding_idx, num_embeddings)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, indices: Any) -> Tensor:
        """Rows of the table; the gradient of a row used several times is the sum."""
        return embedding(indices, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        padding = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{padding}"


class Dropout(Module):
    """Zero each element with probability `p` and scale the rest by 1/(1-p); identity in eval.

    The mask comes from the call's `key=` as in `js.dropout` (pure), else from the current
    draw source (Note [Random keys] in ops/random.py). The key is given per call, not kept:
    a key held by the layer would be static data of the model's pytree, the same mask on
    every call of every program that reads the model.
    """

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, x: Tensor, key: Any = None) -> Tensor:
        return dropout(x, self.p, self.training, self.inplace, key=key)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class ReLU(Module):
    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return relu(x, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class GELU(Module):
    """GELU, exact (`approximate="none"`) or with the tanh approximation (`"tanh"`)."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Tanh(Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.tanh(x)


class Sigmoid(Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.sigmoid(x)


class SiLU(Module):
    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return silu(x, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Identity(Module):
    """Returns its input; takes and ignores any constructor arguments, as PyTorch's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, x: Any) -> Any:
        return x


class Flatten(Module):
    """Merge dims `start_dim` to `end_dim` (inclusive) into one; the batch dim 0 stays."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dim `dim` into `unflattened_size` (one entry may be -1, inferred)."""

    def __init__(self, dim: int, unflattened_size: tuple[int, ...] | list[int]) -> None:
        super().__init__()
        if not isinstance(dim, int):
            raise TypeError(f"Unflatten: dim must be an int, but got {type(dim).__name__}")
        if not isinstance(unflattened_size, tuple | list):
            raise TypeError(
                f"unflattened_size must be a tuple of ints, but found type "
                f"{type(unflattened_size).__name__}"
            )
        for position, size in enumerate(unflattened_size):
            if not isinstance(size, int):
                raise TypeError(
                    f"unflattened_size must be tuple of ints, but found element of type "
                    f"{type(size).__name__} at pos {position}"
                )
        self.dim = dim
        # A tuple, as static pytree data must be hashable.
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, x: Tensor) -> Tensor:
        dim = normalize_axis("unflatten", self.dim, x.shape)
        sizes = _unflattened_sizes(x.shape[dim], self.unflattened_size, dim)
        return x.reshape((*x.shape[:dim], *sizes, *x.shape[dim + 1:]))

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


def _unflattened_sizes(size: int, sizes: tuple[int, ...], dim: int) -> tuple[int, ...]:
    """`sizes` with its -1 inferred, checked to multiply up to `size`, PyTorch's errors."""
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    if sizes.count(-1) > 1:
        raise RuntimeError(f"unflatten: only one dimension can be inferred, got sizes {sizes}")
    known = math.prod(s for s in sizes if s != -1)
    if -1 in sizes and known and size % known == 0:
        sizes = tuple(size // known if s == -1 else s for s in sizes)
    if math.prod(sizes) != size:
        raise RuntimeError(
            f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim "
            f"{dim} ({size}) in the input tensor"
        )
    return sizes
