"""How a Tensor's array leaves it: host copies, Python scalars, DLPack, other libraries.

A mixin of Tensor that uses only its public fields (`array`, `array_backend`,
`device`). On an accelerator, every read by the host is a read on the stream
the tensor's kernels run on (`stream_for`: the caller's current stream, or XLA's
for JAX arrays) followed by a wait for it, issued under the tensor's device
(Note [Device guards] in devices/kind.py), which the stream sanitizer checks.
`record_stream` holds memory as PyTorch's does: Note [record_stream at
deallocation].
"""

from __future__ import annotations

import weakref
from typing import Any

import jax
import numpy as np

from . import device_events, sanitizer, transfer
from .backends import get_backend
from .devices import CPU
from .devices.tracing import inside_trace
from .streams import Stream, issuing, stream_for, stream_with_handle

# Note [record_stream at deallocation]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# `t.record_stream(s)` promises, as in PyTorch, that t's memory is not reused
# until the work queued on `s` up to t's *deallocation* has completed, so that
# the idiom "make t on A, use it on B, t.record_stream(B), del t" is safe
# whatever B was given after the call. The streams are remembered per tensor
# (`_RECORDED`); when the tensor dies, a finalizer (which holds the array, so
# the memory outlives the tensor) hands the array and each stream to
# `sanitizer.deallocated`, which snapshots the stream then: for `cuda` an
# event recorded on it at deallocation, the CuPy array (and so its block in
# CuPy's memory pool) kept alive until the event completes; for `sim` a hold
# released when the host's clock reaches the stream's tick at deallocation,
# with a new buffer at the held address before then reported as a race (Note
# [Stream sanitizer] in sanitizer/checker.py).

# Note [DLPack streams]
# ~~~~~~~~~~~~~~~~~~~~~
# `__dlpack__(stream=)` names the consumer's stream, which the producer must order
# after the tensor's work. The array API allows, on CUDA, None, -1 (no ordering),
# 1 (the legacy default stream), 2 (the per-thread default stream) and an integer
# > 2, the `cudaStream_t` handle of the consumer's stream (0 is disallowed as
# ambiguous); on a device without streams, None alone. jaxstream also takes a
# `js.Stream` of the tensor's device. A handle is a pointer that CUDA dereferences
# without validating it (a stray 5 handed on to a JAX GPU array's `__dlpack__`
# crashed the process), and no runtime query (`cudaStreamQuery`,
# `cudaStreamGetDevice`) is safe on an arbitrary integer for the same reason. So a
# handle is passed on only where it is known, without asking CUDA, to be a live
# stream of the tensor's device: one of jaxstream's streams there
# (`stream_with_handle`), or a stream that an array library of this process names
# there now (`DeviceKind.consumer_stream_handles`): CuPy's current stream, which
# `cupy.from_dlpack` passes, and the streams XLA waits on for outside arrays, which
# `jax.dlpack.from_dlpack` passes (XLA deals them out of a small pool round-robin, one
# per import, so the whole pool is read once: `_external_ready_streams` in
# devices/cuda.py). Any other value is a ValueError naming what is
# allowed: a consumer with another stream makes it CuPy's current one for the
# export, or passes -1 and orders the streams itself. The export is issued with
# the tensor's stream current (`stream_for`: the caller's jaxstream stream, or
# XLA's), which CuPy orders the consumer after, whatever stream the caller has
# current in CuPy itself. `sim` devices take what `cuda` takes, so that a bad
# stream shows on a laptop; their memory is the host's, so the array itself is
# exported without one.
_DLPACK_STREAM_CODES = (-1, 1, 2)


def dlpack_stream(dev: Any, stream: Any) -> Any:
    """The consumer stream `stream` of a DLPack export from `dev`: None, a code of the array
    API, a `Stream` of `dev`, or a handle known to be a live stream of `dev`; anything else
    raises (Note [DLPack streams])."""
    if stream is None:
        return None
    if isinstance(stream, Stream) and stream.device == dev and not stream.is_xla:
        return stream
    if dev.is_accelerator and type(stream) is int:
        if stream in _DLPACK_STREAM_CODES:
            return stream
        known = stream_with_handle(dev, stream)
        if known is not None:
            return known
        if stream > 2 and stream in dev.kind.consumer_stream_handles(dev.index):
            return stream
    if not dev.is_accelerator:
        allowed = "None: it has no streams"
    else:
        allowed = (
            f"None, -1 (no ordering), 1 (the legacy default stream), 2 (the per-thread "
            f"default stream), a js.Stream of {dev} or its handle, or the handle of CuPy's "
            f"current stream there or of the stream JAX waits on there for outside arrays. "
            f"Another handle cannot be checked without CUDA reading it as a pointer: make "
            f"that stream CuPy's current one for the export (as cupy.from_dlpack does), or "
            f"pass -1 and order the streams yourself"
        )
    raise ValueError(
        f"__dlpack__: stream={stream!r} is not a stream of {dev}; a {dev} tensor takes {allowed}"
    )


# By id (a live tensor's id is unique; its finalizer drops the entry): a tensor's
# `==` is an op, so tensors cannot be keys of a WeakKeyDictionary.
_RECORDED: dict[int, list[Stream]] = {}


def _deallocated(key: int, array: Any) -> None:
    """A tensor with recorded streams died: hold its memory for their work queued so far."""
    for s in _RECORDED.pop(key):
        sanitizer.deallocated(array, s)


