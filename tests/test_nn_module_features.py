"""js.nn.Module's buffers, traversal, modes and repr, against torch.nn.Module; buffers and plain
Tensor attributes as pytree leaves under jax.jit and js.to_jax."""

from __future__ import annotations

import copy
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import BACKENDS, arr

import jaxstream as js
from jaxstream import nn


def _stats(lib, module_base, tensor):
    """A module with a parameter, buffers of each kind and a plain tensor attribute, built
    with either library (`tensor` makes a float32 tensor from a list)."""

    class Stats(module_base):
        def __init__(self):
            super().__init__()
            self.scale = lib.nn.Parameter(tensor([1.0, 2.0]))
            self.register_buffer("running_mean", tensor([0.5, -0.5]))
            self.register_buffer("steps", tensor([3.0]), persistent=False)
            self.register_buffer("absent", None)
            self.mask = tensor([1.0, 0.0])  # neither parameter nor buffer

        def forward(self, x):
            return (x - self.running_mean) * self.scale * self.mask + self.steps

    return Stats()


def _js_stats(backend="numpy"):
    return _stats(js, nn.Module, lambda v: js.tensor(np.float32(v), backend=backend))


def _torch_stats(torch):
    return _stats(torch, torch.nn.Module, lambda v: torch.tensor(v, dtype=torch.float32))


# ----------------------------------------------------------------------- buffers
@pytest.mark.oracle
def test_buffers_state_dict_and_parameters_match_torch(torch):
    mine, ref = _js_stats(), _torch_stats(torch)
    for method in ("named_buffers", "named_parameters"):
        names = [n for n, _ in getattr(mine, method)()]
        assert names == [n for n, _ in getattr(ref, method)()], method
    assert [n for n, _ in mine.named_buffers()] == ["running_mean", "steps"]
    assert list(mine.state_dict()) == list(ref.state_dict()) == ["scale", "running_mean"]
    assert [arr(b).tolist() for b in mine.buffers()] == [b.tolist() for b in ref.buffers()]
    state = mine.state_dict()
    assert not state["running_mean"].requires_grad
    with js.no_grad():
        mine.running_mean.add_(1.0)
    np.testing.assert_array_equal(arr(state["running_mean"]), [1.5, 0.5])  # shares memory


@pytest.mark.oracle
def test_nested_and_shared_members_are_named_as_in_torch(torch):
    def build(lib, base, make_stats):
        class Block(base):
            def __init__(self, inner):
                super().__init__()
                self.shared = inner
                self.register_buffer("count", lib.zeros(1))

        class Model(base):
            def __init__(self):
                super().__init__()
                self.inner = make_stats()
                self.block = Block(self.inner)
                self.again = self.inner

        return Model()

    mine = build(js, nn.Module, _js_stats)
    ref = build(torch, torch.nn.Module, lambda: _torch_stats(torch))
    for method in ("named_buffers", "named_parameters", "named_modules"):
        assert [n for n, _ in getattr(mine, method)()] == [n for n, _ in getattr(ref, method)()]
        assert ([n for n, _ in getattr(mine, method)(remove_duplicate=False)]
                == [n for n, _ in getattr(ref, method)(remove_duplicate=False)])
    assert [n for n, _ in mine.named_buffers(prefix="m", recurse=False)] == []
    assert [n for n, _ in mine.block.named_buffers(prefix="b", recurse=False)] == ["b.count"]
    assert list(mine.state_dict()) == list(ref.state_dict())
    assert [n for n, _ in mine.named_children()] == [n for n, _ in ref.named_children()]


@pytest.mark.oracle
@pytest.mark.parametrize(
    ("name", "value"),
    [(1, None), ("a.b", None), ("", None), ("scale", None), ("mask", None), ("forward", None),
     ("fresh", [1.0])],
    ids=["not-a-string", "dotted", "empty", "a-parameter", "an-attribute", "a-method",
         "not-a-tensor"],
)
def test_register_buffer_errors_match_torch(torch, name, value):
    mine, ref = _js_stats(), _torch_stats(torch)
    with pytest.raises((TypeError, KeyError)) as expected:
        ref.register_buffer(name, value)
    with pytest.raises(type(expected.value)) as got:
        mine.register_buffer(name, value)
    words = str(expected.value).replace("torch Tensor", "js.Tensor").split("(")[0][:24]
    assert words.strip("'\"") in str(got.value)


