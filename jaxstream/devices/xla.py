"""JAX's devices behind jaxstream's: where each device's JAX arrays live, and XLA's stream.

Note [JAX devices of jaxstream devices]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Every jaxstream device has one JAX device that holds its JAX arrays: `cpu` has
JAX's first host device, `cuda:N` JAX's N-th GPU, and a `sim` device either
shares the host device (its arrays are host arrays tagged with it, as NumPy's
are) or, in the GPU twin below, has a host device of its own. A JAX array made
without a device goes to JAX's default device, which on a GPU machine is the
GPU, not jaxstream's `cpu`: so every JAX array jaxstream makes is made on the
JAX device of the jaxstream device it is asked for (`jax.default_device`, or
`jax.device_put`), and an array's jaxstream device is read back from the JAX
device it is on, never assumed. Inside a trace (`js.compile`, `to_jax`) a JAX
value becomes a `cpu` tensor: a tracer has no device, a concrete value met there
(`stop_gradient`'s under `jax.grad`) must agree with the tracers beside it, and
the engine runs `cpu` work on the calling thread, where tracers must stay; XLA
places the one program by its committed inputs.

Note [The GPU twin]
~~~~~~~~~~~~~~~~~~~
On a CPU machine nothing shows a JAX array made in the wrong place: JAX has one
device, and it is jaxstream's `cpu`. The twin of a GPU machine
(`JAXSTREAM_GPU_TWIN=1` in the environment before jaxstream is imported; `make
test-gpu-twin` runs the suite so) gives JAX one host device more than there are
sim devices: the first stays jaxstream's `cpu`, host device k+1 holds sim:k's JAX
arrays, and JAX's default device is sim:0's. Then, exactly as on a GPU machine,
an unplaced `jnp` array lands on an accelerator, a move between sim devices is a
`jax.device_put`, and XLA's stream of a sim device has a native side (markers on
its JAX device), so that a stream round trip inside a trace fails here as it
does on a GPU. Only the JAX backend changes: NumPy's sim arrays stay tagged
host arrays. The twin starts JAX when jaxstream is imported, and its sim
devices hold JAX's host devices: a program that shards over those devices, or
that must call `jax.distributed.initialize` first, runs without it.

Note [XLA's stream]
~~~~~~~~~~~~~~~~~~~
XLA runs a device's JAX computations in order on a compute stream of its own,
which jaxstream can neither enter nor hand a CUDA event to. So the native side
of `js.xla_stream(cuda:N)` works through JAX's arrays: recording on it launches
a one-element computation on that device, which completes only after what XLA
queued there before it (its `is_ready` is the event's `done`), and a wait of
XLA's stream for an event blocks the host on that event (XLA cannot be told to
wait). Inside a trace (`js.compile`, `to_jax` under `jax.jit`) there is no
stream at all, one XLA program being ordered by its data flow: a record there
is a marker that is already done, and nothing is launched. The ordinary
crossings never need either: DLPack's `stream=` argument orders the two
streams in both directions. CuPy's `from_dlpack` passes its current stream to
JAX's `__dlpack__`, which makes it wait for the array's definition; JAX's
`from_dlpack` passes the stream XLA waits on for buffers made outside it
(`jax.Device.get_stream_for_external_ready_events()`) to CuPy's `__dlpack__`,
which makes that stream wait for CuPy's *current* stream. So a hand-off from
CuPy is issued with the producing stream current (transfer.py does), and one
CuPy stream importing from another orders nothing by DLPack alone: the
consumer waits for the producer first.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any

import jax
import numpy as np

from .tracing import inside_trace

TWIN_ENV = "JAXSTREAM_GPU_TWIN"
_DEVICE_COUNT_FLAG = re.compile(r"--xla_force_host_platform_device_count=(\d+)")


# This process's devices: in a run of several processes (`jax.distributed`), JAX's global
# device list starts with another process's devices.
@functools.cache
def jax_gpus() -> tuple:
    """This process's JAX GPU devices, by index; empty where JAX has no GPU backend."""
    try:
        return tuple(jax.local_devices(backend="gpu"))
    except RuntimeError:
        return ()


@functools.cache
def host_devices() -> tuple:
    """This process's JAX host devices: the first is jaxstream's `cpu`; in the twin, k+1 is
    sim:k's."""
    return tuple(jax.local_devices(backend="cpu"))


def host_device() -> Any:
    """The JAX device of jaxstream's `cpu`."""
    return host_devices()[0]


class GpuTwin:
    """Note [The GPU twin]: whether it is on, and the host device of each sim device."""

    def __init__(self) -> None:
        self.enabled = False
        self._index_of: dict[Any, int] = {}

    def start(self, sim_devices: int) -> None:
        """Give JAX a host device per sim device and make sim:0's JAX's default device."""
        wanted = sim_devices + 1
        flags = _DEVICE_COUNT_FLAG.search(os.environ.get("XLA_FLAGS", ""))
        try:
            jax.config.update("jax_num_cpu_devices", max(wanted, int(flags[1]) if flags else 0))
        except RuntimeError:
            pass  # JAX already runs; its devices must do
        hosts = host_devices()
        if len(hosts) < wanted:
            raise RuntimeError(
                f"the GPU twin ({TWIN_ENV}=1) needs {wanted} JAX host devices for "
                f"{sim_devices} sim devices, and JAX started with {len(hosts)}: import "
                f"jaxstream before running any JAX computation"
            )
        self._index_of = {dev: k for k, dev in enumerate(hosts[1:wanted])}
        jax.config.update("jax_default_device", hosts[1])
        self.enabled = True

    def device(self, index: int) -> Any:
        """The JAX host device of sim:`index`."""
        hosts = host_devices()
        if index + 1 >= len(hosts):
            raise ValueError(
                f"sim:{index} has no JAX device in the GPU twin, which started with "
                f"{len(hosts) - 1} sim devices; set JAXSTREAM_SIM_DEVICES before the import"
            )
        return hosts[index + 1]

    def sim_index(self, jax_device: Any) -> int | None:
        """The sim index whose arrays `jax_device` holds, or None (it is the cpu's)."""
        return self._index_of.get(jax_device)


twin = GpuTwin()

_tick = jax.jit(lambda x: x + 1)


class XlaMarker:
    """A point of XLA's stream: completes when XLA's work queued before it has."""

    host_only = True  # native streams cannot wait for it; the host does

    def __init__(self, jax_device: Any) -> None:
        self._array = None if inside_trace() else _tick(jax.device_put(np.int32(0), jax_device))

    @property
    def done(self) -> bool:
        return self._array is None or bool(self._array.is_ready())

    def synchronize(self) -> None:
        if self._array is not None:
            self._array.block_until_ready()


class XlaStream:
    """The native side of `js.xla_stream(device)`: Note [XLA's stream]."""

    def __init__(self, jax_device: Any) -> None:
        self._device = jax_device

    def record_event(self) -> XlaMarker:
        return XlaMarker(self._device)

    def wait_event(self, native_event: Any) -> None:
        native_event.synchronize()

    def synchronize(self) -> None:
        self.record_event().synchronize()

    @property
    def done(self) -> bool:
        return self.record_event().done
