"""js.nn: registration, state dicts, modes, PyTorch's init, layers against torch, pytrees."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import BACKENDS, arr

import jaxstream as js
from jaxstream import nn


class Block(nn.Module):
    def __init__(self, key=None):
        super().__init__()
        self.norm = nn.LayerNorm(4)
        self.proj = nn.Linear(4, 3, key=key)
        self.scale = nn.Parameter(js.ones(3))

    def forward(self, x):
        return self.proj(self.norm(x)) * self.scale


def _model(key=None):
    return nn.Sequential(nn.Linear(2, 4, key=key), nn.Tanh(), Block(key=key))


def _torch_model(torch):
    tnn = torch.nn

    class TorchBlock(tnn.Module):
        def __init__(self):
            super().__init__()
            self.norm = tnn.LayerNorm(4)
            self.proj = tnn.Linear(4, 3)
            self.scale = tnn.Parameter(torch.ones(3))

    return tnn.Sequential(tnn.Linear(2, 4), tnn.Tanh(), TorchBlock())


def _inputs(*shape, backend="numpy"):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    return js.tensor(x, backend=backend)


# ----------------------------------------------------------------- registration
@pytest.mark.oracle
def test_names_and_order_match_torch(torch):
    model, reference = _model(), _torch_model(torch)
    assert [n for n, _ in model.named_parameters()] == [n for n, _ in reference.named_parameters()]
    assert [n for n, _ in model.named_modules()] == [n for n, _ in reference.named_modules()]
    shapes = [tuple(p.shape) for p in reference.parameters()]
    assert [p.shape for p in model.parameters()] == shapes
    assert list(model.state_dict()) == list(reference.state_dict())
    assert [type(m).__name__ for m in model.children()] == ["Linear", "Tanh", "Block"]


def test_parameter_is_a_plain_leaf_tensor_that_ops_accept():
    p = nn.Parameter(np.ones(3, np.float32))
    assert type(p) is js.Tensor and isinstance(p, nn.Parameter)
    assert p.is_leaf and p.requires_grad
    assert not isinstance(js.tensor(np.ones(3), requires_grad=True), nn.Parameter)
    (p * 2).sum().backward()
    np.testing.assert_array_equal(arr(p.grad), [2, 2, 2])
    frozen = nn.Parameter(np.ones(2), requires_grad=False)
    assert isinstance(frozen, nn.Parameter) and not frozen.requires_grad


def test_registration_rules():
    module = nn.Module()
    module.frozen = nn.Parameter(np.ones(2), requires_grad=False)
    module.trained = js.tensor(np.ones(2), requires_grad=True)
    module.constant = js.tensor(np.ones(2))
    module.child = nn.ReLU()
    assert [n for n, _ in module.named_parameters()] == ["frozen", "trained"]
    module.trained = None  # stays registered, but yields nothing
    assert [n for n, _ in module.named_parameters()] == ["frozen"]
    with pytest.raises(TypeError, match="cannot assign Tensor as parameter 'frozen'"):
        module.frozen = js.tensor(np.ones(2))
    with pytest.raises(TypeError, match="cannot assign int as module 'child'"):
        module.child = 3
    del module.child
    assert list(module.children()) == []


def test_assignment_before_init_and_missing_forward_raise():
    class Forgetful(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(np.ones(2))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Forgetful()
    with pytest.raises(NotImplementedError, match='missing the required "forward"'):
        nn.Module()(1)


# ------------------------------------------------------------------- state dict
def test_state_dict_round_trip_copies_into_the_same_parameters():
    js.manual_seed(0)
    source, target = _model(), _model()
    weight = target[0].weight
    opt = js.optim.SGD(target.parameters(), lr=0.1)
    assert target.load_state_dict(source.state_dict()) == ([], [])
    assert target[0].weight is weight and opt.params[0] is weight
    for (name, p), q in zip(target.named_parameters(), source.parameters(), strict=True):
        np.testing.assert_array_equal(arr(p), arr(q), err_msg=name)
        assert p.is_leaf and p.requires_grad
    snapshot = source.state_dict()["0.weight"]
    with js.no_grad():
        source[0].weight.mul_(2.0)
    np.testing.assert_array_equal(arr(snapshot), arr(source[0].weight))


def test_strict_load_reports_missing_and_unexpected_and_loads_nothing():
    model = _model(key=1)
    before = arr(model[0].weight).copy()
    state = _model(key=2).state_dict()
    del state["0.bias"]
    state["extra"] = js.ones(1)
    with pytest.raises(RuntimeError) as info:
        model.load_state_dict(state)
    message = str(info.value)
    assert "Error(s) in loading state_dict for Sequential" in message
    assert "Missing key(s) in state_dict: '0.bias'." in message
    assert "Unexpected key(s) in state_dict: 'extra'." in message
    np.testing.assert_array_equal(arr(model[0].weight), before)
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert (missing, unexpected) == (["0.bias"], ["extra"])
    np.testing.assert_array_equal(arr(model[0].weight), arr(state["0.weight"]))


@pytest.mark.parametrize("strict", [True, False])
def test_size_mismatch_raises_even_when_not_strict(strict):
    model = nn.Linear(3, 2)
    state = {"weight": np.zeros((2, 4), np.float32), "bias": np.zeros(2, np.float32)}
    with pytest.raises(RuntimeError, match=r"size mismatch for weight: .*\(2, 4\).*\(2, 3\)"):
        model.load_state_dict(state, strict=strict)
    assert not np.all(arr(model.bias) == 0)


def test_load_accepts_arrays_of_another_backend():
    model = nn.Linear(3, 2)
    model.load_state_dict({"weight": jnp.ones((2, 3)), "bias": jnp.zeros(2)})
    assert model.weight.backend == "numpy"
    np.testing.assert_array_equal(arr(model.weight), 1.0)


# ------------------------------------------------------------------ modes, grads
def test_train_and_eval_switch_dropout():
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5))
    x = _inputs(64, 8)
    assert model.training and model[1].training
    dropped = arr(model(x))
    assert (dropped == 0).mean() > 0.2
    assert model.eval() is model and not model[1].training
    np.testing.assert_array_equal(arr(model(x)), arr(model[0](x)))
    assert model.train().training and model[1].training
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)


def test_zero_grad():
    model = nn.Linear(3, 2)
    model(_inputs(4, 3)).sum().backward()
    held = model.weight.grad
    model.zero_grad(set_to_none=False)
    assert model.weight.grad is held and not arr(held).any()
    model.zero_grad()
    assert model.weight.grad is None and model.bias.grad is None


def test_to_moves_parameters_keeping_their_identity():
    model = _model()
    params = list(model.parameters())
    model(_inputs(5, 2)).sum().backward()
    assert model.to("jax") is model
    assert list(model.parameters()) == params
    assert all(p.backend == "jax" and p.grad.backend == "jax" for p in params)
    out = model(_inputs(5, 2, backend="jax"))
    assert out.backend == "jax"
    model.to(backend="numpy")
    assert all(p.backend == "numpy" for p in model.parameters())


# ----------------------------------------------------------------------- init
def test_default_initialisation_statistics():
    js.manual_seed(3)
    linear = nn.Linear(400, 300)
    w, b = arr(linear.weight), arr(linear.bias)
    bound = 1 / np.sqrt(400)
    assert w.shape == (300, 400) and w.dtype == np.float32
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert abs(w.std() - bound / np.sqrt(3)) < 0.02 * bound  # U(-a, a) has std a / sqrt(3)
    assert abs(w.mean()) < 0.01 * bound
    norm = nn.LayerNorm((2, 3))
    np.testing.assert_array_equal(arr(norm.weight), np.ones((2, 3)))
    np.testing.assert_array_equal(arr(norm.bias), np.zeros((2, 3)))
    table = arr(nn.Embedding(500, 100).weight)
    assert abs(table.mean()) < 0.02 and abs(table.std() - 1) < 0.02
    assert nn.Linear(2, 2, bias=False).bias is None


def test_manual_seed_rebuilds_the_same_model_and_key_is_pure():
    js.manual_seed(7)
    first, second = _model(), _model()
    js.manual_seed(7)
    again = _model()
    drawn = {"0.weight", "0.bias", "2.proj.weight", "2.proj.bias"}
    for name, a, b, c in zip(first.state_dict(), first.parameters(), second.parameters(),
                             again.parameters(), strict=True):
        assert np.array_equal(arr(a), arr(b)) == (name not in drawn), name
        np.testing.assert_array_equal(arr(a), arr(c))
    keyed = [arr(p) for p in _model(key=5).parameters()]
    js.manual_seed(8)
    for a, b in zip(keyed, _model(key=5).parameters(), strict=True):
        np.testing.assert_array_equal(a, arr(b))
    weight, bias = (arr(p) for p in nn.Linear(4, 4, key=jax.random.key(0)).parameters())
    assert not np.array_equal(weight[0], bias)


@pytest.mark.parametrize("backend", BACKENDS)
def test_factory_arguments(backend):
    linear = nn.Linear(3, 2, backend=backend, dtype="float32")
    table = nn.Embedding(4, 2, backend=backend)
    assert {p.backend for p in [*linear.parameters(), *table.parameters()]} == {backend}
    assert linear(_inputs(1, 3, backend=backend)).shape == (1, 2)


# ----------------------------------------------------------- layers vs torch
@pytest.mark.oracle
@pytest.mark.parametrize("backend", BACKENDS)
def test_layers_forward_and_backward_match_torch(torch, backend):
    model = nn.Sequential(nn.Linear(5, 6), nn.LayerNorm(6), nn.GELU(), nn.Linear(6, 4),
                          nn.SiLU(), nn.Sigmoid(), nn.ReLU())
    tnn = torch.nn
    reference = tnn.Sequential(tnn.Linear(5, 6), tnn.LayerNorm(6), tnn.GELU(), tnn.Linear(6, 4),
                               tnn.SiLU(), tnn.Sigmoid(), tnn.ReLU())
    reference.load_state_dict({k: torch.tensor(arr(v)) for k, v in model.state_dict().items()})
    model.to(backend)
    x = _inputs(3, 5)
    out = model(js.tensor(arr(x), backend=backend))
    expected = reference(torch.tensor(arr(x)))
    np.testing.assert_allclose(arr(out), expected.detach().numpy(), rtol=1e-5, atol=1e-6)
    (out * out).sum().backward()
    (expected * expected).sum().backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        np.testing.assert_allclose(arr(p.grad), q.grad.numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=name)


@pytest.mark.oracle
@pytest.mark.parametrize("backend", BACKENDS)
def test_embedding_gradient_accumulates_repeated_rows(torch, backend):
    table = nn.Embedding(5, 3, backend=backend)
    reference = torch.nn.Embedding(5, 3)
    reference.weight.data = torch.tensor(arr(table.weight))
    indices = np.array([[1, 1], [4, 1]])
    out = table(indices)
    expected = reference(torch.tensor(indices))
    np.testing.assert_array_equal(arr(out), expected.detach().numpy())
    weights = np.arange(12, dtype=np.float32).reshape(2, 2, 3)
    (out * js.tensor(weights, backend=backend)).sum().backward()
    (expected * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(arr(table.weight.grad), reference.weight.grad.numpy())


def test_layer_norm_rejects_a_wrong_trailing_shape():
    with pytest.raises(RuntimeError, match=r"expected input with shape \[\*, 4\].*\[2, 3\]"):
        nn.LayerNorm(4)(_inputs(2, 3))


def test_sequential_indexing_length_and_iteration():
    layers = [nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)]
    model = nn.Sequential(*layers)
    assert len(model) == 3 and list(model) == layers
    assert model[-1] is layers[2]
    assert list(model[1:]) == layers[1:]
    assert "(0): Linear(in_features=2, out_features=3, bias=True)" in repr(model)


# --------------------------------------------------------------------- pytree
def test_a_module_is_a_pytree_of_its_parameters():
    model = _model(key=0)
    leaves, treedef = jax.tree_util.tree_flatten(model)
    assert all(a is b for a, b in zip(leaves, model.parameters(), strict=True))
    paths = [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_leaves_with_path(model)]
    assert paths == ["." + name for name, _ in model.named_parameters()]
    arrays = jax.tree.map(js.Tensor.jax, model)
    assert type(arrays) is nn.Sequential and type(arrays[2]) is Block
    assert isinstance(arrays[2].proj.weight, jax.Array)
    assert jax.tree.structure(arrays) == treedef
    rebuilt = jax.tree.unflatten(treedef, leaves)
    x = _inputs(3, 2)
    np.testing.assert_array_equal(arr(rebuilt(x)), arr(model(x)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_jax_grad_through_to_jax_gives_a_module_shaped_gradient(backend):
    model = _model(key=0).to(backend)
    x = _inputs(6, 2, backend=backend)

    def loss(model, x):
        return (model(x) ** 2).mean()

    grads = jax.jit(jax.grad(js.to_jax(loss)))(jax.tree.map(js.Tensor.jax, model), x.jax())
    assert type(grads) is nn.Sequential
    loss(model, x).backward()
    for (name, p), g in zip(model.named_parameters(), jax.tree.leaves(grads), strict=True):
        np.testing.assert_allclose(np.asarray(g), arr(p.grad), rtol=1e-5, atol=1e-7,
                                   err_msg=name)
    assert js.to_jax(loss)(model, x.jax()).shape == ()
