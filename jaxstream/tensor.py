"""Tensor: a backend array plus autograd metadata.

This module sits below the ops: the arithmetic operators and op methods
(`t + u`, `t.sum()`, `t.T`, the in-place `add_` family, ...) and `backward` are
attached to Tensor by `jaxstream.ops.tensor_methods` and `jaxstream.autograd.api`
when the package is imported, so that a Tensor never names the layers above it.
Its views (`aliasing.py`), its conversions (`conversions.py`) and its copy
protocol (`copying.py`) are mixins; `construction.py` makes a new tensor's array.
"""

from __future__ import annotations

import math
import threading
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp

from .aliasing import Aliasing
from .autograd.grad_mode import state as grad_state
from .autograd.node import AccumulateGrad, Node, RemovableHandle
from .backends import Backend, backend_for_dlpack, backend_of, get_backend
from .construction import backend_array
from .conversions import Conversions
from .copying import Copying
from .devices import Device


def is_floating(dtype: Any) -> bool:
    """Whether `dtype` is floating or complex, bfloat16 and JAX's other ml_dtypes included
    (NumPy files those under kind "V", so only JAX's dtype lattice knows them)."""
    if getattr(dtype, "kind", None) in ("f", "c"):
        return True
    return bool(jnp.issubdtype(dtype, jnp.inexact))


# Note [One accumulator per leaf]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A leaf's gradients are summed into its `.grad` under its AccumulateGrad's lock, so that lock
# guards the leaf only while the leaf has a single accumulator. The leaf holds it weakly (the
# graphs that use the leaf keep it alive), and backwards on several threads may build their
# graphs from a fresh leaf at once: two that both found none would each make one, with a lock
# each, and lose updates of `.grad` (4 threads on 500 rounds of 4 fresh leaves, a 1e-7 s
# switch interval: 28 to 96 rounds built a second accumulator, up to 2 gradients were lost).
# As PyTorch makes it under the leaf's mutex, the accumulator is made under one global lock
# (`_accumulator_creation`), taken only when the leaf has no live accumulator, so the ops of
# a forward that find one take no lock. A new accumulator is made only once the old one is
# dead, when no graph, and so no backward, holds it: accumulations into one leaf are always
# under one lock. Hooks registered on the leaf reach its accumulator under the same lock.
_accumulator_creation = threading.Lock()


