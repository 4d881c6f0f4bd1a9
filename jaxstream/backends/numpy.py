"""NumPy backend: host arrays, the reference for every other backend."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import blas, host_kernels
from .base import Backend, seed_of


def host_uniform(rng: Any, shape: tuple, dtype: np.dtype) -> Any:
    """Uniform [0, 1) samples of `dtype` from a NumPy-style generator (CuPy's too).

    float32 and float64 are drawn in that dtype, so that rounding never gives 1.0.
    """
    return rng.random(shape, dtype=np.float64 if dtype.itemsize > 4 else np.float32).astype(dtype)


_UFUNCS = {"add": np.add, "multiply": np.multiply, "max": np.maximum, "min": np.minimum}
"""The ufunc of each way `combine_at` combines."""


class NumpyBackend(Backend):
    name = "numpy"
    xp = host_kernels.namespace  # Note [Host products that reach BLAS]
    runs_array_twins = True

    def __init__(self) -> None:
        blas.apply_default()  # Note [BLAS threads]

    def is_array(self, obj: Any) -> bool:
        return isinstance(obj, np.ndarray | np.generic)

    def asarray(self, data: Any, dtype: Any = None) -> Any:
        return np.asarray(data, dtype=None if dtype is None else np.dtype(dtype))

    # NumPy's own call, no frame: an ndarray comes back as is, a scalar as a 0-d array.
    normalize = staticmethod(np.asarray)

    def scatter_add(self, shape: tuple, dtype: Any, index: Any, values: Any) -> Any:
        out = np.zeros(shape, dtype=dtype)
        np.add.at(out, index, values)
        return out

    def combine_at(self, flat: Any, positions: Any, values: Any, method: str) -> Any:
        out = np.array(flat, copy=True)
        _UFUNCS[method].at(out, positions, values)
        return out

    def random_uniform(self, shape: tuple, key: Any, dtype: Any) -> Any:
        return host_uniform(np.random.default_rng(seed_of(key)), shape, dtype)

    def random_normal(self, shape: tuple, key: Any, dtype: Any) -> Any:
        rng = np.random.default_rng(seed_of(key))
        return rng.standard_normal(shape, dtype=np.float64).astype(dtype)

    def random_integers(self, shape: tuple, key: Any, dtype: Any, low: int, high: int) -> Any:
        return np.random.default_rng(seed_of(key)).integers(low, high, shape, dtype=dtype)

    def random_poisson(self, rates: Any, key: Any) -> Any:
        return np.random.default_rng(seed_of(key)).poisson(rates).astype(rates.dtype)

    def random_binomial(self, counts: Any, probabilities: Any, key: Any) -> Any:
        rng = np.random.default_rng(seed_of(key))
        return rng.binomial(counts.astype(np.int64), probabilities).astype(counts.dtype)

    def to_host(self, array: Any) -> np.ndarray:
        view = np.asarray(array).view()
        view.flags.writeable = False
        return view

    def from_dlpack(self, obj: Any) -> Any:
        return np.from_dlpack(obj)
