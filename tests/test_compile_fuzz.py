"""js.compile against the eager run on the random-DAG fuzzer's programs.

Each drawn graph (``graph_strategies.py``) becomes one step: the forward over
leaves made outside the step, hooks registered inside it, then ``js.grad``,
``backward(inputs=)`` or ``backward()``. The step runs twice eagerly and twice
compiled, on twin leaves: values, returned grads, retained grads and the
leaves' accumulated ``.grad`` must agree, and the hooks must fire in the eager
order on every call that traced (cached calls run the program, not the hooks).
"""

from __future__ import annotations

import numpy as np
import pytest
from graph_evaluators import JsOps, evaluate
from graph_model import ONE_TO_ONE_OPS, Graph
from graph_strategies import HookPlan, graphs, hook_plans
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxstream as js

MODES = ["grad", "backward_inputs", "backward"]
SETTINGS = settings(
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=False,
    max_examples=10,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

pytestmark = pytest.mark.usefixtures("no_leaked_threads", "jax_x64")  # conftest.py


class _Calls:
    """The hooks' log, held by a class: classes are opaque to js.compile's key, so
    writing to it does not force a new trace."""

    log: list = []


def _hook(kind, k, rid, factor):
    if kind == "tensor":
        return lambda grad: _Calls.log.append(("tensor", rid, k)) or (
            None if factor is None else grad * factor
        )
    if kind == "pre":
        return lambda grad_outputs: _Calls.log.append(("pre", rid, k))
    return lambda grad_inputs, grad_outputs: _Calls.log.append(("post", rid, k))


def _register(vals: list, g: Graph, plan: HookPlan) -> list[int]:
    """The plan's hooks on this run's values (and the graph's scaling hooks); the retained."""
    for rid, factor in g.hooks:
        vals[rid].register_hook(lambda grad, c=factor: grad * c)
    retained = []
    for k, (kind, rid, factor) in enumerate(plan.entries):
        t = vals[rid]
        if kind == "tensor":
            t.register_hook(_hook(kind, k, rid, factor))
        elif kind == "retain":
            t.retain_grad()
            retained.append(rid)
        else:
            register = t.grad_fn.register_prehook if kind == "pre" else t.grad_fn.register_hook
            register(_hook(kind, k, rid, factor))
    return retained


def _step(g: Graph, plan: HookPlan, mode: str):
    ops = JsOps("jax")

    def step(leaves: dict):
        vals = evaluate(g, ops, leaves=leaves)
        retained = _register(vals, g, plan)
        out = vals[g.output]
        inputs = [vals[i] for i in g.inputs]
        grads = None
        if mode == "grad":
            grads = js.grad(out, inputs)
        elif mode == "backward_inputs":
            out.backward(inputs=inputs)
        else:
            out.backward()
        return out, grads, {rid: vals[rid].grad for rid in retained}

    return step


def _leaves(g: Graph) -> dict:
    ops = JsOps("jax")
    return {
        rid: ops.leaf(rec.attrs["value"], rec.requires_grad)
        for rid, rec in enumerate(g.recs)
        if rec.op == "leaf"
    }


def _close(actual, expected, what):
    if expected is None:
        assert actual is None, f"{what}: expected None"
        return
    assert actual is not None, f"{what}: missing"
    np.testing.assert_allclose(
        np.asarray(actual.array), np.asarray(expected.array), rtol=1e-7, atol=1e-9, err_msg=what
    )


def check_compiled_matches_eager(g: Graph, plan: HookPlan, mode: str) -> None:
    eager_leaves, compiled_leaves = _leaves(g), _leaves(g)
    eager, compiled = _step(g, plan, mode), js.compile(_step(g, plan, mode))
    expected_log = []
    for call in range(2):
        _Calls.log = []
        with js.autograd.set_multithreading_enabled(False):
            e_out, e_grads, e_retained = eager(eager_leaves)
        eager_log, _Calls.log = _Calls.log, []
        traced_before = compiled.cache_size()
        c_out, c_grads, c_retained = compiled(compiled_leaves)
        if compiled.cache_size() > traced_before:
            expected_log = eager_log
        else:
            expected_log = []
        assert _Calls.log == expected_log, f"hook calls of call {call}"
        _close(c_out, e_out, f"output of call {call}")
        for i, (c, e) in enumerate(zip(c_grads or (), e_grads or (), strict=True)):
            _close(c, e, f"js.grad output {i} of call {call}")
        for rid, e in e_retained.items():
            _close(c_retained[rid], e, f"retained grad of t{rid}, call {call}")
    for rid in g.grad_leaves:
        _close(compiled_leaves[rid].grad, eager_leaves[rid].grad, f".grad of leaf t{rid}")


@SETTINGS
@given(g=graphs(), mode=st.sampled_from(MODES))
def test_random_graphs_compiled_match_eager(g, mode):
    check_compiled_matches_eager(g, HookPlan([]), mode)


@st.composite
def _hooked_graphs(draw):
    g = draw(graphs(ops=ONE_TO_ONE_OPS, hooks=False, max_ops=10))
    return g, draw(hook_plans(g))


@SETTINGS
@given(gp=_hooked_graphs(), mode=st.sampled_from(MODES))
def test_hooked_random_graphs_compiled_match_eager_in_hook_order(gp, mode):
    check_compiled_matches_eager(*gp, mode)