def test_register_buffer_before_init_and_buffer_assignment_rules():
    class Early(nn.Module):
        def __init__(self):
            self.register_buffer("b", js.ones(1))

    with pytest.raises(AttributeError, match="cannot assign buffer before Module.__init__"):
        Early()
    module = _js_stats()
    module.running_mean = js.tensor([0.0, 0.0], requires_grad=True)  # stays a buffer
    module.steps = None
    assert [n for n, _ in module.named_buffers()] == ["running_mean"]
    assert [n for n, _ in module.named_parameters()] == ["scale"]
    with pytest.raises(TypeError, match="cannot assign int as buffer 'running_mean'"):
        module.running_mean = 3
    module.steps = js.ones(1)
    module.register_buffer("steps", module.steps)  # persistent again
    assert list(module.state_dict()) == ["scale", "running_mean", "steps"]
    module.running_mean = nn.Parameter(js.zeros(2))  # a Parameter makes it a parameter
    assert [n for n, _ in module.named_parameters()] == ["scale", "running_mean"]
    module.mask = "no longer a tensor"
    del module.steps
    assert [n for n, _ in module.named_buffers()] == []


@pytest.mark.oracle
def test_load_state_dict_copies_into_buffers_and_checks_their_keys(torch):
    mine, ref = _js_stats(), _torch_stats(torch)
    buffer = mine.running_mean
    loaded = {"scale": np.float32([4.0, 5.0]), "running_mean": np.float32([7.0, 8.0])}
    assert mine.load_state_dict(loaded) == ([], [])
    assert mine.running_mean is buffer
    np.testing.assert_array_equal(arr(buffer), [7.0, 8.0])
    with pytest.raises(RuntimeError, match="Missing key.*running_mean"):
        ref.load_state_dict({"scale": torch.ones(2)})
    with pytest.raises(RuntimeError, match="Missing key.*running_mean"):
        mine.load_state_dict({"scale": loaded["scale"]})
    extra = {**mine.state_dict(), "steps": js.ones(1)}  # a non-persistent buffer's key
    assert mine.load_state_dict(extra, strict=False) == ([], ["steps"])
    with pytest.raises(RuntimeError, match=r"size mismatch for running_mean.*\(3,\)"):
        mine.load_state_dict({**loaded, "running_mean": np.zeros(3, np.float32)})


@pytest.mark.parametrize("backend", BACKENDS)
def test_to_moves_buffers_and_leaves_plain_attributes(backend):
    other = "jax" if backend == "numpy" else "numpy"
    module = _js_stats(backend)
    scale = module.scale
    assert module.to(other) is module and module.scale is scale
    assert {t.backend for t in (module.scale, module.running_mean, module.steps)} == {other}
    assert module.mask.backend == backend and module.absent is None


# ------------------------------------------------------------------------ pytree
def test_buffers_and_plain_tensors_are_leaves_after_the_parameters():
    model = nn.Sequential(_js_stats(), nn.Linear(2, 2))
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(model)]
    assert paths == [".0.scale", ".0.running_mean", ".0.steps", ".0.mask", ".1.weight",
                     ".1.bias"]
    arrays = jax.tree.map(js.Tensor.jax, model)
    assert jax.tree.structure(arrays) == jax.tree.structure(model)
    assert isinstance(arrays[0].running_mean, jax.Array) and arrays[0].absent is None


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["engine", "native"])
def test_a_module_holding_constants_runs_under_jit_and_to_jax(backend, mode):
    model = _js_stats(backend)
    x = js.tensor(np.float32([[1.0, 2.0], [3.0, -1.0]]), backend=backend)

    def loss(model, x):
        return (model(x) ** 2).sum()

    value = js.to_jax(loss, mode=mode)(model, jnp.asarray(arr(x)))
    grads = jax.jit(jax.grad(js.to_jax(loss, mode=mode)))(jax.tree.map(js.Tensor.jax, model),
                                                          jnp.asarray(arr(x)))
    eager = loss(model, x)
    eager.backward()
    np.testing.assert_allclose(np.asarray(value), arr(eager), rtol=1e-6)
    np.testing.assert_allclose(grads.scale, arr(model.scale.grad), rtol=1e-6)
    for name in ("running_mean", "steps", "mask"):  # constants: no gradient, as in torch
        np.testing.assert_array_equal(getattr(grads, name), 0.0, err_msg=name)


