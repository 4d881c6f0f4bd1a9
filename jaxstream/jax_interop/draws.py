"""Where the draws without `key=` of a `to_jax` function take their keys.

Note [Draws inside to_jax]
~~~~~~~~~~~~~~~~~~~~~~~~~~
A run of a `to_jax` function on concrete arrays (called directly, or engine
mode's forward under `jax.grad` or `jax.vjp` without `jax.jit`) draws from the
current source (Note [Where a draw takes its key] in randomness/sources.py),
the global generator outside `js.compile`: each call draws anew.

A run on traced arrays (under `jax.jit`, `jax.vmap`, or `jax.grad` of native
mode) would make such a draw a constant of the trace, and every call of the
program would reuse it. So it raises, naming the function and how to pass a
key, unless the current source threads a state through the program
(`js.compile`'s). A key passed in as an argument (a JAX key, given to the draw
as `key=`, as a tensor if need be) is how a traced function draws.

Engine mode's backward runs the function again: it replays the forward's
draws, whose states the custom_vjp keeps as residuals, so the backward's
dropout masks are the forward's.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ..randomness.sources import DrawLog, KeyState, Recording, Replaying


class CallerDraws(Recording):
    """A to_jax run's draws, logged for engine mode's backward; refused where frozen."""

    def __init__(self, name: str, dynamic: Any) -> None:
        super().__init__()
        self.name = name
        self.traced = any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(dynamic))

    def reserve(self, n: int) -> KeyState:
        state = super().reserve(n)
        if isinstance(state, tuple) and (self.traced or _staging()):
            raise RuntimeError(
                f"to_jax '{self.name}': a random draw without key= (js.dropout, js.rand, "
                f"js.randn, nn.Dropout, ...) while JAX traces the function (jax.jit, jax.vmap, "
                f"jax.grad of mode='native') would be a constant of the trace: every call "
                f"would draw the same values. Pass a JAX key as an argument of the function "
                f"and give it to the draw: js.dropout(x, p, key=k), nn.Dropout(p)(x, key=k), "
                f"js.randn(shape, key=k, backend='jax'); a new key each step "
                f"(jax.random.split) draws anew"
            )
        return state


def replayed_draws(name: str, log: DrawLog) -> Replaying:
    """The forward's draws again, for engine mode's backward."""
    return Replaying(log, f"to_jax '{name}' (the engine's backward)")


def _staging() -> bool:
    """Whether JAX stages what runs now into a program (`jax.jit`): its constants are traced."""
    return isinstance(jnp.zeros((), jnp.uint32), jax.core.Tracer)
