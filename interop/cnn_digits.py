# %% [markdown]
# # A small CNN on the digits, trained step for step against PyTorch
# Percent-format cells: open in Jupyter (jupytext) or VS Code, or run as a script.
# Every cell asserts what it shows, so the recipe is also a test.
#
# PyTorch is the oracle here: the recipe builds the same network in `torch.nn`,
# copies torch's initial weights into the jaxstream model, feeds both the same
# batches and checks that every step's loss agrees, eagerly and under `js.compile`.
# Both sides compute in float32.
# Needs torch (`pip install -e '.[oracle]'`) and scikit-learn (`'.[examples]'`).

# %%
import types
from typing import Any

import numpy as np
import torch
from sklearn.datasets import load_digits

import jaxstream as js

STEPS = 20
BATCH = 64
LEARNING_RATE = 0.05
MOMENTUM = 0.9
MAX_NORM = 1.0
DECAY_EVERY, DECAY = 5, 0.5
RTOL = 1e-4

# %% [markdown]
# ## The data: the digits as 1x8x8 images, and 20 seeded minibatches

# %%
digits = load_digits()
images = (digits.images / 16.0).astype(np.float32)[:, None]
labels = digits.target.astype(np.int64)
rng = np.random.default_rng(0)
batches = [rng.choice(len(labels), BATCH, replace=False) for _ in range(STEPS)]
print(f"{len(labels)} images of shape {images.shape[1:]}, {STEPS} batches of {BATCH}")
assert images.shape[1:] == (1, 8, 8) and images.max() == 1.0

# %% [markdown]
# ## One network, built over both libraries
# `Conv2d -> ReLU -> MaxPool2d -> Conv2d -> ReLU -> BatchNorm2d -> Flatten -> Linear`,
# built by one function over `torch.nn` or `js.nn`: the same names, so torch's
# `state_dict` (weights, BatchNorm's running statistics and its batch counter) loads
# into ours as it is.


# %%
def make_model(nn: types.ModuleType) -> Any:
    """The network over `nn`, which is `torch.nn` or `js.nn`."""
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.BatchNorm2d(16),
        nn.Flatten(),
        nn.Linear(16 * 4 * 4, 10),
    )


torch.manual_seed(0)
torch_model = make_model(torch.nn)
initial_state = {name: t.numpy().copy() for name, t in torch_model.state_dict().items()}


def jaxstream_model(backend: str) -> js.nn.Module:
    """The network on `backend`, holding torch's initial weights and buffers."""
    model = make_model(js.nn).to(backend=backend)
    model.load_state_dict({name: js.tensor(value) for name, value in initial_state.items()})
    return model


model = jaxstream_model("numpy")
assert list(model.state_dict()) == list(initial_state)
for name, value in model.state_dict().items():
    assert np.array_equal(value.numpy(), initial_state[name]), name
print(f"{sum(p.numel() for p in model.parameters())} parameters copied from torch")


# %% [markdown]
# ## Twenty steps in torch: SGD with momentum, a StepLR schedule, clipping
# Each step clips the gradients' global norm to 1 (`clip_grad_norm_`) and the learning
# rate halves every five steps (`StepLR`).


# %%
def torch_run() -> list[float]:
    optimizer = torch.optim.SGD(torch_model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, DECAY_EVERY, DECAY)
    losses = []
    for rows in batches:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(
            torch_model(torch.from_numpy(images[rows])), torch.from_numpy(labels[rows])
        )
        loss.backward()
        torch.nn.utils.clip_grad_norm_(torch_model.parameters(), MAX_NORM)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    return losses


torch_losses = torch_run()
print(f"torch: loss {torch_losses[0]:.4f} -> {torch_losses[-1]:.4f}")
assert torch_losses[-1] < torch_losses[0]

# %% [markdown]
# ## The same twenty steps in jaxstream, eagerly
# The step is PyTorch's, with `js.optim.SGD`,
# `js.optim.lr_scheduler.StepLR` and `js.nn.utils.clip_grad_norm_`. It clears the
# gradients at its end rather than its start: the same steps, and every call then starts
# with no `.grad`, so that the compiled run below sees one signature (a first call
# without `.grad` and later ones with it would be two).


# %%
def training_step(model: js.nn.Module) -> tuple[Any, js.optim.lr_scheduler.LRScheduler]:
    """One training step of `model`, and the scheduler to step after it."""
    optimizer = js.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
    scheduler = js.optim.lr_scheduler.StepLR(optimizer, DECAY_EVERY, DECAY)
    loss_fn = js.nn.CrossEntropyLoss()

    def step(x: js.Tensor, y: js.Tensor) -> js.Tensor:
        loss = loss_fn(model(x), y)
        loss.backward()
        js.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
        optimizer.step()
        optimizer.zero_grad()
        return loss

    return step, scheduler


def run(model: js.nn.Module, compiled: bool) -> list[float]:
    step, scheduler = training_step(model)
    if compiled:
        step = js.compile(step)
    backend = model[0].weight.backend
    losses = []
    for rows in batches:
        x, y = js.tensor(images[rows], backend=backend), js.tensor(labels[rows], backend=backend)
        losses.append(step(x, y).item())
        scheduler.step()
    if compiled:
        print(f"programs that js.compile traced for {STEPS} steps: {step.cache_size()}")
        assert step.cache_size() == 1, step
    return losses


def assert_follows_torch(losses: list[float], what: str) -> None:
    np.testing.assert_allclose(losses, torch_losses, rtol=RTOL, err_msg=what)
    worst = max(abs(a - b) / abs(b) for a, b in zip(losses, torch_losses, strict=True))
    print(f"{what}: all {STEPS} losses within {worst:.1e} of torch's")


def assert_same_state(model: js.nn.Module, what: str) -> None:
    """Weights and BatchNorm's running statistics end where torch's do."""
    expected = torch_model.state_dict()
    for name, value in model.state_dict().items():
        np.testing.assert_allclose(
            value.numpy(), expected[name].numpy(), rtol=1e-3, atol=1e-5, err_msg=f"{what} {name}"
        )


eager_losses = run(model, compiled=False)
assert_follows_torch(eager_losses, "eager")
assert_same_state(model, "eager")

# %% [markdown]
# ## The same twenty steps under `js.compile`
# On the JAX backend the whole step (forward, backward, clipping, the optimizer's
# update and BatchNorm's running statistics) is one XLA program, traced once: the
# learning rate that the scheduler writes into `param_groups` enters the program as an
# input, so its three changes need no new trace.

# %%
compiled_model = jaxstream_model("jax")
compiled_losses = run(compiled_model, compiled=True)
assert_follows_torch(compiled_losses, "js.compile")
assert_same_state(compiled_model, "js.compile")

# %% [markdown]
# ## In eval mode, BatchNorm uses its running statistics
# Both libraries' trained models, switched to eval mode, give the same predictions.

# %%
torch_model.eval()
model.eval()
with torch.no_grad():
    expected = torch_model(torch.from_numpy(images)).numpy()
with js.no_grad():
    logits = model(js.tensor(images)).numpy()
np.testing.assert_allclose(logits, expected, rtol=1e-3, atol=1e-4)
accuracy = float((logits.argmax(axis=1) == labels).mean())
print(f"eval mode matches torch; accuracy on all {len(labels)} images after {STEPS} steps "
      f"{accuracy:.2f}")
assert accuracy > 0.5, accuracy
