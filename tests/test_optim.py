"""js.optim: optax transformations on jaxstream parameters, and PyTorch's SGD/Adam/AdamW rules."""

from __future__ import annotations

import pickle

import jax.numpy as jnp
import numpy as np
import optax
import pytest
from helpers import BACKENDS, arr

import jaxstream as js

SHAPES = [(3, 4), (4,)]

RULES = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
    ("SGD", {"lr": 0.1, "momentum": 0.5, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.01}),
    ("Adam", {"lr": 0.01, "betas": (0.8, 0.99), "weight_decay": 0.1}),
    ("AdamW", {"lr": 0.01}),
    ("AdamW", {"lr": 0.01, "eps": 1e-6, "weight_decay": 0.5}),
]


def _dtype(backend):
    return np.float64 if backend == "numpy" else np.float32


def _values(seed, backend):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(_dtype(backend)) for shape in SHAPES]


def _params(backend, seed=0):
    return [js.tensor(v, requires_grad=True, backend=backend) for v in _values(seed, backend)]


def _set_grads(params, values):
    for p, g in zip(params, values, strict=True):
        p.grad = js.tensor(g, backend=p.backend)


@pytest.mark.oracle
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("name", "kwargs"), RULES)
def test_three_steps_match_torch_optim(torch, backend, name, kwargs):
    params = _params(backend)
    torch_params = [torch.tensor(v, requires_grad=True) for v in _values(0, backend)]
    opt = getattr(js.optim, name)(params, **kwargs)
    torch_opt = getattr(torch.optim, name)(torch_params, **kwargs)
    for step in range(3):
        grads = _values(step + 1, backend)
        _set_grads(params, grads)
        for tp, g in zip(torch_params, grads, strict=True):
            tp.grad = torch.tensor(g)
        opt.step()
        torch_opt.step()
    tol = 1e-12 if backend == "numpy" else 1e-5
    for p, tp in zip(params, torch_params, strict=True):
        assert p.dtype == _dtype(backend) and p.backend == backend
        np.testing.assert_allclose(arr(p), tp.detach().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("backend", BACKENDS)
def test_step_updates_in_place_keeping_leaf_identity_and_bumping_version(backend):
    params = _params(backend)
    before = [p._version for p in params]
    opt = js.optim.SGD(params, lr=0.5)
    _set_grads(params, _values(1, backend))
    opt.step()
    assert opt.params[0] is params[0]
    assert all(p.is_leaf and p.requires_grad for p in params)
    assert all(p._version > v for p, v in zip(params, before, strict=True))
    expected = _values(0, backend)[0] - 0.5 * _values(1, backend)[0]
    np.testing.assert_allclose(arr(params[0]), expected, rtol=1e-6)


def test_a_module_sees_the_update_and_trains():
    js.manual_seed(0)
    model = js.nn.Sequential(js.nn.Linear(2, 8), js.nn.Tanh(), js.nn.Linear(8, 1))
    x = js.tensor(np.random.default_rng(0).standard_normal((32, 2)).astype(np.float32))
    y = (x * x).sum(axis=1, keepdims=True)
    opt = js.optim.Adam(model.parameters(), lr=0.05)

    def loss():
        d = model(x) - y
        return (d * d).mean()

    first = loss().item()
    for _ in range(60):
        opt.zero_grad()
        loss().backward()
        opt.step()
    assert loss().item() < 0.3 * first


def test_zero_grad_sets_to_none_or_zeros():
    params = _params("numpy")
    opt = js.optim.SGD(params, lr=0.1)
    _set_grads(params, _values(1, "numpy"))
    held = params[0].grad
    opt.zero_grad(set_to_none=False)
    assert params[0].grad is held
    np.testing.assert_array_equal(arr(held), 0.0)
    opt.zero_grad()
    assert all(p.grad is None for p in params)


@pytest.mark.oracle
@pytest.mark.oracle
@pytest.mark.parametrize(
    "params",
    [
        # one host vector each way (Note [Packed exchange for small host parameters])
        [np.ones((3, 4), np.float32), np.ones(4, np.float32)],
        # a parameter past the packing size: one argument per parameter
        [np.ones((512, 513), np.float32), np.ones(4, np.float32)],
        # two dtypes: one argument per parameter
        [np.ones((3, 4), np.float32), np.ones(4, np.float64)],
    ],
    ids=["packed", "large", "mixed-dtypes"],
)
def test_both_exchanges_match_torch_and_give_distinct_parameters(torch, params):
    values = [v * np.arange(1, v.size + 1, dtype=v.dtype).reshape(v.shape) for v in params]
    mine = [js.tensor(v, requires_grad=True) for v in values]
    theirs = [torch.tensor(v, requires_grad=True) for v in values]
    opt, torch_opt = js.optim.Adam(mine, lr=0.1), torch.optim.Adam(theirs, lr=0.1)
    for step in range(3):
        for p, tp in zip(mine, theirs, strict=True):
            g = np.full(p.shape, step - 1.0, p.dtype)
            p.grad, tp.grad = js.tensor(g), torch.tensor(g)
        opt.step()
        torch_opt.step()
    for p, tp in zip(mine, theirs, strict=True):
        assert p.shape == tuple(tp.shape) and p.dtype == tp.detach().numpy().dtype
        np.testing.assert_allclose(arr(p), tp.detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="read-only"):
        arr(mine[0])[...] = 0  # the new values are views of the update's output


@pytest.mark.parametrize("backend", BACKENDS)
def test_parameters_without_grad_are_skipped(torch, backend):
    params = _params(backend)
    opt = js.optim.Adam(params, lr=0.1)
    torch_params = [torch.tensor(v, requires_grad=True) for v in _values(0, backend)]
    torch_opt = torch.optim.Adam(torch_params, lr=0.1)
    assert opt.step() is None  # no gradient at all: nothing happens
    grad = _values(1, backend)[1]
    for _ in range(2):
        params[1].grad = js.tensor(grad, backend=backend)
        torch_params[1].grad = torch.tensor(grad)
        opt.step()
        torch_opt.step()
    np.testing.assert_array_equal(arr(params[0]), _values(0, backend)[0])
    np.testing.assert_allclose(arr(params[1]), torch_params[1].detach().numpy(), atol=1e-6)


def test_a_custom_optax_transformation():
    params = _params("numpy")
    opt = js.optim.Optimizer(params, optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(0.1)))
    grads = _values(1, "numpy")
    _set_grads(params, grads)
    opt.step()
    norm = np.sqrt(sum((g * g).sum() for g in grads))
    for p, p0, g in zip(params, _values(0, "numpy"), grads, strict=True):
        np.testing.assert_allclose(arr(p), p0 - 0.1 * g / norm, rtol=1e-12)
    assert opt.param_groups[0].keys() == {"params"}


