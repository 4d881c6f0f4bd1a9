"""The hessian experiment's peers: jaxstream (two backends, and ``js.compile`` of the JAX
backend's step, each with trimming off and on), PyTorch eager and ``jax.jit``, each set up
once over its own copies of the inputs."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from typing import Any, NamedTuple

import numpy as np

from experiments.harness.peers import block_until_ready, jax_device, require, tape
from experiments.harness.timing import Prepare
from experiments.workloads.hessian_model import (
    Autograd,
    Parameters,
    jax_input_hessian,
    jax_training_loss,
    variant_outputs,
)

PEERS = {
    "jaxstream-numpy/off": "jaxstream (NumPy) trimming off",
    "jaxstream-numpy/on": "jaxstream (NumPy) trimming on",
    "jaxstream-jax/off": "jaxstream (JAX) trimming off",
    "jaxstream-jax/on": "jaxstream (JAX) trimming on",
    "jaxstream-compile/off": "jaxstream js.compile trimming off",
    "jaxstream-compile/on": "jaxstream js.compile trimming on",
    "torch": "PyTorch eager",
    "jax-jit": "jax.jit(jax.grad) composition",
}
EAGER = ("numpy", "jax")
FLAVOURS = (*EAGER, "compile")
"""How jaxstream runs: eagerly on the NumPy or the JAX backend, or compiled (JAX backend)."""
COMPILED = "jaxstream-compile"
JAXSTREAM_PEERS = tuple(peer for peer in PEERS if peer.startswith("jaxstream-"))
TAPE_PEERS = (*JAXSTREAM_PEERS, "torch")
EAGER_PEERS = tuple(peer for peer in JAXSTREAM_PEERS if not peer.startswith(COMPILED))


@dataclass(frozen=True)
class TapePeer:
    """A define-by-run peer: its autograd API, its leaves, the mode it runs under, and what
    it makes of a step (``js.compile`` for the compiled peer, else the step itself)."""

    autograd: Autograd
    leaf: Callable[[np.ndarray], Any]
    mode: Callable[[], contextlib.AbstractContextManager]
    synchronize: Callable[[], None]
    compile: Callable[[Callable], Callable] = lambda step: step


def tape_peer(peer: str, device: str) -> TapePeer:
    """Raises PeerUnavailable where the peer cannot run here."""
    framework, _, trimming = peer.partition("/")
    leaf, synchronize = tape("jaxstream-jax" if framework == COMPILED else framework, device)
    if peer == "torch":
        torch = require("torch")
        autograd = Autograd(
            grad=torch.autograd.grad,
            backward=torch.autograd.backward,
            linear=torch.nn.functional.linear,
            tanh=torch.tanh,
        )
        return TapePeer(autograd, leaf, contextlib.nullcontext, synchronize)
    import jaxstream as js

    return TapePeer(
        Autograd(grad=js.grad, backward=js.backward, linear=js.linear, tanh=js.tanh),
        leaf,
        partial(js.autograd.set_trimming_enabled, trimming == "on"),
        synchronize,
        js.compile if framework == COMPILED else TapePeer.compile,
    )


class Stepper(NamedTuple):
    """``step`` runs one variant and returns its outputs; ``reset`` clears grads between steps."""

    reset: Callable[[], None]
    step: Callable[[], list]


def _tape_stepper(peer: TapePeer, variant: str, x: np.ndarray, params: Parameters) -> Stepper:
    x_leaf = peer.leaf(x)
    param_leaves = [(peer.leaf(w), peer.leaf(b)) for w, b in params]
    leaves = [x_leaf, *(p for layer in param_leaves for p in layer)]

    def reset() -> None:
        for tensor in leaves:
            tensor.grad = None

    outputs_of = peer.compile(
        partial(variant_outputs, peer.autograd, variant, x_leaf, param_leaves)
    )

    def step() -> list:
        with peer.mode():
            outputs = outputs_of()
        block_until_ready(outputs)
        peer.synchronize()
        return outputs

    return Stepper(reset, step)


@cache
def _jax_compiled(variant: str) -> Callable[[Any, Any], Any]:
    """One jitted function per variant, so each input shape compiles once per run."""
    jax = require("jax")
    if variant == "hessian":
        return jax.jit(jax_input_hessian)
    return jax.jit(jax.grad(jax_training_loss))


def _jax_stepper(variant: str, x: np.ndarray, params: Parameters, device: str) -> Stepper:
    """``jax.jit`` of the composed grads; the warm-up samples absorb the compilation."""
    jax = require("jax")
    target = jax_device(device)
    x_on_device = jax.device_put(x, target)
    params_on_device = jax.device_put([tuple(layer) for layer in params], target)
    compiled = _jax_compiled(variant)

    def step() -> list:
        result = jax.block_until_ready(compiled(params_on_device, x_on_device))
        return jax.tree_util.tree_leaves(result)

    return Stepper(lambda: None, step)


def build_stepper(
    peer: str, variant: str, x: np.ndarray, params: Parameters, device: str
) -> Stepper:
    """Set ``peer`` up for ``variant``; raises PeerUnavailable where it cannot run."""
    if peer == "jax-jit":
        return _jax_stepper(variant, x, params, device)
    return _tape_stepper(tape_peer(peer, device), variant, x, params)


def timed_step(peer: str, variant: str, x: np.ndarray, params: Parameters, device: str) -> Prepare:
    """For ``time_interleaved``: set up once, then each sample only clears the grads."""
    built = cache(partial(build_stepper, peer, variant, x, params, device))

    def prepare() -> Callable[[], list]:
        stepper = built()
        stepper.reset()
        return stepper.step

    return prepare
