"""Factories: tensors made from a shape or a range (zeros, ones, full, eye, arange, linspace).

Every factory takes `dtype=`, `backend=` (default "numpy", "jax" inside a trace), `device=` and
`requires_grad=`; a shape is a tuple or varargs (`zeros(2, 3) == zeros((2, 3))`).
Without `dtype=` a factory follows PyTorch: floats are the default dtype
(`js.get_default_dtype()`), Python ints int64 (int32 on JAX without x64), bools
bool. The random factories (rand, randn, randint) are in `random.py`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from ..backends import Backend
from ..construction import asked_backend, made_on, unplaced_backend, unplaced_device
from ..devices import Device, device
from ..dtypes import python_dtype
from ..tensor import Tensor, tensor


def shape_of(dims: tuple, caller: str) -> tuple[int, ...]:
    """`f(2, 3)`, `f((2, 3))` and `f([2, 3])` name the same shape."""
    if len(dims) == 1 and isinstance(dims[0], tuple | list):
        dims = tuple(dims[0])
    try:
        shape = tuple(operator.index(d) for d in dims)
    except TypeError:
        raise TypeError(
            f"{caller}: a shape is ints (as varargs or one tuple), got {dims!r}"
        ) from None
    if any(d < 0 for d in shape):
        raise ValueError(f"{caller}: negative dimension in shape {shape}")
    return shape


def factory_backend(backend: str | None, where: str | Device | None) -> Backend:
    """The backend a factory makes its array on: `backend` (which must hold arrays on the
    device `where`), else NumPy, or JAX inside a trace (Note [New tensors inside a trace] in
    construction.py)."""
    if backend is None:
        return unplaced_backend()
    return asked_backend(backend, None if where is None else device(where))


def value_dtype(be: Backend, value: Any, dtype: Any) -> Any:
    """`dtype` on `be`, or else the dtype of the Python number `value` as PyTorch picks it."""
    if dtype is not None:
        return be.dtype(dtype)
    return be.dtype(python_dtype(np.asarray(value).dtype.kind, be))


def made(make: Callable[[], Any], be: Backend, where: str | Device | None,
         requires_grad: bool) -> Tensor:
    """A new leaf around the array `make()` returns, made on `where` (by default the cpu, or
    CuPy's current GPU: Note [New tensors with no device] in construction.py) rather than
    where the backend would put it unasked (JAX's default device)."""
    dev = unplaced_device(be) if where is None else device(where)
    with made_on(be, dev):
        array = be.normalize(make())
    return tensor(array, device=dev, requires_grad=requires_grad)


def full(shape: Any, fill_value: Any, *, dtype: Any = None, backend: str | None = None,
         device: str | Device | None = None, requires_grad: bool = False) -> Tensor:
    """A tensor of `shape` filled with `fill_value` (its dtype as PyTorch picks it)."""
    be = factory_backend(backend, device)
    shape = shape_of((shape,), "full")
    dtype = value_dtype(be, fill_value, dtype)
    return made(lambda: be.xp.full(shape, fill_value, dtype=dtype), be, device, requires_grad)


def zeros(*shape: Any, dtype: Any = None, backend: str | None = None,
          device: str | Device | None = None, requires_grad: bool = False) -> Tensor:
    return full(shape_of(shape, "zeros"), 0.0, dtype=dtype, backend=backend, device=device,
                requires_grad=requires_grad)


def ones(*shape: Any, dtype: Any = None, backend: str | None = None,
         device: str | Device | None = None, requires_grad: bool = False) -> Tensor:
    return full(shape_of(shape, "ones"), 1.0, dtype=dtype, backend=backend, device=device,
                requires_grad=requires_grad)


def full_like(x: Tensor, fill_value: Any, *, dtype: Any = None,
              requires_grad: bool = False) -> Tensor:
    """`full(x.shape, fill_value)` on x's backend and device, in x's dtype unless told."""
    be = x.array_backend
    dtype = x.dtype if dtype is None else be.dtype(dtype)
    return made(lambda: be.xp.full(x.shape, fill_value, dtype=dtype), be, x.device,
                requires_grad)


def zeros_like(x: Tensor, *, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    return full_like(x, 0, dtype=dtype, requires_grad=requires_grad)


def ones_like(x: Tensor, *, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    return full_like(x, 1, dtype=dtype, requires_grad=requires_grad)


def eye(n: int, m: int | None = None, *, dtype: Any = None, backend: str | None = None,
        device: str | Device | None = None, requires_grad: bool = False) -> Tensor:
    """The n x m identity (m defaults to n)."""
    be = factory_backend(backend, device)
    n, m = shape_of((n, n if m is None else m), "eye")
    dtype = value_dtype(be, 1.0, dtype)
    return made(lambda: be.xp.eye(n, m, dtype=dtype), be, device, requires_grad)


def arange(start: float, stop: float | None = None, step: float = 1, *, dtype: Any = None,
           backend: str | None = None, device: str | Device | None = None,
           requires_grad: bool = False) -> Tensor:
    """`start, start + step, ...` up to `stop` (excluded); `arange(n)` is 0..n-1.

    As PyTorch: int64 when every bound is an int, else the default dtype.
    """
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    integral = all(isinstance(v, int | np.integer) for v in (start, stop, step))
    be = factory_backend(backend, device)
    dtype = value_dtype(be, 0 if integral else 0.0, dtype)
    # Computed on the host in int64 or float64, as PyTorch does, then cast: the same
    # values on every backend.
    values = np.arange(start, stop, step, dtype=np.int64 if integral else np.float64)
    return made(lambda: be.asarray(values.astype(dtype)), be, device, requires_grad)


def linspace(start: float, stop: float, num: int | None = None, *, steps: int | None = None,
             dtype: Any = None, backend: str | None = None, device: str | Device | None = None,
             requires_grad: bool = False) -> Tensor:
    """`num` evenly spaced values from `start` to `stop`, both included (PyTorch's `steps=`)."""
    if (num is None) == (steps is None):
        raise TypeError("linspace: give the number of values once, as num or as steps=")
    count = operator.index(num if steps is None else steps)
    if count < 0:
        raise ValueError(f"linspace: number of values must be non-negative, got {count}")
    be = factory_backend(backend, device)
    dtype = value_dtype(be, 1.0, dtype)
    values = np.linspace(start, stop, count, dtype=np.float64)
    return made(lambda: be.asarray(values.astype(dtype)), be, device, requires_grad)
