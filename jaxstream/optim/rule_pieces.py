"""The pieces of PyTorch's update rules that optax's transformations do not express.

Each is an `optax.GradientTransformation` that algorithms.py chains with optax's own
pieces; its docstring says where optax's nearest transformation differs. The state
entries these pieces add take PyTorch's names (`momentum_buffer`, `max_exp_avg_sq`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax


def ascending(maximize: bool,
              transform: optax.GradientTransformation) -> optax.GradientTransformation:
    """`transform` on the negated gradient when `maximize` (PyTorch negates the gradient
    before anything else, weight decay included), else `transform` itself, so that the
    state keeps its layout where maximize is off."""
    if not maximize:
        return transform
    return optax.chain(optax.scale(-1.0), transform)


class MomentumState(NamedTuple):
    """SGD's momentum buffers, and how many steps have moved them (the first starts them)."""

    count: Any
    momentum_buffer: Any


def momentum_with_dampening(momentum: Any, dampening: Any,
                            nesterov: bool) -> optax.GradientTransformation:
    """PyTorch's SGD momentum: the buffer starts at the first gradient, then `b = momentum
    * b + (1 - dampening) * g`; the step is `g + momentum * b` with nesterov, else `b`;
    with momentum 0 the step is `g` and the buffer is left alone.

    optax's `trace` has no dampening, and its buffer, starting from zeros, would take
    `(1 - dampening) * g` on the first step. The count is the group's: a parameter
    whose first gradient comes later starts from a zero buffer, as with `trace`.
    """

    def init(params: Any) -> MomentumState:
        return MomentumState(jnp.zeros([], jnp.int32), optax.tree.zeros_like(params))

    def update(updates: Any, state: MomentumState,
               params: Any = None) -> tuple[Any, MomentumState]:
        moving = momentum != 0
        first = state.count == 0

        def buffer(b: jax.Array, g: jax.Array) -> jax.Array:
            return jnp.where(moving, jnp.where(first, g, momentum * b + (1 - dampening) * g), b)

        buffers = optax.tree.cast_like(jax.tree.map(buffer, state.momentum_buffer, updates),
                                       state.momentum_buffer)
        if nesterov:
            steps = jax.tree.map(lambda g, b: g + momentum * b, updates, buffers)
        else:
            steps = buffers
        steps = jax.tree.map(lambda g, s: jnp.where(moving, s, g), updates, steps)
        count = jnp.where(moving, optax.safe_increment(state.count), state.count)
        return steps, MomentumState(count, buffers)

    return optax.GradientTransformation(init, update)


class AmsgradState(NamedTuple):
    """Adam's moments and the running maximum of the second one (PyTorch's amsgrad)."""

    count: Any
    mu: Any
    nu: Any
    max_exp_avg_sq: Any


def scale_by_amsgrad(beta1: Any, beta2: Any, eps: Any) -> optax.GradientTransformation:
    """PyTorch's Adam with amsgrad: `vmax = max(vmax, v)` of the uncorrected second
    moment, then `m_hat / (sqrt(vmax) / sqrt(1 - beta2**t) + eps)`.

    optax's `scale_by_amsgrad` keeps the maximum of the bias-corrected `v_hat` (each
    step's own correction) instead, or, without correction, never corrects it: neither
    is PyTorch's, which corrects the maximum by the current step's factor.
    """

    def init(params: Any) -> AmsgradState:
        zeros = optax.tree.zeros_like(params)
        return AmsgradState(jnp.zeros([], jnp.int32), zeros, zeros, zeros)

    def update(updates: Any, state: AmsgradState,
               params: Any = None) -> tuple[Any, AmsgradState]:
        mu = optax.tree.update_moment(updates, state.mu, beta1, 1)
        nu = optax.tree.update_moment_per_elem_norm(updates, state.nu, beta2, 2)
        count = optax.safe_increment(state.count)
        largest = jax.tree.map(jnp.maximum, state.max_exp_avg_sq, nu)
        mu_hat = optax.tree.bias_correction(mu, beta1, count)
        root_correction = jnp.sqrt(1 - beta2**count)

        def scaled(m: jax.Array, v: jax.Array) -> jax.Array:
            return m / (jnp.sqrt(v) / root_correction.astype(v.dtype) + eps)

        steps = jax.tree.map(scaled, mu_hat, largest)
        kept = optax.tree.cast_like((mu, nu, largest), state[1:])
        return steps, AmsgradState(count, *kept)

    return optax.GradientTransformation(init, update)


class SumOfSquaresState(NamedTuple):
    """Adagrad's accumulator: each parameter's running sum of squared gradients."""

    sum_of_squares: Any


def scale_by_root_sum_of_squares(initial_accumulator_value: float,
                                 eps: Any) -> optax.GradientTransformation:
    """`g / (sqrt(sum of g*g so far) + eps)`, PyTorch's Adagrad scaling (optax's
    `scale_by_rss` adds eps inside the square root instead)."""

    def init(params: Any) -> SumOfSquaresState:
        return SumOfSquaresState(optax.tree.full_like(params, initial_accumulator_value))

    def update(updates: Any, state: SumOfSquaresState,
               params: Any = None) -> tuple[Any, SumOfSquaresState]:
        sums = jax.tree.map(lambda s, g: s + g * g, state.sum_of_squares, updates)
        scaled = jax.tree.map(lambda g, s: g / (jnp.sqrt(s) + eps), updates, sums)
        return scaled, SumOfSquaresState(sums)

    return optax.GradientTransformation(init, update)
