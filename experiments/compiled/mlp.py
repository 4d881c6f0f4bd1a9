"""The MLP training step, written once with jaxstream (eager and compiled) and once in JAX.

The model is ``Sequential(Linear, Tanh, Linear, Tanh, Linear)`` with a mean-squared
error; the step is the eager habit, ``loss.backward()`` then ``p -= lr * p.grad``
under ``no_grad`` and ``p.grad = None``. The JAX step is ``jax.jit`` of
``value_and_grad`` and the same update, returning the new parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from experiments.harness.peers import (
    JAX_PRECISION,
    block_until_ready,
    jax_device,
    jaxstream_leaf,
    jaxstream_placement,
    require,
)
from experiments.harness.timing import Prepare

WIDTHS = (64, 256, 256, 10)
LEARNING_RATE = 1e-2
SEED = 0

Parameters = list[tuple[np.ndarray, np.ndarray]]


def init_parameters(seed: int = SEED) -> Parameters:
    """(weight (out, in), bias) per layer, scaled by 1/sqrt(fan_in)."""
    rng = np.random.default_rng(seed)
    return [
        (
            rng.normal(0.0, fan_in**-0.5, (fan_out, fan_in)).astype(np.float32),
            np.zeros(fan_out, np.float32),
        )
        for fan_in, fan_out in zip(WIDTHS, WIDTHS[1:], strict=False)
    ]


def init_batch(batch: int, seed: int = SEED + 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(batch, WIDTHS[0])).astype(np.float32),
        rng.normal(size=(batch, WIDTHS[-1])).astype(np.float32),
    )


def jaxstream_step(params: Parameters, device: str) -> tuple[Callable[..., Any], Any]:
    """The eager step over a model holding its own copy of ``params`` on ``device``'s
    jaxstream device (JAX backend), and the model."""
    import jaxstream as js

    layers = []
    for i, (w, _) in enumerate(params):
        if i:
            layers.append(js.nn.Tanh())
        layers.append(js.nn.Linear(w.shape[1], w.shape[0]))
    model = js.nn.Sequential(*layers).to(jaxstream_placement("jax", device), backend="jax")
    model.load_state_dict(
        {
            f"{2 * i}.{name}": value
            for i, (w, b) in enumerate(params)
            for name, value in (("weight", w), ("bias", b))
        }
    )
    weights = list(model.parameters())

    def step(x: Any, y: Any) -> Any:
        loss = js.mse_loss(model(x), y)
        loss.backward()
        with js.no_grad():
            for p in weights:
                p -= LEARNING_RATE * p.grad
                p.grad = None
        return loss

    return step, model


def _jax_loss(params: Any, x: Any, y: Any) -> Any:
    """Its products in float32 (Note [Float32 products in every peer] in harness/peers.py)."""
    jnp = require("jax.numpy")
    h = x
    for w, b in params[:-1]:
        h = jnp.tanh(jnp.matmul(h, w.T, precision=JAX_PRECISION) + b)
    w, b = params[-1]
    return jnp.mean((jnp.matmul(h, w.T, precision=JAX_PRECISION) + b - y) ** 2)


def _jax_update(params: Any, x: Any, y: Any) -> tuple[Any, Any]:
    jax = require("jax")
    loss, grads = jax.value_and_grad(_jax_loss)(params, x, y)
    stepped = jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads)
    return stepped, loss


def prepares(params: Parameters, batch: int, device: str) -> dict[str, Prepare]:
    """Each peer set up once; a sample is one step (the parameters move on every step)."""
    return {
        "jaxstream": _jaxstream_prepare(params, batch, device, compiled=False),
        "compiled": _jaxstream_prepare(params, batch, device, compiled=True),
        "jax-jit": _jax_prepare(params, batch, device),
    }


def _jaxstream_prepare(params: Parameters, batch: int, device: str, compiled: bool) -> Prepare:
    import jaxstream as js

    step, model = jaxstream_step(params, device)
    run = js.compile(step) if compiled else step
    x, y = (jaxstream_leaf(a, "jax", device, requires_grad=False) for a in init_batch(batch))
    # The eager step dispatches its backward and update after the loss: waiting for the
    # loss alone would leave their work running into the next peer's sample. The list of
    # parameters is the harness's, made untimed (the step rebinds their arrays in place).
    parameters = list(model.parameters())
    return lambda: lambda: block_until_ready([run(x, y), *parameters])


def _jax_prepare(params: Parameters, batch: int, device: str) -> Prepare:
    jax = require("jax")
    target = jax_device(device)
    update = jax.jit(_jax_update)
    state = {"params": jax.device_put([tuple(layer) for layer in params], target)}
    x, y = (jax.device_put(a, target) for a in init_batch(batch))

    def sample() -> None:
        state["params"], loss = update(state["params"], x, y)
        jax.block_until_ready((loss, state["params"]))  # what jaxstream's samples wait for

    return lambda: sample


def agreement(device: str, steps: int = 3, batch: int = 32) -> dict[str, Any]:
    """Loss and parameters after ``steps`` steps: compiled against eager and against JAX."""
    import jaxstream as js

    jax = require("jax")
    params = init_parameters()
    target = jax_device(device)
    batch_arrays = init_batch(batch)
    x, y = (jax.device_put(a, target) for a in batch_arrays)
    xs, ys = (jaxstream_leaf(a, "jax", device, requires_grad=False) for a in batch_arrays)
    eager, eager_model = jaxstream_step(params, device)
    compiled_step, model = jaxstream_step(params, device)
    compiled = js.compile(compiled_step)
    reference = jax.device_put([tuple(layer) for layer in params], target)
    for _ in range(steps):
        eager_loss = eager(xs, ys)
        compiled_loss = compiled(xs, ys)
        reference, jax_loss = jax.jit(_jax_update)(reference, x, y)
    flat_reference = [np.asarray(a) for layer in reference for a in layer]
    return {
        "steps": steps,
        "batch": batch,
        "compiled_vs_eager": _deviation(
            [compiled_loss, *model.parameters()], [eager_loss, *eager_model.parameters()]
        ),
        "compiled_vs_jax": _deviation(
            [compiled_loss, *model.parameters()], [jax_loss, *flat_reference]
        ),
        "programs_traced": compiled.cache_size(),
    }


def _deviation(found: list, reference: list) -> float:
    """The largest deviation, relative to the reference's largest entry."""
    pairs = [(np.asarray(getattr(a, "array", a)), np.asarray(getattr(r, "array", r)))
             for a, r in zip(found, reference, strict=True)]
    return max(float(np.max(np.abs(a - r))) / max(float(np.max(np.abs(r))), 1e-30)
               for a, r in pairs)
