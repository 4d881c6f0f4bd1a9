"""js.nn.Module's forward and full backward hooks, against torch.nn.Module's; hooks as part of
the pytree structure and under js.to_jax."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import BACKENDS, arr

import jaxstream as js
from jaxstream import nn

_W = np.float32([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]])
_B = np.float32([0.1, -0.2])
_X = np.float32([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])


def _values(t):
    return None if t is None else np.asarray(t.detach().numpy()).round(5).tolist()


class _Lib:
    """What a test needs of either library: its nn, and tensors of either."""

    def __init__(self, name, torch=None, backend="numpy"):
        self.name = name
        self.torch = torch
        self.nn = torch.nn if name == "torch" else nn
        self.backend = backend

    def tensor(self, values, requires_grad=False):
        values = np.asarray(values, np.float32)
        if self.name == "torch":
            return self.torch.tensor(values, requires_grad=requires_grad)
        return js.tensor(values, backend=self.backend, requires_grad=requires_grad)

    def linear(self):
        layer = self.nn.Linear(3, 2)
        layer.load_state_dict({"weight": self.tensor(_W), "bias": self.tensor(_B)})
        return layer if self.name == "torch" else layer.to(self.backend)


def _both(torch, backend="numpy"):
    return _Lib("torch", torch), _Lib("js", torch, backend)


# ----------------------------------------------------------------------- forward
def _forward_hook_log(lib):
    log = []

    class Shift(lib.nn.Module):
        def forward(self, x, shift=0.0):
            log.append(("forward", _values(x), shift))
            return x * 2 + shift

    module = Shift()
    module.register_forward_pre_hook(lambda m, args: log.append(("pre", len(args))))
    plus_one = module.register_forward_pre_hook(lambda m, args: args[0] + 1)  # not a tuple
    module.register_forward_pre_hook(
        lambda m, args, kwargs: ((args[0] * 10,), {**kwargs, "shift": 0.5}), with_kwargs=True)
    module.register_forward_pre_hook(lambda m, args: log.append("first pre"), prepend=True)
    module.register_forward_hook(lambda m, args, out: out + 100)
    module.register_forward_hook(
        lambda m, args, kwargs, out: log.append(("hook", _values(out), kwargs)), with_kwargs=True)
    module.register_forward_hook(lambda m, args, out: log.append("first hook"), prepend=True)
    first = module(lib.tensor([1.0, 2.0]), shift=0.25)
    plus_one.remove()
    with plus_one:  # a handle is a context manager too; a second remove does nothing
        pass
    second = module(lib.tensor([1.0, 2.0]))
    return log, _values(first), _values(second)


@pytest.mark.oracle
def test_forward_hooks_match_torch(torch):
    expected, got = (_forward_hook_log(lib) for lib in _both(torch))
    assert got == expected
    assert got[1] == [140.5, 160.5]  # ((x + 1) * 10) * 2 + 0.5 + 100


def _always_called(lib):
    log = []

    class Failing(lib.nn.Module):
        def forward(self, x):
            raise ValueError("forward failed")

    module = Failing()
    module.register_forward_hook(lambda m, args, out: log.append(("plain", out)))
    module.register_forward_hook(lambda m, args, out: log.append(("always", out)),
                                 always_call=True)

    def broken(m, args, out):
        raise KeyError("hook failed")

    module.register_forward_hook(broken, always_call=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="forward failed"):
            module(lib.tensor([1.0]))
    return log, ["hook failed" in str(w.message) for w in caught]


@pytest.mark.oracle
def test_always_call_hooks_run_when_forward_raises_as_in_torch(torch):
    expected, got = (_always_called(lib) for lib in _both(torch))
    assert got == expected == ([("always", None)], [True])


@pytest.mark.oracle
def test_a_pre_hook_with_kwargs_must_return_args_and_kwargs(torch):
    for lib in _both(torch):
        layer = lib.linear()
        layer.register_forward_pre_hook(lambda m, args, kwargs: 5, with_kwargs=True)
        with pytest.raises(RuntimeError, match=r"must return None or a tuple of \(new_args, "):
            layer(lib.tensor(_X))


# ---------------------------------------------------------------------- backward
def _backward_hook_run(lib):
    """A module of three positional args (a tensor that requires grad, a number, a tensor
    that does not) and two outputs, with hooks that log and replace gradients."""
    log = []
    layer = lib.linear()

    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = layer

        def forward(self, x, scale, y):
            return self.layer(x) * scale, y * 2

    net = Net()
    net.register_full_backward_pre_hook(
        lambda m, go: log.append(("pre", [_values(g) for g in go])) or (go[0] * 3, None))
    net.register_full_backward_hook(lambda m, gi, go: (gi[0] * 0.5, None, None))
    net.register_full_backward_hook(
        lambda m, gi, go: log.append(("grads", _values(gi[0]), gi[1], [_values(g) for g in go])),
        prepend=True)
    x = lib.tensor(_X, requires_grad=True)
    out, _ = net(x, 2.0, lib.tensor([1.0, 1.0]))
    (out * lib.tensor([[1.0, -1.0], [2.0, 0.5]])).sum().backward(retain_graph=True)
    grads = [_values(x.grad), _values(layer.weight.grad)]
    out.sum().backward()
    return log, grads, type(out.grad_fn).__name__ if lib.name == "torch" else out.grad_fn.name()


@pytest.mark.oracle
@pytest.mark.parametrize("backend", BACKENDS)
def test_full_backward_hooks_see_and_replace_gradients_as_in_torch(torch, backend):
    expected, got = (_backward_hook_run(lib) for lib in _both(torch, backend))
    assert got == expected
    log, _, node = got
    assert node == "BackwardHookFunctionBackward"
    assert [entry[0] for entry in log] == ["pre", "grads", "pre", "grads"]  # once per backward


def test_backward_hooks_give_none_for_an_input_that_does_not_require_grad():
    seen = []

    class Pair(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = _Lib("js").linear()

        def forward(self, x, y, unused):
            return self.layer(x) + y

    pair = Pair()
    pair.register_full_backward_hook(lambda m, gi, go: seen.append(gi))
    unused = js.ones(2, requires_grad=True)
    pair(js.tensor(_X, requires_grad=True), js.ones(2), unused).sum().backward()
    [(grad_x, grad_y, grad_unused)] = seen
    assert grad_x.shape == (2, 3) and grad_y is None  # torch passes zeros for y
    np.testing.assert_array_equal(arr(grad_unused), [0.0, 0.0])  # zeros, as in torch
    np.testing.assert_array_equal(arr(unused.grad), [0.0, 0.0])


def _without_input_grad(lib, result):
    layer = lib.linear()
    seen = []
    layer.register_full_backward_hook(lambda m, gi, go: seen.append((gi, len(go))) or result)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        layer(lib.tensor(_X)).sum().backward()
    assert any("no input" in str(w.message) or "no inputs" in str(w.message) for w in caught)
    return seen


@pytest.mark.oracle
def test_hooks_fire_at_the_output_when_no_input_requires_grad_as_in_torch(torch):
    for lib in _both(torch):
        assert _without_input_grad(lib, None) == [((None,), 1)]
        assert _without_input_grad(lib, (None,)) == [((None,), 1)]
        with pytest.raises(RuntimeError, match="should always return None|must return None"):
            _without_input_grad(lib, (lib.tensor(_X),))


@pytest.mark.oracle
def test_a_hook_returning_the_wrong_number_of_gradients_raises_as_in_torch(torch):
    for lib in _both(torch):
        layer = lib.linear()
        x = lib.tensor(_X, requires_grad=True)
        layer.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0]))
        with pytest.raises(RuntimeError, match=r"(got 2, but expected 1|returned 2 gradients, "
                                               r"expected 1)"):
            layer(x).sum().backward()
        layer = lib.linear()
        layer.register_full_backward_pre_hook(lambda m, go: ())
        with pytest.raises(RuntimeError, match=r"(got 0, but expected 1|returned 0 gradients, "
                                               r"expected 1)"):
            layer(x).sum().backward()


def test_a_replacement_of_another_shape_is_refused_naming_the_module_and_hook():
    layer = _Lib("js").linear()

    def reshaping_hook(m, gi, go):
        return (gi[0][:1],)

    layer.register_full_backward_hook(reshaping_hook)
    with pytest.raises(RuntimeError, match=r"Linear's full backward hook 'reshaping_hook'.*size"):
        layer(js.tensor(_X, requires_grad=True)).sum().backward()


def _through_the_saved_input(lib):
    calls = []

    class Saving(lib.nn.Module):
        def forward(self, x):
            self.seen = x
            return x * 2

    module = Saving()
    module.register_full_backward_hook(lambda m, gi, go: calls.append("hook"))
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    module(x)
    (module.seen * 3).sum().backward()  # reaches the input node, not through the output
    return calls, _values(x.grad)


@pytest.mark.oracle
def test_a_gradient_that_skips_the_output_calls_no_hook_as_in_torch(torch):
    expected, got = (_through_the_saved_input(lib) for lib in _both(torch))
    assert got == expected == ([], [3.0, 3.0])


def test_no_hook_wraps_nothing_under_no_grad_and_removed_hooks_stop():
    layer = _Lib("js").linear()
    calls = []
    handle = layer.register_full_backward_hook(lambda m, gi, go: calls.append(1))
    x = js.tensor(_X, requires_grad=True)
    with js.no_grad():
        assert layer(x).grad_fn is None
    layer(x).sum().backward()
    handle.remove()
    out = layer(x)
    out.sum().backward()
    assert calls == [1] and out.grad_fn.name() != "BackwardHookFunctionBackward"


# ------------------------------------------------------------------------ pytree
def test_hooks_are_structure_and_run_in_a_rebuilt_module_under_to_jax():
    layer = _Lib("js").linear()
    seen = []
    forward = layer.register_forward_hook(lambda m, args, out: seen.append("forward"))
    before = jax.tree.structure(layer)
    layer.register_full_backward_hook(lambda m, gi, go: seen.append("backward"))
    assert jax.tree.structure(layer) != before  # a hook added: JAX traces again
    arrays = jax.tree.map(js.Tensor.jax, layer)
    forward.remove()  # the original's tables only
    assert jax.tree.structure(arrays) != jax.tree.structure(layer)

    def loss(model, x):
        return (model(x) ** 2).sum()

    grads = jax.jit(jax.grad(js.to_jax(loss, mode="engine")))(arrays, jnp.asarray(_X))
    assert seen == ["forward", "forward", "backward"]  # forward, replayed forward, backward
    loss(layer, js.tensor(_X, requires_grad=True)).backward()
    np.testing.assert_allclose(grads.weight, arr(layer.weight.grad), rtol=1e-5)
    with pytest.raises(NotImplementedError, match="BackwardHookFunctionBackward"):
        jax.grad(js.to_jax(loss, mode="native"))(arrays, jnp.asarray(_X))
