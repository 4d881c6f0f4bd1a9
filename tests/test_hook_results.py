"""What a hook returns is held to PyTorch's checks (Note [Hook results] in hook_results.py):
a Tensor of the shape, dtype, device and backend of the gradient it replaces, or None."""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import arr, error_text

import jaxstream as js

pytestmark = pytest.mark.usefixtures("jax_x64")  # a float64 gradient moved to JAX stays float64


def named(name, fn):
    fn.__name__ = name
    return fn


def once(change):
    """`change` the first time, then keep the gradient: the next backward is a clean one."""
    calls = []

    def first(g):
        calls.append(g)
        return change(g) if len(calls) == 1 else g

    return named(change.__name__, first)


CHANGES = {
    "device": (named("to_cpu", lambda g: g.to("cpu")), RuntimeError,
               r"has changed the device of value \(was sim:0 got cpu\)"),
    "dtype": (named("to_float32", lambda g: g.astype("float32")), RuntimeError,
              r"has changed the dtype of value \(was float64 got float32\)"),
    "size": (named("to_column", lambda g: g.reshape((3, 1))), RuntimeError,
             r"has changed the size of value \(was \(3,\) got \(3, 1\)\)"),
    "backend": (named("to_jax", lambda g: g.to(backend="jax")), RuntimeError,
                r"has changed the backend of value \(was numpy got jax\)"),
    "array": (named("to_numpy", lambda g: np.ones(3)), TypeError,
              r"returned a numpy\.ndarray; return a js\.Tensor, e\.g\. js\.tensor\(\.\.\.\)"),
}


def tensor_hook(x, change):
    y = x.exp()
    y.register_hook(change)
    y.sum().backward()


def leaf_hook(x, change):
    x.register_hook(change)
    x.exp().sum().backward()


def pre_hook(x, change):
    y = x.exp()
    y.grad_fn.register_prehook(lambda grads: (change(grads[0]),))
    y.sum().backward()


def post_hook(x, change):
    y = x.exp()
    y.grad_fn.register_hook(lambda grad_inputs, _: (change(grad_inputs[0]),))
    y.sum().backward()


PLACES = {
    "tensor": (tensor_hook, r"hook 'HOOK' on the gradient of output 0 of ExpBackward0"),
    "leaf": (leaf_hook, r"hook 'HOOK' on the gradient of output 0 of AccumulateGrad"),
    "pre": (pre_hook, r"pre hook '<lambda>' of ExpBackward0, gradient 0,"),
    "post": (post_hook, r"post hook '<lambda>' of ExpBackward0, gradient 0,"),
}


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_hook_that_changes_its_gradient_is_refused_by_name(place, change):
    run, where = PLACES[place]
    hook, error, what = CHANGES[change]
    hook = once(hook)
    x = js.tensor(np.ones(3), device="sim:0", requires_grad=True)
    with pytest.raises(error) as info:
        run(x, hook)
    assert re.match(f"{where.replace('HOOK', hook.__name__)}.*{what}", error_text(info)), (
        error_text(info))
    assert x.grad is None, "nothing half-accumulated"
    x.exp().sum().backward()  # the engine, and the leaf, stay usable
    assert x.grad.device == js.device("sim:0")


def test_the_cpu_grad_of_a_sim_leaf_never_reaches_the_optimizer():
    x = js.tensor(np.ones(3), device="sim:0", requires_grad=True)
    x.register_hook(lambda g: g.to("cpu"))
    with pytest.raises(RuntimeError, match="device of value"):
        (x * 2.0).sum().backward()
    js.optim.SGD([x], lr=0.1).step()  # nothing to apply
    np.testing.assert_array_equal(arr(x.to("cpu")), np.ones(3))


def test_a_hook_that_keeps_its_gradients_kind_may_replace_it():
    x = js.tensor(np.ones(3), device="sim:0", requires_grad=True)
    x.register_hook(lambda g: g * 2.0)
    y = x.exp()
    y.register_hook(lambda g: g * 3.0)
    y.grad_fn.register_prehook(lambda grads: (grads[0] * 5.0,))
    y.grad_fn.register_hook(lambda grad_inputs, _: [grad_inputs[0] * 7.0])
    y.sum().backward()
    np.testing.assert_allclose(arr(x.grad.to("cpu")), np.full(3, 2 * 3 * 5 * 7 * np.e))


def test_a_node_hook_may_drop_a_gradient_but_not_make_one_up():
    x = js.tensor(np.ones(3), requires_grad=True)
    y = x * 2.0  # MulBackward0 has no gradient for the constant
    y.grad_fn.register_hook(named("invent", lambda grad_inputs, _: (grad_inputs[0], js.ones(1))))
    with pytest.raises(RuntimeError, match=r"post hook 'invent' of MulBackward0, gradient 1, "
                       r"can't replace a None gradient with a non-None value"):
        y.sum().backward()
    y = x * 2.0
    y.grad_fn.register_hook(lambda grad_inputs, _: (None, None))
    y.sum().backward()
    assert x.grad is None


@pytest.mark.parametrize("kind", ["pre", "post"])
def test_a_node_hook_returning_something_else_than_gradients_says_what_to_return(kind):
    x = js.tensor(np.ones(3), requires_grad=True)
    y = x.exp()
    if kind == "pre":
        y.grad_fn.register_prehook(named("raw", lambda grads: np.ones(3)))
    else:
        y.grad_fn.register_hook(named("raw", lambda grad_inputs, _: np.ones(3)))
    with pytest.raises(TypeError, match=rf"{kind} hook 'raw' of ExpBackward0 returned a "
                       r"numpy\.ndarray; return a tuple of js\.Tensors or Nones, one per "
                       r"gradient"):
        y.sum().backward()


@pytest.mark.oracle
@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("change", ["dtype", "size", "array"])
def test_what_is_refused_matches_torch(torch, place, change):
    """Each change refused here is refused by PyTorch, with the same kind of error."""
    run, _ = PLACES[place]
    torch_change = {
        "dtype": lambda g: g.to(torch.float32),
        "size": lambda g: g.reshape(3, 1),
        "array": lambda g: g.detach().numpy(),
    }[change]
    _, error, _ = CHANGES[change]
    with pytest.raises(error):
        run(torch.ones(3, dtype=torch.float64, requires_grad=True), torch_change)
