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

from .kind import STREAM_CHECK, DeviceKind
from .xla import XlaStream, jax_gpus

if TYPE_CHECKING:
    from . import Device

GPU_STACK = "pip install 'jaxstream[cuda13]' (CUDA 13) or 'jaxstream[cuda12]' (CUDA 12)"
"""How to install CuPy and JAX's GPU plugin for the machine's CUDA generation."""
CUPY_MISSING = f"CuPy is not installed: {GPU_STACK}"
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


XLA_STREAM_POOL_LIMIT = 64
"""At most this many streams are read from XLA's pool for outside arrays."""


@functools.cache
def _external_ready_streams(gpu: Any) -> frozenset[int]:
    """Every stream of JAX device `gpu`'s pool for arrays made outside XLA: XLA hands them
    out round-robin, one per `jax.dlpack.from_dlpack`, so the pool is read once, whole, by
    asking until the first comes round again (none where the plugin lacks the call)."""
    try:
        first = gpu.get_stream_for_external_ready_events()
    except (AttributeError, RuntimeError):  # a plugin without it: UNIMPLEMENTED
        return frozenset()
    pool = {first}
    for _ in range(XLA_STREAM_POOL_LIMIT):
        handle = gpu.get_stream_for_external_ready_events()
        if handle == first:
            break
        pool.add(handle)
    return frozenset(pool)


class CudaKind(DeviceKind):
    """CuPy streams and events, and XLA's stream, made and used under their device's guard."""

    name = "cuda"
    has_streams = True
    host_memory = False

    def __init__(self) -> None:
        # Off unless asked for: a lock per kernel costs real GPU throughput. Bound once, as
        # this kind's method: every op on a GPU asks.
        self.sanitized = STREAM_CHECK.is_one

    def device_count(self) -> int:
        return cuda_device_count()

    def check_exists(self, dev: Device) -> None:
        count = self.device_count()
        if count == 0:
            raise RuntimeError(
                f"{dev} is unavailable: cuda streams need CuPy (or JAX) and a CUDA GPU, "
                f"and neither sees one here: {GPU_STACK} on a machine with one, or use a sim "
                f"device instead"
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

    def jax_device(self, index: int) -> Any:
        gpus = jax_gpus()
        return gpus[index] if index < len(gpus) else None

    def new_native_event(self, index: int) -> Any:
        cupy = require_cupy("a cuda Event")
        with cupy.cuda.Device(index):
            return cupy.cuda.Event(disable_timing=True)

    def consumer_stream_handles(self, index: int) -> tuple[int, ...]:
        # What `cupy.from_dlpack` passes (CuPy's current stream of the device; its default
        # stream is the code 1 or 2) and what `jax.dlpack.from_dlpack` passes (the stream
        # XLA waits on for arrays made outside it). Each is read from its library, never
        # from the integer a caller gave.
        handles = []
        cupy = _cupy()
        if cupy is not None:
            handles.append(cupy.cuda.get_current_stream(index).ptr)
        gpus = jax_gpus()
        if index < len(gpus):
            handles.extend(_external_ready_streams(gpus[index]))
        return tuple(h for h in handles if h)

    def guard(self, index: int) -> AbstractContextManager:
        cupy = _cupy()
        return nullcontext() if cupy is None else cupy.cuda.Device(index)

    def make_current(self, index: int) -> None:
        cupy = _cupy()
        if cupy is not None:
            cupy.cuda.Device(index).use()

    def is_current(self, index: int) -> bool:
        cupy = _cupy()
        return cupy is None or cupy.cuda.runtime.getDevice() == index

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
