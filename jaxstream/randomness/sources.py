"""Where a draw without `key=` takes its key: the global generator, or the source of a scope.

Note [Where a draw takes its key]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A draw given `key=` uses that key and nothing else. A draw without one asks
the current draw source of its thread for the next draw of a generator state
(Note [Keys of a generator state] in threefry.py). The bottom source is the
global generator; code that runs a function again, or inside a program, puts
another on top for the time it runs:

- `Recording` passes the draws of the source below through and logs the
  states it handed out (a `DrawLog`); `Replaying` hands out a log's states
  again, in order, without drawing. `checkpoint` records its forward and
  replays the log in backward's recomputation, and `to_jax`'s engine mode
  records its forward and replays the log (kept as a residual) in its
  backward, so that both runs draw the same masks, and the recomputation
  consumes nothing (PyTorch's `preserve_rng_state=True`).
- `Threaded` draws from a state held in a program as a traced input:
  `js.compile` reserves, before each call, the draws its trace made, and the
  program derives their keys from the state it is given, so each call draws
  anew and a call draws what the eager run would have drawn from that state.

A state is (seed, count) on the host, or four uint32 words in a program
(`state_words`); a source reserves n draws at once and returns the state they
start from. Sources stack: a compiled call inside a checkpoint reserves through
its recording, so the recomputation replays the compiled draws too.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import jax
import numpy as np

from .generator import HostState, default_generator
from .threefry import advanced, state_words, traced_key

KeyState = HostState | jax.Array
"""Where n reserved draws start: (seed, count) on the host, or four uint32 words in a program."""


def key_of(state: KeyState, n: int = 0) -> int | jax.Array:
    """The key of draw `n` from `state`: a 64-bit int on the host, two uint32 words in a program."""
    if isinstance(state, tuple):
        return default_generator.key(state, n)
    return traced_key(state, n)


def host_state(state: KeyState) -> KeyState:
    """`state` as (seed, count) where its words are concrete; traced words as they are."""
    if isinstance(state, tuple | jax.core.Tracer):
        return state
    hi, lo, count_hi, count_lo = (int(w) for w in np.asarray(state))
    return hi << 32 | lo, count_hi << 32 | count_lo


def as_words(state: KeyState) -> Any:
    """`state` as its four uint32 words (an array), to enter or leave a program."""
    return state_words(*state) if isinstance(state, tuple) else state


@jax.tree_util.register_dataclass
@dataclass
class DrawLog:
    """The states a `Recording` handed out, and how many draws each started."""

    states: list = field(default_factory=list)
    sizes: tuple[int, ...] = field(default=(), metadata={"static": True})

    def as_arrays(self) -> DrawLog:
        """This log with its states as words: a pytree of arrays, for a JAX residual."""
        return DrawLog([as_words(s) for s in self.states], self.sizes)


class DrawSource:
    """Where the draws without `key=` of a scope take their keys."""

    outer: DrawSource | None = None
    """The source below this one while it is current."""

    def reserve(self, n: int) -> KeyState:
        """The state the next `n` draws start from."""
        raise NotImplementedError


class _GlobalGenerator(DrawSource):
    def reserve(self, n: int) -> KeyState:
        return default_generator.reserve(n)


_GLOBAL = _GlobalGenerator()


class _Stack(threading.local):
    def __init__(self) -> None:
        self.sources: list[DrawSource] = []


_stack = _Stack()


def current_source() -> DrawSource:
    """The source a draw without `key=` on this thread asks."""
    sources = _stack.sources
    return sources[-1] if sources else _GLOBAL


Source = TypeVar("Source", bound=DrawSource)


@contextmanager
def drawing_from(source: Source) -> Iterator[Source]:
    """Make `source` this thread's current source for the block."""
    source.outer = current_source()
    _stack.sources.append(source)
    try:
        yield source
    finally:
        _stack.sources.pop()


def next_key() -> int | jax.Array:
    """The key of a draw without `key=`, from the current source."""
    return key_of(current_source().reserve(1))


class Recording(DrawSource):
    """The draws of the source below, logged for a `Replaying`."""

    def __init__(self) -> None:
        self.log = DrawLog()

    def reserve(self, n: int) -> KeyState:
        state = self.outer.reserve(n)
        self.log.states.append(state)
        self.log.sizes = (*self.log.sizes, n)
        return state


class Replaying(DrawSource):
    """A log's draws again, in order, without drawing; `owner` names the recomputation."""

    def __init__(self, log: DrawLog, owner: str) -> None:
        self.log = log
        self.owner = owner
        self.position = 0

    def reserve(self, n: int) -> KeyState:
        i = self.position
        if i >= len(self.log.sizes) or self.log.sizes[i] != n:
            recorded = ", ".join(map(str, self.log.sizes)) or "none"
            raise RuntimeError(
                f"{self.owner}: the recomputation draws random values other than the forward "
                f"did (its reservation {i + 1} asks for {n} draw(s); the forward's reservations "
                f"were: {recorded}), so it cannot replay the forward's values. Make the "
                f"function draw the same way on every run, or pass key= to its draws"
            )
        self.position += 1
        return host_state(self.log.states[i])


class Threaded(DrawSource):
    """Draws from `state`, four words a program receives as an input; `used` counts them."""

    def __init__(self, state: jax.Array) -> None:
        self.state = state
        self.used = 0

    def reserve(self, n: int) -> KeyState:
        state = advanced(self.state, self.used)
        self.used += n
        return state
