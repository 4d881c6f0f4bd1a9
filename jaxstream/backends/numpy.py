"""NumPy backend: host arrays, the reference for every other backend."""

from __future__ import annotations

from typing import Any

import array_api_compat.numpy as xnp
import numpy as np

from .base import Backend


class NumpyBackend(Backend):
    name = "numpy"
    xp = xnp

    def is_array(self, obj: Any) -> bool:
        return isinstance(obj, np.ndarray | np.generic)

    def asarray(self, data: Any, dtype: Any = None) -> Any:
        return np.asarray(data, dtype=None if dtype is None else np.dtype(dtype))

    def normalize(self, array: Any) -> Any:
        if type(array) is np.ndarray:
            return array
        return np.asarray(array)

    def scatter_add(self, shape: tuple, dtype: Any, index: Any, values: Any) -> Any:
        out = np.zeros(shape, dtype=dtype)
        np.add.at(out, index, values)
        return out

    def random_normal(self, shape: tuple, key_or_seed: Any, dtype: Any) -> Any:
        if not isinstance(key_or_seed, int | np.integer):
            raise TypeError(
                f"the numpy backend draws from an int seed, got {type(key_or_seed).__name__}"
            )
        rng = np.random.default_rng(int(key_or_seed))
        return rng.standard_normal(shape, dtype=np.float64).astype(np.dtype(dtype))

    def to_host(self, array: Any) -> np.ndarray:
        view = np.asarray(array).view()
        view.flags.writeable = False
        return view

    def from_dlpack(self, obj: Any) -> Any:
        return np.from_dlpack(obj)
