"""The random factories: rand, randn, randint, uniform, and the shape-first draws the library
makes itself (`gaussian`, `bernoulli_mask`); and draw keys. PyTorch's `normal` and
`bernoulli`, whose first argument is a tensor (or a mean), are in sampling.py.

Note [Random keys]
~~~~~~~~~~~~~~~~~~
Every draw is a pure function of a key: an int seed (on any backend), a JAX
PRNG key (typed, or its uint32 key data), or a tensor holding either. A draw
given `key=` uses that key and nothing else: the same key gives the same
values, and no generator state is consumed. A draw without `key=` takes the
next key of its thread's draw source: the global generator (Note [The global
generator] in randomness/generator.py), or the source that checkpoint,
`js.compile` or `to_jax` put in place (Note [Where a draw takes its key] in
randomness/sources.py).

A key becomes a NumPy (or CuPy) `default_rng(seed)`, or on JAX the key whose
two uint32 words are the seed's halves (`backends.jax.prng_key`, the key that
`jax.random.PRNGKey(seed)` gives with x64 on). A JAX key is used as is on JAX;
elsewhere its key data, read as one integer, is the seed. The same seed gives
different values on NumPy and on JAX; each is reproducible. Inside a program
(`js.compile`, `to_jax` under `jax.jit`) keys are traced: only JAX draws can
take them.

Code that draws its own randomness (dropout's mask, nn's initialisers, the samplers of
sampling.py) calls `uniform`, `gaussian` or `bernoulli_mask` here with the user's `key=` (or
None).
"""

from __future__ import annotations

import operator
from typing import Any

import jax
import numpy as np

from ..backends import Backend, get_backend
from ..devices import Device
from ..randomness.generator import (
    DEFAULT_SEED,
    Generator,
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    next_seed,
    set_rng_state,
)
from ..randomness.sources import next_key
from ..tensor import Tensor, is_floating
from .creation import factory_backend, made, shape_of, value_dtype

__all__ = [
    "DEFAULT_SEED", "Generator", "bernoulli_mask", "default_generator", "gaussian",
    "get_rng_state", "initial_seed", "manual_seed", "next_seed", "rand", "rand_like", "randint",
    "randn", "randn_like", "resolve_key", "set_rng_state", "uniform",
]

_JAX = get_backend("jax")
_KEY_KINDS = (
    "key must be an int seed, a JAX PRNG key or None (the global generator), or a tensor "
    "holding an int seed or a JAX PRNG key (typed, or its uint32 key data of shape (2,))"
)


def resolve_key(key: Any) -> int | jax.Array:
    """The key a draw uses: `key` itself (an int, a JAX key or a tensor holding one), or the
    next key of the current draw source for None (Note [Random keys])."""
    if key is None:
        return next_key()
    if isinstance(key, Tensor):
        return _tensor_key(key)
    if isinstance(key, jax.Array) or (
        isinstance(key, int | np.integer) and not isinstance(key, bool)
    ):
        return key
    raise TypeError(f"{_KEY_KINDS}; got {type(key).__name__}")


def _tensor_key(t: Tensor) -> int | jax.Array:
    """The key a tensor holds: a JAX key as is, an integer scalar or host key data as an int."""
    array = t.array
    if jax.dtypes.issubdtype(t.dtype, jax.dtypes.prng_key):
        return array
    if np.issubdtype(t.dtype, np.integer) and t.shape == () and not _traced(array):
        return int(array)
    if np.dtype(t.dtype) == np.uint32 and t.shape == (2,):
        if isinstance(array, jax.Array):
            return array
        hi, lo = (int(w) for w in np.asarray(array))
        return hi << 32 | lo
    raise TypeError(
        f"{_KEY_KINDS}; got a tensor of shape {t.shape} and dtype {t.dtype}"
        + (" holding a traced value (a traced seed cannot become a key: pass a JAX PRNG key, "
           "e.g. jax.random.key(seed))" if _traced(array) else "")
    )


def _traced(value: Any) -> bool:
    return isinstance(value, jax.core.Tracer)


def draw_key(be: Backend, key: Any, caller: str) -> Any:
    """The key of a draw on `be` (`resolve_key`), refused where it is traced and `be` is not
    JAX."""
    key = resolve_key(key)
    if _traced(key) and be is not _JAX:
        raise TypeError(
            f"{caller}: the key of this draw is traced (inside js.compile, or a to_jax "
            f"function under a JAX transformation), and a {be.name} draw cannot take a "
            f"traced key. Draw on JAX: pass backend='jax' (or draw like a JAX tensor, "
            f"e.g. rand_like(x))"
        )
    return key


def _float_dtype(be: Backend, dtype: Any, caller: str) -> Any:
    dtype = value_dtype(be, 0.0, dtype)
    if not is_floating(dtype):
        raise TypeError(f"{caller}: draws floating values; dtype {dtype} is not a floating dtype")
    return dtype


