"""The hessian experiment's peers: jaxstream (two backends, and ``js.compile`` of the JAX
backend's step, each with trimming off and on), PyTorch eager, ``torch.func`` and ``jax.jit``,
each set up once over its own copies of the inputs."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from typing import Any, NamedTuple

import numpy as np

from experiments.harness.peers import (
    block_until_ready,
    jax_device,
    require,
    tape,
    torch_device,
    torch_synchronizer,
)
from experiments.harness.timing import PeerUnavailable, Prepare
from experiments.workloads.hessian_model import (
    PR_FORM,
    WORKLOADS,
    Autograd,
    Parameters,
    func_input_hessian,
    func_training_loss,
    init_inputs,
    init_parameters,
    jax_input_hessian,
    jax_training_loss,
    reaches_input,
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
    "torch-func": "torch.func jvp(grad)",
    "jax-jit": "jax.jit(jax.grad) composition",
}
EAGER = ("numpy", "jax")
FLAVOURS = (*EAGER, "compile")
"""How jaxstream runs: eagerly on the NumPy or the JAX backend, or compiled (JAX backend)."""
COMPILED = "jaxstream-compile"
JAXSTREAM_PEERS = tuple(peer for peer in PEERS if peer.startswith("jaxstream-"))
TAPE_PEERS = (*JAXSTREAM_PEERS, "torch")
EAGER_PEERS = tuple(peer for peer in JAXSTREAM_PEERS if not peer.startswith(COMPILED))
FUNCTIONAL_PEERS = ("torch-func", "jax-jit")
"""Peers that transform functions and record no graph: for them A' is A's program."""
PROBE_BATCH = 4


@dataclass(frozen=True)
class TapePeer:
    """A define-by-run peer: its autograd API, its leaves, the mode it runs under, and what
    it makes of a step (``js.compile`` for the compiled peer, else the step itself)."""

    autograd: Autograd
    leaf: Callable[[np.ndarray], Any]
    mode: Callable[[], contextlib.AbstractContextManager]
    synchronize: Callable[[], None]
    compile: Callable[[Callable], Callable] = lambda step: step


def torch_autograd() -> Autograd:
    """PyTorch's side of the shared API (its functions serve ``torch.func`` as well)."""
    torch = require("torch")
    return Autograd(grad=torch.autograd.grad, backward=torch.autograd.backward,
                    linear=torch.nn.functional.linear, tanh=torch.tanh, relu=torch.relu)


def tape_peer(peer: str, device: str) -> TapePeer:
    """Raises PeerUnavailable where the peer cannot run here."""
    framework, _, trimming = peer.partition("/")
    leaf, synchronize = tape("jaxstream-jax" if framework == COMPILED else framework, device)
    if peer == "torch":
        return TapePeer(torch_autograd(), leaf, contextlib.nullcontext, synchronize)
    import jaxstream as js

    return TapePeer(
        Autograd(grad=js.grad, backward=js.backward, linear=js.linear, tanh=js.tanh,
                 relu=js.relu),
        leaf,
        partial(js.autograd.set_trimming_enabled, trimming == "on"),
        synchronize,
        js.compile if framework == COMPILED else TapePeer.compile,
    )


class Stepper(NamedTuple):
    """``step`` runs one variant and returns its outputs; ``reset`` clears grads between steps."""

    reset: Callable[[], None]
    step: Callable[[], list]


@cache
def second_order_reaches_input(peer: str, device: str, activation: str) -> bool:
    """Whether the tape of ``peer`` (js.compile's: the JAX backend's, eagerly) finds x again
    in the second grad through ``activation`` (untimed, on a batch of ``PROBE_BATCH``)."""
    eager = f"jaxstream-jax/{peer.partition('/')[2]}" if peer.startswith(COMPILED) else peer
    found = tape_peer(eager, device)
    leaves = [(found.leaf(w), found.leaf(b)) for w, b in init_parameters()]
    with found.mode():
        return reaches_input(found.autograd, found.leaf(init_inputs(PROBE_BATCH)), leaves,
                             activation)


def unreached(peer: str, activation: str) -> str:
    """Why ``peer``'s cells of ``activation``'s rows read n/a."""
    return (
        f"{peer}: grad(sum(dy/dx), x) finds no path back to x through {activation}, whose "
        "backward recorded under create_graph has no edge to its input (PyTorch's has one, "
        "whose gradient is zero), so this network's second grad raises; the experiment "
        "measures these cells once it does not"
    )


