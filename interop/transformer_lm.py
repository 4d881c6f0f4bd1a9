# %% [markdown]
# # A character-level transformer language model, trained step for step against PyTorch
# Percent-format cells: open in Jupyter (jupytext) or VS Code, or run as a script.
# Every cell asserts what it shows, so the recipe is also a test.
#
# PyTorch is the oracle here: the model's source is written once and built twice,
# over `torch.nn` and over `js.nn`; the jaxstream model starts from torch's initial
# weights, both see the same batches, and every step's loss must agree, eagerly and
# under `js.compile`. Both sides compute in float32. Needs torch (`pip install -e '.[oracle]'`).

# %%
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

import jaxstream as js

CONTEXT = 24
WIDTH = 32
HEADS = 4
BATCH = 16
STEPS = 20
LEARNING_RATE = 3e-2
WEIGHT_DECAY = 0.01
MAX_NORM = 1.0
RTOL = 1e-4

# %% [markdown]
# ## The text: sentences from a small grammar, drawn with a fixed seed

# %%
GRAMMAR = {
    "subject": ["the cat", "a dog", "my friend", "the old man", "a small bird"],
    "verb": ["sees", "likes", "follows", "finds"],
    "object": ["the ball", "a red box", "the river", "some bread"],
    "ending": [".", " today.", " again."],
}
rng = np.random.default_rng(0)
text = " ".join(
    " ".join(rng.choice(GRAMMAR[part]) for part in ("subject", "verb", "object"))
    + rng.choice(GRAMMAR["ending"])
    for _ in range(24)
)
alphabet = sorted(set(text))
encode = {char: i for i, char in enumerate(alphabet)}
tokens = np.array([encode[char] for char in text], np.int64)
print(f"{len(text)} characters, {len(alphabet)} distinct: {text[:60]!r} ...")
assert 300 <= len(text) <= 1000 and text.endswith(".")

starts = [rng.integers(0, len(tokens) - CONTEXT, BATCH) for _ in range(STEPS)]
batches = [
    (np.stack([tokens[s : s + CONTEXT] for s in rows]),
     np.stack([tokens[s + 1 : s + CONTEXT + 1] for s in rows]))
    for rows in starts
]
assert batches[0][0].shape == (BATCH, CONTEXT)
assert (batches[0][0][:, 1:] == batches[0][1][:, :-1]).all(), "targets are the next characters"

# %% [markdown]
# ## The model, written once for both libraries
# One pre-norm decoder block: causal self-attention through
# `F.scaled_dot_product_attention(..., is_causal=True)`, then an MLP with GELU; learned
# positions; a linear head of its own (untied).


# %%
def language_model(nn: types.ModuleType) -> type:
    """The model's class over `nn`, which is `torch.nn` or `js.nn`."""
    functional = nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            # No bias: a key's bias moves every score of a query alike, so softmax cancels
            # it, its gradient is rounding noise, and Adam would scale that noise up.
            self.qkv = nn.Linear(WIDTH, 3 * WIDTH, bias=False)
            self.out = nn.Linear(WIDTH, WIDTH)

        def forward(self, x: Any) -> Any:
            batch, length, _ = x.shape

            def heads(z: Any) -> Any:
                return z.reshape(batch, length, HEADS, WIDTH // HEADS).transpose(1, 2)

            q, k, v = (heads(z) for z in self.qkv(x).split(WIDTH, dim=-1))
            mixed = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.out(mixed.transpose(1, 2).reshape(batch, length, WIDTH))

    class LanguageModel(nn.Module):
        def __init__(self, vocabulary: int) -> None:
            super().__init__()
            self.tokens = nn.Embedding(vocabulary, WIDTH)
            self.positions = nn.Embedding(CONTEXT, WIDTH)
            self.attention_norm = nn.LayerNorm(WIDTH)
            self.attention = CausalSelfAttention()
            self.mlp_norm = nn.LayerNorm(WIDTH)
            self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(),
                                     nn.Linear(4 * WIDTH, WIDTH))
            self.final_norm = nn.LayerNorm(WIDTH)
            self.head = nn.Linear(WIDTH, vocabulary, bias=False)

        def forward(self, indices: Any) -> Any:
            x = self.tokens(indices) + self.positions.weight[: indices.shape[1]]
            x = x + self.attention(self.attention_norm(x))
            x = x + self.mlp(self.mlp_norm(x))
            return self.head(self.final_norm(x))

    return LanguageModel


torch.manual_seed(0)
torch_model = language_model(torch.nn)(len(alphabet))
initial_state = {name: t.numpy().copy() for name, t in torch_model.state_dict().items()}


def jaxstream_model(backend: str) -> js.nn.Module:
    """The model on `backend`, holding torch's initial weights."""
    model = language_model(js.nn)(len(alphabet)).to(backend=backend)
    model.load_state_dict({name: js.tensor(value) for name, value in initial_state.items()})
    return model