def _shape_and_key(dims: tuple, key: Any, caller: str) -> tuple[tuple[int, ...], Any]:
    """`randn(2, 3)`, `randn((2, 3))`, and the older `randn((2, 3), key)`."""
    if len(dims) == 2 and isinstance(dims[0], tuple | list):
        if key is not None:
            raise TypeError(f"{caller}: key given twice, positionally and as key=")
        dims, key = dims[:1], dims[1]
    return shape_of(dims, caller), key


def uniform(shape: Any, low: float = 0.0, high: float = 1.0, *, key: Any = None,
            dtype: Any = None, backend: str | None = None, device: str | Device | None = None,
            requires_grad: bool = False) -> Tensor:
    """Samples from the uniform distribution on [low, high) (Note [Random keys] for `key`)."""
    be = factory_backend(backend, device)
    dtype = _float_dtype(be, dtype, "uniform")
    shape, key = shape_of((shape,), "uniform"), draw_key(be, key, "uniform")

    def draw() -> Any:
        array = be.random_uniform(shape, key, dtype)
        return array if (low, high) == (0.0, 1.0) else array * (high - low) + low

    return made(draw, be, device, requires_grad)


def gaussian(shape: Any, mean: float = 0.0, std: float = 1.0, *, key: Any = None,
             dtype: Any = None, backend: str | None = None, device: str | Device | None = None,
             requires_grad: bool = False, caller: str = "normal") -> Tensor:
    """Samples of `shape` from N(mean, std**2) (Note [Random keys] for `key`)."""
    be = factory_backend(backend, device)
    dtype = _float_dtype(be, dtype, caller)
    shape, key = shape_of((shape,), caller), draw_key(be, key, caller)

    def draw() -> Any:
        array = be.random_normal(shape, key, dtype)
        return array if (mean, std) == (0.0, 1.0) else array * std + mean

    return made(draw, be, device, requires_grad)


def bernoulli_mask(shape: Any, p: float, *, key: Any = None, backend: str | None = None,
                   device: str | Device | None = None) -> Tensor:
    """A boolean tensor, each element True with probability `p` (a dropout mask's draw)."""
    if not 0.0 <= p <= 1.0:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
    u = uniform(shape, key=key, dtype="float32", backend=backend, device=device)
    return made(lambda: u.array < p, u.array_backend, u.device, False)


def rand(*shape: Any, key: Any = None, dtype: Any = None, backend: str | None = None,
         device: str | Device | None = None, requires_grad: bool = False) -> Tensor:
    """Uniform samples in [0, 1): `rand(2, 3)`, `rand((2, 3))`, `rand((2, 3), key)`."""
    shape, key = _shape_and_key(shape, key, "rand")
    return uniform(shape, key=key, dtype=dtype, backend=backend, device=device,
                   requires_grad=requires_grad)


def randn(*shape: Any, key: Any = None, dtype: Any = None, backend: str | None = None,
          device: str | Device | None = None, requires_grad: bool = False) -> Tensor:
    """Standard normal samples: `randn(2, 3)`, `randn((2, 3))`, `randn((2, 3), key)`."""
    shape, key = _shape_and_key(shape, key, "randn")
    return gaussian(shape, key=key, dtype=dtype, backend=backend, device=device,
                    requires_grad=requires_grad, caller="randn")


def randint(low: int, high: Any = None, shape: Any = None, *, key: Any = None,
            dtype: Any = None, backend: str | None = None,
            device: str | Device | None = None) -> Tensor:
    """Integers drawn uniformly from [low, high); `randint(high, shape)` draws from [0, high).

    int64 unless `dtype=` says otherwise (int32 on JAX without x64).
    """
    if shape is None:
        low, high, shape = 0, low, high
    low, high = operator.index(low), operator.index(high)
    if low >= high:
        raise ValueError(f"randint: expected low < high, got low={low} and high={high}")
    be = factory_backend(backend, device)
    dtype = value_dtype(be, 0, dtype)
    shape, key = shape_of((shape,), "randint"), draw_key(be, key, "randint")
    return made(lambda: be.random_integers(shape, key, dtype, low, high), be, device, False)


def _like(x: Tensor, dtype: Any) -> dict:
    return {"dtype": x.dtype if dtype is None else dtype, "backend": x.backend, "device": x.device}


def rand_like(x: Tensor, *, key: Any = None, dtype: Any = None,
              requires_grad: bool = False) -> Tensor:
    """`rand(x.shape)` on x's backend and device, in x's dtype unless told."""
    return uniform(x.shape, key=key, requires_grad=requires_grad, **_like(x, dtype))


def randn_like(x: Tensor, *, key: Any = None, dtype: Any = None,
               requires_grad: bool = False) -> Tensor:
    """`randn(x.shape)` on x's backend and device, in x's dtype unless told."""
    return gaussian(x.shape, key=key, requires_grad=requires_grad, caller="randn_like",
                    **_like(x, dtype))
