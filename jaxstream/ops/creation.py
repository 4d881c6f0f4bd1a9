"""Factories: tensors made from a shape (zeros, ones, random draws).

Every factory takes `dtype=`, `backend=`, `device=` and `requires_grad=`.
"""

from __future__ import annotations

from typing import Any

from ..backends import Backend, get_backend
from ..devices import Device
from ..tensor import Tensor, tensor


def _backend_for(backend: str | None, like: Tensor | None = None) -> Backend:
    if backend is not None:
        return get_backend(backend)
    return like.array_backend if like is not None else get_backend("numpy")


def zeros(shape: Any, *, dtype: Any = "float32", backend: str | None = None,
          requires_grad: bool = False, device: str | Device | None = None) -> Tensor:
    be = _backend_for(backend)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return tensor(be.xp.zeros(shape, dtype=be.dtype(dtype)), requires_grad=requires_grad,
                  device=device)


def ones(shape: Any, *, dtype: Any = "float32", backend: str | None = None,
         requires_grad: bool = False, device: str | Device | None = None) -> Tensor:
    be = _backend_for(backend)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return tensor(be.xp.ones(shape, dtype=be.dtype(dtype)), requires_grad=requires_grad,
                  device=device)


def zeros_like(x: Tensor, *, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    return tensor(x.array_backend.xp.zeros_like(x.array, dtype=dtype), requires_grad=requires_grad,
                  device=x.device)


def ones_like(x: Tensor, *, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    return tensor(x.array_backend.xp.ones_like(x.array, dtype=dtype), requires_grad=requires_grad,
                  device=x.device)


def randn(shape: Any, key_or_seed: Any = 0, *, dtype: Any = "float32", backend: str = "numpy",
          requires_grad: bool = False) -> Tensor:
    """Standard normal samples from an int seed (any backend) or a JAX PRNG key."""
    be = get_backend(backend)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return tensor(be.random_normal(shape, key_or_seed, dtype), requires_grad=requires_grad)