def test_closure_is_called_with_grad_and_its_loss_returned():
    w = js.tensor(np.array([3.0]), requires_grad=True)
    opt = js.optim.SGD([w], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    with js.no_grad():
        loss = opt.step(closure)
    assert loss.item() == 9.0
    np.testing.assert_allclose(arr(w), [1.5])


@pytest.mark.oracle
def test_learning_rate_set_in_param_groups_is_used(torch):
    params = _params("numpy")
    torch_params = [torch.tensor(v, requires_grad=True) for v in _values(0, "numpy")]
    opt = js.optim.SGD(params, lr=0.1, momentum=0.9)
    torch_opt = torch.optim.SGD(torch_params, lr=0.1, momentum=0.9)
    for step, lr in enumerate([0.1, 0.01, 0.3]):
        opt.param_groups[0]["lr"] = torch_opt.param_groups[0]["lr"] = lr
        grads = _values(step + 1, "numpy")
        _set_grads(params, grads)
        for tp, g in zip(torch_params, grads, strict=True):
            tp.grad = torch.tensor(g)
        opt.step()
        torch_opt.step()
    for p, tp in zip(params, torch_params, strict=True):
        np.testing.assert_allclose(arr(p), tp.detach().numpy(), rtol=1e-12)
    assert opt.param_groups[0]["lr"] == 0.3


@pytest.mark.parametrize("backend", BACKENDS)
def test_optimizer_state_lives_with_the_parameters(backend):
    params = _params(backend)
    opt = js.optim.Adam(params, lr=0.1)
    _set_grads(params, _values(1, backend))
    opt.step()
    mu = opt.state.inner_state[1].mu
    assert [m.dtype for m in mu] == [np.dtype(_dtype(backend))] * 2
    assert [m.shape for m in mu] == SHAPES


def test_state_dict_round_trip_continues_identically():
    params, twins = _params("numpy"), _params("numpy")
    opt, twin_opt = js.optim.Adam(params, lr=0.1), js.optim.Adam(twins, lr=0.2)
    _set_grads(params, _values(1, "numpy"))
    opt.step()
    saved = pickle.loads(pickle.dumps(opt.state_dict()))
    assert saved["param_groups"][0]["params"] == [0, 1]
    with js.no_grad():
        for twin, p in zip(twins, params, strict=True):
            twin.copy_(p)
    twin_opt.load_state_dict(saved)
    assert twin_opt.param_groups[0]["lr"] == 0.1
    for optimizer, ps in ((opt, params), (twin_opt, twins)):
        _set_grads(ps, _values(2, "numpy"))
        optimizer.step()
    for p, twin in zip(params, twins, strict=True):
        np.testing.assert_array_equal(arr(p), arr(twin))


def test_load_state_dict_of_another_optimizer_raises():
    sgd = js.optim.SGD(_params("numpy"), lr=0.1)
    adam = js.optim.Adam(_params("numpy"))
    with pytest.raises(ValueError, match="does not match this optimizer's state"):
        adam.load_state_dict(sgd.state_dict())
    one = js.optim.SGD(_params("numpy")[:1], lr=0.1)
    with pytest.raises(ValueError, match="does not match this optimizer's state"):
        sgd.load_state_dict(one.state_dict())


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda ps: js.optim.SGD(ps, lr=-0.1), ValueError, "Invalid learning rate: -0.1"),
        (lambda ps: js.optim.SGD(ps, lr=0.1, momentum=-1), ValueError, "Invalid momentum"),
        (lambda ps: js.optim.SGD(ps, lr=0.1, nesterov=True), ValueError, "Nesterov momentum"),
        (lambda ps: js.optim.Adam(ps, betas=(1.0, 0.9)), ValueError, "beta parameter at index 0"),
        (lambda ps: js.optim.Adam(ps, eps=-1.0), ValueError, "Invalid epsilon"),
        (lambda ps: js.optim.AdamW(ps, weight_decay=-1.0), ValueError, "Invalid weight_decay"),
        (lambda ps: js.optim.SGD([], lr=0.1), ValueError, "empty parameter list"),
        (lambda ps: js.optim.SGD(ps[0], lr=0.1), TypeError, "iterable of Tensors"),
        (lambda ps: js.optim.SGD([np.ones(2)], lr=0.1), TypeError, "can only optimize Tensors"),
        (lambda ps: js.optim.SGD([ps[0], ps[0]], lr=0.1), ValueError, "more than once"),
        (lambda ps: js.optim.SGD([ps[0] * 2], lr=0.1), ValueError, "non-leaf Tensor.*MulBackward0"),
        (lambda ps: js.optim.SGD([ps[0].detach()], lr=0.1), ValueError, "does not require grad"),
        (lambda ps: js.optim.Optimizer(ps, optax.sgd), TypeError, "optax.GradientTransformation"),
    ],
)
def test_bad_arguments_raise(make, error, match):
    with pytest.raises(error, match=match):
        make(_params("numpy"))


