"""The timed peers: jaxstream in each place it runs, PyTorch, and one raw call of each op.

A place is a device and a backend, with the stream check switched as the place says for
its samples (and its graph's forward), and, for the CuPy stand-in, the stand-in installed
(Note [The CuPy stand-in] in experiments/harness/cupy_stand_in.py). The cuda places and
peers are there only with ``--device cuda``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from functools import cache
from typing import Any

from experiments.harness import cupy_stand_in
from experiments.harness.peers import require, require_cuda_streams, torch_device
from experiments.harness.timing import PeerUnavailable, Prepare
from experiments.workloads import tanh_mul_chain as chain

CHECK_ENV = "JAXSTREAM_STREAM_CHECK"
PASSES = ("forward", "backward")


@dataclass(frozen=True)
class Place:
    """Where jaxstream runs in one row of the table, and what that row compares it with."""

    peer: str
    label: str
    device: str
    backend: str
    checks: str
    """The stream check switch during its samples: "0" off, "1" on (Note [Stream sanitizer])."""
    floor: str
    """The peer that calls each op once, raw, on the same arrays' library and device."""
    host: str | None = None
    """jaxstream on the cpu with the same backend (None for the cpu's own places)."""
    torch: str = "torch"
    stand_in: bool = False


PLACES = (
    Place("cpu-numpy", "cpu, NumPy", "cpu", "numpy", "0", "numpy-op"),
    Place("cpu-jax", "cpu, JAX", "cpu", "jax", "0", "jax-jit-op"),
    Place("sim-numpy", "sim, NumPy, checks off", "sim:0", "numpy", "0", "numpy-op", "cpu-numpy"),
    Place("sim-numpy-checked", "sim, NumPy, checks on", "sim:0", "numpy", "1", "numpy-op",
          "cpu-numpy"),
    Place("sim-jax", "sim, JAX, checks off", "sim:0", "jax", "0", "jax-jit-op", "cpu-jax"),
    Place("sim-jax-checked", "sim, JAX, checks on", "sim:0", "jax", "1", "jax-jit-op",
          "cpu-jax"),
    Place("cuda-stand-in", "cuda, CuPy stand-in", "cuda:0", "cupy", "0", "cuda-stand-in-op",
          "cpu-numpy", stand_in=True),
)
"""Every machine's places."""
CUDA_PLACES = (
    Place("cuda-cupy", "cuda, CuPy", "cuda:0", "cupy", "0", "cuda-cupy-op", "cpu-numpy",
          torch="cuda-torch"),
    Place("cuda-jax", "cuda, JAX", "cuda:0", "jax", "0", "cuda-jax-jit-op", "cpu-jax",
          torch="cuda-torch"),
)
"""The places of a GPU, with ``--device cuda``."""
FLOORS = {
    "numpy-op": "NumPy call",
    "jax-jit-op": "jax.jit call",
    "cuda-stand-in-op": "stand-in CuPy call",
}
CUDA_FLOORS = {"cuda-cupy-op": "CuPy call", "cuda-jax-jit-op": "jax.jit call on the GPU"}


def places(device: str) -> tuple[Place, ...]:
    """The places of a run with ``--device device``."""
    return PLACES + (CUDA_PLACES if device == "cuda" else ())


@contextmanager
def placed(place: Place) -> Iterator[None]:
    """Within the block, the stream check is switched as `place` says, and the CuPy stand-in
    installed where it runs on it."""
    saved = os.environ.get(CHECK_ENV)
    os.environ[CHECK_ENV] = place.checks
    try:
        with cupy_stand_in.installed() if place.stand_in else nullcontext():
            yield
    finally:
        if saved is None:
            os.environ.pop(CHECK_ENV, None)
        else:
            os.environ[CHECK_ENV] = saved


def _require_place(place: Place) -> None:
    """Raises PeerUnavailable where `place` cannot run here."""
    if place.stand_in or not place.device.startswith("cuda"):
        return
    if place.backend == "cupy":
        require_cuda_streams("cuda")
    else:
        from jaxstream.devices import jax_gpus

        if not jax_gpus():
            raise PeerUnavailable("JAX sees no GPU")


def leaf(place: Place) -> Any:
    """A fresh chain input that requires grad, in `place` (call it within `placed`)."""
    import jaxstream as js

    _require_place(place)
    return js.tensor(chain.start(), device=place.device, backend=place.backend,
                     requires_grad=True)


