"""The cpu_defaults peers: two workloads, each as a user writes it, with no library configured.

Every peer is built lazily in its process (one process for all, or a worker of its own,
``harness/alone.py``). jaxstream's NumPy backend runs twice, once with NumPy's BLAS at
jaxstream's cap and once at NumPy's own thread count, since BLAS threads are process-wide:
each sample sets the cap its peer asks for before it starts, untimed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache, partial
from typing import Any

import numpy as np

from experiments.digits_training.peers import TapeTrainer
from experiments.harness.peers import (
    block_until_ready,
    jaxstream_placement,
    require,
    tape,
    torch_device,
)
from experiments.harness.timing import Prepare
from experiments.hessian import peers as hessian_peers
from experiments.workloads.digits_mlp import init_state
from experiments.workloads.hessian_model import init_inputs, init_parameters

BLAS_CAPPED, BLAS_OWN = "jaxstream-numpy/blas-capped", "jaxstream-numpy/blas-own"
PEERS = {
    "torch": "PyTorch eager",
    BLAS_CAPPED: "jaxstream (NumPy), NumPy's BLAS at 1 thread",
    BLAS_OWN: "jaxstream (NumPy), NumPy's BLAS at its own threads",
    "jaxstream-jax": "jaxstream (JAX)",
}
JAXSTREAM_PEERS = (BLAS_CAPPED, BLAS_OWN, "jaxstream-jax")
WORKLOADS = {
    "hessian": "input Hessian (variant A, tanh), batch {batch:,}",
    "mlp": "MLP 64-128-10 training step (SGD), batch {batch:,}",
}
MLP_WIDTHS = (64, 128, 10)
MLP_LEARNING_RATE = 0.01
SEED = 0


def set_blas(peer: str) -> None:
    """The BLAS threads ``peer`` runs with: NumPy's own for ``BLAS_OWN``, else jaxstream's cap
    (set whether or not this is jaxstream's default, so that the two NumPy peers differ
    only there)."""
    from jaxstream.backends import blas

    blas.set_blas_threads(None if peer == BLAS_OWN else 1)


def _hessian(peer: str, batch: int, device: str) -> Prepare:
    """Variant A of the hessian experiment, jaxstream with trimming on (its default)."""
    tape_peer = "torch" if peer == "torch" else f"{peer.partition('/')[0]}/on"
    return hessian_peers.timed_step(
        tape_peer, "hessian", init_inputs(batch), init_parameters(), device
    )


def mlp_state(seed: int = SEED) -> dict[str, np.ndarray]:
    """PyTorch's default Linear initialisation of the MLP."""
    return init_state(seed, MLP_WIDTHS)


def mlp_batch(batch: int, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed + 1)
    features = rng.standard_normal((batch, MLP_WIDTHS[0])).astype(np.float32)
    return features, rng.integers(0, MLP_WIDTHS[-1], batch)


def _mlp_trainer(peer: str, device: str) -> TapeTrainer:
    """``Sequential(Linear, ReLU, Linear)`` from ``mlp_state``, SGD, cross-entropy."""
    framework = peer.partition("/")[0]
    leaf, synchronize = tape(framework, device)
    if framework == "torch":
        torch = require("torch")
        nn, functional = torch.nn, torch.nn.functional
        model = _mlp_model(nn).to(torch_device(device))
        model.load_state_dict({k: torch.from_numpy(v) for k, v in mlp_state().items()})
        optim = torch.optim
    else:
        import jaxstream as js

        backend = framework.removeprefix("jaxstream-")
        nn, functional, optim = js.nn, js.nn.functional, js.optim
        model = _mlp_model(nn).to(jaxstream_placement(backend, device), backend=backend)
        model.load_state_dict(mlp_state())
        synchronize = partial(block_until_ready, model.parameters())
    return TapeTrainer(model, optim.SGD(model.parameters(), lr=MLP_LEARNING_RATE),
                       functional.cross_entropy, partial(leaf, requires_grad=False), synchronize)


def _mlp_model(nn: Any) -> Any:
    first, hidden, classes = MLP_WIDTHS
    return nn.Sequential(nn.Linear(first, hidden), nn.ReLU(), nn.Linear(hidden, classes))


def _mlp(peer: str, batch: int, device: str) -> Prepare:
    trainer = cache(partial(_mlp_trainer, peer, device))
    features, labels = mlp_batch(batch)

    def prepare() -> Callable[[], object]:
        ready = trainer()
        return partial(ready.step, ready.batch(features, labels))

    return prepare


_STEPS = {"hessian": _hessian, "mlp": _mlp}


def timed_step(peer: str, workload: str, batch: int, device: str) -> Prepare:
    """For the timing harness: ``workload``'s step of ``peer``, its BLAS threads set first."""
    step = _STEPS[workload](peer, batch, device)
    if not peer.startswith("jaxstream-"):
        return step

    def prepare() -> Callable[[], object]:
        set_blas(peer)
        return step()

    return prepare


def prepare_alone(request: Mapping[str, Any]) -> Prepare:
    """A worker's step (``harness/alone.py``)."""
    return timed_step(request["peer"], request["workload"], request["batch"], request["device"])
