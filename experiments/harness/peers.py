"""Bringing the compared frameworks up on the requested device, or saying why not.

Note [The sim run]
~~~~~~~~~~~~~~~~~~
`--device sim` is the CPU stand-in for `--device cuda`: every experiment runs the
code paths of a GPU run on any machine. jaxstream's tensors (NumPy and JAX
backends) are on `sim:0`, whose streams, events, device guard and engine worker
thread are an accelerator's while its kernels run on the host; JAX's arrays are on
sim:0's JAX device, which in the GPU twin (`JAXSTREAM_GPU_TWIN=1`, Note [The GPU
twin] in jaxstream/devices/xla.py) is a JAX host device of its own, so that an
array left unplaced lands elsewhere, as it would on a GPU. PyTorch has no sim
device and runs on the cpu; CuPy needs a GPU, so its cuda cells read n/a. Each
run says where its peers ran in a note (`placement_note`). Every tensor and array
is placed explicitly on the run's device (`jaxstream_device`, `jax_device`,
`torch_device`): on a GPU machine JAX's default device is the GPU, and data left
to defaults would land on two devices.
"""

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


# Note [Float32 products in every peer]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Every peer computes its float32 matrix products in float32: PyTorch by default
# (`torch.get_float32_matmul_precision() == "highest"`), jaxstream by the same setting
# (`js.get_float32_matmul_precision()`), NumPy and CuPy always. JAX's default precision lets
# a GPU round a product's inputs to TensorFloat32 (about 1e-3 relative): a cheaper product
# than the others' to time, and one that no agreement check at float32's tolerance passes.
# So each product a JAX peer writes names `JAX_PRECISION`.
JAX_PRECISION = "highest"
"""The `precision=` of every product in a JAX peer (Note [Float32 products in every peer])."""

RUN_DEVICES = {"cpu": "cpu", "cuda": "cuda:0", "sim": "sim:0"}
"""The jaxstream device of each ``--device``: where a run puts its tensors."""


def jaxstream_device(device: str) -> str:
    """The jaxstream device of ``device`` (``--device``): "cpu", "cuda:0" or "sim:0"."""
    return RUN_DEVICES[device]


def torch_device(device: str) -> Any:
    """torch's device for ``device``: cuda, else the cpu (torch has no sim device)."""
    torch = require("torch")
    if device == "cuda" and not torch.cuda.is_available():
        raise PeerUnavailable("torch sees no CUDA device")
    return torch.device("cuda" if device == "cuda" else "cpu")


def jax_device(device: str) -> Any:
    """The JAX device of ``device``'s jaxstream device, which holds its JAX arrays."""
    require("jax")
    import jaxstream as js

    target = js.device(jaxstream_device(device))
    found = target.kind.jax_device(target.index)
    if found is None:
        raise PeerUnavailable(f"jax has no device for {target}")
    return found


PLACEMENTS = {
    "sim": {
        "jaxstream": "jaxstream's tensors on sim:0",
        "jax": "JAX's arrays on sim:0's JAX device",
        "torch": "PyTorch on the cpu (it has no sim device)",
        "cupy": "the cuda cells n/a (CuPy needs a GPU)",
    },
    "cuda": {
        "jaxstream": "jaxstream's tensors on cuda:0 (the NumPy backend's cells n/a: NumPy "
        "arrays live on the host)",
        "jax": "JAX's arrays on the GPU",
        "torch": "PyTorch on cuda",
        "cupy": "CuPy on cuda:0",
    },
}
"""Where each framework's peers ran, by ``--device`` (the cpu needs no note)."""
_LEADS = {
    "sim": "the CPU stand-in for cuda, whose streams, events and engine worker thread are an "
    "accelerator's while its kernels run on the host (Note [The sim run] in "
    "experiments/harness/peers.py)",
    "cuda": "the GPU",
}


def placement_note(device: str, frameworks: Iterable[str]) -> list[str]:
    """The note that says where the peers of ``frameworks`` (keys of ``PLACEMENTS``'
    entries) ran, for a table; none on the cpu, where everything runs, or for no framework."""
    placements = PLACEMENTS.get(device)
    named = tuple(frameworks)
    if placements is None or not named:
        return []
    where = "; ".join(placements[framework] for framework in named)
    return [f"Device {device}, {_LEADS[device]}: {where}."]


def numpy_device(device: str) -> None:
    if device == "cuda":
        raise PeerUnavailable("NumPy arrays live on the host only")


def jaxstream_placement(backend: str, device: str) -> str:
    """The jaxstream device of a ``backend`` ("numpy" | "jax") peer on ``device``; raises
    PeerUnavailable where that backend's arrays cannot live there."""
    if backend == "numpy":
        numpy_device(device)
    else:
        jax_device(device)
    return jaxstream_device(device)


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

    placed = jaxstream_placement(backend, device)
    if backend == "numpy":
        data = array.copy()
    else:  # JAX's own conversion, which makes int64 labels int32 while x64 is off
        data = require("jax").device_put(array, jax_device(device))
    return js.tensor(data, device=placed, requires_grad=requires_grad)


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
