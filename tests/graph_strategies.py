"""Hypothesis strategies: random plain-data graphs (``graph_model.py``) and hook plans.

``graphs`` draws random DAGs of ops whose values stay inside the domain of each
op (checked with ``NumpyOps`` while drawing); ``hook_plans`` draws the hooks to
register on a graph, for comparing the order in which hooks fire.

This module is a library for the differential tests, not a test file.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from graph_evaluators import NumpyOps
from graph_model import (
    ACTIVATIONS,
    ALL_OPS,
    BINARY,
    ONE_TO_ONE_OPS,
    PAIRWISE,
    REDUCTIONS,
    RSCALAR,
    SCALAR,
    STATISTICS,
    UNARY,
    Graph,
    Rec,
)
from hypothesis import strategies as st

# Ops that have a module-level function in jaxstream besides the method.
_MODULE_FUNCTIONS = ("exp", "log", "tanh", "sigmoid", "relu", "softplus", "sum", "mean", "matmul")

MAX_SIZE = 48  # no intermediate array grows beyond this many elements
MAX_ABS = 1e3  # nor beyond this magnitude

HOOK_FACTORS = (2.0, -0.5, 3.0, 0.25)

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
    "expm1": lambda v: bool(np.all(v <= 3.0)),
    "log1p": lambda v: bool(np.all(v >= -0.8)),
    "leaky_relu": lambda v: bool(np.all(np.abs(v) >= 1e-3)),
    # several elements and, for std, a spread: away from std's kink at 0
    "var": lambda v: v.size >= 2,
    "std": lambda v: v.size >= 2 and float(np.std(v)) >= 1e-2,
    "vector_norm": lambda v: float(np.linalg.norm(v)) >= 1e-2,
}

CLIP_BOUNDS = (-0.5, 0.3)



def _has_axes(shape: tuple[int, ...]) -> bool:
    return len(shape) >= 1

# Ops that apply to values of some shapes only.
_SHAPE_OK: dict[str, Callable[[tuple[int, ...]], bool]] = {
    **dict.fromkeys(
        ("getitem", "concatenate", "swapaxes", "cumsum", "flip", "take_along_axis", "einsum"),
        _has_axes,
    ),
    "T": lambda shape: len(shape) <= 2,
    "matmul": lambda shape: len(shape) == 2,
    "stack": lambda shape: _size(shape) * 2 <= MAX_SIZE,
    "squeeze": lambda shape: 1 in shape,
}

_DENOMINATOR_OK = _UNARY_DOMAIN["rdiv_s"]

# The kind of each op that shares its ``_Builder._step_<kind>`` with others; any
# other op has a step of its own, ``_Builder._step_<op>``.
_OP_KINDS = {
    **dict.fromkeys(BINARY + PAIRWISE, "binary"),
    **dict.fromkeys(SCALAR + RSCALAR, "scalar"),
    **dict.fromkeys(UNARY + ACTIVATIONS, "unary"),
    **dict.fromkeys(STATISTICS, "statistic"),
    **dict.fromkeys(REDUCTIONS, "reduction"),
}


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
        if op in _SHAPE_OK:
            return [i for i in nodes if _SHAPE_OK[op](self.shape(i))]
        if op == "div":
            return nodes if any(_DENOMINATOR_OK(self.vals[i]) for i in nodes) else []
        if op == "pow":
            return [i for i in nodes if np.max(np.abs(self.vals[i]), initial=0.0) <= 4.0]
        if op == "clip":
            return [i for i in nodes if _clear_of(self.vals[i], CLIP_BOUNDS)]
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
        fn = op in _MODULE_FUNCTIONS and self.draw(st.booleans())
        fkw = {"fn": True} if fn else {}
        getattr(self, "_step_" + _OP_KINDS.get(op, op))(op, a, one_to_one, fkw)

    def _step_binary(self, op, a, one_to_one, fkw):
        sa = self.shape(a)
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

    def _step_scalar(self, op, a, one_to_one, fkw):
        c = self.draw(st.sampled_from([0.5, 2.0, -1.5, 3.0]))
        self.add_op(op, [a], c=c)

    def _step_unary(self, op, a, one_to_one, fkw):
        self.add_op(op, [a], **fkw)

    def _step_pow(self, op, a, one_to_one, fkw):
        choices: list[float | int] = [2, 3, 2.0, 3.0]
        if np.all(self.vals[a] >= 0.1):
            choices += [0.5, 1.5, -1.0, -0.5, 2.5]
        elif np.all(np.abs(self.vals[a]) >= 0.3):
            choices += [-1.0, -2]
        p = self.draw(st.sampled_from(choices))
        self.add_op("pow", [a], p=p, **fkw)

    def _step_reduction(self, op, a, one_to_one, fkw):
        nd = len(self.shape(a))
        if op in ("max", "min"):
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

    def _step_statistic(self, op, a, one_to_one, fkw):
        attrs = {} if op == "vector_norm" else {"correction": self.draw(st.integers(0, 1))}
        self.add_op(op, [a], **attrs)

    def _step_clip(self, op, a, one_to_one, fkw):
        lo, hi = CLIP_BOUNDS
        bounds = self.draw(st.sampled_from([(lo, hi), (lo, None), (None, hi)]))
        self.add_op("clip", [a], lo=bounds[0], hi=bounds[1])

    def _axis(self, a) -> int:
        nd = len(self.shape(a))
        return self.draw(st.integers(-nd, nd - 1))

    def _step_cumsum(self, op, a, one_to_one, fkw):
        self.add_op("cumsum", [a], axis=self._axis(a))

    def _step_flip(self, op, a, one_to_one, fkw):
        self.add_op("flip", [a], axis=self._axis(a) if self.draw(st.booleans()) else None)

    def _step_squeeze(self, op, a, one_to_one, fkw):
        ones = [i for i, d in enumerate(self.shape(a)) if d == 1]
        self.add_op("squeeze", [a], axis=self.draw(st.sampled_from(ones)))

    def _step_expand_dims(self, op, a, one_to_one, fkw):
        nd = len(self.shape(a))
        self.add_op("expand_dims", [a], axis=self.draw(st.integers(-nd - 1, nd)))

    def _step_flatten(self, op, a, one_to_one, fkw):
        nd = max(len(self.shape(a)), 1)
        start = self.draw(st.integers(0, nd - 1))
        self.add_op("flatten", [a], start=start, end=self.draw(st.integers(start, nd - 1)))

    def _step_take_along_axis(self, op, a, one_to_one, fkw):
        shape = list(self.shape(a))
        axis = self._axis(a)
        n = shape[axis]
        shape[axis] = self.draw(st.integers(1, 3))
        index = self.rng.integers(0, n, size=shape)
        self.add_op("take_along_axis", [a], index=index, axis=axis)

    def _step_einsum(self, op, a, one_to_one, fkw):
        sa = self.shape(a)
        labels = "ijk"[: len(sa)]
        b = self.pick([i for i in self.nodes() if self.shape(i) == sa])
        kept = "".join(c for c in labels if self.draw(st.booleans()))
        self.add_op("einsum", [a, b], spec=f"{labels},{labels}->{kept[::-1]}")

    def _step_reshape(self, op, a, one_to_one, fkw):
        shapes = _shapes_of_size(_size(self.shape(a)))
        shape = list(self.draw(st.sampled_from(shapes)))
        if shape and self.draw(st.booleans()):
            shape[self.draw(st.integers(0, len(shape) - 1))] = -1
        self.add_op("reshape", [a], shape=tuple(shape))

    def _step_transpose(self, op, a, one_to_one, fkw):
        nd = len(self.shape(a))
        if nd >= 2 and self.draw(st.booleans()):
            axes = tuple(self.draw(st.permutations(range(nd))))
            self.add_op("transpose", [a], axes=axes)
        else:
            self.add_op("transpose", [a])

    def _step_swapaxes(self, op, a, one_to_one, fkw):
        nd = len(self.shape(a))
        ax = st.integers(-nd, nd - 1)
        self.add_op("swapaxes", [a], axis1=self.draw(ax), axis2=self.draw(ax))

    def _step_T(self, op, a, one_to_one, fkw):
        self.add_op("T", [a])

    def _step_broadcast_to(self, op, a, one_to_one, fkw):
        sa = self.shape(a)
        target = [self.draw(st.integers(1, 3)) if d == 1 else d for d in sa]
        if len(target) < 3 and self.draw(st.booleans()):
            target.insert(0, self.draw(st.integers(1, 3)))
        if _size(target) > MAX_SIZE:
            target = list(sa)
        self.add_op("broadcast_to", [a], shape=tuple(target))

    def _step_matmul(self, op, a, one_to_one, fkw):
        k = self.shape(a)[1]
        others = [i for i in self.nodes() if len(self.shape(i)) == 2 and self.shape(i)[0] == k]
        choice = self.draw(st.integers(0, len(others)))
        if choice == len(others):
            n = self.draw(st.integers(1, 3))
            b = self.add_leaf((k, n), requires_grad=self.draw(st.booleans()) or one_to_one)
        else:
            b = others[choice]
        self.add_op("matmul", [a, b], **fkw)

    def _step_getitem(self, op, a, one_to_one, fkw):
        self.add_op("getitem", [a], index=self.draw(_index_specs(self.shape(a))))

    def _step_where(self, op, a, one_to_one, fkw):
        sa = self.shape(a)
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

    def _step_concatenate(self, op, a, one_to_one, fkw):
        sa = self.shape(a)
        nd = len(sa)
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

    def _step_stack(self, op, a, one_to_one, fkw):
        sa = self.shape(a)
        nd = len(sa)
        others = [i for i in self.nodes() if self.shape(i) == sa]
        rest = self.draw(st.lists(st.sampled_from(others), min_size=1, max_size=2))
        args = [a, *rest]
        if _size(sa) * len(args) > MAX_SIZE:
            args = [a, a]
        axis = self.draw(st.integers(-(nd + 1), nd))
        self.add_op("stack", args, axis=axis)

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


def _clear_of(values: np.ndarray, points: Sequence[float]) -> bool:
    """Whether no value sits on a kink at one of `points`."""
    return all(np.all(np.abs(values - p) >= 1e-3) for p in points)


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
