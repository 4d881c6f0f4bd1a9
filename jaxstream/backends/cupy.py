"""CuPy backend: arrays on CUDA devices (imported only when a CuPy array shows up)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..devices import Device
from .base import Backend, seed_of
from .numpy import host_uniform


class CupyBackend(Backend):
    name = "cupy"

    def __init__(self) -> None:
        try:
            import array_api_compat.cupy as xcp
            import cupy
        except ImportError as err:
            raise RuntimeError(
                "the cupy backend needs CuPy and a CUDA GPU: install the `cuda` extra "
                "(pip install 'jaxstream[cuda]')"
            ) from err

        self._cupy = cupy
        self.xp = xcp

    def is_array(self, obj: Any) -> bool:
        return isinstance(obj, self._cupy.ndarray)

    def asarray(self, data: Any, dtype: Any = None) -> Any:
        return self._cupy.asarray(data, dtype=None if dtype is None else np.dtype(dtype))

    def device_of(self, array: Any) -> Device:
        return Device("cuda", array.device.id)

    def scatter_add(self, shape: tuple, dtype: Any, index: Any, values: Any) -> Any:
        import cupyx

        out = self._cupy.zeros(shape, dtype=dtype)
        cupyx.scatter_add(out, index, values)
        return out

    def random_uniform(self, shape: tuple, key: Any, dtype: Any) -> Any:
        return host_uniform(self._cupy.random.default_rng(seed_of(key)), shape, dtype)

    def random_normal(self, shape: tuple, key: Any, dtype: Any) -> Any:
        rng = self._cupy.random.default_rng(seed_of(key))
        return rng.standard_normal(shape, dtype=np.float64).astype(dtype)

    def random_integers(self, shape: tuple, key: Any, dtype: Any, low: int, high: int) -> Any:
        return self._cupy.random.default_rng(seed_of(key)).integers(low, high, shape, dtype=dtype)

    def to_host(self, array: Any) -> np.ndarray:
        host = self._cupy.asnumpy(array, stream=self._cupy.cuda.get_current_stream())
        self._cupy.cuda.get_current_stream().synchronize()
        host.flags.writeable = False
        return host

    def from_dlpack(self, obj: Any) -> Any:
        return self._cupy.from_dlpack(obj)