# ------------------------------------------------------------ traversal, modes, repr
def _tree(lib, base, linear):
    class Block(base):
        def __init__(self):
            super().__init__()
            self.first = linear(2, 3)
            self.second = linear(3, 1)

        def extra_repr(self):
            return "depth=2\nmode='x'"

    class Model(base):
        def __init__(self):
            super().__init__()
            self.block = Block()
            self.head = linear(1, 1)

        def extra_repr(self):
            return "tag=1"

    return Model()


def _torch_tree(torch):
    return _tree(torch, torch.nn.Module, torch.nn.Linear)


def _js_tree():
    return _tree(js, nn.Module, nn.Linear)


@pytest.mark.oracle
def test_apply_visits_children_first_as_in_torch(torch):
    def visits(model):
        order = []
        assert model.apply(lambda m: order.append(type(m).__name__)) is model
        return order

    assert visits(_js_tree()) == visits(_torch_tree(torch))
    assert visits(_js_tree()) == ["Linear", "Linear", "Block", "Linear", "Model"]


@pytest.mark.oracle
def test_requires_grad_freezes_and_thaws_as_in_torch(torch):
    for model in (_js_tree(), _torch_tree(torch)):
        assert model.block.requires_grad_(False) is model.block
        assert [p.requires_grad for p in model.parameters()] == [False] * 4 + [True] * 2
        model.requires_grad_()
        assert all(p.requires_grad for p in model.parameters())
    model = _js_tree()
    model.block.requires_grad_(False)
    x = js.ones((4, 2))
    model.head(model.block.second(model.block.first(x))).sum().backward()
    assert model.block.first.weight.grad is None and model.head.weight.grad is not None


@pytest.mark.oracle
@pytest.mark.parametrize("target", ["", "block", "block.second", "block.third", "head.weight",
                                    "block.second.in_features", "nothing.here"])
def test_get_submodule_matches_torch(torch, target):
    mine, ref = _js_tree(), _torch_tree(torch)
    try:
        expected = type(ref.get_submodule(target)).__name__
    except AttributeError as error:
        with pytest.raises(AttributeError) as got:
            mine.get_submodule(target)
        assert str(got.value) == str(error)
    else:
        assert type(mine.get_submodule(target)).__name__ == expected


@pytest.mark.oracle
def test_repr_shows_extra_repr_with_children_as_torch(torch):
    assert repr(_js_tree()) == repr(_torch_tree(torch))
    assert "depth=2\n    mode='x'\n    (first)" in repr(_js_tree())


@pytest.mark.oracle
@pytest.mark.parametrize(
    ("name", "module"),
    [(1, "relu"), ("a.b", "relu"), ("", "relu"), ("training", "relu"), ("fresh", 3)],
    ids=["not-a-string", "dotted", "empty", "an-existing-attribute", "not-a-module"],
)
def test_add_module_errors_match_torch(torch, name, module):
    def child(lib):
        return lib.nn.ReLU() if module == "relu" else module

    with pytest.raises((TypeError, KeyError)) as expected:
        _torch_tree(torch).add_module(name, child(torch))
    with pytest.raises(type(expected.value)) as got:
        _js_tree().add_module(name, child(js))
    assert str(expected.value).split(".")[0][:20] in str(got.value)


def test_add_module_registers_a_name_that_is_no_identifier():
    model = _js_tree()
    model.add_module("2nd", nn.ReLU())
    model.register_module("block", nn.Identity())  # replacing a submodule is allowed
    assert [n for n, _ in model.named_children()] == ["block", "head", "2nd"]
    assert model.get_submodule("2nd") is getattr(model, "2nd")


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_a_copied_module_keeps_its_parameters_parameters_frozen_or_not(how):
    model = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    model[0].bias.requires_grad_(False)
    model.shared = model[0]  # one module under two names stays one module
    clone = copy.deepcopy(model) if how == "deepcopy" else pickle.loads(pickle.dumps(model))
    assert clone.shared is clone[0] and clone[0].weight is not model[0].weight
    assert [name for name, _ in clone.named_parameters()] == [
        name for name, _ in model.named_parameters()]
    assert all(isinstance(p, nn.Parameter) for p in clone.parameters())
    assert not isinstance(clone[0].bias.detach(), nn.Parameter)
    np.testing.assert_array_equal(arr(clone[1].weight), arr(model[1].weight))
    with pytest.raises(TypeError, match="cannot assign Tensor as parameter 'weight'"):
        clone[0].weight = clone[0].weight.detach()  # a plain tensor, as torch refuses
