"""Custom ``js.autograd.Function``, final callbacks, anomaly mode, errors raised
inside a backward, the execution-order queries and the ``Node`` API, ported
from PyTorch's autograd test-suite.  Where PyTorch is installed the same
programs run through ``torch.autograd`` and are compared.
"""

import inspect
import os
import re
import threading
import warnings

import numpy as np
import pytest

import jaxstream as js

try:  # the tests folder may or may not be a package
    from .helpers import arr, error_text, leaf, tt
except ImportError:
    from helpers import arr, error_text, leaf, tt

NAN_MESSAGE = "Function 'MulBackward0' returned nan values in its 0th output."
CALLBACK_MESSAGE = "Final callbacks can only be installed during backward pass."


def all_nodes(root):
    """Every node reachable from ``root`` through ``next_functions``."""
    seen, out, stack = set(), [], [root]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        out.append(node)
        stack.extend(fn for fn, _ in node.next_functions)
    return out


def reaches(node, target):
    return any(n is target for n in all_nodes(node))


def accumulator_of(root, variable):
    for node in all_nodes(root):
        if node.name() == "AccumulateGrad" and node.variable is variable:
            return node
    raise AssertionError("no AccumulateGrad for this leaf in the graph")


# --------------------------------------------------------------- Function


class ScaledProduct(js.autograd.Function):
    log = []

    @staticmethod
    def forward(ctx, a, b, k):
        ScaledProduct.log.append(("forward", js.is_grad_enabled(), ctx.needs_input_grad))
        inner = a * b
        ScaledProduct.log.append(("inner has grad_fn", inner.grad_fn is not None))
        ctx.save_for_backward(a, b)
        ctx.k = k
        return inner * k

    @staticmethod
    def backward(ctx, g):
        ScaledProduct.log.append(("backward", js.is_grad_enabled(), ctx.needs_input_grad))
        a, b = ctx.saved_tensors
        ga = g * b * ctx.k if ctx.needs_input_grad[0] else None
        gb = g * a * ctx.k if ctx.needs_input_grad[1] else None
        return ga, gb, None


@pytest.fixture
def product_log():
    ScaledProduct.log = []
    return ScaledProduct.log


def test_function_forward_backward(product_log):
    a = leaf([1.0, 2.0])
    b = leaf([3.0, 4.0])
    out = ScaledProduct.apply(a, b, 2.0)
    assert isinstance(out, js.Tensor)
    assert out.requires_grad and not out.is_leaf
    assert out.grad_fn.name() == "ScaledProductBackward"
    assert isinstance(out.grad_fn, js.autograd.Node)
    np.testing.assert_allclose(arr(out), [6.0, 16.0])
    out.sum().backward()
    np.testing.assert_allclose(arr(a.grad), [6.0, 8.0])
    np.testing.assert_allclose(arr(b.grad), [2.0, 4.0])
    assert product_log[0] == ("forward", False, (True, True, False))
    assert product_log[1] == ("inner has grad_fn", False)
    assert product_log[2] == ("backward", False, (True, True, False))


def test_function_needs_input_grad_reflects_requires_grad(product_log):
    a = leaf([1.0, 2.0])
    b = leaf([3.0, 4.0], requires_grad=False)
    out = ScaledProduct.apply(a, b, 2.0)
    out.sum().backward()
    assert product_log[0][2] == (True, False, False)
    assert product_log[-1] == ("backward", False, (True, False, False))
    assert b.grad is None
    np.testing.assert_allclose(arr(a.grad), [6.0, 8.0])


def test_function_needs_input_grad_trimmed_by_grad_inputs(product_log):
    a = leaf([1.0, 2.0])
    b = leaf([3.0, 4.0])
    out = ScaledProduct.apply(a * 1.0, b, 2.0).sum()
    (ga,) = js.grad(out, a, retain_graph=True)
    assert product_log[-1] == ("backward", False, (True, False, False))
    np.testing.assert_allclose(arr(ga), [6.0, 8.0])
    (gb,) = js.grad(out, b, retain_graph=True)
    assert product_log[-1] == ("backward", False, (False, True, False))
    np.testing.assert_allclose(arr(gb), [2.0, 4.0])
    out.backward(inputs=[b], retain_graph=True)
    assert product_log[-1] == ("backward", False, (False, True, False))
    assert a.grad is None
    out.backward()
    assert product_log[-1] == ("backward", False, (True, True, False))


