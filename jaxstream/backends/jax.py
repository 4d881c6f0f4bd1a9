"""JAX backend: `jax.Array`s (and tracers, so that jaxstream code can be traced)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..devices import CPU, GPU_STACK, Device, device_of_jax
from ..devices.tracing import inside_trace
from ..dtypes import data_dtype
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


def _home(device: Device) -> Any:
    """The JAX device of `device` (Note [JAX devices of jaxstream devices] in devices/xla.py)."""
    home = device.kind.jax_device(device.index)
    if home is None:
        raise RuntimeError(f"JAX sees no GPU {device} here ({GPU_STACK} on a machine with one)")
    return home


def _device_id(jax_device: Any) -> int:
    return jax_device.id


def _jax_default_device() -> Any:
    """Where JAX runs a computation whose inputs are all uncommitted: its default device,
    else its first device of this process."""
    chosen = jax.config.jax_default_device
    if chosen is None or isinstance(chosen, str):
        return jax.local_devices(backend=chosen)[0]
    return chosen


class JaxBackend(Backend):
    name = "jax"
    places_arrays = True
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
            dtype = data_dtype(dtype, data, self)  # Note [64-bit integer data on JAX]
        return jnp.asarray(data, dtype=_checked(dtype))

    def dtype(self, spec: Any) -> Any:
        return _checked(spec)

    def holds_64bit_dtypes(self) -> bool:
        return jax.config.x64_enabled

    def device_of(self, array: Any) -> Device:
        if inside_trace():  # Note [JAX devices of jaxstream devices] in devices/xla.py
            return CPU
        try:
            devices = array.devices()
        except Exception:  # a tracer outside jaxstream's own traces
            return CPU
        # One device, or the first of an array sharded over several.
        return device_of_jax(min(devices, key=_device_id) if len(devices) > 1 else
                             next(iter(devices)))

    def making_on(self, device: Device) -> AbstractContextManager:
        return jax.default_device(_home(device))

    def scatter_add(self, shape: tuple, dtype: Any, index: Any, values: Any) -> Any:
        return jnp.zeros_like(values, dtype=dtype, shape=shape).at[index].add(values)

    def combine_at(self, flat: Any, positions: Any, values: Any, method: str) -> Any:
        return getattr(flat.at[positions], method)(values)

    def random_uniform(self, shape: tuple, key: Any, dtype: Any) -> Any:
        return jax.random.uniform(prng_key(key), shape, dtype=dtype)

    def random_normal(self, shape: tuple, key: Any, dtype: Any) -> Any:
        return jax.random.normal(prng_key(key), shape, dtype=dtype)

    def random_integers(self, shape: tuple, key: Any, dtype: Any, low: int, high: int) -> Any:
        return jax.random.randint(prng_key(key), shape, low, high, dtype=dtype)

    def random_poisson(self, rates: Any, key: Any) -> Any:
        return jax.random.poisson(prng_key(key), rates).astype(rates.dtype)

    def random_binomial(self, counts: Any, probabilities: Any, key: Any) -> Any:
        return jax.random.binomial(prng_key(key), counts, probabilities, dtype=counts.dtype)

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
            _checked(data_dtype(dtype, obj, self))  # Note [64-bit integer data on JAX]
        return jnp.from_dlpack(obj)

    def placement_problem(self, device: Device) -> str | None:
        if device.kind.jax_device(device.index) is not None:
            return None
        return f"JAX sees no GPU {device} here ({GPU_STACK} on a machine with one)"

    def from_host(self, host: np.ndarray, device: Device) -> Any:
        dtype = _checked(data_dtype(host.dtype, host, self))
        return jax.device_put(np.array(host, dtype=dtype), _home(device))

    def placed(self, array: Any, device: Device) -> Any:
        # JAX runs an op whose inputs are all uncommitted on its default device (a GPU),
        # wherever they are: an array elsewhere is committed to its device. One on the
        # default device stays uncommitted, so that it still meets arrays sharded over
        # several devices as JAX's own arrays do.
        home = _home(device)
        if isinstance(array, jax.core.Tracer):
            return array
        if home in array.devices() and (array.committed or home == _jax_default_device()):
            return array
        return jax.device_put(array, home)

    def tags(self, array: Any, device: Device) -> bool:
        return isinstance(array, jax.core.Tracer) or _home(device) in array.devices()

    def to_device(self, array: Any, device: Device) -> Any:
        # Devices whose arrays are tagged host arrays (cpu and sim outside the GPU twin)
        # share one JAX device: between them the move copies through the host.
        home = _home(device)
        return None if home in array.devices() else jax.device_put(array, home)
