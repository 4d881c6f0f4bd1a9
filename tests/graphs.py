"""Random autograd graphs as plain data, and the evaluators that run them.

A graph is a list of op records (``Rec``). Each record names an op, the ids of
the earlier records it reads and the op's keyword attributes, all plain Python
and NumPy values. The same graph can then be evaluated by any *adapter*:

* ``NumpyOps``: plain NumPy, used while generating a graph to keep every value
  inside the domain of the next op (no log of negatives, no division by values
  near 0, no kink of ``abs``/``relu`` hit exactly);
* ``JaxOps``: ``jax.numpy`` arrays, for references under ``jax.vjp``/``jax.grad``;
* ``JsOps``: jaxstream tensors on the NumPy or the JAX backend;
* ``TorchOps``: ``torch`` tensors (torch is imported lazily).

This module is a library for the differential tests, not a test file.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st

# --------------------------------------------------------------------------
# Op names
# --------------------------------------------------------------------------

BINARY = ("add", "sub", "mul", "div")
SCALAR = ("add_s", "sub_s", "mul_s", "div_s")
RSCALAR = ("rsub_s", "rdiv_s")
UNARY = ("neg", "exp", "log", "sin", "cos", "tanh", "sigmoid", "relu", "softplus", "sqrt", "abs")
REDUCTIONS = ("sum", "mean", "max")
SHAPE_OPS = ("reshape", "transpose", "swapaxes", "T", "broadcast_to")
OTHER = ("pow", "matmul", "getitem", "where", "concatenate", "stack")

ALL_OPS = BINARY + SCALAR + RSCALAR + UNARY + REDUCTIONS + SHAPE_OPS + OTHER

# Ops whose autograd node structure is one-to-one with torch's: each record
# makes exactly one node, named as in torch, with the same input edges.
ONE_TO_ONE_OPS = BINARY + SCALAR + UNARY + ("pow", "sum", "mean", "matmul")

# Ops that have a module-level function in jaxstream besides the method.
_MODULE_FUNCTIONS = ("exp", "log", "tanh", "sigmoid", "relu", "softplus", "sum", "mean", "matmul")

MAX_SIZE = 48  # no intermediate array grows beyond this many elements
MAX_ABS = 1e3  # nor beyond this magnitude

HOOK_FACTORS = (2.0, -0.5, 3.0, 0.25)

# --------------------------------------------------------------------------
# Plain-data graph
# --------------------------------------------------------------------------


@dataclasses.dataclass
class Rec:
    """One op record: ``op(*[value of r] for r in args, **attrs)``."""

    op: str
    args: tuple[int, ...] = ()
    attrs: dict[str, Any] = dataclasses.field(default_factory=dict)
    shape: tuple[int, ...] = ()
    requires_grad: bool = False


@dataclasses.dataclass
class Graph:
    recs: list[Rec]
    inputs: list[int]  # leaf record ids passed as ``inputs=``, in that order
    hooks: list[tuple[int, float]]  # (record id, c): a tensor hook ``g -> g * c``
    output: int  # record id of the scalar loss
    seed: int = 0

    @property
    def grad_leaves(self) -> list[int]:
        return [i for i, r in enumerate(self.recs) if r.op == "leaf" and r.requires_grad]

    @property
    def grad_nodes(self) -> list[int]:
        """Non-leaf records that require grad (they have a ``grad_fn``)."""
        return [
            i for i, r in enumerate(self.recs) if r.op not in ("leaf", "const") and r.requires_grad
        ]

    def _repr_pretty_(self, p, cycle) -> None:  # used by hypothesis' reports
        p.text(repr(self))

    def __repr__(self) -> str:
        lines = [f"Graph(seed={self.seed}):"]
        for i, r in enumerate(self.recs):
            if r.op in ("leaf", "const"):
                kind = "leaf" if r.op == "leaf" and r.requires_grad else "const"
                v = np.asarray(r.attrs["value"])
                lines.append(f"  t{i} = {kind}(shape={v.shape}, value={np.round(v, 3).tolist()})")
                continue
            args = ", ".join(f"t{a}" for a in r.args)
            attrs = ", ".join(f"{k}={_short(v)}" for k, v in r.attrs.items() if k != "fn" or v)
            sep = ", " if args and attrs else ""
            lines.append(f"  t{i} = {r.op}({args}{sep}{attrs})  # shape {r.shape}")
        lines.append(f"  output=t{self.output}")
        lines.append(f"  inputs={[f't{i}' for i in self.inputs]}")
        lines.append(f"  hooks={[(f't{i}', c) for i, c in self.hooks]}")
        return "\n".join(lines)


def _short(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return repr(v.tolist())
    return repr(v)


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

    def concatenate(self, *args, axis):
        return self.xp.concatenate(list(args), axis=axis)

    def stack(self, *args, axis):
        return self.xp.stack(list(args), axis=axis)


class NumpyOps(ArrayOps):
    def __init__(self):
        super().__init__(np)


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


class JsOps(Ops):
    """jaxstream tensors on one backend; leaves and constants cast to ``dtype``."""

    def __init__(self, backend: str = "numpy", dtype: Any = np.float64):
        import jaxstream as js

        self.js = js
        self.backend = backend
        self.dtype = np.dtype(dtype)

    def array(self, value, dtype=None):
        v = np.array(value, dtype=self.dtype if dtype is None else dtype)
        if self.backend == "jax":
            import jax.numpy as jnp

            return jnp.asarray(v)
        return v

    def leaf(self, value, requires_grad=True):
        return self.js.tensor(self.array(value), requires_grad=requires_grad)

    def const(self, value):
        return self.js.tensor(self.array(value))

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
        return a.transpose() if axes is None else a.transpose(*axes)

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
        return self.js.where(self.js.tensor(self.array(cond, dtype=bool)), a, b)

    def concatenate(self, *args, axis):
        return self.js.concatenate(list(args), axis=axis)

    def stack(self, *args, axis):
        return self.js.stack(list(args), axis=axis)


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


# --------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------


def _broadcastable(s1: tuple[int, ...], s2: tuple[int, ...]) -> tuple[int, ...] | None:
    try:
        return tuple(np.broadcast_shapes(s1, s2))
    except ValueError:
        return None


def _size(shape: Sequence[int]) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _shapes_of_size(n: int, max_ndim: int = 3) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = [()] if n == 1 else []
    for ndim in range(1, max_ndim + 1):
        for dims in itertools.product(range(1, n + 1), repeat=ndim):
            if _size(dims) == n:
                out.append(dims)
    return out


_UNARY_DOMAIN: dict[str, Callable[[np.ndarray], bool]] = {
    "exp": lambda v: bool(np.all(v <= 3.0)) and bool(np.all(v >= -30.0)),
    "log": lambda v: bool(np.all(v >= 0.1)),
    "sqrt": lambda v: bool(np.all(v >= 0.1)),
    "abs": lambda v: bool(np.all(np.abs(v) >= 1e-3)),
    "relu": lambda v: bool(np.all(np.abs(v) >= 1e-3)),
    "rdiv_s": lambda v: bool(np.all(np.abs(v) >= 0.3)),
}

_DENOMINATOR_OK = _UNARY_DOMAIN["rdiv_s"]


class _Builder:
    def __init__(self, draw, ops: Sequence[str], seed: int):
        self.draw = draw
        self.ops = tuple(ops)
        self.rng = np.random.default_rng(seed)
        self.op_rng = np.random.default_rng(seed + 1)
        self.recs: list[Rec] = []
        self.vals: list[np.ndarray] = []
        self.np_ops = NumpyOps()

    # -- records ------------------------------------------------------------

    def _leaf_value(self, shape):
        mag = self.rng.uniform(0.2, 2.0, size=shape)
        sign = self.rng.choice([-1.0, 1.0], size=shape)
        return np.asarray(mag * sign, dtype=np.float64)

    def add_leaf(self, shape, requires_grad=True) -> int:
        value = self._leaf_value(tuple(shape))
        op = "leaf" if requires_grad else "const"
        return self._append(Rec(op, (), {"value": value}, tuple(shape), requires_grad), value)

    def add_const(self, value) -> int:
        value = np.asarray(value, dtype=np.float64)
        return self._append(Rec("const", (), {"value": value}, value.shape, False), value)

    def _append(self, rec: Rec, value: np.ndarray) -> int:
        self.recs.append(rec)
        self.vals.append(np.asarray(value))
        return len(self.recs) - 1

    def add_op(self, op: str, args: Sequence[int], **attrs) -> int:
        rec = Rec(op, tuple(args), dict(attrs))
        value = np.asarray(self.np_ops.apply(rec, [self.vals[a] for a in args]))
        if not np.all(np.isfinite(value)) or (value.size and np.max(np.abs(value)) > MAX_ABS):
            # Out of the comfortable range: squash the first operand instead.
            rec = Rec("tanh", (args[0],), {})
            value = np.tanh(self.vals[args[0]])
        rec.shape = tuple(value.shape)
        rec.requires_grad = any(self.recs[a].requires_grad for a in rec.args)
        return self._append(rec, value)

    # -- drawing helpers ----------------------------------------------------

    def pick(self, cands: Sequence[int]) -> int:
        # Counted from the newest candidate, so that small draws (which
        # shrinking prefers) extend the latest value: deep chains, and
        # fan-out whenever an older value is picked again.
        cands = list(cands)
        return cands[len(cands) - 1 - self.draw(st.integers(0, len(cands) - 1))]

    def nodes(self) -> list[int]:
        """Records a new op may read."""
        return list(range(len(self.recs)))

    def shape(self, rid: int) -> tuple[int, ...]:
        return self.recs[rid].shape

    # -- applicability ------------------------------------------------------

    def candidates(self, op: str) -> list[int]:
        nodes = self.nodes()
        if op in _UNARY_DOMAIN:
            return [i for i in nodes if _UNARY_DOMAIN[op](self.vals[i])]
        if op == "div":
            return nodes if any(_DENOMINATOR_OK(self.vals[i]) for i in nodes) else []
        if op in ("getitem", "concatenate"):
            return [i for i in nodes if len(self.shape(i)) >= 1]
        if op == "swapaxes":
            return [i for i in nodes if len(self.shape(i)) >= 1]
        if op == "T":
            return [i for i in nodes if len(self.shape(i)) <= 2]
        if op == "matmul":
            return [i for i in nodes if len(self.shape(i)) == 2]
        if op == "stack":
            return [i for i in nodes if _size(self.shape(i)) * 2 <= MAX_SIZE]
        if op == "pow":
            return [i for i in nodes if np.max(np.abs(self.vals[i]), initial=0.0) <= 4.0]
        if op in REDUCTIONS:
            return [i for i in nodes if len(self.shape(i)) >= 1] or nodes
        return nodes

    # -- one op -------------------------------------------------------------

    def step(self, one_to_one: bool) -> None:
        usable = [op for op in self.ops if self.candidates(op)]
        # The drawn index is offset by a seeded random one: every op stays
        # reachable by the draw, while the ops of a small budget of examples
        # spread evenly over the op set instead of clumping on a few.
        offset = int(self.op_rng.integers(len(usable)))
        op = usable[(self.draw(st.integers(0, len(usable) - 1)) + offset) % len(usable)]
        cands = self.candidates(op)
        # The first operand requires grad whenever it can: work on constants
        # alone would never reach the loss.
        a = self.pick([i for i in cands if self.recs[i].requires_grad] or cands)
        sa = self.shape(a)
        nd = len(sa)
        fn = op in _MODULE_FUNCTIONS and self.draw(st.booleans())
        fkw = {"fn": True} if fn else {}

        if op in BINARY:
            others = [
                i
                for i in self.nodes()
                if (bs := _broadcastable(sa, self.shape(i))) is not None and _size(bs) <= MAX_SIZE
            ]
            if op == "div":
                others = [i for i in others if _DENOMINATOR_OK(self.vals[i])]
                if not others:
                    self.add_op("div_s", [a], c=self.draw(st.sampled_from([2.0, -4.0])))
                    return
            b = self.pick(others)
            self.add_op(op, [a, b])
        elif op in SCALAR or op in RSCALAR:
            c = self.draw(st.sampled_from([0.5, 2.0, -1.5, 3.0]))
            self.add_op(op, [a], c=c)
        elif op in UNARY:
            self.add_op(op, [a], **fkw)
        elif op == "pow":
            choices: list[float | int] = [2, 3, 2.0, 3.0]
            if np.all(self.vals[a] >= 0.1):
                choices += [0.5, 1.5, -1.0, -0.5, 2.5]
            elif np.all(np.abs(self.vals[a]) >= 0.3):
                choices += [-1.0, -2]
            p = self.draw(st.sampled_from(choices))
            self.add_op("pow", [a], p=p, **fkw)
        elif op in REDUCTIONS:
            self.reduction(op, a, nd, one_to_one, fkw)
        elif op == "reshape":
            shapes = _shapes_of_size(_size(sa))
            shape = list(self.draw(st.sampled_from(shapes)))
            if shape and self.draw(st.booleans()):
                shape[self.draw(st.integers(0, len(shape) - 1))] = -1
            self.add_op("reshape", [a], shape=tuple(shape))
        elif op == "transpose":
            if nd >= 2 and self.draw(st.booleans()):
                axes = tuple(self.draw(st.permutations(range(nd))))
                self.add_op("transpose", [a], axes=axes)
            else:
                self.add_op("transpose", [a])
        elif op == "swapaxes":
            ax = st.integers(-nd, nd - 1)
            self.add_op("swapaxes", [a], axis1=self.draw(ax), axis2=self.draw(ax))
        elif op == "T":
            self.add_op("T", [a])
        elif op == "broadcast_to":
            self.broadcast_to(a, sa)
        elif op == "matmul":
            k = sa[1]
            others = [i for i in self.nodes() if len(self.shape(i)) == 2 and self.shape(i)[0] == k]
            choice = self.draw(st.integers(0, len(others)))
            if choice == len(others):
                n = self.draw(st.integers(1, 3))
                b = self.add_leaf((k, n), requires_grad=self.draw(st.booleans()) or one_to_one)
            else:
                b = others[choice]
            self.add_op("matmul", [a, b], **fkw)
        elif op == "getitem":
            self.add_op("getitem", [a], index=self.draw(_index_specs(sa)))
        elif op == "where":
            others = [
                i
                for i in self.nodes()
                if (bs := _broadcastable(sa, self.shape(i))) is not None and _size(bs) <= MAX_SIZE
            ]
            b = self.pick(others)
            full = _broadcastable(sa, self.shape(b))
            assert full is not None
            cshape = tuple(d if self.draw(st.booleans()) else 1 for d in full)
            cshape = cshape[self.draw(st.integers(0, len(cshape))) :]
            cond = self.rng.random(cshape) < 0.5
            self.add_op("where", [a, b], cond=cond)
        elif op == "concatenate":
            axis = self.draw(st.integers(-nd, nd - 1))
            ax = axis % nd

            def fits(i):
                s = self.shape(i)
                return len(s) == nd and all(s[j] == sa[j] for j in range(nd) if j != ax)

            others = [i for i in self.nodes() if fits(i)]
            rest = self.draw(st.lists(st.sampled_from(others), min_size=1, max_size=2))
            args = [a, *rest]
            if sum(_size(self.shape(i)) for i in args) > MAX_SIZE:
                args = [a, a]
            self.add_op("concatenate", args, axis=axis)
        elif op == "stack":
            others = [i for i in self.nodes() if self.shape(i) == sa]
            rest = self.draw(st.lists(st.sampled_from(others), min_size=1, max_size=2))
            args = [a, *rest]
            if _size(sa) * len(args) > MAX_SIZE:
                args = [a, a]
            axis = self.draw(st.integers(-(nd + 1), nd))
            self.add_op("stack", args, axis=axis)
        else:  # pragma: no cover - every op name is handled above
            raise AssertionError(op)

    def reduction(self, op, a, nd, one_to_one, fkw):
        if op == "max":
            fkw = {}
            if _size(self.shape(a)) * 2 <= MAX_SIZE and self.draw(st.booleans()):
                # Exact ties: the maximum of a value stacked with itself
                # (ties share the gradient evenly).
                a = self.add_op("stack", [a, a], axis=0)
                nd += 1
        if nd == 0 or self.draw(st.integers(0, 2)) == 2:
            keepdims = False if one_to_one else self.draw(st.booleans())
            self.add_op(op, [a], axis=None, keepdims=keepdims, **fkw)
            return
        if one_to_one or self.draw(st.booleans()):
            axis: Any = self.draw(st.integers(-nd, nd - 1))
        else:
            picked = self.draw(
                st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True)
            )
            axis = tuple(p - nd if self.draw(st.booleans()) else p for p in picked)
        self.add_op(op, [a], axis=axis, keepdims=self.draw(st.booleans()), **fkw)

    def broadcast_to(self, a, sa):
        target = [self.draw(st.integers(1, 3)) if d == 1 else d for d in sa]
        if len(target) < 3 and self.draw(st.booleans()):
            target.insert(0, self.draw(st.integers(1, 3)))
        if _size(target) > MAX_SIZE:
            target = list(sa)
        self.add_op("broadcast_to", [a], shape=tuple(target))

    # -- the loss -----------------------------------------------------------

    def finish(self) -> int:
        """Weight every unread value that requires grad by a constant array,
        sum it, and add the sums up: the scalar loss."""
        used = {a for r in self.recs for a in r.args}
        sinks = [i for i, r in enumerate(self.recs) if i not in used and r.requires_grad]
        total = None
        for s in sinks:
            w = self.add_const(self.rng.normal(size=self.shape(s)))
            term = self.add_op("sum", [self.add_op("mul", [s, w])], axis=None, keepdims=False)
            total = term if total is None else self.add_op("add", [total, term])
        assert total is not None
        return total


@st.composite
def _index_specs(draw, shape: tuple[int, ...]):
    """A NumPy index (as plain data) for ``shape``: basic slices and integers,
    or basic slices and one integer array. Never selects an empty array."""
    nd = len(shape)
    k = draw(st.integers(1, nd))
    use_array = draw(st.booleans())
    array_at = draw(st.integers(0, k - 1)) if use_array else -1
    spec: list[tuple] = []
    for ax in range(k):
        n = shape[ax]
        if ax == array_at:
            vals = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=4))
            spec.append(("a", tuple(vals)))
            continue
        kind = draw(st.sampled_from(["slice", "int"] if not use_array else ["slice"]))
        if kind == "int":
            spec.append(("i", draw(st.integers(-n, n - 1))))
        else:
            start = draw(st.integers(0, n - 1))
            stop = draw(st.integers(start + 1, n))
            step = draw(st.integers(1, 2))
            spec.append(("s", start, stop, step))
    return tuple(spec)


@st.composite
def _base_shapes(draw, max_ndim=3):
    nd = draw(st.sampled_from([n for n in (2, 1, 3, 0) if n <= max_ndim]))
    return tuple(draw(st.integers(1, 3)) for _ in range(nd))


@st.composite
def graphs(
    draw,
    ops: Sequence[str] = ALL_OPS,
    min_ops: int = 3,
    max_ops: int = 12,
    max_leaves: int = 4,
    hooks: bool = True,
    consts: bool = True,
    base_shapes: st.SearchStrategy[tuple[int, ...]] | None = None,
):
    """Random DAGs of ``ops`` over leaves whose shapes broadcast together.

    Values reused by several later records give fan-out; binary ops, ``where``,
    ``concatenate`` and ``stack`` give fan-in. The loss is a weighted sum of
    every unread value, so every leaf that requires grad reaches it. Each
    leaf's shape is a suffix of a base shape (from ``base_shapes``, 0-d to
    3-d by default) with some dimensions set to 1.
    """
    one_to_one = set(ops) <= set(ONE_TO_ONE_OPS)
    seed = draw(st.integers(0, 2**31 - 1))
    b = _Builder(draw, ops, seed)
    base = draw(_base_shapes() if base_shapes is None else base_shapes)
    n_leaves = draw(st.integers(min(2, max_leaves), max_leaves))
    for j in range(n_leaves):
        k = len(base) - draw(st.integers(0, len(base)))
        # a suffix of the base shape with some dimensions set to 1
        shape = tuple(1 if draw(st.integers(0, 3)) == 0 else d for d in base[len(base) - k :])
        requires_grad = j == 0 or not consts or draw(st.integers(0, 4)) > 0
        b.add_leaf(shape, requires_grad=requires_grad)
    n_ops = draw(st.integers(min_ops, max_ops))
    for _ in range(n_ops):
        b.step(one_to_one)
    output = b.finish()

    grad_leaves = [i for i, r in enumerate(b.recs) if r.op == "leaf" and r.requires_grad]
    order = draw(st.permutations(grad_leaves))
    inputs = [r for r in order if draw(st.booleans())] or [order[0]]

    hook_list: list[tuple[int, float]] = []
    if hooks:
        targets = [i for i, r in enumerate(b.recs) if r.requires_grad]
        for _ in range(draw(st.integers(0, 3))):
            hook_list.append((draw(st.sampled_from(targets)), draw(st.sampled_from(HOOK_FACTORS))))
    return Graph(b.recs, inputs, hook_list, output, seed)


# --------------------------------------------------------------------------
# Hook plans (for comparing the order in which hooks fire)
# --------------------------------------------------------------------------


@dataclasses.dataclass
class HookPlan:
    """Hooks registered, in this order, after the forward pass.

    Each entry is ``(kind, record id, factor)``: ``kind`` is ``"tensor"``
    (a tensor hook; ``factor`` None makes it an observer, else it returns
    ``grad * factor``), ``"pre"``/``"post"`` (hooks on the record's
    ``grad_fn``) or ``"retain"`` (``retain_grad()``).
    """

    entries: list[tuple[str, int, float | None]]


@st.composite
def hook_plans(draw, graph: Graph, max_hooks: int = 10):
    tensor_targets = [i for i, r in enumerate(graph.recs) if r.requires_grad]
    node_targets = graph.grad_nodes
    entries: list[tuple[str, int, float | None]] = []
    for _ in range(draw(st.integers(1, max_hooks))):
        kind = draw(st.sampled_from(["tensor", "tensor", "pre", "post", "retain"]))
        if kind == "tensor":
            rid = draw(st.sampled_from(tensor_targets))
            factor = draw(st.sampled_from([None, *HOOK_FACTORS]))
        else:
            rid = draw(st.sampled_from(node_targets))
            factor = None
        entries.append((kind, rid, factor))
    return HookPlan(entries)