def test_function_needs_input_grad_without_trimming(product_log):
    a = leaf([1.0, 2.0])
    b = leaf([3.0, 4.0])
    out = ScaledProduct.apply(a, b, 2.0).sum()
    assert js.autograd.is_trimming_enabled()
    js.autograd.set_trimming_enabled(False)
    try:
        assert not js.autograd.is_trimming_enabled()
        (ga,) = js.grad(out, a)
    finally:
        js.autograd.set_trimming_enabled(True)
    assert js.autograd.is_trimming_enabled()
    assert product_log[-1] == ("backward", False, (True, True, False))
    np.testing.assert_allclose(arr(ga), [6.0, 8.0])


def test_function_without_inputs_requiring_grad_has_no_node(product_log):
    a = leaf([1.0, 2.0], requires_grad=False)
    out = ScaledProduct.apply(a, a, 3.0)
    assert not out.requires_grad and out.grad_fn is None
    np.testing.assert_allclose(arr(out), [3.0, 12.0])
    x = leaf([1.0, 2.0])
    with js.no_grad():
        out = ScaledProduct.apply(x, x, 3.0)
    assert not out.requires_grad and out.grad_fn is None


class Cube(js.autograd.Function):
    grad_modes = []

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * a * a

    @staticmethod
    def backward(ctx, g):
        Cube.grad_modes.append(js.is_grad_enabled())
        (a,) = ctx.saved_tensors
        return g * 3.0 * a * a


def test_function_backward_is_differentiable_under_create_graph():
    Cube.grad_modes.clear()
    x = leaf([1.0, 2.0])
    (g,) = js.grad(Cube.apply(x).sum(), x, create_graph=True)
    assert g.requires_grad
    np.testing.assert_allclose(arr(g), [3.0, 12.0])
    (gg,) = js.grad(g.sum(), x)
    np.testing.assert_allclose(arr(gg), [6.0, 12.0])
    Cube.apply(x).sum().backward()
    # backward runs with grad mode == create_graph, as in PyTorch
    assert Cube.grad_modes == [True, False]


def test_function_saved_tensors_freed_after_backward():
    x = leaf([1.0, 2.0])
    out = Cube.apply(x).sum()
    out.backward(retain_graph=True)
    out.backward()
    np.testing.assert_allclose(arr(x.grad), [6.0, 24.0])
    with pytest.raises(RuntimeError, match=re.escape("retain_graph=True")):
        out.backward()


def test_function_saved_input_modified_in_place_raises():
    x = leaf([1.0, 2.0])
    y = x * 1.0
    out = Cube.apply(y)
    y.mul_(2.0)
    with pytest.raises(RuntimeError, match="version"):
        out.sum().backward()


