"""Bringing the compared frameworks up on the requested device, or saying why not."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from functools import partial
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np

from experiments.harness.hardware import missing_gpu
from experiments.harness.timing import PeerUnavailable


def require(module_name: str) -> ModuleType:
    """Import an optional peer; a missing one makes its columns read n/a."""
    try:
        return importlib.import_module(module_name)
    except ImportError as error:
        raise PeerUnavailable(f"{module_name} is not installed") from error


def torch_device(device: str) -> Any:
    torch = require("torch")
    if device == "cuda" and not torch.cuda.is_available():
        raise PeerUnavailable("torch sees no CUDA device")
    return torch.device(device)


def jax_device(device: str) -> Any:
    jax = require("jax")
    platform = "gpu" if device == "cuda" else "cpu"
    try:
        return jax.devices(platform)[0]
    except RuntimeError as error:
        raise PeerUnavailable(f"jax has no {platform} device") from error


def numpy_device(device: str) -> None:
    if device != "cpu":
        raise PeerUnavailable("NumPy arrays live on the host only")


def array_backend(device: str) -> str:
    """The jaxstream backend whose arrays live on ``device``: CuPy on cuda, else NumPy."""
    return "cupy" if device.startswith("cuda") else "numpy"


def require_cuda_streams(device: str) -> None:
    """Raises PeerUnavailable unless ``--device cuda`` was given and CuPy sees a GPU
    (jaxstream's cuda streams are CuPy's)."""
    if device != "cuda":
        raise PeerUnavailable("run with --device cuda")
    require("cupy")
    problem = missing_gpu()
    if problem is not None:
        raise PeerUnavailable(problem)


def block_until_ready(values: Iterable[Any]) -> None:
    """Wait for asynchronously dispatched results (JAX), so a timing covers the work."""
    for value in values:
        array = getattr(value, "data", value)
        if hasattr(array, "block_until_ready"):
            array.block_until_ready()


def as_numpy(value: Any) -> np.ndarray:
    """A host copy of a NumPy, JAX, torch or jaxstream array, for cross-checks."""
    if hasattr(value, "detach"):
        value = value.detach()
    if hasattr(value, "cpu") and callable(value.cpu):
        value = value.cpu()
    if hasattr(value, "numpy") and callable(value.numpy):
        return np.array(value.numpy())
    return np.array(value)


def jaxstream_leaf(array: np.ndarray, backend: str, device: str, requires_grad: bool = True) -> Any:
    """A jaxstream leaf over a private copy of ``array`` on ``backend`` ("numpy" | "jax")."""
    import jaxstream as js

    if backend == "numpy":
        numpy_device(device)
        data = array.copy()
    else:
        data = require("jax").device_put(array, jax_device(device))
    return js.tensor(data, requires_grad=requires_grad)


def torch_leaf(array: np.ndarray, device: str, requires_grad: bool = True) -> Any:
    torch = require("torch")
    return torch.tensor(array, device=torch_device(device), requires_grad=requires_grad)


def torch_synchronizer(device: str) -> Any:
    """What waits for torch's queued work on ``device`` (nothing to wait for on the CPU)."""
    torch = require("torch")
    return torch.cuda.synchronize if device == "cuda" else (lambda: None)


class Tape(NamedTuple):
    """A define-by-run peer's leaves and what waits for its queued work."""

    leaf: Callable[[np.ndarray], Any]
    synchronize: Callable[[], None]


def tape(peer: str, device: str) -> Tape:
    """``torch``, or ``jaxstream-BACKEND`` (``numpy`` | ``jax``), on ``device``.

    Raises PeerUnavailable where torch is named and cannot run here; a jaxstream
    leaf raises it when made.
    """
    if peer == "torch":
        return Tape(partial(torch_leaf, device=device), torch_synchronizer(device))
    return Tape(
        partial(jaxstream_leaf, backend=peer.removeprefix("jaxstream-"), device=device),
        lambda: None,
    )
