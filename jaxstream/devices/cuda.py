"""`cuda`: GPUs through CuPy's streams and events.

CuPy is imported only when a `cuda` device is counted or used, so jaxstream
works without it; `cuda` devices are then reported unavailable.
"""

from __future__ import annotations

import functools
import os
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from .kind import STREAM_CHECK_ENV, DeviceKind

if TYPE_CHECKING:
    from . import Device


@functools.cache
def cuda_device_count() -> int:
    """How many GPUs CuPy sees; 0 without CuPy or a GPU (`cuda` streams need both)."""
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except (ImportError, OSError, RuntimeError):
        return 0


def _cupy() -> Any:
    import cupy

    return cupy


class CudaKind(DeviceKind):
    """CuPy streams and events, made and used under the device they belong to."""

    name = "cuda"
    has_streams = True
    host_memory = False

    def device_count(self) -> int:
        return cuda_device_count()

    def check_exists(self, dev: Device) -> None:
        count = self.device_count()
        if count == 0:
            raise RuntimeError(
                f"{dev} is unavailable: cuda streams need CuPy and a CUDA GPU, "
                f"and CuPy sees no GPU here (or is not installed); use a sim device instead"
            )
        if dev.index >= count:
            raise ValueError(f"{dev} does not exist: CuPy sees {count} GPUs")

    def new_native_stream(self, index: int, priority: int) -> Any:
        cupy = _cupy()
        # Non-blocking, so that it does not implicitly sync with the default stream;
        # only events and waits order it, which is what the sanitizer models.
        with cupy.cuda.Device(index):
            return cupy.cuda.Stream(non_blocking=True, priority=priority)

    def default_native_stream(self, index: int) -> Any:
        return _cupy().cuda.Stream.null

    def new_native_event(self, index: int) -> Any:
        cupy = _cupy()
        with cupy.cuda.Device(index):
            return cupy.cuda.Event(disable_timing=True)

    def guard(self, index: int) -> AbstractContextManager:
        return _cupy().cuda.Device(index)

    def make_current(self, index: int) -> None:
        _cupy().cuda.Device(index).use()

    def sanitized(self) -> bool:
        # Off unless asked for: a lock per kernel costs real GPU throughput.
        return os.environ.get(STREAM_CHECK_ENV) == "1"

    def completion_event(self, stream: Any) -> Any:
        return stream.record_event().native
