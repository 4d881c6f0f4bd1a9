"""How a Tensor's array leaves it: host copies, Python scalars, DLPack, other libraries.

A mixin of Tensor that uses only its public fields (`array`, `array_backend`,
`device`). On an accelerator, every read by the host is a read on the caller's
current stream followed by a wait for it, which the stream sanitizer checks.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import sanitizer
from .backends import get_backend
from .devices import CPU
from .streams import current_stream


class HostReadWhileTracing(TypeError):
    """A call that needs a tensor's value on the host, made while the tensor holds a tracer."""


class Conversions:
    """Tensor's conversions (see the module docstring)."""

    __slots__ = ()
    array: Any
    array_backend: Any
    device: Any

    def item(self) -> Any:
        return self._scalar("item()")

    def numpy(self) -> np.ndarray:
        """A read-only NumPy view (a device-to-host copy only for device memory).

        On an accelerator it reads on the caller's current stream, then waits for it.
        """
        return self._to_host("numpy()")

    def _to_host(self, call: str) -> np.ndarray:
        """The value on the host, for `call`; a tensor over a JAX tracer has none to give."""
        if isinstance(self.array, jax.core.Tracer):
            raise HostReadWhileTracing(
                f"{call} needs the value of a tensor (shape {tuple(self.array.shape)}, dtype "
                f"{self.array.dtype}) on the host, but the tensor holds a JAX tracer: it runs "
                f"inside a trace (js.compile, to_jax, jax.jit), where values are not known yet. "
                f"Compute with tensor ops instead (js.where for a branch), or pass the value in "
                f"as an argument"
            )
        dev = self.device
        if dev.is_accelerator:
            sanitizer.host_read(self.array, current_stream(dev), "numpy")
        return self.array_backend.to_host(self.array)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        host = self._to_host("__array__()")
        if dtype is not None:
            host = host.astype(dtype)
        return host.copy() if copy else host

    def tolist(self) -> Any:
        return self._to_host("tolist()").tolist()

    def jax(self) -> Any:
        return self.array if self.array_backend is get_backend("jax") else jnp.asarray(self.numpy())

    def cupy(self) -> Any:
        """The CuPy array (a host-to-device copy unless this is a CuPy tensor)."""
        if self.array_backend is get_backend("cupy"):
            return self.array
        return get_backend("cupy").asarray(self.numpy())

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        """Export the buffer (array-API stream semantics; the backend array does the work).

        A sim tensor is host memory: exporting it is a host read on the caller's
        current stream, like `numpy()`.
        """
        dev = self.device
        if dev.is_accelerator and dev.kind.host_memory:
            sanitizer.host_read(self.array, current_stream(dev), "__dlpack__")
        return self.array.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self) -> tuple:
        return self.array.__dlpack_device__()

    def record_stream(self, stream: Any) -> None:
        """Keep this tensor's buffer alive until the work queued on `stream` so far is done.

        Use it when the tensor was made on one stream, is used on `stream`, and
        may be dropped before `stream` catches up (as PyTorch's record_stream).
        """
        if stream is None or getattr(stream, "device", None) != self.device:
            raise ValueError(
                f"record_stream needs a stream of the tensor's device {self.device}, got "
                f"{stream!r}"
            )
        sanitizer.record_stream(self.array, stream)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.array.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __bool__(self) -> bool:
        return bool(self._scalar("bool()"))

    def __float__(self) -> float:
        return float(self._scalar("float()"))

    def __int__(self) -> int:
        return int(self._scalar("int()"))

    def _scalar(self, call: str) -> Any:
        if self.size != 1:
            raise RuntimeError(
                f"a Tensor with {self.size} elements cannot be converted to a Python scalar"
            )
        return self._to_host(call).reshape(()).item()

    def __repr__(self) -> str:
        # Not `numpy()`: showing a tensor must not raise, even one whose stream is unsynced.
        body = np.array2string(
            np.asarray(self.array_backend.to_host(self.array)), separator=", ", prefix="tensor("
        )
        extras = []
        if self.array_backend is not get_backend("numpy"):
            extras.append(f"backend={self.array_backend.name!r}")
        if self.device is not CPU and self.device != CPU:
            extras.append(f"device={str(self.device)!r}")
        extras.append(f"dtype={self.dtype}")
        if self.grad_fn is not None:
            extras.append(f"grad_fn=<{self.grad_fn.name()}>")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        return f"tensor({body}, {', '.join(extras)})"
