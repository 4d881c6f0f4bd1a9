"""Hooks of the autograd engine, ported from PyTorch's autograd test-suite.

Covers tensor hooks, ``retain_grad``, node pre/post hooks, the hook ordering of
DESIGN.md (invariant 5), hooks under ``js.grad(..., inputs)`` and how hooks and
``retain_grad`` behave when a tensor is modified in place.  Where PyTorch is
installed the same programs are run through ``torch.autograd`` and compared.
"""

import numpy as np
import pytest
from helpers import BACKENDS, arr, error_text, grad_of, leaf, tt

import jaxstream as js


class Logged(js.autograd.Function):
    """Identity whose backward writes to a log, to see when the node runs."""

    log = None

    @staticmethod
    def forward(ctx, a):
        return a * 1.0

    @staticmethod
    def backward(ctx, g):
        Logged.log.append("node")
        return g


# ---------------------------------------------------------------- tensor hooks


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_hook_returning_none_observes_gradient(backend):
    x = leaf([1.0, 2.0, 3.0], backend=backend)
    y = x * x
    seen = []
    y.register_hook(lambda g: seen.append(arr(g)))
    (y * 2.0).sum().backward()
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], [2.0, 2.0, 2.0])
    np.testing.assert_allclose(arr(x.grad), [4.0, 8.0, 12.0], rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_hook_replacement_flows_downstream(backend):
    x = leaf([1.0, 2.0, 3.0], backend=backend)
    y = x * x
    y.register_hook(lambda g: g * 3.0)
    y.sum().backward()
    np.testing.assert_allclose(arr(x.grad), [6.0, 12.0, 18.0], rtol=1e-6)


def test_tensor_hooks_chain_in_registration_order():
    x = leaf([1.0, 2.0])
    y = x * 1.0
    y.register_hook(lambda g: g + 1.0)
    y.register_hook(lambda g: g * 2.0)
    y.sum().backward()
    # (1 + 1) * 2, not 1 * 2 + 1
    np.testing.assert_allclose(arr(x.grad), [4.0, 4.0])


def test_tensor_hook_handle_remove():
    x = leaf([1.0, 2.0])
    y = x * 2.0
    calls = []
    h1 = y.register_hook(lambda g: calls.append("kept"))
    h2 = y.register_hook(lambda g: calls.append("removed") or g * 100.0)
    h2.remove()
    h2.remove()  # removing twice is harmless, as in PyTorch
    y.sum().backward()
    assert calls == ["kept"]
    np.testing.assert_allclose(arr(x.grad), [2.0, 2.0])
    h1.remove()
    calls.clear()
    z = x * 2.0
    z.register_hook(lambda g: calls.append("other tensor"))
    z.sum().backward()
    assert calls == ["other tensor"]


def test_hook_of_tensor_used_twice_sees_the_summed_gradient_once():
    x = leaf([1.0, 2.0])
    y = x * 1.0
    seen = []
    y.register_hook(lambda g: seen.append(arr(g)))
    (y * 2.0 + y * 3.0).sum().backward()
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], [5.0, 5.0])


def test_hook_under_create_graph_sees_differentiable_gradient():
    x = leaf([1.0, 2.0])
    y = x * x
    seen = []
    y.register_hook(lambda g: seen.append(g.requires_grad))
    (g,) = js.grad((y * x).sum(), x, create_graph=True)
    assert seen == [True]
    (gg,) = js.grad(g.sum(), x)
    # the second pass goes through y's node again, this time without create_graph
    assert seen == [True, False]
    np.testing.assert_allclose(arr(gg), [6.0, 12.0])