def _tape_stepper(peer: str, variant: str, x: np.ndarray, params: Parameters, device: str,
                  activation: str) -> Stepper:
    if not second_order_reaches_input(peer, device, activation):
        raise PeerUnavailable(unreached(peer, activation))
    found = tape_peer(peer, device)
    x_leaf = found.leaf(x)
    param_leaves = [(found.leaf(w), found.leaf(b)) for w, b in params]
    leaves = [x_leaf, *(p for layer in param_leaves for p in layer)]

    def reset() -> None:
        for tensor in leaves:
            tensor.grad = None

    outputs_of = found.compile(
        partial(variant_outputs, found.autograd, variant, x_leaf, param_leaves, activation)
    )

    def step() -> list:
        with found.mode():
            outputs = outputs_of()
        block_until_ready(outputs)
        found.synchronize()
        return outputs

    return Stepper(reset, step)


@cache
def _jax_compiled(variant: str, activation: str) -> Callable[[Any, Any], Any]:
    """One jitted function per variant, so each input shape compiles once per run."""
    jax = require("jax")
    if variant == "training":
        return jax.jit(jax.grad(partial(jax_training_loss, activation=activation)))
    return jax.jit(partial(jax_input_hessian, activation=activation))


def _jax_stepper(variant: str, x: np.ndarray, params: Parameters, device: str,
                 activation: str) -> Stepper:
    """``jax.jit`` of the composed grads; the warm-up samples absorb the compilation."""
    jax = require("jax")
    target = jax_device(device)
    x_on_device = jax.device_put(x, target)
    params_on_device = jax.device_put([tuple(layer) for layer in params], target)
    compiled = _jax_compiled("hessian" if variant == PR_FORM else variant, activation)

    def step() -> list:
        result = jax.block_until_ready(compiled(params_on_device, x_on_device))
        return jax.tree_util.tree_leaves(result)

    return Stepper(lambda: None, step)


def _torch_func_stepper(variant: str, x: np.ndarray, params: Parameters, device: str,
                        activation: str) -> Stepper:
    """``torch.func``'s composition, eager, as the PR's functorch column: variant B takes
    ``torch.func.grad`` of the loss with respect to the weights."""
    torch = require("torch")
    ad, wait = torch_autograd(), torch_synchronizer(device)
    target = torch_device(device)
    x_t = torch.tensor(x, device=target)
    params_t = [tuple(torch.tensor(p, device=target) for p in layer) for layer in params]
    grads = torch.func.grad(partial(func_training_loss, ad, x=x_t, activation=activation))

    def outputs() -> list:
        if variant == "training":
            return [g for layer in grads(params_t) for g in layer]
        return [func_input_hessian(ad, params_t, x_t, activation)]

    def step() -> list:
        found = outputs()
        wait()
        return found

    return Stepper(lambda: None, step)


def build_stepper(
    peer: str, variant: str, x: np.ndarray, params: Parameters, device: str,
    activation: str = "tanh",
) -> Stepper:
    """Set ``peer`` up for ``variant``; raises PeerUnavailable where it cannot run."""
    if peer == "jax-jit":
        return _jax_stepper(variant, x, params, device, activation)
    if peer == "torch-func":
        return _torch_func_stepper(variant, x, params, device, activation)
    return _tape_stepper(peer, variant, x, params, device, activation)


def _prepared(built: Callable[[], Stepper]) -> Prepare:
    """For ``time_interleaved``: set up once (``built``), then each sample only clears the
    grads."""

    def prepare() -> Callable[[], list]:
        stepper = built()
        stepper.reset()
        return stepper.step

    return prepare


def timed_step(peer: str, variant: str, x: np.ndarray, params: Parameters, device: str,
               activation: str = "tanh") -> Prepare:
    """``peer``'s step of ``variant`` on ``x``, set up at its first sample."""
    return _prepared(cache(partial(build_stepper, peer, variant, x, params, device, activation)))


class Steppers:
    """Every peer's stepper of each workload at one batch, set up once in a run: the checks
    and the timing at the check batch (smoke mode's) share them, rather than set up (and,
    for js.compile, compile) each step twice."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.batch: int | None = None
        self._built: dict[tuple[str, str], Stepper] = {}

    def get(self, peer: str, key: str, batch: int) -> Stepper:
        """``peer``'s stepper of workload ``key`` at ``batch`` (those of another batch are
        let go: one batch's steppers are alive at a time)."""
        if batch != self.batch:
            self.batch, self._built = batch, {}
        found = self._built.get((peer, key))
        if found is None:
            activation, variant = WORKLOADS[key]
            found = build_stepper(peer, variant, init_inputs(batch), init_parameters(),
                                  self.device, activation)
            self._built[peer, key] = found
        return found

    def timed(self, peer: str, key: str, batch: int) -> Prepare:
        """``get``'s stepper, for ``time_interleaved``."""
        return _prepared(partial(self.get, peer, key, batch))
