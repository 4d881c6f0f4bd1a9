"""The evaluators of a plain-data graph (``graph_model.py``), and the JAX reference.

Each *adapter* runs the ops of a graph with one array library:

* ``NumpyOps``: plain NumPy, used while generating a graph to keep every value
  inside the domain of the next op (no log of negatives, no division by values
  near 0, no kink of ``abs``/``relu`` hit exactly);
* ``JaxOps``: ``jax.numpy`` arrays, for references under ``jax.vjp``/``jax.grad``;
* ``JsOps``: jaxstream tensors on the NumPy or the JAX backend;
* ``TorchOps``: ``torch`` tensors (torch is imported lazily).

``evaluate`` runs a graph with one adapter; ``jax_reference`` gives the loss of a
graph and its gradients under ``jax.vjp``.

This module is a library for the differential tests, not a test file.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from graph_model import Graph, Rec

# --------------------------------------------------------------------------
# Adapters
# --------------------------------------------------------------------------


def _norm_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int):
        axis = (axis,)
    return tuple(sorted(a % ndim for a in axis))


def _index_tuple(spec: Sequence[tuple], array: Callable[[list[int]], Any]) -> tuple:
    out = []
    for item in spec:
        if item[0] == "s":
            out.append(slice(item[1], item[2], item[3]))
        elif item[0] == "i":
            out.append(item[1])
        else:
            out.append(array(list(item[1])))
    return tuple(out)


class Ops:
    """Shared behaviour of all adapters; the arithmetic uses Python operators."""

    def apply(self, rec: Rec, args: list[Any]) -> Any:
        return getattr(self, rec.op)(*args, **rec.attrs)

    # tensor-tensor arithmetic (broadcasting)
    def add(self, a, b):
        return a + b

    def sub(self, a, b):
        return a - b

    def mul(self, a, b):
        return a * b

    def div(self, a, b):
        return a / b

    # arithmetic with a Python scalar
    def add_s(self, a, c):
        return a + c

    def sub_s(self, a, c):
        return a - c

    def mul_s(self, a, c):
        return a * c

    def div_s(self, a, c):
        return a / c

    def rsub_s(self, a, c):
        return c - a

    def rdiv_s(self, a, c):
        return c / a

    def neg(self, a):
        return -a

    def pow(self, a, p, fn=False):
        return a**p

    def square(self, a):
        return a * a

    def flatten(self, a, start, end):
        shape = tuple(a.shape)
        merged = int(np.prod(shape[start : end + 1], dtype=np.int64))
        return self.reshape(a, shape[:start] + (merged,) + shape[end + 1 :])


class ArrayOps(Ops):
    """NumPy-like namespace adapter (NumPy itself or ``jax.numpy``)."""

    def __init__(self, xp: Any):
        self.xp = xp

    def leaf(self, value, requires_grad=True):
        return self.xp.asarray(value)

    def const(self, value):
        return self.xp.asarray(value)

    def exp(self, a, fn=False):
        return self.xp.exp(a)

    def log(self, a, fn=False):
        return self.xp.log(a)

    def sin(self, a):
        return self.xp.sin(a)

    def cos(self, a):
        return self.xp.cos(a)

    def tanh(self, a, fn=False):
        return self.xp.tanh(a)

    def sigmoid(self, a, fn=False):
        return 1.0 / (1.0 + self.xp.exp(-a))

    def relu(self, a, fn=False):
        return self.xp.maximum(a, 0.0)

    def softplus(self, a, fn=False):
        return self.xp.logaddexp(a, 0.0)

    def sqrt(self, a):
        return self.xp.sqrt(a)

    def abs(self, a):
        return self.xp.abs(a)

    def sum(self, a, axis=None, keepdims=False, fn=False):
        return self.xp.sum(a, axis=axis, keepdims=keepdims)

    def mean(self, a, axis=None, keepdims=False, fn=False):
        return self.xp.mean(a, axis=axis, keepdims=keepdims)

    def max(self, a, axis=None, keepdims=False):
        return self.xp.max(a, axis=axis, keepdims=keepdims)

    def reshape(self, a, shape):
        return self.xp.reshape(a, shape)

    def transpose(self, a, axes=None):
        return self.xp.transpose(a, axes)

    def swapaxes(self, a, axis1, axis2):
        return self.xp.swapaxes(a, axis1, axis2)

    def T(self, a):
        return self.xp.transpose(a)

    def broadcast_to(self, a, shape):
        return self.xp.broadcast_to(a, shape)

    def matmul(self, a, b, fn=False):
        return self.xp.matmul(a, b)

    def getitem(self, a, index):
        return a[_index_tuple(index, lambda v: np.asarray(v, dtype=np.int64))]

    def where(self, a, b, cond):
        return self.xp.where(self.xp.asarray(cond), a, b)

    def log1p(self, a):
        return self.xp.log1p(a)

    def expm1(self, a):
        return self.xp.expm1(a)

    def gelu(self, a):
        return 0.5 * a * (1.0 + self.erf(a * np.sqrt(0.5)))

    def silu(self, a):
        return a * self.sigmoid(a)

    def leaky_relu(self, a):
        return self.xp.where(a > 0, a, 0.01 * a)

    def maximum(self, a, b):
        return self.xp.maximum(a, b)

    def minimum(self, a, b):
        return self.xp.minimum(a, b)

    def min(self, a, axis=None, keepdims=False):
        return self.xp.min(a, axis=axis, keepdims=keepdims)

    def prod(self, a, axis=None, keepdims=False):
        return self.xp.prod(a, axis=axis, keepdims=keepdims)

    def var(self, a, correction):
        return self.xp.var(a, ddof=correction)

    def std(self, a, correction):
        return self.xp.std(a, ddof=correction)

    def vector_norm(self, a):
        return self.xp.sqrt(self.xp.sum(a * a))

    def clip(self, a, lo, hi):
        return self.xp.clip(a, lo, hi)

    def cumsum(self, a, axis):
        return self.xp.cumsum(a, axis=axis)

    def flip(self, a, axis):
        return self.xp.flip(a, axis=axis)

    def squeeze(self, a, axis):
        return self.xp.squeeze(a, axis=axis)

    def expand_dims(self, a, axis):
        return self.xp.expand_dims(a, axis)

    def take_along_axis(self, a, index, axis):
        return self.xp.take_along_axis(a, self.xp.asarray(index), axis=axis)

    def einsum(self, a, b, spec):
        return self.xp.einsum(spec, a, b)

    def concatenate(self, *args, axis):
        return self.xp.concatenate(list(args), axis=axis)

    def stack(self, *args, axis):
        return self.xp.stack(list(args), axis=axis)


class NumpyOps(ArrayOps):
    def __init__(self):
        super().__init__(np)

    def erf(self, a):
        return np.vectorize(math.erf, otypes=[np.float64])(a)


class JaxOps(ArrayOps):
    def __init__(self):
        import jax.numpy as jnp

        super().__init__(jnp)

    def sigmoid(self, a, fn=False):
        import jax

        return jax.nn.sigmoid(a)

    def softplus(self, a, fn=False):
        import jax

        return jax.nn.softplus(a)

    def relu(self, a, fn=False):
        import jax

        return jax.nn.relu(a)

    def erf(self, a):
        import jax.scipy.special

        return jax.scipy.special.erf(a)


class JsOps(Ops):
    """jaxstream tensors on one backend; leaves and constants cast to ``dtype``."""

    def __init__(self, backend: str = "numpy", dtype: Any = np.float64):
        import jaxstream as js

        self.js = js
        self.backend = backend
        self.dtype = np.dtype(dtype)

    def tensor(self, value, dtype=None, requires_grad=False):
        """A cpu tensor of ``value`` on this backend."""
        v = np.array(value, dtype=self.dtype if dtype is None else dtype)
        return self.js.tensor(v, backend=self.backend, requires_grad=requires_grad)

    def leaf(self, value, requires_grad=True):
        return self.tensor(value, requires_grad=requires_grad)

    def const(self, value):
        return self.tensor(value)

    def _unary(self, name, a, fn):
        return getattr(self.js, name)(a) if fn else getattr(a, name)()

    def exp(self, a, fn=False):
        return self._unary("exp", a, fn)

    def log(self, a, fn=False):
        return self._unary("log", a, fn)

    def sin(self, a):
        return a.sin()

    def cos(self, a):
        return a.cos()

    def tanh(self, a, fn=False):
        return self._unary("tanh", a, fn)

    def sigmoid(self, a, fn=False):
        return self._unary("sigmoid", a, fn)

    def relu(self, a, fn=False):
        return self._unary("relu", a, fn)

    def softplus(self, a, fn=False):
        return self._unary("softplus", a, fn)

    def sqrt(self, a):
        return a.sqrt()

    def abs(self, a):
        return a.abs()

    def pow(self, a, p, fn=False):
        return a.pow(p) if fn else a**p

    def sum(self, a, axis=None, keepdims=False, fn=False):
        if fn:
            return self.js.sum(a, axis=axis, keepdims=keepdims)
        if axis is None and not keepdims:
            return a.sum()
        return a.sum(axis=axis, keepdims=keepdims)

    def mean(self, a, axis=None, keepdims=False, fn=False):
        if fn:
            return self.js.mean(a, axis=axis, keepdims=keepdims)
        if axis is None and not keepdims:
            return a.mean()
        return a.mean(axis=axis, keepdims=keepdims)

    def max(self, a, axis=None, keepdims=False):
        if axis is None and not keepdims:
            return a.max()
        return a.max(axis=axis, keepdims=keepdims)

    def reshape(self, a, shape):
        return a.reshape(shape)

    def transpose(self, a, axes=None):
        """The graph's transpose is NumPy's (a permutation); jaxstream's, as PyTorch's, swaps
        two dims: a swap is spelled so, any other permutation `permute`, none `T`."""
        if axes is None:
            return a.T
        moved = [i for i, axis in enumerate(axes) if axis % a.ndim != i]
        return a.transpose(*moved) if len(moved) == 2 else a.permute(*axes)

    def swapaxes(self, a, axis1, axis2):
        return a.swapaxes(axis1, axis2)

    def T(self, a):
        return a.T

    def broadcast_to(self, a, shape):
        return a.broadcast_to(shape)

    def matmul(self, a, b, fn=False):
        return self.js.matmul(a, b) if fn else a @ b

    def getitem(self, a, index):
        return a[_index_tuple(index, lambda v: np.asarray(v, dtype=np.int64))]

    def where(self, a, b, cond):
        return self.js.where(self.tensor(cond, dtype=bool), a, b)

    def concatenate(self, *args, axis):
        return self.js.concatenate(list(args), axis=axis)

    def stack(self, *args, axis):
        return self.js.stack(list(args), axis=axis)

    def square(self, a):
        return self.js.square(a)

    def log1p(self, a):
        return a.log1p()

    def expm1(self, a):
        return self.js.expm1(a)

    def gelu(self, a):
        return self.js.gelu(a)

    def silu(self, a):
        return self.js.silu(a)

    def leaky_relu(self, a):
        return self.js.leaky_relu(a)

    def maximum(self, a, b):
        return self.js.maximum(a, b)

    def minimum(self, a, b):
        return a.minimum(b)

    def min(self, a, axis=None, keepdims=False):
        return a.amin(dim=axis, keepdim=keepdims)

    def prod(self, a, axis=None, keepdims=False):
        return self.js.prod(a, axis=axis, keepdims=keepdims)

    def var(self, a, correction):
        return a.var(correction=correction)

    def std(self, a, correction):
        return self.js.std(a, correction=correction)

    def vector_norm(self, a):
        return self.js.vector_norm(a)

    def clip(self, a, lo, hi):
        return a.clamp(lo, hi)

    def cumsum(self, a, axis):
        return self.js.cumsum(a, axis)

    def flip(self, a, axis):
        return a.flip(axis)

    def squeeze(self, a, axis):
        return a.squeeze(axis)

    def expand_dims(self, a, axis):
        return self.js.expand_dims(a, axis)

    def flatten(self, a, start, end):
        return a.flatten(start, end)

    def take_along_axis(self, a, index, axis):
        return self.js.take_along_axis(a, np.asarray(index, dtype=np.int32), axis)

    def einsum(self, a, b, spec):
        return self.js.einsum(spec, a, b)


class TorchOps(Ops):
    """``torch`` tensors (CPU); leaves and constants cast to ``dtype``."""

    def __init__(self, dtype: Any = np.float64):
        import torch

        self.torch = torch
        self.dtype = np.dtype(dtype)

    def leaf(self, value, requires_grad=True):
        t = self.torch.tensor(np.array(value, dtype=self.dtype))
        return t.requires_grad_(requires_grad)

    def const(self, value):
        return self.torch.tensor(np.array(value, dtype=self.dtype))

    def exp(self, a, fn=False):
        return a.exp()

    def log(self, a, fn=False):
        return a.log()

    def sin(self, a):
        return a.sin()

    def cos(self, a):
        return a.cos()

    def tanh(self, a, fn=False):
        return a.tanh()

    def sigmoid(self, a, fn=False):
        return a.sigmoid()

    def relu(self, a, fn=False):
        return a.relu()

    def softplus(self, a, fn=False):
        return self.torch.nn.functional.softplus(a)

    def sqrt(self, a):
        return a.sqrt()

    def abs(self, a):
        return a.abs()

    def _reduce(self, name, a, axis, keepdims):
        if axis is None and not keepdims:
            return getattr(a, name)()
        dims = _norm_axes(axis, a.ndim)
        if isinstance(axis, int):
            dims = dims[0]
        return getattr(a, name)(dim=dims, keepdim=keepdims)

    def sum(self, a, axis=None, keepdims=False, fn=False):
        return self._reduce("sum", a, axis, keepdims)

    def mean(self, a, axis=None, keepdims=False, fn=False):
        return self._reduce("mean", a, axis, keepdims)

    def max(self, a, axis=None, keepdims=False):
        return self.torch.amax(a, dim=_norm_axes(axis, a.ndim), keepdim=keepdims)

    def reshape(self, a, shape):
        return a.reshape(shape)

    def transpose(self, a, axes=None):
        if axes is None:
            axes = tuple(reversed(range(a.ndim)))
        return a.permute(tuple(axes))

    def swapaxes(self, a, axis1, axis2):
        return a.swapaxes(axis1, axis2)

    def T(self, a):
        return a.permute(tuple(reversed(range(a.ndim))))

    def broadcast_to(self, a, shape):
        return a.broadcast_to(shape)

    def matmul(self, a, b, fn=False):
        return a @ b

    def getitem(self, a, index):
        return a[_index_tuple(index, lambda v: self.torch.tensor(v, dtype=self.torch.int64))]

    def where(self, a, b, cond):
        return self.torch.where(self.torch.from_numpy(np.array(cond, dtype=bool)), a, b)

    def concatenate(self, *args, axis):
        return self.torch.cat(list(args), dim=axis)

    def stack(self, *args, axis):
        return self.torch.stack(list(args), dim=axis)

    def log1p(self, a):
        return a.log1p()

    def expm1(self, a):
        return a.expm1()

    def gelu(self, a):
        return self.torch.nn.functional.gelu(a)

    def silu(self, a):
        return self.torch.nn.functional.silu(a)

    def leaky_relu(self, a):
        return self.torch.nn.functional.leaky_relu(a)

    def maximum(self, a, b):
        return self.torch.maximum(a, b)

    def minimum(self, a, b):
        return self.torch.minimum(a, b)

    def min(self, a, axis=None, keepdims=False):
        return self.torch.amin(a, dim=_norm_axes(axis, a.ndim), keepdim=keepdims)

    def prod(self, a, axis=None, keepdims=False):
        if axis is None and not keepdims:
            return a.prod()
        for d in reversed(_norm_axes(axis, a.ndim)):
            a = a.prod(d, keepdim=keepdims)
        return a

    def var(self, a, correction):
        return a.var(correction=correction)

    def std(self, a, correction):
        return a.std(correction=correction)

    def vector_norm(self, a):
        return self.torch.linalg.vector_norm(a)

    def clip(self, a, lo, hi):
        return a.clamp(lo, hi)

    def cumsum(self, a, axis):
        return a.cumsum(axis)

    def flip(self, a, axis):
        return a.flip(tuple(range(a.ndim)) if axis is None else axis)

    def squeeze(self, a, axis):
        return a.squeeze(axis)

    def expand_dims(self, a, axis):
        return a.unsqueeze(axis)

    def take_along_axis(self, a, index, axis):
        return self.torch.take_along_dim(a, self.torch.as_tensor(index), axis)

    def einsum(self, a, b, spec):
        return self.torch.einsum(spec, a, b)


def evaluate(
    graph: Graph,
    ops: Ops,
    leaves: dict[int, Any] | None = None,
    on_value: Callable[[int, Rec, Any], Any] | None = None,
) -> list[Any]:
    """Run ``graph`` with ``ops``; return the value of every record.

    ``leaves`` overrides leaf values (e.g. traced JAX arguments). ``on_value``
    sees each value as it is made and returns the value later records read
    (it may wrap it, or register hooks on it and return it unchanged).
    """
    vals: list[Any] = []
    for rid, rec in enumerate(graph.recs):
        if leaves is not None and rid in leaves:
            v = leaves[rid]
        elif rec.op == "leaf":
            v = ops.leaf(rec.attrs["value"], rec.requires_grad)
        elif rec.op == "const":
            v = ops.const(rec.attrs["value"])
        else:
            v = ops.apply(rec, [vals[a] for a in rec.args])
        if on_value is not None:
            v = on_value(rid, rec, v)
        vals.append(v)
    return vals


# --------------------------------------------------------------------------
# JAX reference
# --------------------------------------------------------------------------


def scale_grad(c: float) -> Callable[[Any], Any]:
    """Identity whose vector-Jacobian product multiplies the cotangent by ``c``:
    the JAX image of a tensor hook ``lambda g: g * c``."""
    import jax

    @jax.custom_vjp
    def ident(x):
        return x

    def fwd(x):
        return x, None

    def bwd(_, g):
        return (g * c,)

    ident.defvjp(fwd, bwd)
    return ident


def jax_loss_fn(graph: Graph, wrt: Sequence[int]) -> Callable[..., Any]:
    """The loss as a JAX function of the leaves ``wrt`` (other leaves fixed),
    with every hook of the graph applied as a cotangent scaling."""
    hooks: dict[int, list[float]] = {}
    for rid, c in graph.hooks:
        hooks.setdefault(rid, []).append(c)

    def on_value(rid, rec, v):
        for c in hooks.get(rid, ()):
            v = scale_grad(c)(v)
        return v

    def f(*xs):
        vals = evaluate(graph, JaxOps(), dict(zip(wrt, xs, strict=True)), on_value)
        return vals[graph.output]

    return f


def jax_reference(graph: Graph) -> tuple[float, dict[int, np.ndarray]]:
    """Loss value and the gradient of the loss for every leaf requiring grad."""
    import jax
    import jax.numpy as jnp

    wrt = graph.grad_leaves
    f = jax_loss_fn(graph, wrt)

    def value_and_grads(*xs):
        out, vjp = jax.vjp(f, *xs)
        return out, vjp(jnp.ones_like(out))

    xs = [jnp.asarray(graph.recs[r].attrs["value"]) for r in wrt]
    # One compilation for the whole graph costs far less than compiling
    # each eagerly dispatched op for each new shape.
    out, grads = jax.jit(value_and_grads)(*xs)
    return float(out), {r: np.asarray(g) for r, g in zip(wrt, grads, strict=True)}
