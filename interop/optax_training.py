"""Train a jaxstream model with optax: `to_jax` turns the loss into a JAX function.

The model is written with jaxstream ops; `to_jax` gives a plain JAX function
whose gradient is jaxstream's, so `jax.jit(jax.value_and_grad(...))` and an
optax optimizer drive it like any JAX model.

Run: python interop/optax_training.py   (needs `pip install optax`)
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax

import jaxstream as js
from jaxstream.jax_interop import to_jax

STEPS = 200


def model_loss(params: dict, x: js.Tensor, y: js.Tensor) -> js.Tensor:
    """A two-layer MLP regressor, in jaxstream ops."""
    hidden = js.tanh(js.linear(x, params["w1"], params["b1"]))
    prediction = js.linear(hidden, params["w2"], params["b2"])
    return ((prediction - y) ** 2).mean()


def make_data(key: jax.Array) -> tuple[jax.Array, jax.Array]:
    x = jax.random.uniform(key, (256, 2), minval=-1.0, maxval=1.0)
    y = jnp.sin(3 * x[:, :1]) * jnp.cos(2 * x[:, 1:])
    return x, y


def init_params(key: jax.Array, width: int = 32) -> dict:
    k1, k2 = jax.random.split(key)
    return {
        "w1": jax.random.normal(k1, (width, 2)) * 0.5,
        "b1": jnp.zeros(width),
        "w2": jax.random.normal(k2, (1, width)) / np.sqrt(width),
        "b2": jnp.zeros(1),
    }


def main() -> None:
    data_key, params_key = jax.random.split(jax.random.PRNGKey(0))
    x, y = make_data(data_key)
    params = init_params(params_key)
    loss_fn = to_jax(model_loss)
    optimizer = optax.adam(1e-2)
    state = optimizer.init(params)

    @jax.jit
    def step(params: dict, state: optax.OptState) -> tuple:
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, state = optimizer.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    losses = []
    for i in range(STEPS):
        params, state, loss = step(params, state)
        losses.append(float(loss))
        if i % 50 == 0 or i == STEPS - 1:
            print(f"step {i:3d}  loss {losses[-1]:.5f}")
    assert losses[-1] < 0.25 * losses[0], (losses[0], losses[-1])
    print(f"loss went down: {losses[0]:.4f} -> {losses[-1]:.4f}")


if __name__ == "__main__":
    main()