def test_jax_parameters_update_on_jax():
    params = _params("jax")
    opt = js.optim.SGD(params, lr=1.0)
    _set_grads(params, _values(1, "jax"))
    opt.step()
    assert all(isinstance(p.data, jnp.ndarray) for p in params)


def test_the_state_packing_round_trips_leaves_of_mixed_dtypes_and_shapes():
    from jaxstream.optim.state_packing import StateLayout

    leaves = [
        jnp.asarray(3, jnp.int32),
        jnp.arange(6.0, dtype=jnp.float32).reshape(2, 3),
        jnp.asarray([7], jnp.int32),
        jnp.asarray(0.5, jnp.float32),
    ]
    layout = StateLayout.of(leaves)
    vectors = layout.pack(leaves)
    assert [v.dtype for v in vectors] == [jnp.int32, jnp.float32]
    assert [v.shape for v in vectors] == [(2,), (7,)]
    back = layout.unpack(vectors)
    for got, want in zip(back, leaves, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    with pytest.raises(ValueError):
        layout.unpack(vectors[:1])  # a vector missing: not silently short


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_state_set_as_a_whole_is_the_one_the_next_step_uses(backend):
    params, fresh_params = _params(backend), _params(backend)
    opt, fresh = js.optim.Adam(params, lr=0.1), js.optim.Adam(fresh_params, lr=0.1)
    initial = opt.state
    _set_grads(params, _values(1, backend))
    opt.step()
    assert int(opt.state.count) == 1
    opt.state = initial  # back to the moments of a fresh optimizer
    with js.no_grad():
        for p, f in zip(params, fresh_params, strict=True):
            f.copy_(p)
    for optimizer, ps in ((opt, params), (fresh, fresh_params)):
        _set_grads(ps, _values(2, backend))
        optimizer.step()
    for p, f in zip(params, fresh_params, strict=True):
        np.testing.assert_array_equal(arr(p), arr(f))


def test_a_transformation_without_state_steps():
    params = _params("numpy")
    opt = js.optim.Optimizer(params, optax.sgd(0.5))
    before = [arr(p).copy() for p in params]
    grads = _values(1, "numpy")
    _set_grads(params, grads)
    opt.step()
    for p, b, g in zip(params, before, grads, strict=True):
        np.testing.assert_allclose(arr(p), b - 0.5 * g, rtol=1e-12)
