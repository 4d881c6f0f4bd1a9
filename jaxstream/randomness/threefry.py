"""The key of the n-th draw of a generator state, computed alike on the host and in a program.

Note [Keys of a generator state]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A generator state is (seed, count), two 64-bit integers; the key of its n-th
draw is Threefry-2x32 (20 rounds; Salmon et al., "Parallel random numbers: as
easy as 1, 2, 3", 2011) of the 64-bit counter `count + n` under the 64-bit key
`seed`. A block cipher of the counter: distinct draws of one seed get distinct
keys, and any key is computed directly, without the ones before it.

The same function runs on NumPy arrays (the global generator, on the host) and
on JAX arrays (a compiled program, whose input is the state), in uint32
arithmetic only, so both give the same bits: a compiled step draws what the
eager step would have drawn from the same state (Note [Where a draw takes its
key] in sources.py). The two words of a key are the two words of a JAX PRNG key
(`backends.jax.prng_key` of the seed `hi << 32 | lo`).

A state crosses a program's boundary as four uint32 words: seed high, seed
low, count high, count low (`state_words`).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA
_WORD = 0xFFFFFFFF


def threefry2x32(key: tuple[Any, Any], counter: tuple[Any, Any]) -> tuple[Any, Any]:
    """Threefry-2x32 of `counter` under `key`, word pairs of uint32 arrays (NumPy or JAX)."""
    k0, k1 = key
    schedule = (k0, k1, k0 ^ k1 ^ _PARITY)
    x0, x1 = counter[0] + k0, counter[1] + k1
    for block in range(5):
        for rotation in _ROTATIONS[block % 2]:
            x0 = x0 + x1
            x1 = ((x1 << rotation) | (x1 >> (32 - rotation))) ^ x0
        x0 = x0 + schedule[(block + 1) % 3]
        x1 = x1 + schedule[(block + 2) % 3] + (block + 1)
    return x0, x1


def state_words(seed: int, count: int) -> np.ndarray:
    """The four uint32 words of a state: seed high, seed low, count high, count low."""
    return np.array([seed >> 32, seed & _WORD, count >> 32 & _WORD, count & _WORD], np.uint32)


def host_keys(seed: int, first: int, n: int) -> list[int]:
    """The keys of draws `first` to `first + n - 1` of `seed`, as 64-bit ints."""
    counts = np.arange(first, first + n, dtype=np.uint64)
    hi, lo = threefry2x32(
        (np.full(n, seed >> 32, np.uint32), np.full(n, seed & _WORD, np.uint32)),
        ((counts >> 32).astype(np.uint32), (counts & _WORD).astype(np.uint32)),
    )
    return [h << 32 | low for h, low in zip(hi.tolist(), lo.tolist(), strict=True)]


def advanced(state: Any, n: int) -> Any:
    """`state` (four uint32 words, a JAX array) with its count moved on by `n`."""
    low = state[3] + np.uint32(n)
    high = state[2] + (low < state[3]).astype(jnp.uint32)
    return jnp.stack([state[0], state[1], high, low])


def traced_key(state: Any, n: int) -> Any:
    """The key of draw `n` of `state` (four uint32 words, a JAX array), as two uint32 words."""
    words = advanced(state, n)
    return jnp.stack(threefry2x32((words[0], words[1]), (words[2], words[3])))
