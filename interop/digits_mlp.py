# %% [markdown]
# # A digits classifier with `js.nn` and `js.optim`, then under `jax.jit` + optax
# Percent-format cells: open in Jupyter (jupytext) or VS Code, or run as a script.
# Every cell asserts what it shows, so the recipe is also a test.
#
# Needs scikit-learn for the data (`pip install -e '.[examples]'`).

# %%
import jax
import numpy as np
import optax
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import jaxstream as js

EPOCHS = 5
BATCH = 64
LEARNING_RATE = 1e-2
PENALTY = 0.1
TARGET_ACCURACY = 0.93

# %% [markdown]
# ## The data: 8x8 images of digits, standardised on the training split

# %%
digits = load_digits()
x_train, x_test, y_train, y_test = train_test_split(
    digits.data.astype(np.float32),
    digits.target,
    test_size=0.25,
    random_state=0,
    stratify=digits.target,
)
scaler = StandardScaler().fit(x_train)
x_train = scaler.transform(x_train).astype(np.float32)
x_test = scaler.transform(x_test).astype(np.float32)
print(f"{len(y_train)} training and {len(y_test)} test images of {x_train.shape[1]} pixels")
assert x_train.shape[1] == 64 and set(np.unique(y_train)) == set(range(10))

# %% [markdown]
# ## The model: 64 -> 64 -> 10 with ReLU
# `js.manual_seed` makes the initialisation (PyTorch's default) reproducible; the
# two layers draw different weights from the one global generator.


# %%
def make_model() -> js.nn.Module:
    return js.nn.Sequential(js.nn.Linear(64, 64), js.nn.ReLU(), js.nn.Linear(64, 10))


js.manual_seed(0)
model = make_model()
shapes = {name: p.shape for name, p in model.named_parameters()}
print(shapes)
assert shapes == {
    "0.weight": (64, 64),
    "0.bias": (64,),
    "2.weight": (10, 64),
    "2.bias": (10,),
}
first, last = model[0].weight.numpy(), model[2].weight.numpy()
assert not np.allclose(first[:10], last), "each layer draws its own weights"
js.manual_seed(0)
assert np.array_equal(make_model()[2].weight.numpy(), last), "the seed rebuilds the same model"


# %% [markdown]
# ## Training with `js.optim.Adam`, as in PyTorch
# Minibatches are drawn from a seeded permutation of the training set each epoch.


# %%
def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    return float((np.argmax(logits, axis=1) == labels).mean())


def held_out_accuracy(model: js.nn.Module) -> float:
    with js.no_grad():
        return accuracy(model(js.tensor(x_test)).numpy(), y_test)


def minibatches(rng: np.random.Generator) -> list[np.ndarray]:
    order = rng.permutation(len(y_train))
    return [order[start : start + BATCH] for start in range(0, len(order), BATCH)]


optimizer = js.optim.Adam(model.parameters(), lr=LEARNING_RATE)
rng = np.random.default_rng(0)
eager_losses = []
for epoch in range(EPOCHS):
    for rows in minibatches(rng):
        optimizer.zero_grad()
        loss = js.cross_entropy(model(js.tensor(x_train[rows])), js.tensor(y_train[rows]))
        loss.backward()
        optimizer.step()
        eager_losses.append(loss.item())
    print(f"epoch {epoch}  loss {loss.item():.4f}  test accuracy {held_out_accuracy(model):.3f}")
eager_accuracy = held_out_accuracy(model)
assert eager_accuracy >= TARGET_ACCURACY, eager_accuracy

# %% [markdown]
# ## A gradient-penalty step
# The penalty is the squared norm of the loss's gradient with respect to the input.
# `js.grad(..., create_graph=True)` records that gradient's own graph, so the
# penalised loss backpropagates through it into the weights.

# %%
x = js.tensor(x_train[:BATCH], requires_grad=True)
labels = js.tensor(y_train[:BATCH])
loss = js.cross_entropy(model(x), labels)
(input_grad,) = js.grad(loss, x, create_graph=True)
penalised = loss + PENALTY * (input_grad**2).sum()
plain_grads = js.grad(loss, list(model.parameters()), retain_graph=True)
before = {name: p.numpy().copy() for name, p in model.named_parameters()}
optimizer.zero_grad()
penalised.backward()
penalty_grads = [p.grad.numpy() for p in model.parameters()]
optimizer.step()
print(f"loss {loss.item():.3e} + penalty {penalised.item() - loss.item():.3e}")
assert np.isfinite(penalised.item()) and penalised.item() > loss.item()
assert all(np.isfinite(g).all() for g in penalty_grads)
assert any(
    not np.allclose(g, plain.numpy()) for g, plain in zip(penalty_grads, plain_grads, strict=True)
), "the penalty must reach the weights' gradients"
moved = [
    name for name, p in model.named_parameters() if not np.array_equal(before[name], p.numpy())
]
assert moved == list(before), f"the step must move every parameter; it moved {moved}"

# %% [markdown]
# ## The same model under `jax.jit` + optax
# `js.to_jax` turns a loss written with jaxstream into a plain JAX function. A
# Module is a JAX pytree of its parameters, so it goes in and comes out of
# `jax.jit`, `jax.value_and_grad` and optax as the parameters themselves.


# %%
def batch_loss(model: js.nn.Module, x: js.Tensor, labels: js.Tensor) -> js.Tensor:
    return js.cross_entropy(model(x), labels)


js.manual_seed(0)
params = jax.tree.map(js.Tensor.jax, make_model())
transform = optax.adam(LEARNING_RATE)
state = transform.init(params)


@jax.jit
def train_step(
    params: js.nn.Module, state: optax.OptState, x: jax.Array, labels: jax.Array
) -> tuple:
    loss, grads = jax.value_and_grad(js.to_jax(batch_loss))(params, x, labels)
    updates, state = transform.update(grads, state, params)
    return optax.apply_updates(params, updates), state, loss


predict = jax.jit(js.to_jax(lambda model, x: model(x)))
rng = np.random.default_rng(0)
jit_losses = []
for epoch in range(EPOCHS):
    for rows in minibatches(rng):
        params, state, loss = train_step(params, state, x_train[rows], y_train[rows])
        jit_losses.append(float(loss))
    jit_accuracy = accuracy(np.asarray(predict(params, x_test)), y_test)
    print(f"epoch {epoch}  loss {float(loss):.4f}  test accuracy {jit_accuracy:.3f}")
assert jit_accuracy >= TARGET_ACCURACY, jit_accuracy
# The same seed, weights and minibatches: the first epoch follows the eager run's losses.
first_epoch = len(eager_losses) // EPOCHS
np.testing.assert_allclose(jit_losses[:first_epoch], eager_losses[:first_epoch], rtol=1e-3)
print(f"both paths reach {TARGET_ACCURACY:.0%}: eager {eager_accuracy:.3f}, jit {jit_accuracy:.3f}")
