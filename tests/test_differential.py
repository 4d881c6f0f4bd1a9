"""Differential tests: jaxstream's autograd against JAX and PyTorch.

Random DAGs of ops (``graph_strategies.py``) are evaluated with jaxstream on the NumPy
and the JAX backends, with ``jax.numpy`` under ``jax.vjp``/``jax.grad`` and,
where it is installed, with ``torch``; gradients, higher-order derivatives,
hook firing order and the engine's execution order must agree.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from graph_evaluators import JaxOps, JsOps, Ops, TorchOps, evaluate, jax_reference
from graph_model import ONE_TO_ONE_OPS, Graph
from graph_strategies import HookPlan, graphs, hook_plans
from helpers import BACKENDS, arr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxstream as js

MODES = ["grad", "backward_inputs", "backward"]

BASE = settings(
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=False,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.large_base_example,
    ],
)


pytestmark = pytest.mark.usefixtures("jax_x64")  # conftest.py


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def assert_close(actual, expected, *, rtol=1e-7, atol=1e-9, what=""):
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol * scale, err_msg=what)


def _scaler(c):
    return lambda grad: grad * c


def build(graph: Graph, ops: Ops, hooks: bool = True) -> list:
    """Run the forward pass of ``graph``, registering its scaling hooks."""

    def on_value(rid, rec, v):
        if hooks:
            for r, c in graph.hooks:
                if r == rid:
                    v.register_hook(_scaler(c))
        return v

    return evaluate(graph, ops, on_value=on_value)


class JsSide:
    """What the comparisons need from jaxstream."""

    name = "jaxstream"

    def __init__(self, backend: str, dtype=np.float64):
        self.ops = JsOps(backend, dtype)

    def grad(self, out, inputs):
        return js.grad(out, inputs)

    def single_threaded(self):
        return js.autograd.set_multithreading_enabled(False)

    def execution_order(self):
        return js.autograd.graph.current_execution_order()

    def numpy(self, t):
        return None if t is None else arr(t)


class TorchSide:
    name = "torch"

    def __init__(self, torch):
        self.torch = torch
        self.ops = TorchOps()

    def grad(self, out, inputs):
        return self.torch.autograd.grad(out, inputs)

    def single_threaded(self):
        return self.torch.autograd.set_multithreading_enabled(False)

    def execution_order(self):
        return self.torch._C._current_graph_task_execution_order()

    def numpy(self, t):
        return None if t is None else t.detach().numpy()


def node_name(node) -> str:
    name = node.name()
    return name.rsplit("::", 1)[-1]  # torch spells it torch::autograd::AccumulateGrad


def run_backward(side, graph: Graph, vals: list, mode: str):
    out = vals[graph.output]
    inputs = [vals[i] for i in graph.inputs]
    if mode == "grad":
        return tuple(side.numpy(g) for g in side.grad(out, inputs))
    if mode == "backward_inputs":
        out.backward(inputs=inputs)
    else:
        out.backward()
    return None


# --------------------------------------------------------------------------
# 1. random graphs vs jax.vjp
# --------------------------------------------------------------------------


def check_grads_match_jax(backend: str, g: Graph) -> None:
    loss, ref = jax_reference(g)

    # js.grad(out, inputs=subset)
    vals = build(g, JsOps(backend))
    out = vals[g.output]
    assert tuple(out.shape) == ()
    assert_close(arr(out), loss, what="forward loss")
    grads = js.grad(out, [vals[i] for i in g.inputs])
    assert isinstance(grads, tuple) and len(grads) == len(g.inputs)
    for rid, gr in zip(g.inputs, grads, strict=True):
        assert gr.backend == backend
        assert arr(gr).dtype == np.float64
        assert_close(arr(gr), ref[rid], what=f"js.grad wrt t{rid}")
    for rid in g.grad_leaves:
        assert vals[rid].grad is None, "grad() must not accumulate into .grad"

    # out.backward(inputs=subset), twice: accumulation into .grad
    vals = build(g, JsOps(backend))
    out = vals[g.output]
    inputs = [vals[i] for i in g.inputs]
    out.backward(inputs=inputs, retain_graph=True)
    first = {rid: arr(vals[rid].grad).copy() for rid in g.inputs}
    out.backward(inputs=inputs)
    for rid in g.grad_leaves:
        leaf = vals[rid]
        if rid in g.inputs:
            assert leaf.grad.backend == backend
            assert_close(first[rid], ref[rid], what=f"backward(inputs=) .grad of t{rid}")
            assert_close(arr(leaf.grad), 2 * ref[rid], what=f"accumulated .grad of t{rid}")
        else:
            assert leaf.grad is None, f"t{rid} is not in inputs= but got a .grad"


# Each backend gets its own test so that the JAX backend, whose eager ops
# compile once per new shape, can run fewer examples.


@settings(BASE, max_examples=30)
@given(g=graphs())
def test_random_graph_grads_match_jax_numpy_backend(g):
    check_grads_match_jax("numpy", g)


@settings(BASE, max_examples=8)
@given(g=graphs())
def test_random_graph_grads_match_jax_jax_backend(g):
    check_grads_match_jax("jax", g)


_SAME_SHAPE_VIEWS = {
    "broadcast_to": lambda t: t.broadcast_to(tuple(t.shape)),
    "reshape": lambda t: t.reshape(tuple(t.shape)),
    "transpose": lambda t: t.transpose(0, -1),
    "T": lambda t: t.T,
    "swapaxes": lambda t: t.swapaxes(0, 0),
    "getitem": lambda t: t[:],
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("view", sorted(_SAME_SHAPE_VIEWS))
def test_hook_on_same_shape_view_scales_only_that_view(backend, view):
    # Found by the random graphs: a view op that leaves the shape unchanged
    # still makes a new tensor, so a hook on it must not touch the other
    # uses of its input (torch: 3 = 2 through the hooked view + 1 directly).
    ops = JsOps(backend)
    x = ops.leaf(np.array([1.0, 2.0]))
    y = x * 1.0
    z = _SAME_SHAPE_VIEWS[view](y)
    z.register_hook(_scaler(2.0))
    (gx,) = js.grad((z + y).sum(), [x])
    assert_close(arr(gx), np.array([3.0, 3.0]), what=view)


# --------------------------------------------------------------------------
# 2. third-order derivatives vs jax.grad(jax.grad(jax.grad(f)))
# --------------------------------------------------------------------------

_RNG = np.random.default_rng(1234)
_W23 = _RNG.normal(size=(2, 3))
_W322 = _RNG.normal(size=(3, 2, 2))
_COND23 = np.array([[True, False, True], [False, True, True]])

# Scalar functions of one input built from the op set. A 0-d input is
# differentiated three times directly; a larger one along fixed directions.


def _f_activations(o, x):  # 0-d
    return o.tanh(x) * o.sigmoid(x * 2.0) + o.softplus(x) - o.exp(-x * x)


def _f_exp_sin_div_log_pow(o, x):  # 0-d
    return o.exp(o.sin(x)) / (x * x + 1.0) + o.log(x * x + 1.0) ** 3


def _f_sqrt_cos_abs_max(o, x):  # 0-d
    return o.sqrt(o.cos(x) + 2.0) * o.abs(x) + o.max(o.stack(o.sin(x), x * x, o.tanh(x), axis=0))


def _f_broadcast_mean(o, x):  # 0-d
    return o.mean(o.sigmoid(o.broadcast_to(x, (2, 3)) * o.const(_W23)) ** 2)


def _f_matmul_softplus(o, x):  # (2, 3)
    return o.sum(o.tanh(o.matmul(x, o.T(x)))) + o.sum(o.mean(o.softplus(x) ** 2.0, axis=1))


def _f_max_where(o, x):  # (2, 3)
    return o.sum(o.max(o.sin(x), axis=1) ** 3) + o.sum(
        o.where(o.exp(x), o.cos(x), cond=_COND23) * x
    )


def _f_index_concat_relu(o, x):  # (4,)
    a = o.getitem(x, (("s", 1, 4, 1),))
    b = o.getitem(x, (("a", (0, 0, 2)),))
    return o.sum(o.sigmoid(o.concatenate(a, b * b, axis=0))) + o.sum(o.relu(x) ** 3)


def _f_swapaxes_centered(o, x):  # (2, 2, 3)
    t = o.sum(o.exp(o.tanh(o.swapaxes(x, 0, 2))) * o.const(_W322))
    return t + o.sum(o.tanh(x - o.mean(x, axis=0, keepdims=True)) ** 2)


def _f_reshape_log_pow(o, x):  # (2, 3)
    t = o.mean(o.log(o.reshape(x, (3, 2)) ** 2 + 1.0) * o.sin(o.transpose(x)))
    return t + o.sum((x * x + 1.0) ** 1.5 / (o.cos(x) - 2.0))


THIRD_ORDER = {
    # name: (function, input value)
    "activations": (_f_activations, np.array(0.7)),
    "exp_sin_div_log_pow": (_f_exp_sin_div_log_pow, np.array(-0.4)),
    "sqrt_cos_abs_max": (_f_sqrt_cos_abs_max, np.array(-0.5)),
    "broadcast_mean": (_f_broadcast_mean, np.array(0.3)),
    "matmul_softplus": (_f_matmul_softplus, _RNG.uniform(-1, 1, size=(2, 3))),
    "max_where": (_f_max_where, _RNG.uniform(-1, 1, size=(2, 3))),
    "index_concat_relu": (_f_index_concat_relu, np.array([0.5, -0.7, 1.1, 0.3])),
    "swapaxes_centered": (_f_swapaxes_centered, _RNG.uniform(-1, 1, size=(2, 2, 3))),
    "reshape_log_pow": (_f_reshape_log_pow, _RNG.uniform(-1, 1, size=(2, 3))),
}


def _directions(x0):
    rng = np.random.default_rng(7)
    return rng.normal(size=np.shape(x0)), rng.normal(size=np.shape(x0))


@functools.cache
def _jax_derivatives(name):
    """First, second and third derivatives of ``THIRD_ORDER[name]``; past the
    first, along v1 then v2 for non-scalar inputs (a scalar input uses the
    plain nested ``jax.grad``)."""
    f, x0 = THIRD_ORDER[name]
    o = JaxOps()
    fx = lambda x: f(o, x)
    x = jnp.asarray(x0)
    if x.ndim == 0:
        d1 = jax.grad(fx)
        d2 = jax.grad(jax.grad(fx))
        d3 = jax.grad(jax.grad(jax.grad(fx)))
    else:
        v1, v2 = (jnp.asarray(v) for v in _directions(x0))
        d1 = jax.grad(fx)
        d2 = jax.grad(lambda x: jnp.sum(d1(x) * v1))
        d3 = jax.grad(lambda x: jnp.sum(d2(x) * v2))
    # One compiled function instead of hundreds of eagerly dispatched ops.
    both = jax.jit(lambda x: (d1(x), d2(x), d3(x)))
    return [np.asarray(d) for d in both(x)]


def _triple_grad(ops, grad_fn, f, x0):
    """The same three derivatives with ``create_graph=True`` each time."""
    x = ops.leaf(x0)
    y = f(ops, x)
    v1, v2 = _directions(x0)
    out = []
    s = y
    for v in (v1, v2, None):
        (g,) = grad_fn(s, x)
        out.append(g)
        if v is not None:
            s = g if np.ndim(x0) == 0 else ops.sum(g * ops.const(v))
    return out


# The JAX backend runs a subset: its eager ops compile once per new shape.
_THIRD_ORDER_JAX_BACKEND = ("activations", "matmul_softplus", "max_where")


@pytest.mark.parametrize(
    ("backend", "name"),
    [("numpy", n) for n in sorted(THIRD_ORDER)] + [("jax", n) for n in _THIRD_ORDER_JAX_BACKEND],
)
def test_third_order_matches_jax(backend, name):
    f, x0 = THIRD_ORDER[name]
    expected = _jax_derivatives(name)
    got = _triple_grad(
        JsOps(backend),
        lambda s, x: js.grad(s, [x], create_graph=True),
        f,
        x0,
    )
    for order, (g, e) in enumerate(zip(got, expected, strict=True), start=1):
        assert g.backend == backend
        assert_close(arr(g), e, rtol=1e-6, atol=1e-9, what=f"order {order}")


# --------------------------------------------------------------------------
# 3. vs torch.autograd: gradients, hook order, execution order
# --------------------------------------------------------------------------


@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(THIRD_ORDER))
def test_third_order_matches_torch(torch, name):
    f, x0 = THIRD_ORDER[name]
    expected = _triple_grad(
        TorchOps(),
        lambda s, x: torch.autograd.grad(s, [x], create_graph=True),
        f,
        x0,
    )
    got = _triple_grad(JsOps("numpy"), lambda s, x: js.grad(s, [x], create_graph=True), f, x0)
    for order, (g, e) in enumerate(zip(got, expected, strict=True), start=1):
        assert_close(arr(g), e.detach().numpy(), rtol=1e-6, atol=1e-9, what=f"order {order}")


@pytest.mark.oracle
@settings(BASE, max_examples=80)
@given(g=graphs(), mode=st.sampled_from(MODES))
def test_random_graph_grads_match_torch(torch, g, mode):
    results = {}
    for side in (JsSide("numpy"), TorchSide(torch)):
        vals = build(g, side.ops)
        grads = run_backward(side, g, vals, mode)
        leaf_grads = {rid: side.numpy(vals[rid].grad) for rid in g.grad_leaves}
        results[side.name] = (grads, leaf_grads)
    (js_grads, js_leaf), (th_grads, th_leaf) = results["jaxstream"], results["torch"]
    if mode == "grad":
        for rid, a, e in zip(g.inputs, js_grads, th_grads, strict=True):
            assert_close(a, e, what=f"grad wrt t{rid}")
    for rid in g.grad_leaves:
        if th_leaf[rid] is None:
            assert js_leaf[rid] is None, f".grad of t{rid} should be None"
        else:
            assert js_leaf[rid] is not None, f".grad of t{rid} is missing"
            assert_close(js_leaf[rid], th_leaf[rid], what=f".grad of t{rid}")


@st.composite
def _hooked_graphs(draw):
    g = draw(graphs(ops=ONE_TO_ONE_OPS, hooks=False, max_ops=10))
    return g, draw(hook_plans(g))


def _tensor_hook(log, k, rid, factor):
    def hook(grad):
        log.append(("tensor", rid, k))
        return None if factor is None else grad * factor

    return hook


def _pre_hook(log, k, rid):
    def hook(grad_outputs):
        log.append(("pre", rid, k))

    return hook


def _post_hook(log, k, rid):
    def hook(grad_inputs, grad_outputs):
        log.append(("post", rid, k))

    return hook


def _run_with_hook_plan(side, g: Graph, plan: HookPlan, mode: str):
    vals = evaluate(g, side.ops)
    log: list[tuple[str, int, int]] = []
    retained = []
    for k, (kind, rid, factor) in enumerate(plan.entries):
        t = vals[rid]
        if kind == "tensor":
            t.register_hook(_tensor_hook(log, k, rid, factor))
        elif kind == "pre":
            t.grad_fn.register_prehook(_pre_hook(log, k, rid))
        elif kind == "post":
            t.grad_fn.register_hook(_post_hook(log, k, rid))
        else:
            t.retain_grad()
            retained.append(rid)
    with side.single_threaded():
        grads = run_backward(side, g, vals, mode)
    retained_grads = {rid: side.numpy(vals[rid].grad) for rid in retained}
    leaf_grads = {rid: side.numpy(vals[rid].grad) for rid in g.grad_leaves}
    return log, grads, retained_grads, leaf_grads


def _assert_same_optional(a, e, what):
    if e is None:
        assert a is None, f"{what}: expected None"
    else:
        assert a is not None, f"{what}: missing"
        assert_close(a, e, what=what)


def _canonical_log(log, leaf_rids):
    """Leaf accumulators share the highest priority, and torch's heap does not
    pop equal priorities first-in first-out, so the order between the hooks
    of consecutive leaves is not specified: sort within such runs (hooks of
    one leaf keep their registration order)."""
    out, run = [], []
    for event in log:
        if event[1] in leaf_rids:
            run.append(event)
            continue
        out.extend(sorted(run, key=lambda e: (e[1], e[2])))
        run = []
        out.append(event)
    out.extend(sorted(run, key=lambda e: (e[1], e[2])))
    return out


def check_hook_order(torch, backend, gp, mode):
    g, plan = gp
    js_log, js_grads, js_ret, js_leaf = _run_with_hook_plan(JsSide(backend), g, plan, mode)
    th_log, th_grads, th_ret, th_leaf = _run_with_hook_plan(TorchSide(torch), g, plan, mode)
    leaf_rids = set(g.grad_leaves)
    assert _canonical_log(js_log, leaf_rids) == _canonical_log(th_log, leaf_rids)
    if mode == "grad":
        for rid, a, e in zip(g.inputs, js_grads, th_grads, strict=True):
            assert_close(a, e, what=f"grad wrt t{rid}")
    for rid, e in th_ret.items():
        _assert_same_optional(js_ret[rid], e, f"retained .grad of t{rid}")
    for rid, e in th_leaf.items():
        _assert_same_optional(js_leaf[rid], e, f".grad of leaf t{rid}")


@pytest.mark.oracle
@settings(BASE, max_examples=40)
@given(gp=_hooked_graphs(), mode=st.sampled_from(MODES))
def test_hook_order_matches_torch_numpy_backend(torch, gp, mode):
    check_hook_order(torch, "numpy", gp, mode)


@pytest.mark.oracle
@settings(BASE, max_examples=8)
@given(gp=_hooked_graphs(), mode=st.sampled_from(MODES))
def test_hook_order_matches_torch_jax_backend(torch, gp, mode):
    check_hook_order(torch, "jax", gp, mode)


def _canonical(order):
    """AccumulateGrad nodes share the highest priority, so the order inside
    a run of consecutive ones is not specified: sort within such runs."""
    out, run = [], []
    for item in order:
        if item[0] == "AccumulateGrad":
            run.append(item)
            continue
        out.extend(sorted(run, key=repr))
        run = []
        out.append(item)
    out.extend(sorted(run, key=repr))
    return out


def _record_execution_order(side, g: Graph, mode: str):
    """``current_execution_order()`` as seen from the root's pre-hook, as
    (node name, record id) pairs; an accumulator is labelled by its leaf."""
    vals = evaluate(g, side.ops)
    for rid in g.grad_nodes:
        vals[rid].grad_fn.metadata["rid"] = rid
    leaves = [(rid, vals[rid]) for rid in g.grad_leaves]

    def describe(node):
        name = node_name(node)
        if name == "AccumulateGrad":
            var = node.variable
            label = next((rid for rid, t in leaves if t is var), None)
        else:
            label = node.metadata.get("rid")
        return name, label

    orders: list[list[tuple[str, int | None]]] = []

    def probe(grad_outputs):
        orders.append([describe(n) for n in side.execution_order()])

    # Only the first node to run: torch computes the order from the
    # dependency counts, which the running backward consumes.
    vals[g.output].grad_fn.register_prehook(probe)
    with side.single_threaded():
        run_backward(side, g, vals, mode)
    assert len(orders) == 1
    return orders[0]


def check_execution_order(torch, backend, g, mode):
    js_order = _record_execution_order(JsSide(backend), g, mode)
    th_order = _record_execution_order(TorchSide(torch), g, mode)
    assert [n for n, _ in js_order] == [n for n, _ in th_order]
    assert _canonical(js_order) == _canonical(th_order)


_ONE_TO_ONE_GRAPHS = graphs(ops=ONE_TO_ONE_OPS, hooks=False, max_ops=12)


@pytest.mark.oracle
@settings(BASE, max_examples=40)
@given(g=_ONE_TO_ONE_GRAPHS, mode=st.sampled_from(MODES))
def test_execution_order_matches_torch_numpy_backend(torch, g, mode):
    check_execution_order(torch, "numpy", g, mode)


@pytest.mark.oracle
@settings(BASE, max_examples=8)
@given(g=_ONE_TO_ONE_GRAPHS, mode=st.sampled_from(MODES))
def test_execution_order_matches_torch_jax_backend(torch, g, mode):
    check_execution_order(torch, "jax", g, mode)


def test_execution_order_needs_multithreading_disabled():
    x = js.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = (x.exp() * 2.0).sum()
    errors = []

    def probe(grad_outputs):
        try:
            js.autograd.graph.current_execution_order()
        except RuntimeError as e:
            errors.append(e)

    y.grad_fn.register_prehook(probe)
    with js.autograd.set_multithreading_enabled(True):
        y.backward()
    assert len(errors) == 1


def test_execution_order_of_a_known_graph():
    # Torch-independent. Ready nodes run by decreasing sequence_nr, and a
    # leaf's accumulator only once every node reading the leaf has run; the
    # predicted order is the order in which the nodes then actually run.
    x = js.tensor(np.array([0.5, 1.5]), requires_grad=True)
    w = js.tensor(np.array([2.0, -1.0]), requires_grad=True)
    a = x * w  # MulBackward0
    b = a.exp()  # ExpBackward0
    c = x.sin()  # SinBackward0, reads x a second time
    s = b + c  # AddBackward0
    y = s.sum()  # SumBackward0
    predicted, ran = [], []
    y.grad_fn.register_prehook(
        lambda go: predicted.append(
            [node_name(n) for n in js.autograd.graph.current_execution_order()]
        )
    )
    for t in (y, s, c, b, a):
        t.grad_fn.register_prehook(lambda go, node=t.grad_fn: ran.append(node_name(node)))
    for leaf in (x, w):
        leaf.register_hook(lambda g: ran.append("AccumulateGrad"))
    with js.autograd.set_multithreading_enabled(False):
        y.backward()
    expected = [
        "SumBackward0",
        "AddBackward0",
        "SinBackward0",
        "ExpBackward0",
        "MulBackward0",
        "AccumulateGrad",
        "AccumulateGrad",
    ]
    assert predicted == [expected]
    assert ran == expected


# --------------------------------------------------------------------------
# 4. dtype preservation and broadcasting
# --------------------------------------------------------------------------


def check_float32_grads(backend, g):
    _, ref = jax_reference(g)
    vals = build(g, JsOps(backend, np.float32))
    out = vals[g.output]
    assert arr(out).dtype == np.float32
    grads = js.grad(out, [vals[i] for i in g.inputs])
    for rid, gr in zip(g.inputs, grads, strict=True):
        got = arr(gr)
        assert got.dtype == np.float32, f"grad wrt t{rid} has dtype {got.dtype}"
        assert gr.data.dtype == np.float32
        assert_close(got, ref[rid], rtol=2e-3, atol=2e-3, what=f"grad wrt t{rid}")


@settings(BASE, max_examples=12)
@given(g=graphs())
def test_float32_random_graph_grads_are_float32_numpy_backend(g):
    check_float32_grads("numpy", g)


@settings(BASE, max_examples=4)
@given(g=graphs())
def test_float32_random_graph_grads_are_float32_jax_backend(g):
    check_float32_grads("jax", g)


BROADCAST_CASES = [
    ((3,), (2, 3)),
    ((2, 1), (1, 3)),
    ((), (2, 2)),
    ((2, 1, 3), (4, 1)),
    ((1, 1), (3,)),
]


def _broadcast_fn(o, a, b, cond):
    s = a * b - a / (b * b + 1.0)
    return o.sum(o.where(s, a - b, cond=cond) * o.tanh(b))


def _broadcast_inputs(sa, sb):
    rng = np.random.default_rng(3)
    va, vb = rng.uniform(-1, 1, size=sa), rng.uniform(-1, 1, size=sb)
    cond = rng.random(np.broadcast_shapes(sa, sb)[-1:]) < 0.5
    return va, vb, cond


@functools.cache
def _broadcast_reference(sa, sb):
    va, vb, cond = _broadcast_inputs(sa, sb)
    f = lambda x, y: _broadcast_fn(JaxOps(), x, y, cond)
    ga, gb = jax.jit(jax.grad(f, argnums=(0, 1)))(jnp.asarray(va), jnp.asarray(vb))
    return np.asarray(ga), np.asarray(gb)


@pytest.mark.parametrize(
    ("backend", "dtype", "sa", "sb"),
    [("numpy", dt, sa, sb) for dt in (np.float32, np.float64) for sa, sb in BROADCAST_CASES]
    + [("jax", np.float32, sa, sb) for sa, sb in BROADCAST_CASES[:3]],
)
def test_broadcast_grads_reduce_to_input_shape(backend, dtype, sa, sb):
    va, vb, cond = _broadcast_inputs(sa, sb)
    ops = JsOps(backend, dtype)
    a, b = ops.leaf(va), ops.leaf(vb)
    ga, gb = js.grad(_broadcast_fn(ops, a, b, cond), [a, b])
    ea, eb = _broadcast_reference(sa, sb)
    tol = 1e-4 if dtype == np.float32 else 1e-9
    for got, want, shape in ((ga, ea, sa), (gb, eb, sb)):
        values = arr(got)
        assert tuple(got.shape) == shape
        assert values.dtype == dtype
        assert_close(values, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_scalars_keep_float32(backend):
    ops = JsOps(backend, np.float32)
    a = ops.leaf(np.array([[0.5, 1.5, 2.0], [1.0, 0.25, 3.0]]))
    results = {
        "a * 2.0": a * 2.0,
        "2.0 * a": 2.0 * a,
        "a + 1": a + 1,
        "a - 0.5": a - 0.5,
        "3.0 - a": 3.0 - a,
        "a / 3.0": a / 3.0,
        "2.0 / a": 2.0 / a,
        "a ** 2": a**2,
        "a ** 0.5": a**0.5,
        "-a": -a,
        "a.mean()": a.mean(),
        "a.sum(axis=0)": a.sum(axis=0),
        "a.max(axis=1)": a.max(axis=1),
        "a.softplus()": a.softplus(),
        "a @ a.T": a @ a.T,
    }
    for what, r in results.items():
        assert arr(r).dtype == np.float32, what
    total = None
    for r in results.values():
        term = r.sum()
        total = term if total is None else total + term
    total.backward()
    assert arr(a.grad).dtype == np.float32
    assert tuple(a.grad.shape) == tuple(a.shape)