def waiter(place: Place) -> Callable[[Any], None]:
    """What waits for a tensor of `place` to be computed (JAX's and a GPU's run ahead)."""
    if place.backend == "jax":
        jax = require("jax")
        return lambda t: jax.block_until_ready(t.array)
    if place.device.startswith("cuda") and not place.stand_in:
        cupy = require("cupy")
        return lambda _: cupy.cuda.Device(0).synchronize()
    return lambda _: None


def jaxstream_prepare(place: Place, pass_: str, length: int) -> Prepare:
    """jaxstream's chain in `place`: its forward from a fresh leaf, or its backward on a graph
    built untimed."""

    def prepare() -> Callable[[], None]:
        wait = waiter(place)
        with placed(place):
            start = leaf(place)
            loss = None if pass_ == "forward" else chain.tape_chain(start, length).sum()

        def forward() -> None:
            with placed(place):
                wait(chain.tape_chain(start, length))

        def backward() -> None:
            with placed(place):
                loss.backward()
                wait(start.grad)

        return forward if pass_ == "forward" else backward

    return prepare


def torch_place(peer: str) -> tuple[Any, Any, Callable[[], object]]:
    """torch, the device of ``peer`` (the cpu for "torch", the GPU for "cuda-torch") and what
    waits for the work queued there."""
    torch = require("torch")
    device = torch_device("cuda" if peer == "cuda-torch" else "cpu")
    return torch, device, torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def torch_prepare(peer: str, pass_: str, length: int) -> Prepare:
    """PyTorch's chain, with autograd, on the cpu ("torch") or the GPU ("cuda-torch")."""

    def prepare() -> Callable[[], None]:
        torch, device, synchronize = torch_place(peer)
        start = torch.tensor(chain.start(), device=device, requires_grad=True)
        if pass_ == "forward":
            return lambda: (chain.tape_chain(start, length), synchronize())
        loss = chain.tape_chain(start, length).sum()
        return lambda: (loss.backward(), synchronize())

    return prepare


@cache
def _jitted() -> tuple[Callable, Callable]:
    """``jax.jit`` of each op, made once: a new one would take its slow path on its first call."""
    jax, jnp = require("jax"), require("jax.numpy")
    return jax.jit(jnp.tanh), jax.jit(jnp.multiply)


def floor_prepare(floor: str, length: int) -> Prepare:
    """Each op of the chain called once, raw, on an array of the floor's library and device,
    waited for once at the end."""

    def prepare() -> Callable[[], object]:
        if floor in ("jax-jit-op", "cuda-jax-jit-op"):
            return _jax_floor(floor == "cuda-jax-jit-op", length)
        if floor == "cuda-cupy-op":
            require_cuda_streams("cuda")
            cupy = require("cupy")
            array = cupy.asarray(chain.start())
            return lambda: (chain.op_chain(array, length, cupy.tanh, cupy.multiply),
                            cupy.cuda.Device(0).synchronize())
        numpy = require("numpy")
        array = chain.start()
        if floor == "cuda-stand-in-op":
            array = array.view(cupy_stand_in.ndarray_on(0))
        return lambda: chain.op_chain(array, length, numpy.tanh, numpy.multiply)

    return prepare


def _jax_floor(on_gpu: bool, length: int) -> Callable[[], object]:
    jax = require("jax")
    import jaxstream as js

    target = js.device("cuda:0" if on_gpu else "cpu")
    if on_gpu:
        _require_place(CUDA_PLACES[1])
    tanh, multiply = _jitted()
    array = jax.device_put(chain.start(), target.kind.jax_device(target.index))
    return lambda: jax.block_until_ready(chain.op_chain(array, length, tanh, multiply))


def prepares(device: str, pass_: str, length: int) -> dict[str, Prepare]:
    """Every peer of one pass, by name: the places, PyTorch, the floors."""
    found: dict[str, Prepare] = {
        place.peer: jaxstream_prepare(place, pass_, length) for place in places(device)
    }
    found["torch"] = torch_prepare("torch", pass_, length)
    floors = dict(FLOORS)
    if device == "cuda":
        found["cuda-torch"] = torch_prepare("cuda-torch", pass_, length)
        floors.update(CUDA_FLOORS)
    found.update({floor: floor_prepare(floor, length) for floor in floors})
    return found