class Tensor(Aliasing, Conversions, Copying):
    """An n-dimensional array of the NumPy, JAX or CuPy backend, with autograd history.

    A leaf (no `grad_fn`) that requires grad accumulates gradients into `.grad`;
    a non-leaf records the node (`grad_fn`) and output index that produced it.

    The fields other modules of jaxstream use: `array` (the backend array, also
    `data`), `array_backend` (the `Backend` object; `backend` is its name),
    `device`, and `version_counter` (a one-element list shared with the
    tensors that alias this one's value; `_version` reads it).
    """

    __slots__ = (
        "array",
        "array_backend",
        "device",
        "version_counter",
        "_requires_grad",
        "_grad",
        "_grad_fn",
        "_output_nr",
        "_grad_accumulator",
        "_leaf_hooks",
        "_post_accumulate_grad_hooks",
        "_retains_grad",
        "_view",
        "_views",
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
        shared_from = None
        if isinstance(data, Tensor):
            shared_from, data = data.device, data.array
            if device is None and _holds(backend, shared_from):
                device = shared_from  # a host array would go to the cpu, not the tensor's sim:N
        placed = backend_array(
            data, device=device, dtype=dtype, backend=backend, shared_from=shared_from
        )
        self._init(*placed)
        if requires_grad:
            self.requires_grad = True

    def _init(self, array: Any, backend: Backend, device: Device) -> None:
        self.array = array
        self.array_backend = backend
        self.device = device
        self.version_counter = [0]
        self._requires_grad = False
        self._grad = None
        self._grad_fn = None
        self._output_nr = 0
        self._grad_accumulator = None
        self._leaf_hooks = None
        self._post_accumulate_grad_hooks: dict | None = None
        self._retains_grad = False
        self._view = None
        self._views = None

    @classmethod
    def wrap(cls, array: Any, backend: Backend, device: Device) -> Tensor:
        """A new leaf around `array` (no copy, no checks): how ops make their results."""
        t = object.__new__(cls)
        t._init(array, backend, device)
        return t

    # ----------------------------------------------------------------- properties
    @property
    def data(self) -> Any:
        return self.array

    @data.setter
    def data(self, value: Any) -> None:
        other = value if isinstance(value, Tensor) else tensor(value, backend=self.backend)
        self.array = other.array
        self.array_backend = other.array_backend
        self.device = other.device

    @property
    def shape(self) -> tuple:
        return tuple(self.array.shape)

    @property
    def dtype(self) -> Any:
        return self.array.dtype

    @property
    def ndim(self) -> int:
        return self.array.ndim

    def numel(self) -> int:
        """The number of elements (`size()` is the shape, as in PyTorch)."""
        return math.prod(self.array.shape)

    @property
    def backend(self) -> str:
        return self.array_backend.name

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
        """The accumulated gradient of a leaf (or of a non-leaf that retains it).

        Reading it on another non-leaf warns, as PyTorch does: backward never fills
        it. Library code reads `_grad`, so that only users' mistakes warn.
        """
        if self._grad_fn is not None and not self._retains_grad:
            warnings.warn(_NON_LEAF_GRAD, UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(
                    f"assigned grad must be a Tensor or None, got {type(value).__name__}"
                )
            problem = mismatch(value, self, dtype=True)
            if problem:
                raise RuntimeError(f"assigned grad does not match the tensor: {problem}")
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
        return self.version_counter[0]

    # ------------------------------------------------------------------- autograd
    def set_history(self, node: Node, output_nr: int) -> Tensor:
        """Make this tensor output `output_nr` of `node` (it then requires grad); returns it."""
        self._grad_fn = node
        self._output_nr = output_nr
        self._requires_grad = True
        return self

    def grad_accumulator(self) -> AccumulateGrad:
        """This leaf's AccumulateGrad node, made on first use and held weakly: one at a time,
        whichever threads ask (Note [One accumulator per leaf])."""
        ref = self._grad_accumulator
        acc = ref() if ref is not None else None
        if acc is None:
            with _accumulator_creation:
                acc = self.existing_grad_accumulator()
                if acc is None:
                    acc = AccumulateGrad(self, self._leaf_hooks)
                    self._grad_accumulator = weakref.ref(acc)
        return acc

    def existing_grad_accumulator(self) -> AccumulateGrad | None:
        """This leaf's AccumulateGrad node if a live graph uses it, else None."""
        ref = self._grad_accumulator
        return ref() if ref is not None else None

    def accumulate_grad(self, new_grad: Tensor) -> None:
        """`self.grad += new_grad`, the one rule for leaves and `retain_grad`.

        Without grad mode the existing `.grad` tensor is updated in place (its
        holders see the sum, as in PyTorch); with grad mode on (create_graph) the
        sum is recorded so that the gradient stays differentiable. Either way the
        sum is an ordinary op: it goes through dispatch, on the current stream.
        """
        old = self._grad
        if grad_state.grad_enabled:
            self._grad = new_grad.clone() if old is None else old + new_grad
        elif old is None:
            self._grad = Tensor.wrap(new_grad.array, new_grad.array_backend, new_grad.device)
        else:
            old.rebind((old + new_grad).array)

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
            return self._grad_fn.register_tensor_pre_hook(self._output_nr, hook)
        if self._leaf_hooks is None:
            with _accumulator_creation:  # an accumulator made meanwhile gets the hooks too
                if self._leaf_hooks is None:
                    self._leaf_hooks = {}
                    acc = self.existing_grad_accumulator()
                    if acc is not None:
                        acc.tensor_pre_hooks = self._leaf_hooks
        handle = RemovableHandle(self._leaf_hooks)
        self._leaf_hooks[handle.id] = (0, hook)
        return handle

    def register_post_accumulate_grad_hook(self, hook: Callable) -> RemovableHandle:
        """`hook(leaf) -> None` runs each time a backward has accumulated into this leaf's
        `.grad` (an optimizer step per parameter, say). See Note [Post-accumulate hooks]."""
        if not self._requires_grad:
            raise RuntimeError(
                "cannot register a hook on a tensor that doesn't require gradient "
                f"(shape {self.shape}); call requires_grad_() first."
            )
        if self._grad_fn is not None:
            raise RuntimeError(
                "post accumulate grad hooks cannot be registered on non-leaf tensors (this one "
                f"is output {self._output_nr} of {self._grad_fn.name()}); register it on a "
                "leaf, or use register_hook for the gradient of this one"
            )
        with _accumulator_creation:  # two threads registering the first hook make one table
            if self._post_accumulate_grad_hooks is None:
                self._post_accumulate_grad_hooks = {}
        handle = RemovableHandle(self._post_accumulate_grad_hooks)
        self._post_accumulate_grad_hooks[handle.id] = hook
        return handle

    def retain_grad(self) -> None:
        """Populate `.grad` of this non-leaf during backward (a no-op on leaves)."""
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on a tensor that has requires_grad=False")
        if self._grad_fn is None or self._retains_grad:
            return
        self._retains_grad = True
        self._install_retains_grad_hook()

    def move_retains_grad_hook(self, old_fn: Node | None, old_output_nr: int) -> None:
        """After an in-place op gave this tensor a new grad_fn, its retains_grad hook follows."""
        if not self._retains_grad:
            return
        if old_fn is not None and old_fn.retains_grad_hooks:
            old_fn.retains_grad_hooks.pop(old_output_nr, None)
        self._install_retains_grad_hook()

    def _install_retains_grad_hook(self) -> None:
        ref = weakref.ref(self)

        def retain(grad: Tensor) -> None:
            t = ref()
            if t is not None and grad is not None:
                t.accumulate_grad(grad)

        fn = self._grad_fn
        if fn.retains_grad_hooks is None:
            fn.retains_grad_hooks = {}
        fn.retains_grad_hooks[self._output_nr] = retain

    def detach_(self) -> Tensor:
        self._grad_fn = None
        self._requires_grad = False
        return self

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        self.requires_grad = requires_grad
        return self


_NON_LEAF_GRAD = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during backward(). If you indeed want the .grad field to be "
    "populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you access "
    "the non-leaf Tensor by mistake, make sure you access the leaf Tensor instead."
)


_COPY_CONSTRUCT = (
    "To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() or "
    "sourceTensor.detach().clone().requires_grad_(True), rather than js.tensor(sourceTensor)."
)


def _holds(backend: str | None, device: Device) -> bool:
    """Whether a tensor of `backend` (None: the array's own) can be on `device`."""
    return backend is None or get_backend(backend).placement_problem(device) is None


def gradient_edge(t: Tensor) -> tuple:
    """Where the gradient of `t` goes: its grad_fn, or its leaf accumulator."""
    if t._grad_fn is not None:
        return (t._grad_fn, t._output_nr)
    return (t.grad_accumulator(), 0)


def mismatch(t: Tensor, expected: Any, *, shape: bool = True, dtype: bool = False) -> str | None:
    """How `t` differs from `expected` (a Tensor or an InputMetadata), or None.

    The one check of shape, dtype, backend and device that the engine, `grad`'s
    arguments and the `.grad` setter share; each caller says what it is checking.
    """
    if shape and tuple(t.shape) != tuple(expected.shape):
        return f"expected shape {tuple(expected.shape)} but got {tuple(t.shape)}"
    if dtype and t.dtype != expected.dtype:
        return f"expected dtype {expected.dtype} but got {t.dtype}"
    if t.array_backend is not expected.array_backend:
        return f"expected a {expected.array_backend.name} tensor but got a {t.backend} one"
    if t.device is not expected.device and t.device != expected.device:
        return f"expected device {expected.device} but got {t.device}"
    return None


def tensor(
    data: Any,
    *,
    requires_grad: bool = False,
    device: str | Device | None = None,
    dtype: Any = None,
    backend: str | None = None,
) -> Tensor:
    """Wrap an array of any backend (no copy), a DLPack producer, a scalar or a nested list.

    The backend is the array's own, else `backend` (default "numpy"). Arrays keep their
    dtype; Python data takes PyTorch's (floats the default dtype, see `dtypes.py`). A
    dtype the backend cannot hold (float64 on JAX without x64) is an error. A Tensor gives
    a detached copy with its device, backend and dtype unless told otherwise, and warns as
    PyTorch's `torch.tensor(t)` does; the copy shares the array, which no op writes (Note
    [In-place ops rebase history] in ops/inplace.py), so it is a copy in all but memory.
    """
    if isinstance(data, Tensor):
        warnings.warn(_COPY_CONSTRUCT, UserWarning, stacklevel=2)
    return Tensor(data, requires_grad=requires_grad, device=device, dtype=dtype, backend=backend)


def from_dlpack(obj: Any, *, backend: str | None = None) -> Tensor:
    """Zero-copy import of any DLPack producer: its own backend if it is one of ours, else
    the one its memory belongs to (`backend_for_dlpack`: CUDA memory to CuPy or JAX)."""
    if isinstance(obj, Tensor):
        return obj.detach()
    if backend is not None:
        target = get_backend(backend)
    elif backend_of(obj) is not None:
        return tensor(obj)
    else:
        target = backend_for_dlpack(obj)
    return tensor(target.from_dlpack(obj))