class ReturnsInput(js.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a

    @staticmethod
    def backward(ctx, g):
        return g * 2.0


@pytest.mark.parametrize("shape", [(1,), ()])
def test_function_returning_its_input(shape):
    v = js.tensor(np.ones(shape), requires_grad=True)
    out = ReturnsInput.apply(v)
    assert v.is_leaf and v.grad_fn is None
    assert out.grad_fn.name() == "ReturnsInputBackward"
    out.backward()
    np.testing.assert_allclose(arr(v.grad), np.full(shape, 2.0))
    v.grad = None
    ReturnsInput.apply(v * 1.0).backward()
    np.testing.assert_allclose(arr(v.grad), np.full(shape, 2.0))


class MustNotRun(js.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 1.0

    @staticmethod
    def backward(ctx, g):
        raise AssertionError("this node is not on a path to the inputs")


def test_nodes_not_leading_to_inputs_are_not_executed():
    a = leaf([1.0, 2.0])
    b = leaf([3.0, 4.0])
    out = (MustNotRun.apply(a) + b * 2.0).sum()
    (gb,) = js.grad(out, b, retain_graph=True)
    np.testing.assert_allclose(arr(gb), [2.0, 2.0])
    out.backward(inputs=[b])
    np.testing.assert_allclose(arr(b.grad), [2.0, 2.0])
    assert a.grad is None
    unreachable = leaf([0.0])
    (ga, gu) = js.grad(MustNotRun.apply(a).sum(), [b, unreachable], allow_unused=True)
    assert ga is None and gu is None


class ExpFn(js.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        result = a.exp()
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, g):
        (result,) = ctx.saved_tensors
        return g * result


def test_function_may_save_its_output():
    x = leaf([0.0, 1.0])
    ExpFn.apply(x).sum().backward()
    np.testing.assert_allclose(arr(x.grad), np.exp([0.0, 1.0]))


class TwoOutputs(js.autograd.Function):
    seen = []
    materialize = True

    @staticmethod
    def forward(ctx, a):
        ctx.set_materialize_grads(TwoOutputs.materialize)
        return a * 2.0, a * 3.0

    @staticmethod
    def backward(ctx, g1, g2):
        TwoOutputs.seen.append((g1, g2))
        total = g1 * 2.0
        if g2 is not None:
            total = total + g2 * 3.0
        return total


@pytest.mark.parametrize("materialize", [True, False])
def test_set_materialize_grads(materialize):
    TwoOutputs.seen.clear()
    TwoOutputs.materialize = materialize
    x = leaf([1.0, 2.0, 3.0])
    o1, o2 = TwoOutputs.apply(x)
    assert o1.grad_fn is o2.grad_fn
    o1.sum().backward()
    (g1, g2) = TwoOutputs.seen[0]
    np.testing.assert_allclose(arr(g1), [1.0, 1.0, 1.0])
    if materialize:
        np.testing.assert_allclose(arr(g2), [0.0, 0.0, 0.0])
    else:
        assert g2 is None
    np.testing.assert_allclose(arr(x.grad), [2.0, 2.0, 2.0])


def test_multi_output_function_edges_carry_input_nr():
    TwoOutputs.materialize = True
    x = leaf([1.0, 2.0])
    o1, o2 = TwoOutputs.apply(x)
    z = o1 + o2
    node = o1.grad_fn
    assert z.grad_fn.next_functions == ((node, 0), (node, 1))
    z.sum().backward()
    np.testing.assert_allclose(arr(x.grad), [5.0, 5.0])


class WithIndex(js.autograd.Function):
    seen = []

    @staticmethod
    def forward(ctx, a):
        index = a * 0.0 + 1.0
        ctx.mark_non_differentiable(index)
        return a * 2.0, index

    @staticmethod
    def backward(ctx, g, g_index):
        WithIndex.seen.append(g_index)
        return g * 2.0


def test_mark_non_differentiable():
    WithIndex.seen.clear()
    x = leaf([1.0, 2.0])
    out, index = WithIndex.apply(x)
    assert out.requires_grad
    assert not index.requires_grad and index.grad_fn is None
    with pytest.raises(RuntimeError, match="does not require grad"):
        index.sum().backward()
    out.sum().backward()
    np.testing.assert_allclose(arr(WithIndex.seen[0]), [0.0, 0.0])
    np.testing.assert_allclose(arr(x.grad), [2.0, 2.0])


class IgnoresSecond(js.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return a * b

    @staticmethod
    def backward(ctx, g):
        return g, None


def test_backward_returning_none_for_an_input():
    a = leaf([1.0, 2.0])
    b = leaf([3.0, 4.0])
    IgnoresSecond.apply(a, b).sum().backward()
    np.testing.assert_allclose(arr(a.grad), [1.0, 1.0])
    assert b.grad is None
    with pytest.raises(RuntimeError, match="allow_unused"):
        js.grad(IgnoresSecond.apply(a, b).sum(), b)
    (gb,) = js.grad(IgnoresSecond.apply(a, b).sum(), b, allow_unused=True)
    assert gb is None


class TooFew(js.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return a * b

    @staticmethod
    def backward(ctx, g):
        return (g,)


class TooMany(js.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return a * b

    @staticmethod
    def backward(ctx, g):
        return g, g, g


class TrailingNone(js.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return a * b

    @staticmethod
    def backward(ctx, g):
        return g, g, None


@pytest.mark.parametrize("fn, got", [(TooFew, 1), (TooMany, 3)])
def test_wrong_number_of_gradients_raises(fn, got):
    a = leaf([1.0, 2.0])
    b = leaf([3.0, 4.0])
    with pytest.raises(RuntimeError, match=rf"number of gradients.*expected 2.*got {got}") as e:
        fn.apply(a, b).sum().backward()
    assert f"{fn.__name__}Backward" in error_text(e)
    assert a.grad is None and b.grad is None


def test_extra_none_gradients_are_ignored():
    a = leaf([1.0, 2.0])
    b = leaf([3.0, 4.0])
    TrailingNone.apply(a, b).sum().backward()
    np.testing.assert_allclose(arr(a.grad), [1.0, 1.0])
    np.testing.assert_allclose(arr(b.grad), [1.0, 1.0])


class WrongShape(js.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2.0

    @staticmethod
    def backward(ctx, g):
        return js.tensor(np.ones((4, 7)))


class Broadcast(js.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 1.0

    @staticmethod
    def backward(ctx, g):
        return js.tensor(np.ones((4, 3)))


def test_gradient_of_wrong_shape_names_node_and_shapes():
    x = js.tensor(np.ones((7, 4)), requires_grad=True)
    with pytest.raises(RuntimeError) as excinfo:
        WrongShape.apply(x).sum().backward()
    text = error_text(excinfo)
    assert "WrongShapeBackward" in text
    assert "7, 4" in text and "4, 7" in text
    assert x.grad is None


def test_broadcastable_gradient_is_summed_to_input_shape():
    x = leaf([1.0, 2.0, 3.0])
    Broadcast.apply(x).sum().backward()
    np.testing.assert_allclose(arr(x.grad), [4.0, 4.0, 4.0])


@pytest.mark.oracle
def test_function_matches_torch(torch):
    class TorchScaledProduct(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, k):
            ctx.save_for_backward(a, b)
            ctx.k = k
            return a * b * k

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b * ctx.k, g * a * ctx.k, None

    def program(fn, make):
        a = make([1.0, -2.0, 0.5])
        b = make([3.0, 4.0, -1.0])
        out = fn.apply(a * a, b, 1.5)
        ((out * out).sum() + out.sum()).backward()
        return a.grad, b.grad

    ours = program(ScaledProduct, leaf)
    ref = program(TorchScaledProduct, lambda v: tt(torch, v))
    for x, y in zip(ours, ref, strict=True):
        np.testing.assert_allclose(arr(x), y.numpy(), rtol=1e-12)


# ------------------------------------------------------ errors in backward


class Raises(js.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2.0

    @staticmethod
    def backward(ctx, g):
        raise ValueError("boom from a custom backward")


def test_error_in_backward_keeps_type_traceback_and_gets_a_note():
    x = leaf([1.0, 2.0])
    with pytest.raises(ValueError, match="boom from a custom backward") as excinfo:
        Raises.apply(x).sum().backward()
    notes = getattr(excinfo.value, "__notes__", [])
    assert any("RaisesBackward" in note for note in notes)
    assert any(entry.name == "backward" for entry in excinfo.traceback)
    assert x.grad is None
    # the engine stays usable
    (x * 2.0).sum().backward()
    np.testing.assert_allclose(arr(x.grad), [2.0, 2.0])


def test_error_in_backward_under_grad_keeps_type():
    x = leaf([1.0, 2.0])
    with pytest.raises(ValueError, match="boom") as excinfo:
        js.grad(Raises.apply(x).sum(), x)
    assert any("RaisesBackward" in n for n in getattr(excinfo.value, "__notes__", []))


# ------------------------------------------------------------ queue_callback


def test_queue_callback_outside_backward_raises():
    with pytest.raises(RuntimeError, match=re.escape(CALLBACK_MESSAGE)) as excinfo:
        js.autograd.queue_callback(lambda: None)
    assert str(excinfo.value) == CALLBACK_MESSAGE
    x = leaf([1.0])
    (x * 2.0).sum().backward()
    with pytest.raises(RuntimeError, match=re.escape(CALLBACK_MESSAGE)) as excinfo:
        js.autograd.queue_callback(lambda: None)
    assert str(excinfo.value) == CALLBACK_MESSAGE


def _callback_program(make, queue_callback):
    order = []
    x = make([1.0, 2.0])
    y = x * 2.0
    caller = threading.get_ident()

    def first():
        order.append(("first", x.grad is not None, threading.get_ident() == caller))
        queue_callback(lambda: order.append("queued by a callback"))

    def hook(g):
        queue_callback(first)
        queue_callback(lambda: order.append("second"))
        order.append("hook")

    y.register_hook(hook)
    y.sum().backward()
    order.append("returned")
    return order


def test_queue_callback_fifo_after_leaves_and_nested():
    order = _callback_program(leaf, js.autograd.queue_callback)
    assert order == [
        "hook",
        ("first", True, True),
        "second",
        "queued by a callback",
        "returned",
    ]


@pytest.mark.oracle
def test_queue_callback_matches_torch(torch):
    from torch.autograd import Variable

    ours = _callback_program(leaf, js.autograd.queue_callback)
    ref = _callback_program(lambda v: tt(torch, v), Variable._execution_engine.queue_callback)
    assert ours == ref


def test_queue_callback_from_function_backward_and_grad():
    ran = []

    class Queues(js.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1.0

        @staticmethod
        def backward(ctx, g):
            js.autograd.queue_callback(lambda: ran.append("callback"))
            return g

    x = leaf([1.0])
    (gx,) = js.grad(Queues.apply(x).sum(), x)
    assert ran == ["callback"]
    np.testing.assert_allclose(arr(gx), [1.0])
    # callbacks belong to their graph task: a second backward does not rerun them
    (x * 1.0).sum().backward()
    assert ran == ["callback"]


def test_error_in_callback_reaches_caller_and_engine_recovers():
    x = leaf([1.0, 2.0])
    y = x * 2.0

    def bad():
        raise KeyError("from a callback")

    y.register_hook(lambda g: js.autograd.queue_callback(bad))
    with pytest.raises(KeyError, match="from a callback"):
        y.sum().backward()
    x.grad = None
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(arr(x.grad), [3.0, 3.0])


# ------------------------------------------------------------ anomaly mode


def _forward_that_makes_nan(x):
    w = js.tensor(np.array([np.nan, 1.0]))
    return x * w


def _forward_location():
    lines, start = inspect.getsourcelines(_forward_that_makes_nan)
    offset = next(i for i, line in enumerate(lines) if "return x * w" in line)
    return start + offset


def test_detect_anomaly_nan_message_and_forward_trace_warning():
    x = leaf([1.0, 2.0])
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        with js.autograd.detect_anomaly():
            y = _forward_that_makes_nan(x)
            with pytest.raises(RuntimeError) as excinfo:
                y.sum().backward()
    assert str(excinfo.value) == NAN_MESSAGE
    texts = [str(r.message) for r in records]
    line = _forward_location()
    assert any(
        "MulBackward0" in t
        and os.path.basename(__file__) in t
        and ("_forward_that_makes_nan" in t or f"line {line}" in t or f":{line}" in t)
        for t in texts
    ), texts


def test_detect_anomaly_without_nan_check_and_outside_anomaly_mode():
    x = leaf([1.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with js.autograd.detect_anomaly(check_nan=False):
            _forward_that_makes_nan(x).sum().backward()
    g = arr(x.grad)
    assert np.isnan(g[0]) and g[1] == 1.0
    x.grad = None
    _forward_that_makes_nan(x).sum().backward()
    assert np.isnan(arr(x.grad)[0])


def test_detect_anomaly_error_in_backward_warns_with_forward_trace():
    x = leaf([1.0, 2.0])
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        with js.autograd.detect_anomaly():
            out = Raises.apply(x)
            with pytest.raises(ValueError, match="boom"):
                out.sum().backward()
    texts = [str(r.message) for r in records]
    assert any("RaisesBackward" in t and os.path.basename(__file__) in t for t in texts), texts


@pytest.mark.oracle
def test_detect_anomaly_matches_torch(torch):
    tx = tt(torch, [1.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autograd.detect_anomaly():
            ty = tx * torch.tensor([float("nan"), 1.0], dtype=torch.float64)
            with pytest.raises(RuntimeError) as ref:
                ty.sum().backward()
            x = leaf([1.0, 2.0])
            with js.autograd.detect_anomaly():
                with pytest.raises(RuntimeError) as ours:
                    _forward_that_makes_nan(x).sum().backward()
    assert str(ours.value) == str(ref.value) == NAN_MESSAGE


# ------------------------------------------------------- execution order


def _diamond(make):
    x = make([0.5, 1.0])
    a = x.exp()
    p = a.sin()
    q = a.cos()
    return x, a, (p * q).sum()


EXPECTED_ORDER = [
    "SumBackward0",
    "MulBackward0",
    "CosBackward0",
    "SinBackward0",
    "ExpBackward0",
    "AccumulateGrad",
]


def test_current_execution_order_predicts_the_run():
    x, a, c = _diamond(leaf)
    predicted, executed = [], []
    c.register_hook(lambda g: predicted.append(js.autograd.graph.current_execution_order()))
    for node in all_nodes(c.grad_fn):
        node.register_prehook(lambda go, node=node: executed.append(node))
    assert js.autograd.is_multithreading_enabled()
    with js.autograd.set_multithreading_enabled(False):
        assert not js.autograd.is_multithreading_enabled()
        c.backward(retain_graph=True)
        js.grad(c, a)
    assert js.autograd.is_multithreading_enabled()
    assert [n.name() for n in predicted[0]] == EXPECTED_ORDER
    assert predicted[0][0] is c.grad_fn
    assert predicted[0][-1] is a.grad_fn.next_functions[0][0]
    assert [n.name() for n in executed[: len(EXPECTED_ORDER)]] == EXPECTED_ORDER
    names = [n.name() for n in predicted[1]]
    assert names[:4] == EXPECTED_ORDER[:4] and "AccumulateGrad" not in names


@pytest.mark.oracle
def test_current_execution_order_matches_torch(torch):
    _, _, c = _diamond(lambda v: tt(torch, v))
    ref = []
    c.register_hook(
        lambda g: ref.append([n.name() for n in torch._C._current_graph_task_execution_order()])
    )
    with torch.autograd.set_multithreading_enabled(False):
        c.backward()
    assert [name.split("::")[-1] for name in ref[0]] == EXPECTED_ORDER


def test_current_execution_order_outside_backward_raises():
    with pytest.raises(RuntimeError):
        js.autograd.graph.current_execution_order()


def test_current_execution_order_requires_multithreading_disabled():
    x, _, c = _diamond(leaf)
    calls = []

    def hook(g):
        calls.append(js.autograd.graph.current_execution_order())

    c.register_hook(hook)
    with pytest.raises(RuntimeError, match="multithreading"):
        c.backward(retain_graph=True)
    js.autograd.set_multithreading_enabled(False)
    try:
        c.backward()
    finally:
        js.autograd.set_multithreading_enabled(True)
    assert js.autograd.is_multithreading_enabled()
    assert x.grad is not None
    assert [n.name() for n in calls[-1]] == EXPECTED_ORDER


def test_will_engine_execute_node():
    x = leaf([[1.0, 2.0]])
    w = leaf([[1.0, 2.0], [3.0, 4.0]])
    y = x @ w
    acc_x = accumulator_of(y.grad_fn, x)
    acc_w = accumulator_of(y.grad_fn, w)
    will = js.autograd.graph.will_engine_execute_node
    with pytest.raises(RuntimeError):
        will(acc_w)
    seen = []
    y.register_hook(lambda g: seen.append((will(y.grad_fn), will(acc_w))))
    y.sum().backward(retain_graph=True)
    assert seen.pop() == (True, True)
    y.sum().backward(inputs=[x], retain_graph=True)
    assert seen.pop() == (True, False)
    js.grad(y.sum(), x, retain_graph=True)
    assert seen.pop() == (True, False)
    y.register_hook(lambda g: seen.append(will(acc_x)))
    y.sum().backward(inputs=[x])
    assert seen.pop() is True


# ----------------------------------------------- trimming in built-in ops


def _record_post_hooks(root):
    records = []
    for node in all_nodes(root):
        if node.name() != "AccumulateGrad":
            node.register_hook(lambda gi, go, node=node: records.append((node, gi)))
    return records


def _mm_graph():
    x = leaf([[1.0, 2.0]])
    w = leaf([[1.0, 2.0], [3.0, 4.0]])
    y = js.matmul(x, w)
    return x, w, y


@pytest.mark.parametrize(
    "run, expected_none",
    [
        (lambda x, w, y: js.grad(y.sum(), x), [False, True]),
        (lambda x, w, y: js.grad(y.sum(), w), [True, False]),
        (lambda x, w, y: y.sum().backward(), [False, False]),
        (lambda x, w, y: y.sum().backward(inputs=[x]), [False, True]),
    ],
)
def test_matmul_skips_gradients_that_are_not_needed(run, expected_none):
    x, w, y = _mm_graph()
    assert y.grad_fn.name() == "MmBackward0"
    (acc_x, _), (acc_w, _) = y.grad_fn.next_functions
    assert acc_x.variable is x and acc_w.variable is w
    records = _record_post_hooks(y.grad_fn)
    run(x, w, y)
    ((node, gi),) = [r for r in records if r[0] is y.grad_fn]
    assert [g is None for g in gi] == expected_none


@pytest.mark.oracle
def test_matmul_trimming_matches_torch(torch):
    runs = [
        lambda m, x, w, y: m.grad(y.sum(), x),
        lambda m, x, w, y: m.grad(y.sum(), w),
        lambda m, x, w, y: y.sum().backward(),
        lambda m, x, w, y: y.sum().backward(inputs=[x]),
    ]
    for run in runs:
        tx, tw = tt(torch, [[1.0, 2.0]]), tt(torch, [[1.0, 2.0], [3.0, 4.0]])
        ty = tx @ tw
        ref = []
        ty.grad_fn.register_hook(lambda gi, go, ref=ref: ref.append([g is None for g in gi]))
        run(torch.autograd, tx, tw, ty)
        x, w, y = _mm_graph()
        ours = []
        y.grad_fn.register_hook(lambda gi, go, ours=ours: ours.append([g is None for g in gi]))
        run(js, x, w, y)
        assert ours == ref


def test_matmul_without_trimming_computes_every_gradient():
    x, w, y = _mm_graph()
    records = _record_post_hooks(y.grad_fn)
    js.autograd.set_trimming_enabled(False)
    try:
        (gx,) = js.grad(y.sum(), x)
    finally:
        js.autograd.set_trimming_enabled(True)
    ((_, gi),) = records
    assert gi[0] is not None and gi[1] is not None
    np.testing.assert_allclose(arr(gx), [[3.0, 7.0]])


def test_linear_skips_weight_and_bias_gradients_under_grad_of_input():
    xv = np.arange(6.0).reshape(2, 3)
    wv = np.arange(12.0).reshape(4, 3) / 10.0
    bv = np.array([1.0, -1.0, 0.5, 2.0])
    x, w, b = leaf(xv), leaf(wv), leaf(bv)
    y = js.linear(x, w, b)
    np.testing.assert_allclose(arr(y), xv @ wv.T + bv)
    acc_x, acc_w, acc_b = (accumulator_of(y.grad_fn, t) for t in (x, w, b))
    unneeded = [
        n for n in all_nodes(y.grad_fn)
        if (reaches(n, acc_w) or reaches(n, acc_b)) and not reaches(n, acc_x)
    ]
    records = _record_post_hooks(y.grad_fn)
    flags = []
    will = js.autograd.graph.will_engine_execute_node
    s = y.sum()
    s.register_hook(lambda g: flags.append((will(acc_w), will(acc_b), will(y.grad_fn))))
    (gx,) = js.grad(s, x)
    assert flags == [(False, False, True)]
    np.testing.assert_allclose(arr(gx), np.ones((2, 4)) @ wv)
    assert not any(any(node is u for u in unneeded) for node, _ in records)
    checked = 0
    for node, gi in records:
        for i, (fn, _) in enumerate(node.next_functions):
            if fn is not None and any(fn is u for u in unneeded):
                assert gi[i] is None, (node.name(), i)
                checked += 1
    assert checked >= 2  # the weight's and the bias' edges


@pytest.mark.oracle
def test_linear_matches_torch(torch):
    xv = np.arange(6.0).reshape(2, 3)
    wv = np.arange(12.0).reshape(4, 3) / 10.0
    bv = np.array([1.0, -1.0, 0.5, 2.0])
    tx, tw, tb = (tt(torch, v) for v in (xv, wv, bv))
    (torch.nn.functional.linear(tx, tw, tb) ** 2).sum().backward()
    x, w, b = leaf(xv), leaf(wv), leaf(bv)
    (js.linear(x, w, b) ** 2).sum().backward()
    for ours, ref in ((x, tx), (w, tw), (b, tb)):
        np.testing.assert_allclose(arr(ours.grad), ref.grad.numpy(), rtol=1e-12)


# ---------------------------------------------------------------- Node API


def test_node_names_and_next_functions():
    x = leaf([[1.0, 2.0]])
    w = leaf([[1.0], [2.0]])
    c = leaf([[3.0, 4.0]], requires_grad=False)
    y = x @ w
    acc_x, acc_w = (fn for fn, _ in y.grad_fn.next_functions)
    assert y.grad_fn.name() == "MmBackward0"
    assert y.grad_fn.next_functions == ((acc_x, 0), (acc_w, 0))
    assert acc_x.name() == "AccumulateGrad" and acc_x.variable is x
    assert acc_w.variable is w
    assert acc_x.next_functions == ()
    assert x.grad_fn is None
    scaled = x * 2.0
    assert scaled.grad_fn.name() == "MulBackward0"
    assert scaled.grad_fn.next_functions == ((acc_x, 0), (None, 0))
    assert (x * c).grad_fn.next_functions == ((acc_x, 0), (None, 0))
    assert (c * x).grad_fn.next_functions == ((None, 0), (acc_x, 0))


def test_accumulate_grad_is_one_per_leaf():
    x = leaf([1.0, 2.0])
    a = x * 2.0
    b = x.exp()
    acc = a.grad_fn.next_functions[0][0]
    assert b.grad_fn.next_functions[0][0] is acc
    assert acc.variable is x
    assert isinstance(acc, js.autograd.Node)


def test_node_metadata_is_a_persistent_dict():
    x = leaf([1.0, 2.0])
    node = (x * 2.0).grad_fn
    assert isinstance(node.metadata, dict) and node.metadata == {}
    node.metadata["tag"] = 7
    assert node.metadata is node.metadata
    assert node.metadata["tag"] == 7


def test_sequence_nr_follows_creation_order():
    x = leaf([1.0, 2.0])
    a = x * 2.0
    b = a.exp()
    c = a.sin()
    d = b + c
    nrs = [t.grad_fn.sequence_nr for t in (a, b, c, d)]
    assert nrs == sorted(nrs) and len(set(nrs)) == 4
    acc = a.grad_fn.next_functions[0][0]
    assert all(acc.sequence_nr > n for n in nrs)


def test_topological_nr():
    x = leaf([1.0, 2.0])
    acc = (x * 1.0).grad_fn.next_functions[0][0]
    a = x * 2.0
    b = a.exp().sin()
    d = b + x
    assert acc.topological_nr == 0
    assert a.grad_fn.topological_nr == 1
    assert b.grad_fn.topological_nr == 3
    assert d.grad_fn.topological_nr == 4
    for node in all_nodes(d.grad_fn):
        nexts = [fn.topological_nr for fn, _ in node.next_functions if fn is not None]
        assert node.topological_nr == (1 + max(nexts) if nexts else 0)


def test_node_hook_registration_on_accumulate_grad_prehook_sees_gradient():
    x = leaf([1.0, 2.0])
    y = x * 3.0
    acc = y.grad_fn.next_functions[0][0]
    seen = []
    acc.register_prehook(lambda go: seen.append(arr(go[0])))
    y.sum().backward()
    np.testing.assert_allclose(seen[0], [3.0, 3.0])
