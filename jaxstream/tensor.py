"""Tensor: a backend array plus autograd metadata. Operators delegate to `ops`."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from . import sanitizer
from .autograd.grad_mode import state as grad_state
from .autograd.graph import AccumulateGrad, Node, RemovableHandle, accumulate_into_grad
from .backends import Backend, backend_of, get_backend
from .devices import CPU, Device
from .devices import device as to_device
from .streams import current_stream


def is_floating(dtype: Any) -> bool:
    kind = getattr(dtype, "kind", None)
    if kind is not None:
        return kind in "fc"
    return np.issubdtype(np.dtype(dtype), np.inexact)


class Tensor:
    """An n-dimensional array of the NumPy, JAX or CuPy backend, with autograd history.

    A leaf (no `grad_fn`) that requires grad accumulates gradients into `.grad`;
    a non-leaf records the node (`grad_fn`) and output index that produced it.
    """

    __slots__ = (
        "_data",
        "_backend",
        "_device",
        "_requires_grad",
        "_grad",
        "_grad_fn",
        "_output_nr",
        "_version_counter",
        "_grad_accumulator",
        "_hooks",
        "_retains_grad",
        "__weakref__",
    )

    # NumPy defers to our reflected operators instead of broadcasting over us.
    __array_ufunc__ = None
    __hash__ = object.__hash__

    def __init__(
        self,
        data: Any,
        *,
        requires_grad: bool = False,
        device: str | Device | None = None,
        dtype: Any = None,
        backend: str | None = None,
    ) -> None:
        made = tensor(data, device=device, dtype=dtype, backend=backend)
        self._init(made._data, made._backend, made._device)
        self.requires_grad = requires_grad

    def _init(self, data: Any, backend: Backend, device: Device) -> None:
        self._data = data
        self._backend = backend
        self._device = device
        self._requires_grad = False
        self._grad = None
        self._grad_fn = None
        self._output_nr = 0
        self._version_counter = [0]
        self._grad_accumulator = None
        self._hooks = None
        self._retains_grad = False

    @classmethod
    def _wrap(cls, data: Any, backend: Backend, device: Device) -> Tensor:
        t = object.__new__(cls)
        t._init(data, backend, device)
        return t

    # ----------------------------------------------------------------- properties
    @property
    def data(self) -> Any:
        return self._data

    @data.setter
    def data(self, value: Any) -> None:
        other = value if isinstance(value, Tensor) else tensor(value, backend=self.backend)
        self._data = other._data
        self._backend = other._backend
        self._device = other._device

    @property
    def shape(self) -> tuple:
        return tuple(self._data.shape)

    @property
    def dtype(self) -> Any:
        return self._data.dtype

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def size(self) -> int:
        return int(np.prod(self._data.shape, dtype=np.int64))

    @property
    def device(self) -> Device:
        return self._device

    @property
    def backend(self) -> str:
        return self._backend.name

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        if self._grad_fn is not None:
            if flag:
                return
            raise RuntimeError(
                "you can only change requires_grad flags of leaf tensors; this tensor was "
                f"produced by {self._grad_fn.name()}. Use detach() to get a leaf."
            )
        if flag and not is_floating(self.dtype):
            raise RuntimeError(
                f"only tensors of floating point dtype can require gradients, got {self.dtype} "
                f"(shape {self.shape}); cast first, e.g. t.astype('float32')."
            )
        self._requires_grad = bool(flag)

    @property
    def grad(self) -> Tensor | None:
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(
                    f"assigned grad must be a Tensor or None, got {type(value).__name__}"
                )
            if value.shape != self.shape or value.dtype != self.dtype:
                raise RuntimeError(
                    f"assigned grad has shape {value.shape} and dtype {value.dtype}, but the "
                    f"tensor has shape {self.shape} and dtype {self.dtype}"
                )
            if value._backend is not self._backend or value._device != self._device:
                raise RuntimeError(
                    f"assigned grad is a {value.backend} tensor on {value.device}, but the tensor "
                    f"is a {self.backend} tensor on {self.device}"
                )
        self._grad = value

    @property
    def grad_fn(self) -> Node | None:
        return self._grad_fn

    @property
    def is_leaf(self) -> bool:
        return self._grad_fn is None

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad and self._grad_fn is not None

    @property
    def output_nr(self) -> int:
        return self._output_nr

    @property
    def _version(self) -> int:
        return self._version_counter[0]

    @property
    def T(self) -> Tensor:
        return F.transpose(self)

    # ------------------------------------------------------------------- autograd
    def backward(
        self,
        gradient: Any = None,
        retain_graph: bool | None = None,
        create_graph: bool = False,
        inputs: Any = None,
    ) -> None:
        from .autograd.api import backward

        backward(self, gradient, retain_graph, create_graph, inputs)

    def _get_grad_accumulator(self) -> AccumulateGrad:
        ref = self._grad_accumulator
        acc = ref() if ref is not None else None
        if acc is None:
            acc = AccumulateGrad(self)
            self._grad_accumulator = weakref.ref(acc)
        return acc

    def register_hook(self, hook: Callable) -> RemovableHandle:
        """`hook(grad) -> Tensor | None` runs when this tensor's gradient is computed.

        A non-None result replaces the gradient. On a leaf, it runs before the
        gradient is accumulated into `.grad`.
        """
        if not self._requires_grad:
            raise RuntimeError(
                "cannot register a hook on a tensor that doesn't require gradient "
                f"(shape {self.shape}); call requires_grad_() first."
            )
        if self._grad_fn is not None:
            return self._grad_fn._register_tensor_pre_hook(self._output_nr, hook)
        if self._hooks is None:
            self._hooks = {}
            ref = self._grad_accumulator
            acc = ref() if ref is not None else None
            if acc is not None:
                acc._tensor_pre_hooks = self._hooks
        handle = RemovableHandle(self._hooks)
        self._hooks[handle.id] = (0, hook)
        return handle

    def retain_grad(self) -> None:
        """Populate `.grad` of this non-leaf during backward (a no-op on leaves)."""
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on a tensor that has requires_grad=False")
        if self._grad_fn is None or self._retains_grad:
            return
        self._retains_grad = True
        self._install_retains_grad_hook()

    def _install_retains_grad_hook(self) -> None:
        ref = weakref.ref(self)

        def retain(grad: Tensor) -> None:
            t = ref()
            if t is not None and grad is not None:
                accumulate_into_grad(t, grad)

        fn = self._grad_fn
        if fn._retains_grad_hooks is None:
            fn._retains_grad_hooks = {}
        fn._retains_grad_hooks[self._output_nr] = retain

    def detach(self) -> Tensor:
        """A new leaf sharing this tensor's array and version counter."""
        t = Tensor._wrap(self._data, self._backend, self._device)
        t._version_counter = self._version_counter
        return t

    def detach_(self) -> Tensor:
        self._grad_fn = None
        self._requires_grad = False
        return self

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        self.requires_grad = requires_grad
        return self

    def _fresh_version(self) -> Tensor:
        self._version_counter = [0]
        return self

    def _as_output_of(self, node: Node, output_nr: int) -> Tensor:
        t = Tensor._wrap(self._data, self._backend, self._device)
        t._version_counter = self._version_counter
        t._grad_fn = node
        t._output_nr = output_nr
        t._requires_grad = True
        return t

    # ------------------------------------------------------------------- in place
    # Note [In-place ops rebase history]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    # `t.add_(u)` runs the out-of-place op on an alias of t's current value (same
    # array, same grad_fn) and then rebinds t to the result: t's buffer becomes the
    # new array, its `_version` is bumped, and its grad_fn becomes the new node,
    # whose edge leads to the old history. Arrays are never written in place, so
    # nothing shared with other code changes, and the node that saved t's old
    # value keeps it. Saved tensors still compare versions, so a backward that
    # would read a value modified in place fails as PyTorch's does. Tensor hooks
    # stay with the node they were registered on (they see the gradient of the
    # old value); the retains_grad hook moves to the new grad_fn.
    def _set_data(self, data: Any) -> None:
        """Rebind the buffer and bump the version (arrays are never written in place)."""
        self._data = data
        self._version_counter[0] += 1

    def _apply_inplace(self, fn: Callable[[Tensor], Tensor]) -> Tensor:
        """Run the out-of-place `fn` on this tensor's value, then rebase (Note above)."""
        if self._grad_fn is None and self._requires_grad and grad_state.grad_enabled:
            raise RuntimeError(
                f"a leaf tensor that requires grad (shape {self.shape}) is being used in an "
                "in-place operation; wrap the update in `with js.no_grad():` or use an "
                "out-of-place op."
            )
        before = Tensor._wrap(self._data, self._backend, self._device)
        before._grad_fn = self._grad_fn
        before._output_nr = self._output_nr
        before._requires_grad = self._requires_grad
        before._grad_accumulator = self._grad_accumulator
        result = fn(before)
        if result.shape != self.shape:
            raise RuntimeError(
                f"in-place result has shape {result.shape}, which cannot be stored in a tensor "
                f"of shape {self.shape}"
            )
        if result.dtype != self.dtype:
            result = F.astype(result, self.dtype)
        self._set_data(result._data)
        if result._grad_fn is not None:
            old_fn, old_nr = self._grad_fn, self._output_nr
            self._grad_fn = result._grad_fn
            self._output_nr = result._output_nr
            self._requires_grad = True
            if self._retains_grad:
                if old_fn is not None and old_fn._retains_grad_hooks:
                    old_fn._retains_grad_hooks.pop(old_nr, None)
                self._install_retains_grad_hook()
        return self

    def add_(self, other: Any) -> Tensor:
        return self._apply_inplace(lambda t: t + other)

    def mul_(self, other: Any) -> Tensor:
        return self._apply_inplace(lambda t: t * other)

    def zero_(self) -> Tensor:
        return self._apply_inplace(F.zero_grad_to_history)

    def copy_(self, src: Any) -> Tensor:
        return self._apply_inplace(lambda t: F.copy_into(t, src))

    # --------------------------------------------------------------- conversions
    def item(self) -> Any:
        if self.size != 1:
            raise RuntimeError(
                f"a Tensor with {self.size} elements cannot be converted to a Python scalar"
            )
        return self.numpy().reshape(()).item()

    def numpy(self) -> np.ndarray:
        """A read-only NumPy view (a device-to-host copy only for device memory).

        On an accelerator it reads on the caller's current stream, then waits for it.
        """
        dev = self._device
        if dev.type != "cpu":
            sanitizer.host_read(self._data, current_stream(dev), "numpy")
        return self._backend.to_host(self._data)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        host = self.numpy()
        if dtype is not None:
            host = host.astype(dtype)
        return host.copy() if copy else host

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def jax(self) -> Any:
        import jax.numpy as jnp

        return self._data if self.backend == "jax" else jnp.asarray(self.numpy())

    def cupy(self) -> Any:
        """The CuPy array (a host-to-device copy unless this is a CuPy tensor)."""
        if self.backend == "cupy":
            return self._data
        return get_backend("cupy").asarray(self.numpy())

    def to(self, device: str | Device | None = None, *, backend: str | None = None) -> Tensor:
        """A differentiable copy on another device and/or backend (self when nothing changes)."""
        target_backend = get_backend(backend) if backend is not None else self._backend
        target_device = to_device(device) if device is not None else self._device
        if target_backend is self._backend and target_device == self._device:
            return self
        return F.convert(self, target_backend, target_device)

    def astype(self, dtype: Any) -> Tensor:
        return F.astype(self, dtype)

    def clone(self) -> Tensor:
        return F.clone(self)

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        """Export the buffer (array-API stream semantics; the backend array does the work).

        A sim tensor is host memory: exporting it is a host read on the caller's
        current stream, like `numpy()`.
        """
        dev = self._device
        if dev.type == "sim":
            sanitizer.host_read(self._data, current_stream(dev), "__dlpack__")
        return self._data.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self) -> tuple:
        return self._data.__dlpack_device__()

    def record_stream(self, stream: Any) -> None:
        """Keep this tensor's buffer alive until the work queued on `stream` so far is done.

        Use it when the tensor was made on one stream, is used on `stream`, and
        may be dropped before `stream` catches up (as PyTorch's record_stream).
        """
        if stream is None or getattr(stream, "device", None) != self._device:
            raise ValueError(
                f"record_stream needs a stream of the tensor's device {self._device}, got "
                f"{stream!r}"
            )
        sanitizer.record_stream(self._data, stream)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __bool__(self) -> bool:
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __repr__(self) -> str:
        # Not `numpy()`: showing a tensor must not raise, even one whose stream is unsynced.
        body = np.array2string(
            np.asarray(self._backend.to_host(self._data)), separator=", ", prefix="tensor("
        )
        extras = []
        if self._backend.name != "numpy":
            extras.append(f"backend={self._backend.name!r}")
        if self._device is not CPU and self._device != CPU:
            extras.append(f"device={str(self._device)!r}")
        extras.append(f"dtype={self.dtype}")
        if self._grad_fn is not None:
            extras.append(f"grad_fn=<{self._grad_fn.name()}>")
        elif self._requires_grad:
            extras.append("requires_grad=True")
        return f"tensor({body}, {', '.join(extras)})"

    # ------------------------------------------------------------------ operators
    def __add__(self, other: Any) -> Tensor:
        return F.add(self, other)

    def __radd__(self, other: Any) -> Tensor:
        return F.add(other, self)

    def __sub__(self, other: Any) -> Tensor:
        return F.sub(self, other)

    def __rsub__(self, other: Any) -> Tensor:
        return F.sub(other, self)

    def __mul__(self, other: Any) -> Tensor:
        return F.mul(self, other)

    def __rmul__(self, other: Any) -> Tensor:
        return F.mul(other, self)

    def __truediv__(self, other: Any) -> Tensor:
        return F.div(self, other)

    def __rtruediv__(self, other: Any) -> Tensor:
        return F.div(other, self)

    def __pow__(self, other: Any) -> Tensor:
        return F.pow(self, other)

    def __rpow__(self, other: Any) -> Tensor:
        return F.pow(other, self)

    def __matmul__(self, other: Any) -> Tensor:
        return F.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Tensor:
        return F.matmul(other, self)

    def __neg__(self) -> Tensor:
        return F.neg(self)

    def __pos__(self) -> Tensor:
        return self

    def __getitem__(self, index: Any) -> Tensor:
        return F.getitem(self, index)

    def __eq__(self, other: Any) -> Tensor:  # type: ignore[override]
        return F.equal(self, other)

    def __ne__(self, other: Any) -> Tensor:  # type: ignore[override]
        return F.not_equal(self, other)

    def __lt__(self, other: Any) -> Tensor:
        return F.less(self, other)

    def __le__(self, other: Any) -> Tensor:
        return F.less_equal(self, other)

    def __gt__(self, other: Any) -> Tensor:
        return F.greater(self, other)

    def __ge__(self, other: Any) -> Tensor:
        return F.greater_equal(self, other)

    def __and__(self, other: Any) -> Tensor:
        return F.logical_and(self, other)

    def __or__(self, other: Any) -> Tensor:
        return F.logical_or(self, other)

    def __invert__(self) -> Tensor:
        return F.logical_not(self)

    # -------------------------------------------------------------------- methods
    def sum(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return F.sum(self, axis=axis, keepdims=keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return F.mean(self, axis=axis, keepdims=keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return F.max(self, axis=axis, keepdims=keepdims)

    def exp(self) -> Tensor:
        return F.exp(self)

    def log(self) -> Tensor:
        return F.log(self)

    def sin(self) -> Tensor:
        return F.sin(self)

    def cos(self) -> Tensor:
        return F.cos(self)

    def tanh(self) -> Tensor:
        return F.tanh(self)

    def sigmoid(self) -> Tensor:
        return F.sigmoid(self)

    def relu(self) -> Tensor:
        return F.relu(self)

    def softplus(self) -> Tensor:
        return F.softplus(self)

    def sqrt(self) -> Tensor:
        return F.sqrt(self)

    def abs(self) -> Tensor:
        return F.abs(self)

    def pow(self, exponent: Any) -> Tensor:
        return F.pow(self, exponent)

    def reshape(self, *shape: Any) -> Tensor:
        if len(shape) == 1 and isinstance(shape[0], tuple | list):
            shape = tuple(shape[0])
        return F.reshape(self, shape)

    def transpose(self, *axes: Any) -> Tensor:
        if len(axes) == 1 and isinstance(axes[0], tuple | list):
            axes = tuple(axes[0])
        return F.transpose(self, axes or None)

    def swapaxes(self, axis1: int, axis2: int) -> Tensor:
        return F.swapaxes(self, axis1, axis2)

    def broadcast_to(self, shape: tuple) -> Tensor:
        return F.broadcast_to(self, shape)

    def matmul(self, other: Any) -> Tensor:
        return F.matmul(self, other)


def gradient_edge(t: Tensor) -> tuple:
    """Where the gradient of `t` goes: its grad_fn, or its leaf accumulator."""
    if t._grad_fn is not None:
        return (t._grad_fn, t._output_nr)
    return (t._get_grad_accumulator(), 0)


def tensor(
    data: Any,
    *,
    requires_grad: bool = False,
    device: str | Device | None = None,
    dtype: Any = None,
    backend: str | None = None,
) -> Tensor:
    """Wrap an array of any backend (no copy), a DLPack producer, a scalar or a nested list.

    The backend is the array's own, else `backend` (default "numpy"). A
    Tensor argument gives a new leaf sharing its array.
    """
    shared_from = None
    if isinstance(data, Tensor):
        shared_from = data._device
        data = data._data
    source = backend_of(data)
    if backend is not None:
        target = get_backend(backend)
    elif source is not None:
        target = source
    else:
        target = get_backend("numpy")
    # A foreign producer (or an array between two non-NumPy backends) crosses by DLPack.
    if source is None:
        crosses = hasattr(data, "__dlpack__")
    else:
        crosses = source is not target and "numpy" not in (source.name, target.name)
    if source is target:
        array = data if dtype is None else target.asarray(data, dtype)
    elif crosses:
        array = target.from_dlpack(data)
        if dtype is not None:
            array = target.asarray(array, dtype)
    else:
        array = target.asarray(data, dtype)
    array = target.normalize(array)
    dev = target.device_of(array)
    wanted = None if device is None else to_device(device)
    if wanted is not None and wanted != dev:
        if wanted.type == "sim":
            dev = wanted
            if shared_from != wanted:
                sanitizer.on_kernel(current_stream(dev), op="tensor", allocs=(array,))
        else:
            raise RuntimeError(
                f"a {target.name} array lives on {dev}, not on {wanted}; move it with its own "
                "library, or create the tensor and call .to(device)"
            )
    t = Tensor._wrap(array, target, dev)
    if requires_grad:
        t.requires_grad = True
    return t


def from_dlpack(obj: Any, *, backend: str | None = None) -> Tensor:
    """Zero-copy import of any DLPack producer (its own backend if it is one of ours)."""
    if isinstance(obj, Tensor):
        return obj.detach()
    if backend is None:
        own = backend_of(obj)
        if own is not None:
            return tensor(obj)
        device_type = obj.__dlpack_device__()[0]
        backend = "cupy" if device_type == 2 else "numpy"
    target = get_backend(backend)
    return tensor(target.from_dlpack(obj))


from .ops import functional as F  # noqa: E402  (ops call back into Tensor)
