"""The backend interface: the array-API namespace plus what the standard lacks."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

import jax
import numpy as np

from ..devices import CPU, Device


class Backend:
    """One array library. Subclasses fill in `xp` and the few non-standard pieces."""

    name: str = ""
    xp: Any = None
    compiles_kernels: bool = False
    """Whether ops run a compiled kernel here (JAX: Note [Compiled kernels on JAX] in
    ops/compiled_kernels.py) rather than calling the kernel on `xp`."""
    runs_array_twins: bool = False
    """Whether a node's backward without create_graph may call its rules' array twins on
    this backend's host arrays instead of dispatching ops (NumPy's: Note [Array vjps on the
    host] in ops/twins.py)."""
    places_arrays: bool = False
    """Whether its arrays carry a device of their own (JAX's and CuPy's), rather than being
    host arrays that a jaxstream device tags."""
    runs_on_xla: bool = False
    """Whether kernels on an accelerator run on XLA's own stream of the device
    (`js.xla_stream`) rather than on jaxstream's current stream (JAX's do)."""

    def is_array(self, obj: Any) -> bool:
        raise NotImplementedError

    def asarray(self, data: Any, dtype: Any = None) -> Any:
        return self.xp.asarray(data, dtype=self.dtype(dtype) if dtype is not None else None)

    def normalize(self, array: Any) -> Any:
        """Coerce a kernel's result to this backend's array type (NumPy returns scalars)."""
        return array

    def device_of(self, array: Any) -> Device:
        return CPU

    def default_device(self) -> Device:
        """Where this backend's new arrays go when no device is named."""
        return CPU

    def making_on(self, device: Device) -> AbstractContextManager:
        """A context in which this backend's new arrays are made on `device` (JAX's default
        device; the device guard does it for CuPy, and host arrays have nowhere else)."""
        return nullcontext()

    def holds_64bit_dtypes(self) -> bool:
        """Whether this backend can hold 64-bit dtypes now (JAX only in its x64 mode)."""
        return True

    def dtype(self, spec: Any) -> Any:
        """A dtype object of this backend from a string, NumPy dtype or backend dtype."""
        return np.dtype(spec)

    def scatter_add(self, shape: tuple, dtype: Any, index: Any, values: Any) -> Any:
        """zeros(shape).at[index].add(values): the adjoint of `array[index]`."""
        raise NotImplementedError

    def combine_at(self, flat: Any, positions: Any, values: Any, method: str) -> Any:
        """A copy of the 1-d `flat` with `values` combined in at `positions` by `method`
        ("add", "multiply", "max" or "min"; a position may repeat): scatter_reduce's kernel."""
        raise NotImplementedError

    # Random draws: `key` is an int seed or a JAX PRNG key (see ops/random.py), `dtype` a
    # dtype of this backend. Each draw is a pure function of its key.
    def random_uniform(self, shape: tuple, key: Any, dtype: Any) -> Any:
        """Uniform samples in [0, 1)."""
        raise NotImplementedError

    def random_normal(self, shape: tuple, key: Any, dtype: Any) -> Any:
        """Standard normal samples."""
        raise NotImplementedError

    def random_integers(self, shape: tuple, key: Any, dtype: Any, low: int, high: int) -> Any:
        """Integers drawn uniformly from [low, high)."""
        raise NotImplementedError

    def random_poisson(self, rates: Any, key: Any) -> Any:
        """A Poisson sample of each (non-negative) rate, in the rates' floating dtype."""
        raise NotImplementedError

    def random_binomial(self, counts: Any, probabilities: Any, key: Any) -> Any:
        """A binomial sample for each whole count (>= 0) and probability (in [0, 1]), of the
        two's broadcast shape, in the counts' floating dtype."""
        raise NotImplementedError

    def to_host(self, array: Any) -> np.ndarray:
        """A read-only NumPy view of `array` (a copy only where the memory is not host).

        A device array is copied on its own device's current stream, then waited for.
        """
        raise NotImplementedError

    def host_copy(self, array: Any) -> np.ndarray:
        """A writeable NumPy copy of `array`, the host's own (one copy, off a device too)."""
        return np.array(self.to_host(array))

    def from_dlpack(self, obj: Any) -> Any:
        """Zero-copy import of a DLPack producer whose memory this backend can hold.

        On a GPU the import is ordered after the producer's stream by DLPack's
        `stream=` argument (the consumer passes its current stream).
        """
        return self.xp.from_dlpack(obj)

    def placement_problem(self, device: Device) -> str | None:
        """Why this backend cannot hold arrays on `device`, or None if it can."""
        if device.kind.host_memory:
            return None
        return f"{self.name} arrays live in host memory (cpu and sim devices)"

    def from_host(self, host: np.ndarray, device: Device) -> Any:
        """A new array on `device` holding a copy of the host array `host`."""
        return self.asarray(np.array(host))

    def placed(self, array: Any, device: Device) -> Any:
        """`array`, a new array of this backend, where `device` keeps it: moved or bound there
        if the backend places arrays, as it is where `device` tags host arrays."""
        return array

    def tags(self, array: Any, device: Device) -> bool:
        """Whether `array` may be tagged with `device` as it is: it lies in the memory that
        device's arrays of this backend use (host memory, for a sim device's host arrays)."""
        return device.kind.host_memory and self.device_of(array).kind.host_memory

    def to_device(self, array: Any, device: Device) -> Any:
        """A copy of `array` on another device of this backend without the host; None if
        the backend has no such path (the move then goes through the host)."""
        return None

    def __repr__(self) -> str:
        return f"<backend {self.name}>"


def seed_of(key: Any) -> int:
    """An int seed from an int or a JAX PRNG key (its key data read as one integer)."""
    if not isinstance(key, jax.Array):
        return int(key)
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    return int.from_bytes(np.asarray(key, dtype=np.uint32).tobytes(), "little")
