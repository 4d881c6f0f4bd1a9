"""The digits_training peers, each a trainer of the same MLP from the same weights.

PyTorch eager and jaxstream (NumPy and JAX backends) run one training step as a
user writes it: ``zero_grad``, forward, cross-entropy, ``backward``, Adam's
``step``. ``jax.jit`` + optax runs the same step as one compiled call.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from typing import Any, Protocol

import numpy as np
from threadpoolctl import threadpool_info

from experiments.harness.peers import (
    as_numpy,
    block_until_ready,
    jax_device,
    jaxstream_placement,
    require,
    tape,
    torch_device,
)
from experiments.harness.timing import PeerUnavailable, Prepare
from experiments.workloads.digits_mlp import (
    CLASSES,
    FEATURES,
    HIDDEN,
    LEARNING_RATE,
    StateDict,
    jax_loss,
)

PEERS = {
    "jaxstream-numpy": "jaxstream (NumPy)",
    "jaxstream-jax": "jaxstream (JAX)",
    "torch": "PyTorch eager",
    "jax-jit": "jax.jit + optax",
}
JAXSTREAM_PEERS = ("jaxstream-numpy", "jaxstream-jax")
REFERENCE = "jax-jit"


class Trainer(Protocol):
    def batch(self, features: np.ndarray, labels: np.ndarray) -> Any:
        """The minibatch as this peer's arrays (made once, outside any timing)."""

    def step(self, batch: Any) -> Any:
        """One training step on ``batch``, finished when it returns; gives the loss."""


@dataclass
class TapeTrainer:
    """A define-by-run peer: the step is the same code for torch and jaxstream."""

    model: Any
    optimizer: Any
    cross_entropy: Callable[[Any, Any], Any]
    leaf: Callable[[np.ndarray], Any]
    synchronize: Callable[[], None]

    def batch(self, features: np.ndarray, labels: np.ndarray) -> tuple[Any, Any]:
        return self.leaf(features), self.leaf(labels)

    def step(self, batch: tuple[Any, Any]) -> Any:
        features, labels = batch
        self.optimizer.zero_grad()
        loss = self.cross_entropy(self.model(features), labels)
        loss.backward()
        self.optimizer.step()
        self.synchronize()
        return loss


@cache
def _jitted_update() -> tuple[Any, Callable[..., Any]]:
    """optax's Adam and one jitted step, shared by every trainer (one compile per shape)."""
    jax, optax = require("jax"), require("optax")
    optimizer = optax.adam(LEARNING_RATE)

    @jax.jit
    def update(params: Any, state: Any, features: Any, labels: Any) -> tuple[Any, Any, Any]:
        loss, grads = jax.value_and_grad(jax_loss)(params, features, labels)
        updates, state = optimizer.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    return optimizer, update


@dataclass
class JitTrainer:
    """``jax.jit`` + optax: parameters and optimizer state are carried from step to step."""

    params: Any
    state: Any
    device: Any
    update: Callable[..., tuple[Any, Any, Any]]

    def batch(self, features: np.ndarray, labels: np.ndarray) -> tuple[Any, Any]:
        """Labels as int32, since JAX runs with its 64-bit types off."""
        put = partial(require("jax").device_put, device=self.device)
        return put(features), put(labels.astype(np.int32))

    def step(self, batch: tuple[Any, Any]) -> Any:
        self.params, self.state, loss = self.update(self.params, self.state, *batch)
        # One compiled call makes every output at once: the loss being ready means all are.
        return loss.block_until_ready()


def _jax_jit(state: StateDict, device: str) -> JitTrainer:
    target = jax_device(device)
    params = require("jax").device_put(state, target)
    optimizer, update = _jitted_update()
    return JitTrainer(params, optimizer.init(params), target, update)


def _torch(state: StateDict, device: str) -> TapeTrainer:
    torch = require("torch")
    leaf, synchronize = tape("torch", device)
    model = torch.nn.Sequential(
        torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, CLASSES)
    ).to(torch_device(device))
    model.load_state_dict({name: torch.from_numpy(array) for name, array in state.items()})
    return TapeTrainer(
        model,
        torch.optim.Adam(model.parameters(), lr=LEARNING_RATE),
        torch.nn.functional.cross_entropy,
        lambda array: leaf(array, requires_grad=False),
        synchronize,
    )


def _jaxstream(state: StateDict, device: str, backend: str) -> TapeTrainer:
    import jaxstream as js

    leaf, _ = tape(f"jaxstream-{backend}", device)
    model = js.nn.Sequential(
        js.nn.Linear(FEATURES, HIDDEN), js.nn.ReLU(), js.nn.Linear(HIDDEN, CLASSES)
    ).to(jaxstream_placement(backend, device), backend=backend)
    model.load_state_dict(state)
    return TapeTrainer(
        model,
        js.optim.Adam(model.parameters(), lr=LEARNING_RATE),
        js.cross_entropy,
        lambda array: leaf(array, requires_grad=False),
        lambda: block_until_ready(model.parameters()),
    )


def timed_step(trainer: Callable[[], Trainer], minibatch: tuple[np.ndarray, ...]) -> Prepare:
    """For the timing harness: each sample is one step of the trainer on ``minibatch``."""

    def prepare() -> Callable[[], object]:
        ready = trainer()
        return partial(ready.step, ready.batch(*minibatch))

    return prepare


def build(peer: str, state: StateDict, device: str) -> Trainer:
    """``peer`` set up from ``state``; raises PeerUnavailable where it cannot run here."""
    if peer == "jax-jit":
        return _jax_jit(state, device)
    if peer == "torch":
        return _torch(state, device)
    return _jaxstream(state, device, peer.removeprefix("jaxstream-"))


def loss_value(loss: Any) -> float:
    return float(as_numpy(loss))


def thread_settings() -> dict[str, Any]:
    """The intra-op threads each side ran with, as the libraries report them."""
    settings: dict[str, Any] = {
        "blas": _blas_threads(),
        "xla_flags": os.environ.get("XLA_FLAGS") or "default",
    }
    try:
        settings["torch"] = require("torch").get_num_threads()
    except PeerUnavailable as unavailable:
        settings["torch"] = f"n/a ({unavailable})"
    return settings


def _blas_threads() -> list[dict[str, Any]]:
    """Each BLAS library loaded in this process, with its thread count (NumPy's is capped by
    jaxstream: Note [BLAS threads] in jaxstream/backends/blas.py)."""
    return [
        {
            "library": pool["internal_api"],
            "file": os.path.basename(pool["filepath"]),
            "threads": pool["num_threads"],
        }
        for pool in threadpool_info()
        if pool["user_api"] == "blas"
    ]