model = jaxstream_model("numpy")
assert sorted(name for name, _ in model.named_parameters()) == sorted(
    name for name, _ in torch_model.named_parameters()
)
print(f"{sum(p.numel() for p in model.parameters())} parameters copied from torch")


# %% [markdown]
# ## Twenty steps in torch: AdamW, gradients clipped to norm 1

# %%
def next_character_loss(logits: Any, targets: Any, functional: types.ModuleType) -> Any:
    """Cross entropy of every position's prediction of the next character."""
    return functional.cross_entropy(logits.reshape(-1, len(alphabet)), targets.reshape(-1))


def torch_run() -> list[float]:
    optimizer = torch.optim.AdamW(
        torch_model.parameters(), lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY
    )
    losses = []
    for inputs, targets in batches:
        optimizer.zero_grad()
        logits = torch_model(torch.from_numpy(inputs))
        loss = next_character_loss(logits, torch.from_numpy(targets), torch.nn.functional)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(torch_model.parameters(), MAX_NORM)
        optimizer.step()
        losses.append(loss.item())
    return losses


torch_losses = torch_run()
print(f"torch: loss {torch_losses[0]:.4f} -> {torch_losses[-1]:.4f}")
assert torch_losses[-1] < torch_losses[0]


# %% [markdown]
# ## The same twenty steps in jaxstream, eagerly, then under `js.compile`
# The step is PyTorch's, with `js.optim.AdamW` and
# `js.nn.utils.clip_grad_norm_`; it clears the gradients at its end, so that every call
# starts with no `.grad`. Compiled, the whole step (forward, backward, clipping, AdamW's
# update) is one XLA program on the JAX backend, traced once for all twenty steps.


# %%
def training_step(model: js.nn.Module) -> Callable[[js.Tensor, js.Tensor], js.Tensor]:
    """One training step of `model` on a batch of inputs and targets."""
    optimizer = js.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY)

    def step(inputs: js.Tensor, targets: js.Tensor) -> js.Tensor:
        loss = next_character_loss(model(inputs), targets, js.nn.functional)
        loss.backward()
        js.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
        optimizer.step()
        optimizer.zero_grad()
        return loss

    return step


def run(model: js.nn.Module, compiled: bool) -> list[float]:
    step = training_step(model)
    if compiled:
        step = js.compile(step)
    backend = model.tokens.weight.backend
    losses = [
        step(js.tensor(inputs, backend=backend), js.tensor(targets, backend=backend)).item()
        for inputs, targets in batches
    ]
    if compiled:
        print(f"programs that js.compile traced for {STEPS} steps: {step.cache_size()}")
        assert step.cache_size() == 1, step
    return losses


def assert_follows_torch(losses: list[float], what: str) -> None:
    np.testing.assert_allclose(losses, torch_losses, rtol=RTOL, err_msg=what)
    worst = max(abs(a - b) / abs(b) for a, b in zip(losses, torch_losses, strict=True))
    print(f"{what}: all {STEPS} losses within {worst:.1e} of torch's")


eager_losses = run(model, compiled=False)
assert_follows_torch(eager_losses, "eager")
compiled_model = jaxstream_model("jax")
compiled_losses = run(compiled_model, compiled=True)
assert_follows_torch(compiled_losses, "js.compile")

# %% [markdown]
# ## Greedy sampling
# Each new character is the most likely one after the last `CONTEXT` characters (the
# prompt is that long, so every call has one shape). The trained models of both
# libraries write the same continuation, and a second run writes it again.


# %%
def greedy(predict: Callable[[np.ndarray], np.ndarray], prompt: str, length: int) -> str:
    """The `length` characters that `predict` (indices -> logits) writes after `prompt`."""
    written = [encode[char] for char in prompt]
    for _ in range(length):
        logits = predict(np.array([written[-CONTEXT:]], np.int64))
        written.append(int(np.argmax(logits[0, -1])))
    return "".join(alphabet[i] for i in written[len(prompt) :])


def jaxstream_predict(indices: np.ndarray) -> np.ndarray:
    with js.no_grad():
        return model(js.tensor(indices)).numpy()


def torch_predict(indices: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return torch_model(torch.from_numpy(indices)).numpy()


prompt = text[:CONTEXT]
sample = greedy(jaxstream_predict, prompt, 32)
print(f"{prompt!r} goes on greedily: {sample!r}")
assert len(sample) == 32 and set(sample) <= set(alphabet)
assert greedy(jaxstream_predict, prompt, 32) == sample, "greedy sampling is deterministic"
assert greedy(torch_predict, prompt, 32) == sample, "torch's model writes the same"
# Both jaxstream runs end with torch's weights, so the compiled model writes the same too.
for trained in (model, compiled_model):
    for name, value in torch_model.state_dict().items():
        np.testing.assert_allclose(trained.state_dict()[name].numpy(), value.numpy(),
                                   rtol=1e-3, atol=1e-5, err_msg=name)
print("torch writes the same continuation; eager and compiled runs end with torch's weights")
