"""`cuda`: GPUs, through CuPy's streams and events and XLA's own stream per device.

CuPy is imported only when a `cuda` stream or event is made, so jaxstream works
without it: JAX arrays on a GPU need only JAX (their kernels run on XLA's
stream, `js.xla_stream`), and a cuda device exists when CuPy or JAX sees it.
Every native call is issued under the device's guard: Note [Device guards] in
kind.py.
"""

from __future__ import annotations

import functools
import os
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from .kind import STREAM_CHECK_ENV, DeviceKind

if TYPE_CHECKING:
    from . import Device

CUPY_MISSING = "CuPy is not installed: pip install 'jaxstream[cuda]'"
# CuPy's switch from the legacy default stream to the per-thread one.
PER_THREAD_DEFAULT_STREAM_ENV = "CUPY_CUDA_PER_THREAD_DEFAULT_STREAM"


@functools.cache
def _cupy() -> Any:
    """The cupy module, or None where it is not installed."""
    try:
        import cupy
    except ImportError:
        return None
    return cupy


def require_cupy(what: str) -> Any:
    """The cupy module, or an ImportError that says `what` needs it and how to get it."""
    cupy = _cupy()
    if cupy is None:
        raise ImportError(f"{what} needs CuPy. {CUPY_MISSING}")
    return cupy


@functools.cache
def jax_gpus() -> tuple:
    """JAX's GPU devices, by index; empty where JAX has no GPU backend."""
    try:
        return tuple(jax.devices("gpu"))
    except RuntimeError:
        return ()


@functools.cache
def cuda_device_count() -> int:
    """How many GPUs CuPy or JAX sees; 0 without a GPU."""
    cupy = _cupy()
    count = 0
    if cupy is not None:
        try:
            count = int(cupy.cuda.runtime.getDeviceCount())
        except (OSError, RuntimeError, cupy.cuda.runtime.CUDARuntimeError):
            count = 0
    return max(count, len(jax_gpus()))


# Note [XLA's stream]
# ~~~~~~~~~~~~~~~~~~~
# XLA runs a device's JAX computations in order on a compute stream of its own,
# which jaxstream can neither enter nor hand a CUDA event to. So the native side
# of `js.xla_stream(cuda:N)` works through JAX's arrays: recording on it launches
# a one-element computation on that device, which completes only after what XLA
# queued there before it (its `is_ready` is the event's `done`), and a wait of
# XLA's stream for an event blocks the host on that event (XLA cannot be told to
# wait). The ordinary crossings never need either: DLPack's `stream=` argument
# orders the two streams in both directions. CuPy's `from_dlpack` passes its
# current stream to JAX's `__dlpack__`, which makes it wait for the array's
# definition; JAX's `from_dlpack` passes the stream XLA waits on for buffers
# made outside it (`jax.Device.get_stream_for_external_ready_events()`) to
# CuPy's `__dlpack__`, which makes that stream wait for CuPy's *current*
# stream. So a hand-off from CuPy is issued with the producing stream current
# (transfer.py does), and one CuPy stream importing from another orders
# nothing by DLPack alone: the consumer waits for the producer first.

_tick = jax.jit(lambda x: x + 1)


class XlaMarker:
    """A point of XLA's stream: completes when XLA's work queued before it has."""

    host_only = True  # native streams cannot wait for it; the host does

    def __init__(self, jax_device: Any) -> None:
        self._array = _tick(jax.device_put(np.int32(0), jax_device))

    @property
    def done(self) -> bool:
        return bool(self._array.is_ready())

    def synchronize(self) -> None:
        self._array.block_until_ready()


class XlaStream:
    """The native side of `js.xla_stream(cuda:N)`: Note [XLA's stream]."""

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


class CudaKind(DeviceKind):
    """CuPy streams and events, and XLA's stream, made and used under their device's guard."""

    name = "cuda"
    has_streams = True
    host_memory = False

    def device_count(self) -> int:
        return cuda_device_count()

    def check_exists(self, dev: Device) -> None:
        count = self.device_count()
        if count == 0:
            raise RuntimeError(
                f"{dev} is unavailable: cuda streams need CuPy (or JAX) and a CUDA GPU, "
                f"and neither sees one here. {CUPY_MISSING} (for JAX: pip install "
                f"'jax[cuda12]'); or use a sim device instead"
            )
        if dev.index >= count:
            raise ValueError(f"{dev} does not exist: there are {count} GPUs")

    def new_native_stream(self, index: int, priority: int) -> Any:
        cupy = require_cupy("a cuda Stream")
        # Non-blocking, so that it does not implicitly sync with the default stream;
        # only events and waits order it, which is what the sanitizer models.
        with cupy.cuda.Device(index):
            return cupy.cuda.Stream(non_blocking=True, priority=priority)

    def default_native_stream(self, index: int) -> Any:
        # CuPy's own default stream, where its kernels go when no stream is entered:
        # the legacy default stream, or the per-thread one where CuPy was told to use
        # it (CUPY_CUDA_PER_THREAD_DEFAULT_STREAM=1; CuPy's `get_default_stream`).
        # Either is a handle meaning "of whichever device is current", so it is only
        # ever used under `guard(index)` (Note [Device guards]). Without CuPy there
        # is none, and a wait on it is a host wait.
        cupy = _cupy()
        if cupy is None:
            return None
        per_thread = os.environ.get(PER_THREAD_DEFAULT_STREAM_ENV) == "1"
        return cupy.cuda.Stream.ptds if per_thread else cupy.cuda.Stream.null

    def xla_native_stream(self, index: int) -> Any:
        gpus = jax_gpus()
        return XlaStream(gpus[index]) if index < len(gpus) else None

    def new_native_event(self, index: int) -> Any:
        cupy = require_cupy("a cuda Event")
        with cupy.cuda.Device(index):
            return cupy.cuda.Event(disable_timing=True)

    def guard(self, index: int) -> AbstractContextManager:
        cupy = _cupy()
        return nullcontext() if cupy is None else cupy.cuda.Device(index)

    def make_current(self, index: int) -> None:
        cupy = _cupy()
        if cupy is not None:
            cupy.cuda.Device(index).use()

    def sanitized(self) -> bool:
        # Off unless asked for: a lock per kernel costs real GPU throughput.
        return os.environ.get(STREAM_CHECK_ENV) == "1"

    def synchronize(self, index: int) -> None:
        cupy = _cupy()
        if cupy is not None:
            with cupy.cuda.Device(index):
                cupy.cuda.Device(index).synchronize()
        gpus = jax_gpus()
        if index < len(gpus):
            XlaStream(gpus[index]).synchronize()  # Note [XLA's stream]

    def completion_event(self, stream: Any) -> Any:
        # Native only (no sanitizer, no lock): it is called from finalizers.
        native = stream.native
        if native is None:
            return None
        if stream.is_xla:
            return native.record_event()
        cupy = _cupy()
        with cupy.cuda.Device(stream.device.index):
            event = cupy.cuda.Event(disable_timing=True)
            event.record(native)
        return event
