"""JAX backend: `jax.Array`s (and tracers, so that jaxstream code can be traced)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..devices import CPU, Device
from .base import Backend


class JaxBackend(Backend):
    name = "jax"
    xp = jnp

    def is_array(self, obj: Any) -> bool:
        return isinstance(obj, jax.Array)

    def asarray(self, data: Any, dtype: Any = None) -> Any:
        return jnp.asarray(data, dtype=None if dtype is None else np.dtype(dtype))

    def device_of(self, array: Any) -> Device:
        try:
            devices = array.devices()
        except Exception:
            return CPU
        platform = next(iter(devices)).platform
        if platform == "cpu":
            return CPU
        if platform == "gpu" or platform == "cuda":
            return Device("cuda", next(iter(devices)).id)
        raise RuntimeError(f"jaxstream does not support JAX arrays on {platform!r} devices")

    def scatter_add(self, shape: tuple, dtype: Any, index: Any, values: Any) -> Any:
        return jnp.zeros(shape, dtype=dtype).at[index].add(values)

    def random_normal(self, shape: tuple, key_or_seed: Any, dtype: Any) -> Any:
        if isinstance(key_or_seed, int | np.integer):
            key_or_seed = jax.random.PRNGKey(int(key_or_seed))
        return jax.random.normal(key_or_seed, shape, dtype=np.dtype(dtype))

    def to_host(self, array: Any) -> np.ndarray:
        host = np.asarray(array)
        if host.flags.writeable:
            host = host.view()
            host.flags.writeable = False
        return host