class Split(js.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 1.0, a * 1.0

    @staticmethod
    def backward(ctx, g1, g2):
        return g1 + g2 * 10.0


def test_tensor_hook_on_one_output_of_a_multi_output_node():
    x = leaf([1.0, 2.0])
    o1, o2 = Split.apply(x)
    seen = []
    o2.register_hook(lambda g: seen.append(arr(g)) or g * 2.0)
    o2.retain_grad()
    (o1 * 3.0 + o2 * 5.0).sum().backward()
    np.testing.assert_allclose(seen[0], [5.0, 5.0])
    np.testing.assert_allclose(arr(o2.grad), [10.0, 10.0])
    assert grad_of(o1) is None
    np.testing.assert_allclose(arr(x.grad), [3.0 + 100.0, 3.0 + 100.0])


def test_register_hook_on_tensor_that_does_not_require_grad_raises():
    t = leaf([1.0, 2.0], requires_grad=False)
    with pytest.raises(RuntimeError, match="require"):
        t.register_hook(lambda g: g)


@pytest.mark.parametrize("backend", BACKENDS)
def test_leaf_hook_modifies_what_is_accumulated(backend):
    x = leaf([1.0, 2.0], backend=backend)
    seen = []

    def hook(g):
        seen.append(arr(g))
        return g * 10.0

    x.register_hook(hook)
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(arr(x.grad), [30.0, 30.0])
    # the hook sees the incoming gradient, never the accumulated .grad
    (x * 1.0).sum().backward()
    np.testing.assert_allclose(seen[1], [1.0, 1.0])
    np.testing.assert_allclose(arr(x.grad), [40.0, 40.0])


def test_leaf_hook_modifies_gradient_captured_by_grad():
    x = leaf([1.0, 2.0])
    x.register_hook(lambda g: g * 2.0)
    (gx,) = js.grad((x * 3.0).sum(), x)
    np.testing.assert_allclose(arr(gx), [6.0, 6.0])
    assert x.grad is None


def test_hook_returning_wrong_shape_names_node_and_shapes():
    x = js.tensor(np.ones((7, 4)), requires_grad=True)
    y = x * 2.0
    y.register_hook(lambda g: js.tensor(np.zeros((4, 7))))
    with pytest.raises(RuntimeError) as excinfo:
        y.sum().backward()
    text = error_text(excinfo)
    assert "MulBackward0" in text
    assert "7, 4" in text and "4, 7" in text
    assert x.grad is None
    # the engine stays usable
    (x * 2.0).sum().backward()
    np.testing.assert_allclose(arr(x.grad), np.full((7, 4), 2.0))


def test_hook_returning_wrong_dtype_raises():
    x = leaf([1.0, 2.0])
    y = x * 2.0
    y.register_hook(lambda g: js.tensor(np.ones(2, dtype=np.float32)))
    with pytest.raises(RuntimeError, match="dtype|type") as excinfo:
        y.sum().backward()
    assert "MulBackward0" in error_text(excinfo)
    assert x.grad is None


def test_leaf_hook_returning_wrong_shape_raises():
    x = js.tensor(np.ones((7, 4)), requires_grad=True)
    x.register_hook(lambda g: js.tensor(np.zeros((4, 7))))
    with pytest.raises(RuntimeError) as excinfo:
        (x * 2.0).sum().backward()
    text = error_text(excinfo)
    assert "7, 4" in text and "4, 7" in text
    assert x.grad is None


def test_hook_raising_keeps_type_and_engine_recovers():
    x = leaf([1.0, 2.0])
    y = x * 2.0

    def bad(g):
        raise KeyError("from a hook")

    handle = y.register_hook(bad)
    with pytest.raises(KeyError, match="from a hook") as excinfo:
        y.sum().backward(retain_graph=True)
    assert any("MulBackward0" in n for n in getattr(excinfo.value, "__notes__", []))
    handle.remove()
    y.sum().backward()
    np.testing.assert_allclose(arr(x.grad), [2.0, 2.0])


# ----------------------------------------------------------------- retain_grad


@pytest.mark.parametrize("backend", BACKENDS)
def test_retain_grad_on_non_leaf(backend):
    x = leaf([1.0, 2.0, 3.0], backend=backend)
    y = x * 2.0
    z = x * 3.0
    assert not y.retains_grad
    y.retain_grad()
    assert y.retains_grad
    (y * y + z).sum().backward()
    np.testing.assert_allclose(arr(y.grad), [4.0, 8.0, 12.0], rtol=1e-6)
    np.testing.assert_allclose(arr(x.grad), [11.0, 19.0, 27.0], rtol=1e-6)
    assert grad_of(z) is None


def test_retain_grad_also_runs_under_grad():
    x = leaf([1.0, 2.0])
    y = x * 2.0
    y.retain_grad()
    (gy,) = js.grad((y * 3.0).sum(), y)
    np.testing.assert_allclose(arr(gy), [3.0, 3.0])
    np.testing.assert_allclose(arr(y.grad), [3.0, 3.0])
    y2 = x * 2.0
    y2.retain_grad()
    (gx,) = js.grad((y2 * 3.0 + y2 * 5.0).sum(), x)
    np.testing.assert_allclose(arr(gx), [16.0, 16.0])
    np.testing.assert_allclose(arr(y2.grad), [8.0, 8.0])
    assert x.grad is None


def test_retain_grad_on_leaf_is_a_no_op():
    x = leaf([1.0, 2.0])
    x.retain_grad()
    assert not x.retains_grad
    (x * 2.0).sum().backward()
    np.testing.assert_allclose(arr(x.grad), [2.0, 2.0])


def test_retain_grad_accumulates_across_backwards():
    x = leaf([1.0, 2.0])
    y = x * 2.0
    y.retain_grad()
    loss = (y * 3.0).sum()
    loss.backward(retain_graph=True)
    np.testing.assert_allclose(arr(y.grad), [3.0, 3.0])
    loss.backward()
    np.testing.assert_allclose(arr(y.grad), [6.0, 6.0])
    np.testing.assert_allclose(arr(x.grad), [12.0, 12.0])


def test_retain_grad_twice_does_not_double():
    x = leaf([1.0, 2.0])
    y = x * 2.0
    y.retain_grad()
    y.retain_grad()
    y.sum().backward()
    np.testing.assert_allclose(arr(y.grad), [1.0, 1.0])


def test_retain_grad_runs_after_tensor_hooks_registered_later():
    x = leaf([1.0, 2.0])
    y = x * 2.0
    y.register_hook(lambda g: g + 1.0)
    y.retain_grad()
    y.register_hook(lambda g: g * 10.0)
    y.sum().backward()
    # both hooks ran before the retained value was stored
    np.testing.assert_allclose(arr(y.grad), [20.0, 20.0])
    np.testing.assert_allclose(arr(x.grad), [40.0, 40.0])


@pytest.mark.oracle
def test_retain_grad_with_hooks_matches_torch(torch):
    values = [1.0, -2.0, 0.5]

    def program(mod, make):
        x = make(values)
        y = x * 2.0
        y.register_hook(lambda g: g + 1.0)
        y.retain_grad()
        y.register_hook(lambda g: g * 10.0)
        loss = (y * y).sum()
        loss.backward(retain_graph=True)
        loss.backward()
        return y.grad, x.grad

    ours = program(js, leaf)
    ref = program(torch, lambda v: tt(torch, v))
    for a, b in zip(ours, ref, strict=True):
        np.testing.assert_allclose(arr(a), b.detach().numpy(), rtol=1e-12)


# ------------------------------------------------------------------ node hooks


def test_node_prehook_receives_grad_outputs_and_can_replace_them():
    x = leaf([1.0, 2.0])
    y = x * 3.0
    seen = []

    def pre(grad_outputs):
        seen.append(grad_outputs)
        return (grad_outputs[0] * 2.0,)

    y.grad_fn.register_prehook(pre)
    y.sum().backward()
    assert len(seen) == 1
    assert isinstance(seen[0], tuple) and len(seen[0]) == 1
    np.testing.assert_allclose(arr(seen[0][0]), [1.0, 1.0])
    np.testing.assert_allclose(arr(x.grad), [6.0, 6.0])


def test_node_prehook_returning_none_keeps_gradient():
    x = leaf([1.0, 2.0])
    y = x * 3.0
    y.grad_fn.register_prehook(lambda go: None)
    y.sum().backward()
    np.testing.assert_allclose(arr(x.grad), [3.0, 3.0])


def test_node_post_hook_sees_grad_inputs_and_grad_outputs():
    x = leaf([1.0, 2.0])
    w = leaf([3.0, 5.0])
    y = x * w
    seen = []
    y.grad_fn.register_hook(lambda gi, go: seen.append((gi, go)))
    (y * 2.0).sum().backward()
    (gi, go) = seen[0]
    assert len(seen) == 1 and len(gi) == 2 and len(go) == 1
    np.testing.assert_allclose(arr(go[0]), [2.0, 2.0])
    np.testing.assert_allclose(arr(gi[0]), [6.0, 10.0])
    np.testing.assert_allclose(arr(gi[1]), [2.0, 4.0])


def test_node_post_hook_can_replace_grad_inputs():
    x = leaf([1.0, 2.0])
    w = leaf([3.0, 5.0])
    y = x * w
    y.grad_fn.register_hook(lambda gi, go: (gi[0] * 10.0, gi[1]))
    y.sum().backward()
    np.testing.assert_allclose(arr(x.grad), [30.0, 50.0])
    np.testing.assert_allclose(arr(w.grad), [1.0, 2.0])


def test_node_hook_handles_remove():
    x = leaf([1.0, 2.0])
    y = x * 3.0
    calls = []
    pre = y.grad_fn.register_prehook(lambda go: calls.append("pre") or (go[0] * 0.0,))
    post = y.grad_fn.register_hook(lambda gi, go: calls.append("post") or (gi[0] * 0.0,))
    pre.remove()
    post.remove()
    y.sum().backward()
    assert calls == []
    np.testing.assert_allclose(arr(x.grad), [3.0, 3.0])


@pytest.mark.oracle
def test_node_hooks_match_torch(torch):
    def program(make):
        x = make([1.0, 2.0])
        y = x * 3.0
        y.grad_fn.register_hook(lambda gi, go: (gi[0] * 10.0, None))
        y.grad_fn.register_prehook(lambda go: (go[0] * 2.0,))
        y.sum().backward()
        return x.grad

    np.testing.assert_allclose(
        arr(program(leaf)), program(lambda v: tt(torch, v)).numpy(), rtol=1e-12
    )


# ------------------------------------------------------------------ hook order


def _ordered_program(make, apply_logged):
    """Registers every kind of hook on one node and records the firing order."""
    log = []
    Logged.log = log
    x = make([1.0, 2.0])
    y = apply_logged(x * 1.0)

    def tensor_hook(name):
        def hook(g):
            log.append(name)
            if name == "tensor1":
                assert grad_of(y) is None  # retains_grad has not run yet
                return g * 2.0
            return None

        return hook

    def pre(grad_outputs):
        log.append("pre")
        assert grad_of(y) is not None  # retains_grad ran before node pre-hooks
        log.append(("pre sees", float(np.asarray(arr(grad_outputs[0]))[0])))

    def post(grad_inputs, grad_outputs):
        log.append("post")
        log.append(("post sees", float(np.asarray(arr(grad_outputs[0]))[0])))

    y.register_hook(tensor_hook("tensor1"))
    y.retain_grad()
    y.register_hook(tensor_hook("tensor2"))
    y.grad_fn.register_prehook(pre)
    y.grad_fn.register_hook(post)
    y.sum().backward()
    return log, y


def test_hook_order_tensor_retain_pre_node_post():
    log, y = _ordered_program(leaf, Logged.apply)
    assert log == [
        "tensor1",
        "tensor2",
        "pre",
        ("pre sees", 2.0),
        "node",
        "post",
        ("post sees", 2.0),
    ]
    np.testing.assert_allclose(arr(y.grad), [2.0, 2.0])


@pytest.mark.oracle
def test_hook_order_matches_torch(torch):
    class TorchLogged(torch.autograd.Function):
        """``Logged``'s own forward and backward, run by torch."""

        forward = staticmethod(Logged.forward)
        backward = staticmethod(Logged.backward)

    ours, _ = _ordered_program(leaf, Logged.apply)
    ref, _ = _ordered_program(lambda v: tt(torch, v), TorchLogged.apply)
    assert ours == ref


def test_tensor_hooks_run_for_grad_inputs_but_node_prehooks_do_not():
    x = leaf([1.0, 2.0, 3.0])
    y = x * 2.0
    z = y * 3.0
    log = []

    def tensor_hook(g):
        log.append("tensor")
        return g * 100.0

    y.register_hook(tensor_hook)
    y.grad_fn.register_prehook(lambda go: log.append("node pre"))
    y.grad_fn.register_hook(lambda gi, go: log.append("node post"))
    (gy,) = js.grad(z.sum(), y)
    assert log == ["tensor"]
    # the gradient returned for y is the one the tensor hook produced
    np.testing.assert_allclose(arr(gy), [300.0, 300.0, 300.0])
    assert x.grad is None


@pytest.mark.oracle
def test_tensor_hooks_for_grad_inputs_match_torch(torch):
    def program(make):
        x = make([1.0, 2.0, 3.0])
        y = x * 2.0
        z = y * 3.0
        log = []
        y.register_hook(lambda g: log.append("tensor") or g * 100.0)
        y.grad_fn.register_prehook(lambda go: log.append("node pre"))
        (gy,) = (js if isinstance(x, js.Tensor) else torch.autograd).grad(z.sum(), y)
        return log, gy

    log, gy = program(leaf)
    tlog, tgy = program(lambda v: tt(torch, v))
    assert log == tlog
    np.testing.assert_allclose(arr(gy), tgy.numpy())


def _hook_counts_program(make, grad):
    """Counts tensor hooks, node pre-hooks and post-hooks per kind of run."""
    a = make(1.0)
    b = a * 2.0
    c = b * 2.0
    counts = {"tensor": 0, "pre": 0, "post": 0}

    def bump(kind):
        def hook(*args):
            counts[kind] += 1

        return hook

    for t in (a, b, c):
        t.register_hook(bump("tensor"))
    for node in (b.grad_fn, c.grad_fn):
        node.register_prehook(bump("pre"))
        node.register_hook(bump("post"))
    runs = [
        lambda: grad(c, b, retain_graph=True),
        lambda: grad(c, (a, b), retain_graph=True),
        lambda: c.backward(retain_graph=True),
        lambda: c.backward(inputs=(a, b), retain_graph=True),
    ]
    results = []
    for run in runs:
        for kind in counts:
            counts[kind] = 0
        run()
        results.append(dict(counts))
    return results


def test_hook_counts_per_kind_of_run():
    assert _hook_counts_program(leaf, js.grad) == [
        {"tensor": 2, "pre": 1, "post": 1},
        {"tensor": 3, "pre": 2, "post": 2},
        {"tensor": 3, "pre": 2, "post": 2},
        {"tensor": 3, "pre": 2, "post": 2},
    ]


@pytest.mark.oracle
def test_hook_counts_match_torch(torch):
    ours = _hook_counts_program(leaf, js.grad)
    ref = _hook_counts_program(lambda v: tt(torch, v), torch.autograd.grad)
    assert ours == ref


# ------------------------------------------------------------ in-place and hooks


def test_retain_grad_follows_tensor_through_inplace():
    x = leaf([1.0, 2.0, 3.0])
    c = leaf([1.0, 2.0, 3.0], requires_grad=False)
    y = x * 2.0
    y.retain_grad()
    old = y.grad_fn
    y.mul_(3.0)
    assert y.grad_fn is not old
    assert y.grad_fn.name() == "MulBackward0"
    assert y.grad_fn.next_functions[0][0] is old
    assert y.retains_grad
    (y * c).sum().backward()
    # the gradient w.r.t. the value after the in-place op, stored once
    np.testing.assert_allclose(arr(y.grad), [1.0, 2.0, 3.0])
    np.testing.assert_allclose(arr(x.grad), [6.0, 12.0, 18.0])


def test_hooks_registered_before_inplace_stay_on_old_node():
    x = leaf([1.0, 2.0, 3.0])
    c = leaf([1.0, 2.0, 3.0], requires_grad=False)
    y = x * 2.0
    log = []
    y.register_hook(lambda g: log.append(("before", arr(g).tolist())))
    y.mul_(3.0)
    y.register_hook(lambda g: log.append(("after", arr(g).tolist())))
    (y * c).sum().backward()
    # the new node runs first; the old hook sees d/d(value before mul_)
    assert log == [("after", [1.0, 2.0, 3.0]), ("before", [3.0, 6.0, 9.0])]
    np.testing.assert_allclose(arr(x.grad), [6.0, 12.0, 18.0])


def _add_then_hook(y):
    y.add_(1.0)
    y.register_hook(lambda g: g * 5.0)


@pytest.mark.parametrize(
    ("inplace", "y_grad", "x_grad"),
    [
        # a hook registered after add_ modifies the gradient of the new value
        pytest.param(_add_then_hook, [5.0, 5.0], [10.0, 10.0], id="hook_after_add_"),
        # zero_ blocks the gradient to the old history
        pytest.param(lambda y: y.zero_(), [1.0, 1.0], [0.0, 0.0], id="zero_"),
    ],
)
def test_inplace_on_retained_non_leaf(inplace, y_grad, x_grad):
    x = leaf([1.0, 2.0])
    y = x * 2.0
    y.retain_grad()
    inplace(y)
    y.sum().backward()
    np.testing.assert_allclose(arr(y.grad), y_grad)
    np.testing.assert_allclose(arr(x.grad), x_grad)


def test_inplace_with_tensor_operand_and_retain_grad():
    x = leaf([1.0, 2.0])
    w = leaf([3.0, 4.0])
    y = x * 1.0
    y.retain_grad()
    y.add_(w)
    assert y.grad_fn.name() == "AddBackward0"
    (y * y).sum().backward()
    expected = 2.0 * np.array([4.0, 6.0])
    np.testing.assert_allclose(arr(y.grad), expected)
    np.testing.assert_allclose(arr(x.grad), expected)
    np.testing.assert_allclose(arr(w.grad), expected)


def test_copy_inplace_routes_gradient_to_source():
    x = leaf([1.0, 2.0])
    s = leaf([5.0, 6.0])
    y = x * 2.0
    y.copy_(s)
    np.testing.assert_allclose(arr(y), [5.0, 6.0])
    (y * y).sum().backward()
    np.testing.assert_allclose(arr(s.grad), [10.0, 12.0])
    np.testing.assert_allclose(arr(x.grad), [0.0, 0.0])


@pytest.mark.oracle
def test_inplace_hooks_match_torch(torch):
    def as_list(g):
        return g.tolist() if hasattr(g, "tolist") else arr(g).tolist()

    def program(make):
        x = make([1.0, 2.0, 3.0])
        y = x * 2.0
        log = []
        y.retain_grad()
        y.register_hook(lambda g: log.append(("before", as_list(g))))
        y.mul_(3.0)
        y.register_hook(lambda g: log.append(("after", as_list(g))) or g * 2.0)
        (y * y).sum().backward()
        return log, y.grad, x.grad

    ours = program(leaf)
    ref = program(lambda v: tt(torch, v))
    assert ours[0] == ref[0]
    np.testing.assert_allclose(arr(ours[1]), ref[1].numpy())
    np.testing.assert_allclose(arr(ours[2]), ref[2].numpy())


def _several_inplace_program(make):
    a = make(1.0)
    b = a.clone()
    seen = []
    b.register_hook(lambda g: seen.append(("h1", float(arr(g)))))
    b.mul_(2.0)
    b.register_hook(lambda g: seen.append(("h2", float(arr(g)))) or g * 10.0)
    b.mul_(3.0)
    b.register_hook(lambda g: seen.append(("h3", float(arr(g)))))
    b.sum().backward()
    return seen, float(arr(a.grad))


def test_tensor_hooks_over_several_inplace_ops():
    seen, a_grad = _several_inplace_program(leaf)
    assert seen == [("h3", 1.0), ("h2", 3.0), ("h1", 60.0)]
    assert a_grad == 60.0


@pytest.mark.oracle
def test_tensor_hooks_over_several_inplace_ops_match_torch(torch):
    assert _several_inplace_program(leaf) == _several_inplace_program(lambda v: tt(torch, v))
