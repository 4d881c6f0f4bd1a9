"""JAX backend: `jax.Array`s (and tracers, so that jaxstream code can be traced)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..devices import CPU, Device, jax_gpus
from .base import Backend

_WORD = 0xFFFFFFFF


def _checked(dtype: Any) -> np.dtype:
    """`dtype` as a NumPy dtype, or the error of a 64-bit dtype while x64 is off."""
    d = np.dtype(dtype)
    wide = d.itemsize == 8 and d.kind in "fiu" or d == np.complex128
    if wide and not jax.config.x64_enabled:
        raise TypeError(
            f"{d} on the jax backend needs JAX's 64-bit mode, which is off; enable it with "
            "jax.config.update('jax_enable_x64', True) (or JAX_ENABLE_X64=1), or use a "
            "32-bit dtype"
        )
    return d


def _source_dtype(data: Any) -> np.dtype | None:
    """The NumPy dtype of another library's array (`torch.float64` -> float64), if it has one."""
    dtype = getattr(data, "dtype", None)
    if dtype is None:
        return None
    for spec in (dtype, str(dtype).rsplit(".", 1)[-1]):
        try:
            return np.dtype(spec)
        except TypeError:
            continue
    return None


def prng_key(key: Any) -> jax.Array:
    """A JAX key as is; an int seed as the key whose two uint32 words are its halves.

    That is `jax.random.PRNGKey(seed)` with x64 on, for every 64-bit seed; without
    x64 `PRNGKey` would drop the high half.
    """
    if isinstance(key, jax.Array):
        return key
    seed = int(key) % 2**64
    return jnp.asarray([seed >> 32, seed & _WORD], dtype=jnp.uint32)


def _jax_device(device: Device) -> Any:
    """JAX's device for a jaxstream device: its cpu for host memory, else its GPU."""
    if device.kind.host_memory:
        return jax.devices("cpu")[0]
    return jax_gpus()[device.index]


class JaxBackend(Backend):
    name = "jax"
    xp = jnp
    compiles_kernels = True
    runs_on_xla = True

    def is_array(self, obj: Any) -> bool:
        return isinstance(obj, jax.Array)

    def asarray(self, data: Any, dtype: Any = None) -> Any:
        if dtype is None:
            dtype = _source_dtype(data)
            if dtype is None:
                return jnp.asarray(data)
        return jnp.asarray(data, dtype=_checked(dtype))

    def dtype(self, spec: Any) -> Any:
        return _checked(spec)

    def holds_64bit_dtypes(self) -> bool:
        return jax.config.x64_enabled

    def device_of(self, array: Any) -> Device:
        try:
            devices = array.devices()
        except Exception:
            return CPU
        where = next(iter(devices))
        if where.platform == "cpu":
            return CPU
        if where.platform in ("gpu", "cuda"):
            # Its kernels run on XLA's stream of that device (js.xla_stream): no CuPy.
            return Device("cuda", jax_gpus().index(where))
        raise RuntimeError(f"jaxstream does not support JAX arrays on {where.platform!r} devices")

    def scatter_add(self, shape: tuple, dtype: Any, index: Any, values: Any) -> Any:
        return jnp.zeros(shape, dtype=dtype).at[index].add(values)

    def random_uniform(self, shape: tuple, key: Any, dtype: Any) -> Any:
        return jax.random.uniform(prng_key(key), shape, dtype=dtype)

    def random_normal(self, shape: tuple, key: Any, dtype: Any) -> Any:
        return jax.random.normal(prng_key(key), shape, dtype=dtype)

    def random_integers(self, shape: tuple, key: Any, dtype: Any, low: int, high: int) -> Any:
        return jax.random.randint(prng_key(key), shape, low, high, dtype=dtype)

    def to_host(self, array: Any) -> np.ndarray:
        host = np.asarray(array)
        if host.flags.writeable:
            host = host.view()
            host.flags.writeable = False
        return host

    def from_dlpack(self, obj: Any) -> Any:
        # JAX passes XLA's stream to a GPU producer's `__dlpack__(stream=)`.
        dtype = _source_dtype(obj)
        if dtype is not None:
            _checked(dtype)
        return jnp.from_dlpack(obj)

    def placement_problem(self, device: Device) -> str | None:
        if device.kind.host_memory or device.index < len(jax_gpus()):
            return None
        return f"JAX sees no GPU {device} here (pip install 'jax[cuda12]' on a machine with one)"

    def from_host(self, host: np.ndarray, device: Device) -> Any:
        _checked(host.dtype)
        return jax.device_put(np.array(host), _jax_device(device))

    def to_device(self, array: Any, device: Device) -> Any:
        # Host memory is one JAX device: a move between sim devices copies through the host.
        return None if device.kind.host_memory else jax.device_put(array, _jax_device(device))
