"""The global generator and the random factories: rand, randn, randint, uniform, normal, bernoulli.

Note [Random keys]
~~~~~~~~~~~~~~~~~~
Every draw is a pure function of a key: an int seed (on any backend) or a JAX
PRNG key. A draw given `key=` uses that key and nothing else: the same key
gives the same values, and no generator state is consumed. A draw without
`key=` asks the global generator for a fresh 64-bit seed (`next_seed()`).

The generator is a counter: the n-th seed after `manual_seed(s)` is 64 bits
of `np.random.SeedSequence(s, spawn_key=(n,))`, so seeds are independent of
each other, the sequence is reproducible after `manual_seed`, and a lock
keeps it one sequence across threads. At import it is seeded with PyTorch's
default seed, so a fresh process draws the same values each run.

A seed becomes a NumPy (or CuPy) `default_rng(seed)`, or on JAX the key whose
two uint32 words are the seed's halves (`backends.jax.prng_key`, the key that
`jax.random.PRNGKey(seed)` gives with x64 on). A JAX key is used as is on JAX;
elsewhere its key data, read as one integer, is the seed. The same seed gives
different values on NumPy and on JAX; each is reproducible.

Code that draws its own randomness (dropout's mask, nn's initialisers) calls
`uniform`, `normal` or `bernoulli` here with the user's `key=` (or None).
"""

from __future__ import annotations

import operator
import threading
from typing import Any

import jax
import numpy as np

from ..backends import Backend
from ..devices import Device
from ..tensor import Tensor, is_floating
from .creation import factory_backend, made, shape_of, value_dtype

DEFAULT_SEED = 67280421310721  # PyTorch's default seed
_SEED_RANGE = 2**64


class Generator:
    """A thread-safe source of fresh 64-bit seeds (Note [Random keys])."""

    def __init__(self, seed: int) -> None:
        self._lock = threading.Lock()
        self._seed = 0
        self._count = 0
        self.manual_seed(seed)

    def manual_seed(self, seed: int) -> None:
        """Restart the sequence of seeds from `seed` (any int; negative ones wrap as in PyTorch)."""
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
            raise TypeError(f"manual_seed: the seed must be an int, got {type(seed).__name__}")
        with self._lock:
            self._seed = int(seed) % _SEED_RANGE
            self._count = 0

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> tuple[int, int]:
        """(seed, number of draws so far): with `set_state`, replays the draws that follow."""
        with self._lock:
            return self._seed, self._count

    def set_state(self, state: tuple[int, int]) -> None:
        with self._lock:
            self._seed, self._count = (int(v) for v in state)

    def next_seed(self) -> int:
        with self._lock:
            seed, n = self._seed, self._count
            self._count += 1
        hi, lo = np.random.SeedSequence(seed, spawn_key=(n,)).generate_state(2, np.uint32)
        return int(hi) << 32 | int(lo)


default_generator = Generator(DEFAULT_SEED)


def manual_seed(seed: int) -> Generator:
    """Seed the global generator: the draws without `key=` that follow are reproducible."""
    default_generator.manual_seed(seed)
    return default_generator


def initial_seed() -> int:
    """The seed the global generator was last seeded with."""
    return default_generator.initial_seed()


def get_rng_state() -> tuple[int, int]:
    """The global generator's state, for `set_rng_state` (e.g. to replay a dropout mask)."""
    return default_generator.get_state()


def set_rng_state(state: tuple[int, int]) -> None:
    default_generator.set_state(state)


def next_seed() -> int:
    """A fresh 64-bit seed from the global generator."""
    return default_generator.next_seed()


def resolve_key(key: Any) -> int | jax.Array:
    """The key a draw uses: `key` itself (an int or a JAX key), or a fresh seed for None."""
    if key is None:
        return next_seed()
    if isinstance(key, jax.Array) or (
        isinstance(key, int | np.integer) and not isinstance(key, bool)
    ):
        return key
    raise TypeError(
        f"key must be an int seed, a JAX PRNG key or None (the global generator), "
        f"got {type(key).__name__}"
    )


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
    be = factory_backend(backend)
    dtype = _float_dtype(be, dtype, "uniform")
    shape, key = shape_of((shape,), "uniform"), resolve_key(key)

    def draw() -> Any:
        array = be.random_uniform(shape, key, dtype)
        return array if (low, high) == (0.0, 1.0) else array * (high - low) + low

    return made(draw, be, device, requires_grad)


def normal(shape: Any, mean: float = 0.0, std: float = 1.0, *, key: Any = None,
           dtype: Any = None, backend: str | None = None, device: str | Device | None = None,
           requires_grad: bool = False) -> Tensor:
    """Samples from the normal distribution N(mean, std**2) (Note [Random keys] for `key`)."""
    be = factory_backend(backend)
    dtype = _float_dtype(be, dtype, "normal")
    shape, key = shape_of((shape,), "normal"), resolve_key(key)

    def draw() -> Any:
        array = be.random_normal(shape, key, dtype)
        return array if (mean, std) == (0.0, 1.0) else array * std + mean

    return made(draw, be, device, requires_grad)


def bernoulli(shape: Any, p: float, *, key: Any = None, backend: str | None = None,
              device: str | Device | None = None) -> Tensor:
    """A boolean tensor, each element True with probability `p` (a dropout mask's draw)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"bernoulli: p must be a probability in [0, 1], got {p}")
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
    return normal(shape, key=key, dtype=dtype, backend=backend, device=device,
                  requires_grad=requires_grad)


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
    be = factory_backend(backend)
    dtype = value_dtype(be, 0, dtype)
    shape, key = shape_of((shape,), "randint"), resolve_key(key)
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
    return normal(x.shape, key=key, requires_grad=requires_grad, **_like(x, dtype))
