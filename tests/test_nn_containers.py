"""js.nn's ModuleList, ModuleDict, Sequential, Identity, Flatten and Unflatten against torch.nn's;
containers as pytrees under jax.jit and js.to_jax."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import BACKENDS, arr

import jaxstream as js
from jaxstream import nn


def _names(module):
    return list(module.state_dict())


def _list_operations(tnn):
    """The same ModuleList edits in either library; the layers are told apart by size."""
    layers = tnn.ModuleList([tnn.Linear(1, 1)])
    layers.append(tnn.Linear(1, 2)).extend([tnn.Linear(1, 3), tnn.ReLU()])
    layers.insert(1, tnn.Linear(1, 4))
    layers += [tnn.Linear(1, 5)]
    layers[-1] = tnn.Linear(1, 6)
    del layers[2]
    popped = layers.pop(0)
    sizes = [getattr(layer, "out_features", 0) for layer in layers]
    sliced = [getattr(layer, "out_features", 0) for layer in layers[1:3]]
    return sizes, sliced, popped.out_features, len(layers), _names(layers), type(layers[1:])


@pytest.mark.oracle
def test_module_list_edits_match_torch(torch):
    *expected, expected_type = _list_operations(torch.nn)
    *got, got_type = _list_operations(nn)
    assert got == expected and got_type is nn.ModuleList
    assert expected[0] == [4, 3, 0, 6]


@pytest.mark.oracle
@pytest.mark.parametrize(
    "edit",
    [lambda lib, m: m[3], lambda lib, m: m[-3], lambda lib, m: m.extend(5),
     lambda lib, m: m.append(3), lambda lib, m: m.__setitem__(2, lib.ReLU())],
    ids=["index", "negative-index", "extend-a-number", "append-a-number", "set-out-of-range"],
)
def test_module_list_errors_match_torch(torch, edit):
    with pytest.raises((IndexError, TypeError)) as expected:
        edit(torch.nn, torch.nn.ModuleList([torch.nn.ReLU(), torch.nn.ReLU()]))
    with pytest.raises(type(expected.value)) as got:
        edit(nn, nn.ModuleList([nn.ReLU(), nn.ReLU()]))
    assert str(expected.value) in str(got.value)


def _dict_operations(tnn):
    layers = tnn.ModuleDict({"b": tnn.Linear(1, 1), "a": tnn.ReLU()})
    layers.update([("c", tnn.Linear(1, 2))])
    layers.update({"b": tnn.Linear(1, 3)})  # replaces, keeps its place
    layers["d"] = tnn.Linear(1, 4)
    del layers["a"]
    popped = layers.pop("c")
    state = (list(layers), list(layers.keys()), [v.out_features for v in layers.values()],
             [k for k, _ in layers.items()], "d" in layers, "a" in layers, len(layers),
             popped.out_features, _names(layers))
    layers.clear()
    return state, len(layers)


@pytest.mark.oracle
def test_module_dict_api_matches_torch(torch):
    assert _dict_operations(nn) == _dict_operations(torch.nn)


@pytest.mark.oracle
@pytest.mark.parametrize(
    "make",
    [lambda lib: lib.ModuleDict({"update": lib.ReLU()}), lambda lib: lib.ModuleDict()["x"],
     lambda lib: lib.ModuleDict(5), lambda lib: lib.ModuleDict([("a",)]),
     lambda lib: lib.ModuleDict([5]), lambda lib: lib.ModuleDict({"a.b": lib.ReLU()}),
     lambda lib: lib.ModuleDict({"a": 3})],
    ids=["a-method-name", "missing", "not-iterable", "short-pair", "not-a-pair", "dotted",
         "not-a-module"],
)
def test_module_dict_errors_match_torch(torch, make):
    with pytest.raises((KeyError, TypeError, ValueError)) as expected:
        make(torch.nn)
    with pytest.raises(type(expected.value)) as got:
        make(nn)
    assert str(expected.value).replace("; isint", "; is int") in str(got.value)


@pytest.mark.oracle
def test_a_layer_held_twice_runs_twice_but_is_one_child(torch):
    for lib in (torch.nn, nn):
        layer = lib.Linear(2, 2)
        model = lib.Sequential(layer, layer)
        assert len(model) == 2 and list(model) == [layer, layer]
        assert [n for n, _ in model.named_children()] == ["0"]
        assert len(list(model.parameters())) == 2 and len(model.state_dict()) == 4


# --------------------------------------------------------------- simple modules
@pytest.mark.oracle
@pytest.mark.parametrize("backend", BACKENDS)
def test_identity_flatten_unflatten_match_torch(torch, backend):
    x = np.arange(2 * 3 * 4 * 2, dtype=np.float32).reshape(2, 3, 4, 2)
    mine_x, ref_x = js.tensor(x, backend=backend), torch.tensor(x)
    cases = [((), {}), ((0, 1), {}), ((2, -1), {})]
    for args, kwargs in cases:
        mine, ref = nn.Flatten(*args, **kwargs), torch.nn.Flatten(*args, **kwargs)
        np.testing.assert_array_equal(arr(mine(mine_x)), ref(ref_x).numpy())
        assert repr(mine) == repr(ref)
    for dim, sizes in [(1, (3, 1)), (-1, [1, -1]), (2, (-1, 2, 1))]:
        mine, ref = nn.Unflatten(dim, sizes), torch.nn.Unflatten(dim, tuple(sizes))
        np.testing.assert_array_equal(arr(mine(mine_x)), ref(ref_x).numpy())
        assert repr(mine) == repr(ref)
    assert nn.Identity(3, a=2)(mine_x) is mine_x and repr(nn.Identity(3)) == "Identity()"


@pytest.mark.oracle
@pytest.mark.parametrize(
    ("make", "size"),
    [(lambda lib: lib.Unflatten(1, (2, 2)), 6), (lambda lib: lib.Unflatten(1, (-1, 4)), 6),
     (lambda lib: lib.Unflatten(5, (2, 3)), 6), (lambda lib: lib.Unflatten(1, ()), 6),
     (lambda lib: lib.Unflatten(1, [2, 2.0]), 4), (lambda lib: lib.Unflatten(1, 4), 4)],
    ids=["sizes", "inferred", "dim", "empty", "float-size", "not-a-tuple"],
)
def test_unflatten_errors_match_torch(torch, make, size):
    with pytest.raises((RuntimeError, IndexError, TypeError)) as expected:
        make(torch.nn)(torch.ones(2, size))
    with pytest.raises(type(expected.value)) as got:
        make(nn)(js.ones((2, size)))
    assert str(expected.value).split("(")[0].strip() in str(got.value)


def test_unflatten_refuses_two_inferred_sizes():
    with pytest.raises(RuntimeError, match="only one dimension can be inferred"):
        nn.Unflatten(1, (-1, -1))(js.ones((2, 6)))


# ---------------------------------------------------------------------- pytree
@pytest.mark.parametrize("backend", BACKENDS)
def test_containers_are_pytrees_under_jit_and_to_jax(backend):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([nn.Linear(3, 3, key=i) for i in range(2)])
            self.heads = nn.ModuleDict({"out": nn.Linear(3, 1, key=5)})
            self.flat = nn.Flatten(0)

        def forward(self, x):
            for block in self.blocks:
                x = js.tanh(block(x))
            return self.flat(self.heads["out"](x))

    model = Net().to(backend)
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(model)]
    assert paths == ["." + name for name in model.state_dict()]
    x = js.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), backend=backend)

    def loss(model, x):
        return (model(x) ** 2).sum()

    grads = jax.jit(jax.grad(js.to_jax(loss)))(jax.tree.map(js.Tensor.jax, model),
                                               jnp.asarray(arr(x)))
    assert type(grads.blocks) is nn.ModuleList and type(grads.heads) is nn.ModuleDict
    loss(model, x).backward()
    for (name, p), g in zip(model.named_parameters(), jax.tree.leaves(grads), strict=True):
        np.testing.assert_allclose(np.asarray(g), arr(p.grad), rtol=1e-5, atol=1e-7,
                                   err_msg=name)
