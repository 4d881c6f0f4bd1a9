"""The global generator: a counter of draws under a seed, reproducible after `manual_seed`.

Note [The global generator]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
The generator's state is (seed, count): the n-th key after `manual_seed(s)` is
the key of draw n of seed s (Note [Keys of a generator state] in threefry.py).
`reserve(n)` hands out the next n draws at once, as the state they start
from, and moves the count past them under a lock, so that threads drawing at
once never share a key and a compiled program can take all of its draws in
one step. At import it is seeded with PyTorch's default seed, so a fresh
process draws the same values each run.

Keys are computed a block at a time on the host: eager code draws one after
another, and one NumPy pass over a block costs what one key would.
"""

from __future__ import annotations

import threading

import numpy as np

from .threefry import host_keys

DEFAULT_SEED = 67280421310721  # PyTorch's default seed
SEED_RANGE = 2**64
_BLOCK = 256

HostState = tuple[int, int]
"""(seed, count) of the global generator."""


class Generator:
    """A thread-safe source of fresh 64-bit keys (Note [The global generator])."""

    def __init__(self, seed: int) -> None:
        self._lock = threading.Lock()
        self._seed = 0
        self._count = 0
        self._block: tuple[int, int, list[int]] = (-1, -1, [])
        self.manual_seed(seed)

    def manual_seed(self, seed: int) -> None:
        """Restart the sequence of keys from `seed` (any int; negative ones wrap as in PyTorch)."""
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
            raise TypeError(f"manual_seed: the seed must be an int, got {type(seed).__name__}")
        with self._lock:
            self._seed = int(seed) % SEED_RANGE
            self._count = 0

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> HostState:
        """(seed, number of draws so far): with `set_state`, replays the draws that follow."""
        with self._lock:
            return self._seed, self._count

    def set_state(self, state: HostState) -> None:
        seed, count = (int(v) for v in state)
        with self._lock:
            self._seed, self._count = seed % SEED_RANGE, count

    def reserve(self, n: int) -> HostState:
        """The state the next `n` draws start from; the count moves past them."""
        with self._lock:
            state = self._seed, self._count
            self._count += n
        return state

    def key(self, state: HostState, n: int = 0) -> int:
        """The key of draw `n` of `state`, a 64-bit int."""
        seed, count = state[0], state[1] + n
        block = count // _BLOCK
        with self._lock:
            cached_seed, cached_block, keys = self._block
            if (cached_seed, cached_block) != (seed, block):
                keys = host_keys(seed, block * _BLOCK, _BLOCK)
                self._block = seed, block, keys
        return keys[count - block * _BLOCK]

    def next_seed(self) -> int:
        """A fresh 64-bit key."""
        return self.key(self.reserve(1))


default_generator = Generator(DEFAULT_SEED)


def manual_seed(seed: int) -> Generator:
    """Seed the global generator: the draws without `key=` that follow are reproducible."""
    default_generator.manual_seed(seed)
    return default_generator


def initial_seed() -> int:
    """The seed the global generator was last seeded with."""
    return default_generator.initial_seed()


def get_rng_state() -> HostState:
    """The global generator's state, for `set_rng_state` (e.g. to replay a dropout mask)."""
    return default_generator.get_state()


def set_rng_state(state: HostState) -> None:
    default_generator.set_state(state)


def next_seed() -> int:
    """A fresh 64-bit key from the global generator."""
    return default_generator.next_seed()
