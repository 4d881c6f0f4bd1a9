"""`Tensor.register_post_accumulate_grad_hook`: a hook that sees a leaf once its `.grad` has
been accumulated, as in PyTorch (Note [Post-accumulate hooks] in autograd/node.py)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from helpers import arr, leaf, tt

import jaxstream as js


def test_the_hook_sees_the_leaf_with_its_grad_accumulated_each_time():
    x = leaf([1.0, 2.0])
    seen = []
    handle = x.register_post_accumulate_grad_hook(lambda t: seen.append((t, arr(t.grad))))
    (x * 3.0).sum().backward()
    (x * 3.0).sum().backward()
    assert [t is x for t, _ in seen] == [True, True]
    np.testing.assert_array_equal([g for _, g in seen], [[3.0, 3.0], [6.0, 6.0]])
    handle.remove()
    (x * 3.0).sum().backward()
    assert len(seen) == 2


def test_the_hook_may_update_the_leaf_in_place_as_an_optimizer_step():
    w = leaf([1.0, 2.0])

    def step(t):
        with js.no_grad():
            t -= 0.5 * t.grad
        t.grad = None

    w.register_post_accumulate_grad_hook(step)
    (w * w).sum().backward()
    np.testing.assert_allclose(arr(w), [0.0, 0.0])
    assert w.grad is None


def test_it_runs_only_where_a_gradient_is_accumulated():
    x, w = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    ran = []
    x.register_post_accumulate_grad_hook(lambda t: ran.append("x"))
    js.grad((x * w).sum(), [x, w])
    (x * w).sum().backward(inputs=[w])
    assert ran == []
    (x * w).sum().backward()
    assert ran == ["x"]


def test_it_runs_after_the_leafs_tensor_hooks_under_the_accumulations_stream():
    side = js.Stream("sim:0")
    side.wait_stream(js.current_stream("sim:0"))
    with js.stream(side):
        x = js.tensor(np.ones(2), device="sim:0", requires_grad=True)
        loss = (x * 2.0).sum()
    js.current_stream("sim:0").wait_stream(side)
    log = []
    x.register_hook(lambda g: log.append("tensor hook") or g * 10.0)
    x.register_post_accumulate_grad_hook(lambda t: log.append(
        ("post", js.current_stream("sim:0"), threading.current_thread().name,
         arr(t.grad.to("cpu")).tolist())))
    loss.backward()
    assert log[0] == "tensor hook"
    assert log[1] == ("post", side, "jaxstream autograd device 0", [20.0, 20.0])


def test_a_hook_returning_a_value_is_an_error_naming_it():
    x = leaf([1.0, 2.0])

    def scaled(t):
        return t.grad * 2.0

    x.register_post_accumulate_grad_hook(scaled)
    with pytest.raises(RuntimeError, match=r"post accumulate grad hook 'scaled' of a leaf "
                       r"\(shape \(2,\)\) returned a Tensor; it must return None"):
        (x * 3.0).sum().backward()


def test_it_is_registered_only_on_leaves_that_require_grad():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="post accumulate grad hooks cannot be registered on "
                       "non-leaf tensors.*MulBackward0"):
        (x * 2.0).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't "
                       "require gradient"):
        leaf([1.0], requires_grad=False).register_post_accumulate_grad_hook(lambda t: None)


def _hooks_program(make):
    """Every kind of hook on a two-leaf graph, and the order in which they fire."""
    log = []
    x, w = make([1.0, 2.0]), make([3.0, 4.0])
    x.register_hook(lambda g: log.append("x tensor hook") or g * 2.0)
    w.register_hook(lambda g: log.append("w tensor hook"))
    for name, t in (("x", x), ("w", w)):
        t.register_post_accumulate_grad_hook(
            lambda t, name=name: log.append((f"{name} post accumulate", arr(t.grad).tolist()))
        )
        t.register_post_accumulate_grad_hook(lambda t, name=name: log.append(f"{name} second"))
    y = x * w
    z = y * 2.0
    y.register_hook(lambda g: log.append("y tensor hook"))
    z.grad_fn.register_prehook(lambda grads: log.append("z pre hook"))
    z.grad_fn.register_hook(lambda grads_in, grads_out: log.append("z post hook"))
    y.grad_fn.register_prehook(lambda grads: log.append("mul pre hook"))
    y.grad_fn.register_hook(lambda grads_in, grads_out: log.append("mul post hook"))
    z.sum().backward(retain_graph=True)
    z.sum().backward()
    return log


def test_post_accumulate_hooks_run_last_for_their_leaf_and_in_registration_order():
    log = _hooks_program(leaf)
    first = log.index(("x post accumulate", [12.0, 16.0]))
    assert log.index("x tensor hook") < first and log[first + 1] == "x second"
    assert ("x post accumulate", [24.0, 32.0]) in log[first + 2:]


@pytest.mark.oracle
def test_hook_order_with_post_accumulate_hooks_matches_torch(torch):
    assert _hooks_program(leaf) == _hooks_program(lambda v: tt(torch, v))


def test_a_hook_registered_after_a_compile_is_traced_into_the_next_call():
    w = js.tensor(np.array([1.0, 2.0], np.float32), backend="jax", requires_grad=True)
    x = js.tensor(np.array([1.0, 5.0], np.float32), backend="jax")
    compiled = js.compile(lambda x: (x * w).sum().backward())
    compiled(x)
    w.grad = None

    def step(t):
        with js.no_grad():
            t -= 0.5 * t.grad

    w.register_post_accumulate_grad_hook(step)
    compiled(x)  # the leaf's hooks are part of the key: traced again, with the step
    assert compiled.cache_size() == 2
    np.testing.assert_allclose(arr(w), [0.5, -0.5])