# Note [Tensors handed to NumPy and JAX]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# What a PyTorch user expects of a tensor met by array code:
# - `np.asarray(t)` and `jnp.asarray(t)` (both read `__array__`) convert a tensor that does
#   not require grad, and refuse one that does, naming `.detach()`, as PyTorch refuses: the
#   array would silently leave the graph. `t.numpy()` and `t.jax()` are the explicit
#   conversions and work on any tensor; `t.jax()` is zero-copy where the memory allows.
# - An array on the left of an operator defers to the tensor (`jnp_array * t` is a tensor
#   with a graph), as a NumPy array does to a torch tensor. That is why Tensor has no
#   `__jax_array__`: JAX's operators would take it and return an array without a graph.
# - `jax.jit`, `jax.grad`, `jax.vmap` and `jnp` functions take arrays, not tensors (a
#   Tensor is not a pytree: its autograd state has no place there). Handed one, they raise
#   an error naming `t.jax()`, `jax.tree.map(lambda t: t.jax(), tree)` for a model or
#   state, and `js.to_jax` to run jaxstream code under them (jax_interop/arguments.py).
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

        On an accelerator it reads on the stream the tensor's kernels run on, then
        waits for it, under the tensor's device whatever device is current.
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
        if not dev.is_accelerator:
            return self.array_backend.to_host(self.array)
        s = stream_for(dev, self.array_backend)
        with issuing(s):
            device_events.host_read(s, self.array, "numpy")  # Note [The watchers' bus]
            return self.array_backend.to_host(self.array)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """NumPy's (and `jnp.asarray`'s) conversion: refused where it would leave the graph
        (Note [Tensors handed to NumPy and JAX])."""
        if self.requires_grad:
            raise RuntimeError(
                f"Can't convert a tensor that requires grad (shape {tuple(self.shape)}, dtype "
                f"{self.dtype}) with np.asarray or jnp.asarray: the array would leave the "
                f"autograd graph and no gradient would flow back through it. Use "
                f"tensor.detach() first (np.asarray(t.detach()), or t.detach().jax() for a "
                f"zero-copy JAX array); to run a JAX function on it inside the graph, wrap the "
                f"function with js.jax_function"
            )
        host = self._to_host("__array__()")
        if dtype is not None:
            host = host.astype(dtype)
        return host.copy() if copy else host

    def tolist(self) -> Any:
        return self._to_host("tolist()").tolist()

    def jax(self) -> Any:
        """The JAX array (moved as `to(backend="jax")` unless this is a JAX tensor)."""
        return self._array_of(get_backend("jax"))

    def cupy(self) -> Any:
        """The CuPy array (moved as `to(backend="cupy")` unless this is a CuPy tensor)."""
        return self._array_of(get_backend("cupy"))

    def _array_of(self, backend: Any) -> Any:
        if self.array_backend is backend:
            return self.array
        target, dev = transfer.target_of(self.array_backend, self.device, None, backend.name)
        return transfer.move(self.array, self.array_backend, self.device, target, dev)

    def __dlpack__(self, *, stream: Any = None, **kwargs: Any) -> Any:
        """Export the buffer with the array API's stream semantics (Note [DLPack streams]).

        A sim tensor is host memory: exporting it is a host read on the caller's
        current stream, like `numpy()`, or a read on the consumer's stream once that
        stream waits for the tensor's. A tensor that requires grad is refused, as
        PyTorch refuses it: the consumer would share its values outside the graph.
        """
        if self.requires_grad:
            raise BufferError(
                f"Can't export tensors that require gradient, use tensor.detach() (a "
                f"{self.dtype} tensor of shape {tuple(self.shape)} on {self.device})"
            )
        dev = self.device
        consumer = dlpack_stream(dev, stream)
        if not dev.is_accelerator:
            return self.array.__dlpack__(**kwargs)
        s = stream_for(dev, self.array_backend)
        if dev.kind.host_memory:
            if isinstance(consumer, Stream):
                consumer.wait_stream(s)
                with issuing(consumer):
                    device_events.launched(consumer, "__dlpack__", (self.array,))
            else:
                with issuing(s):
                    device_events.host_read(s, self.array, "__dlpack__")
            return self.array.__dlpack__(**kwargs)
        if isinstance(consumer, Stream):
            # CuPy's legacy default stream has the handle 0, which DLPack spells 1.
            handle = getattr(consumer.native, "ptr", None)
            consumer = None if handle is None else handle or 1
        # CuPy orders the consumer after its current stream: the tensor's, not the caller's.
        with issuing(s):
            return self.array.__dlpack__(stream=consumer, **kwargs)

    def __dlpack_device__(self) -> tuple:
        return self.array.__dlpack_device__()

    def record_stream(self, stream: Any) -> None:
        """Keep this tensor's memory from reuse until the work queued on `stream` up to
        the tensor's deallocation is done (PyTorch's semantics).

        Use it when the tensor was made on one stream, is used on `stream`, and
        may be dropped before `stream` catches up. See Note [record_stream at
        deallocation].
        """
        if not isinstance(stream, Stream) or stream.device != self.device:
            raise ValueError(
                f"record_stream needs a stream of the tensor's device {self.device}, got "
                f"{stream!r}"
            )
        if inside_trace():  # a tracer holds no memory: Note [XLA's stream] in devices/xla.py
            return
        recorded = _RECORDED.get(id(self))
        if recorded is None:
            recorded = _RECORDED[id(self)] = []
            weakref.finalize(self, _deallocated, id(self), self.array).atexit = False
        if stream not in recorded:
            recorded.append(stream)

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
        if self.numel() != 1:
            raise RuntimeError(
                f"a Tensor with {self.numel()} elements cannot be converted to a Python scalar"
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
