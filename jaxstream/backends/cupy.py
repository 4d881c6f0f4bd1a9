"""CuPy backend: arrays on CUDA devices (imported only when a CuPy array shows up).

Every CuPy call that launches work runs under the array's (or the target's)
device, on that device's current CuPy stream: Note [Device guards] in
jaxstream/devices/kind.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..devices import CUPY_MISSING, Device
from .base import Backend, seed_of
from .numpy import host_uniform


class CupyBackend(Backend):
    name = "cupy"
    places_arrays = True

    def __init__(self) -> None:
        try:
            import array_api_compat.cupy as xcp
            import cupy
        except ImportError as err:
            message = f"the cupy backend needs CuPy and a CUDA GPU. {CUPY_MISSING}"
            raise RuntimeError(message) from err

        self._cupy = cupy
        self.xp = xcp

    def is_array(self, obj: Any) -> bool:
        return isinstance(obj, self._cupy.ndarray)

    def asarray(self, data: Any, dtype: Any = None) -> Any:
        return self._cupy.asarray(data, dtype=None if dtype is None else np.dtype(dtype))

    def device_of(self, array: Any) -> Device:
        return Device("cuda", array.device.id)

    def default_device(self) -> Device:
        return Device("cuda", self._cupy.cuda.runtime.getDevice())

    def scatter_add(self, shape: tuple, dtype: Any, index: Any, values: Any) -> Any:
        import cupyx

        out = self._cupy.zeros(shape, dtype=dtype)
        cupyx.scatter_add(out, index, values)
        return out

    def combine_at(self, flat: Any, positions: Any, values: Any, method: str) -> Any:
        import cupyx

        if method == "multiply":
            raise NotImplementedError(
                "scatter_reduce(reduce='prod') on CuPy arrays: CuPy has no scattered product; "
                "move the tensor to the host or to JAX first (t.to(backend='numpy'))"
            )
        out = flat.copy()
        getattr(cupyx, f"scatter_{method}")(out, positions, values)
        return out

    def random_uniform(self, shape: tuple, key: Any, dtype: Any) -> Any:
        return host_uniform(self._cupy.random.default_rng(seed_of(key)), shape, dtype)

    def random_normal(self, shape: tuple, key: Any, dtype: Any) -> Any:
        rng = self._cupy.random.default_rng(seed_of(key))
        return rng.standard_normal(shape, dtype=np.float64).astype(dtype)

    def random_integers(self, shape: tuple, key: Any, dtype: Any, low: int, high: int) -> Any:
        return self._cupy.random.default_rng(seed_of(key)).integers(low, high, shape, dtype=dtype)

    def random_poisson(self, rates: Any, key: Any) -> Any:
        return self._cupy.random.default_rng(seed_of(key)).poisson(rates).astype(rates.dtype)

    def random_binomial(self, counts: Any, probabilities: Any, key: Any) -> Any:
        rng = self._cupy.random.default_rng(seed_of(key))
        return rng.binomial(counts.astype(np.int64), probabilities).astype(counts.dtype)

    def to_host(self, array: Any) -> np.ndarray:
        host = self.host_copy(array)
        host.flags.writeable = False
        return host

    def host_copy(self, array: Any) -> np.ndarray:
        # The array's own device and its current stream, not the caller's current device.
        with array.device:
            stream = self._cupy.cuda.get_current_stream()
            host = self._cupy.asnumpy(array, stream=stream)
            stream.synchronize()
        return host

    def from_dlpack(self, obj: Any) -> Any:
        # CuPy passes its current stream of the producer's device to `__dlpack__(stream=)`.
        with self._cupy.cuda.Device(obj.__dlpack_device__()[1]):
            return self._cupy.from_dlpack(obj)

    def placement_problem(self, device: Device) -> str | None:
        if device.kind.host_memory:
            return "cupy arrays live on CUDA GPUs; choose a cuda device"
        return None

    def from_host(self, host: np.ndarray, device: Device) -> Any:
        with self._cupy.cuda.Device(device.index):
            return self._cupy.array(host)

    def placed(self, array: Any, device: Device) -> Any:
        return array if array.device.id == device.index else self.to_device(array, device)

    def to_device(self, array: Any, device: Device) -> Any:
        # A peer copy, issued on the target's current stream, which the caller has
        # ordered after the source's. `cupy.copy` is documented to copy an array of
        # another device into the current one; `cupy.array`'s documentation says no
        # such thing.
        with self._cupy.cuda.Device(device.index):
            return self._cupy.copy(array)
