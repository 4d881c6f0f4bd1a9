"""The layers: Linear, Sequential, LayerNorm, Embedding, Dropout and the activations.

Each layer with parameters takes `key=` (pure initialisation; without it the
global generator draws, so that `js.manual_seed` rebuilds a model identically)
and the factory arguments `dtype=`, `backend=`, `device=`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..devices import Device
from ..ops import functional as F
from ..ops import neural
from ..ops.creation import ones, zeros
from ..tensor import Tensor
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


class Sequential(Module):
    """Layers applied in order; indexing, `len` and iteration reach the layers."""

    def __init__(self, *layers: Module) -> None:
        super().__init__()
        for index, layer in enumerate(layers):
            setattr(self, str(index), layer)

    def forward(self, x: Any) -> Any:
        for layer in self:
            x = layer(x)
        return x

    def __getitem__(self, index: int | slice) -> Module:
        layers = list(self.children())
        return Sequential(*layers[index]) if isinstance(index, slice) else layers[index]

    def __len__(self) -> int:
        return len(self.__dict__["_registered"])

    def __iter__(self) -> Iterator[Module]:
        return self.children()


class LayerNorm(Module):
    """Normalise over the trailing `normalized_shape` axes (biased variance, as torch)."""

    def __init__(self, normalized_shape: int | tuple[int, ...], eps: float = 1e-5,
                 elementwise_affine: bool = True, *, dtype: Any = None,
                 backend: str | None = None, device: str | Device | None = None) -> None:
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        shape = self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        factory = _factory(dtype, backend, device)
        self.weight = Parameter(ones(shape, **factory)) if elementwise_affine else None
        self.bias = Parameter(zeros(shape, **factory)) if elementwise_affine else None

    def forward(self, x: Tensor) -> Tensor:
        shape = self.normalized_shape
        if tuple(x.shape[x.ndim - len(shape):]) != shape:
            raise RuntimeError(
                f"LayerNorm: expected input with shape [*, {', '.join(map(str, shape))}], "
                f"but got input of size {list(x.shape)}"
            )
        axes = tuple(range(-len(shape), 0))
        centred = x - x.mean(axis=axes, keepdims=True)
        variance = (centred * centred).mean(axis=axes, keepdims=True)
        y = centred / (variance + self.eps).sqrt()
        return y if self.weight is None else y * self.weight + self.bias

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"


class Embedding(Module):
    """A lookup table of `num_embeddings` vectors of size `embedding_dim`, init N(0, 1)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, *, key: Any = None,
                 dtype: Any = None, backend: str | None = None,
                 device: str | Device | None = None) -> None:
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.weight = standard_normal((num_embeddings, embedding_dim), key=key,
                                      **_factory(dtype, backend, device))

    def forward(self, indices: Any) -> Tensor:
        """Rows of the table; the gradient of a row used several times is the sum."""
        return self.weight[indices]

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"


class Dropout(Module):
    """Zero each element with probability `p` and scale the rest by 1/(1-p); identity in eval.

    The mask comes from the call's `key=` as in `js.dropout` (pure), else from the current
    draw source (Note [Random keys] in ops/random.py). The key is given per call, not kept:
    a key held by the layer would be static data of the model's pytree, the same mask on
    every call of every program that reads the model.
    """

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p

    def forward(self, x: Tensor, key: Any = None) -> Tensor:
        return neural.dropout(x, self.p, training=self.training, key=key)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class ReLU(Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x)


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
    def forward(self, x: Tensor) -> Tensor:
        return F.silu(x)
