"""js.nn.init against torch.nn.init: gains, fans, scales, exact fills, errors, keys."""

from __future__ import annotations

import math
import warnings

import jax
import numpy as np
import pytest
from helpers import BACKENDS, arr

import jaxstream as js

torch = pytest.importorskip("torch")
init = js.nn.init
tinit = torch.nn.init

NONLINEARITIES = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d", "sigmoid", "tanh", "relu", "leaky_relu", "selu"]
DRAWING = {
    "uniform_": lambda t, **k: init.uniform_(t, -0.5, 0.5, **k),
    "normal_": lambda t, **k: init.normal_(t, 0.0, 0.02, **k),
    "trunc_normal_": lambda t, **k: init.trunc_normal_(t, std=0.5, **k),
    "xavier_uniform_": lambda t, **k: init.xavier_uniform_(t, **k),
    "xavier_normal_": lambda t, **k: init.xavier_normal_(t, **k),
    "kaiming_uniform_": lambda t, **k: init.kaiming_uniform_(t, a=math.sqrt(5), **k),
    "kaiming_normal_": lambda t, **k: init.kaiming_normal_(t, mode="fan_out", **k),
    "orthogonal_": lambda t, **k: init.orthogonal_(t, **k),
    "sparse_": lambda t, **k: init.sparse_(t, 0.3, **k),
}
FILLING = {
    "constant_": lambda t: init.constant_(t, 0.25),
    "ones_": init.ones_,
    "zeros_": init.zeros_,
    "eye_": init.eye_,
}
TORCH_FILLING = {
    "constant_": lambda t: tinit.constant_(t, 0.25),
    "ones_": tinit.ones_,
    "zeros_": tinit.zeros_,
    "eye_": tinit.eye_,
}
FAN_BASED = ["xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"]


def _param(shape, backend):
    return js.nn.Parameter(js.zeros(*shape, backend=backend))


def _values(t):
    return arr(t.detach()).astype(np.float64)


def _torch_std(name, shape, kwargs):
    """PyTorch's std of a fan-based initialiser (its documented formula), from torch's own
    gain and fans."""
    fan_in, fan_out = tinit._calculate_fan_in_and_fan_out(torch.empty(shape))
    if name.startswith("xavier"):
        return kwargs.get("gain", 1.0) * math.sqrt(2.0 / (fan_in + fan_out))
    fan = fan_in if kwargs.get("mode", "fan_in").lower() == "fan_in" else fan_out
    gain = tinit.calculate_gain(kwargs.get("nonlinearity", "leaky_relu"), kwargs.get("a", 0))
    return gain / math.sqrt(fan)


@pytest.mark.parametrize("nonlinearity", NONLINEARITIES)
def test_calculate_gain_matches_torch(nonlinearity):
    assert init.calculate_gain(nonlinearity) == pytest.approx(tinit.calculate_gain(nonlinearity))


@pytest.mark.parametrize("param", [None, 0, 0.2, 3, -0.5])
def test_leaky_relu_gain_takes_the_slope(param):
    expected = tinit.calculate_gain("leaky_relu", param)
    assert init.calculate_gain("leaky_relu", param) == pytest.approx(expected)


@pytest.mark.parametrize("nonlinearity, param", [("softmax", None), ("leaky_relu", "0.1"),
                                                 ("leaky_relu", True), ("leaky_relu", [0.1])])
def test_calculate_gain_refuses_what_torch_refuses(nonlinearity, param):
    with pytest.raises(ValueError):
        tinit.calculate_gain(nonlinearity, param)
    with pytest.raises(ValueError, match="calculate_gain"):
        init.calculate_gain(nonlinearity, param)


@pytest.mark.parametrize("shape", [(3, 4), (8, 3, 5), (6, 2, 3, 3), (4, 2, 1, 2, 3), (0, 3)])
def test_fans_match_torch(shape):
    expected = tinit._calculate_fan_in_and_fan_out(torch.empty(shape))
    assert init._calculate_fan_in_and_fan_out(js.zeros(*shape)) == tuple(expected)


UNIFORM_CASES = [
    ("xavier_uniform_", (200, 300), {}),
    ("xavier_uniform_", (64, 32, 3, 3), {"gain": 2.0}),
    ("kaiming_uniform_", (300, 200), {"a": math.sqrt(5)}),
    ("kaiming_uniform_", (64, 16, 5, 5), {"mode": "fan_out", "nonlinearity": "relu"}),
    ("kaiming_uniform_", (256, 256), {"a": 0.1, "mode": "FAN_IN"}),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name, shape, kwargs", UNIFORM_CASES)
def test_uniform_initialisers_fill_torchs_bound(backend, name, shape, kwargs):
    bound = math.sqrt(3.0) * _torch_std(name, shape, kwargs)
    ours = np.abs(_values(getattr(init, name)(_param(shape, backend), key=1, **kwargs)))
    theirs = np.abs(getattr(tinit, name)(torch.empty(shape), **kwargs).numpy())
    for values in (ours, theirs):
        assert values.max() <= bound * (1 + 1e-6)
        assert values.max() >= bound * 0.99


def test_uniform_fills_the_interval():
    values = _values(init.uniform_(_param((200, 200), "numpy"), -0.3, 0.7, key=0))
    assert values.min() >= -0.3 and values.max() < 0.7
    assert values.min() < -0.29 and values.max() > 0.69


NORMAL_CASES = [
    ("xavier_normal_", (200, 300), {"gain": 0.5}),
    ("kaiming_normal_", (300, 200), {}),
    ("kaiming_normal_", (64, 16, 5, 5), {"mode": "fan_out", "nonlinearity": "relu"}),
    ("kaiming_normal_", (256, 256), {"a": 0.3, "nonlinearity": "leaky_relu"}),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name, shape, kwargs", NORMAL_CASES)
def test_normal_initialisers_have_torchs_std(backend, name, shape, kwargs):
    std = _torch_std(name, shape, kwargs)
    ours = _values(getattr(init, name)(_param(shape, backend), key=2, **kwargs))
    theirs = getattr(tinit, name)(torch.empty(shape), **kwargs).numpy()
    for values in (ours, theirs):
        assert values.std() == pytest.approx(std, rel=0.02)
        assert abs(values.mean()) < 0.02 * std * 5


@pytest.mark.parametrize("backend", BACKENDS)
def test_normal_takes_mean_and_std(backend):
    values = _values(init.normal_(_param((300, 300), backend), 1.5, 0.02, key=3))
    assert values.mean() == pytest.approx(1.5, abs=1e-3)
    assert values.std() == pytest.approx(0.02, rel=0.02)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", FILLING)
@pytest.mark.parametrize("shape", [(3, 5), (5, 3)])
def test_fills_equal_torchs(backend, name, shape):
    expected = TORCH_FILLING[name](torch.empty(shape))
    np.testing.assert_array_equal(_values(FILLING[name](_param(shape, backend))),
                                  expected.numpy())


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape, groups", [((4, 2, 3), 1), ((6, 3, 3, 3), 1), ((6, 2, 3, 3), 2),
                                           ((6, 1, 2, 3), 3), ((4, 4, 1, 2, 3), 2)])
def test_dirac_equals_torchs(backend, shape, groups):
    expected = tinit.dirac_(torch.empty(shape), groups).numpy()
    np.testing.assert_array_equal(_values(init.dirac_(_param(shape, backend), groups)), expected)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(4, 10), (10, 4), (6, 2, 3), (5, 5)])
@pytest.mark.parametrize("gain", [1.0, 2.5])
def test_orthogonal_rows_or_columns_are_orthonormal(backend, shape, gain):
    ours = _values(init.orthogonal_(_param(shape, backend), gain, key=4))
    theirs = tinit.orthogonal_(torch.empty(shape), gain).double().numpy()
    for values in (ours, theirs):
        w = values.reshape(shape[0], -1)
        gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
        np.testing.assert_allclose(gram, gain**2 * np.eye(len(gram)), atol=1e-5 * gain**2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mean, std, a, b", [(0.0, 1.0, -2.0, 2.0), (0.5, 2.0, -1.0, 3.0),
                                             (0.0, 0.02, -0.04, 0.04), (1.0, 1.0, 0.0, 5.0)])
def test_trunc_normal_range_and_moments_match_torch(backend, mean, std, a, b):
    ours = _values(init.trunc_normal_(_param((400, 500), backend), mean, std, a, b, key=5))
    torch.manual_seed(0)
    theirs = tinit.trunc_normal_(torch.empty(400, 500), mean, std, a, b).double().numpy()
    assert ours.min() >= a and ours.max() <= b
    assert ours.mean() == pytest.approx(theirs.mean(), abs=0.01 * std)
    assert ours.std() == pytest.approx(theirs.std(), rel=0.01)
    for bound, extreme in ((a, ours.min()), (b, ours.max())):
        if abs(bound - mean) <= 2 * std:  # then a large sample reaches it
            assert extreme == pytest.approx(bound, abs=0.01 * std)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sparse_zeroes_torchs_count_per_column(backend):
    ours = _values(init.sparse_(_param((50, 40), backend), 0.25, std=0.5, key=6))
    theirs = tinit.sparse_(torch.empty(50, 40), 0.25, std=0.5).numpy()
    np.testing.assert_array_equal((ours == 0).sum(axis=0), (theirs == 0).sum(axis=0))
    assert ours[ours != 0].std() == pytest.approx(0.5, rel=0.1)


ALL = {**{name: lambda t, f=f: f(t, key=7) for name, f in DRAWING.items()}, **FILLING,
       "dirac_": init.dirac_}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ALL)
def test_fills_a_parameter_in_place_and_keeps_it_a_leaf(backend, name):
    shape = (8, 2, 3) if name == "dirac_" else (8, 6)
    w = _param(shape, backend)
    assert ALL[name](w) is w
    assert w.is_leaf and w.requires_grad and w.grad_fn is None
    assert not np.all(_values(w) == 0) or name == "zeros_"
    (w * 2).sum().backward()
    np.testing.assert_array_equal(_values(w.grad), np.full(shape, 2.0))


@pytest.mark.parametrize("name", FAN_BASED + ["orthogonal_"])
@pytest.mark.parametrize("shape", [(5,), ()])
def test_fan_based_initialisers_need_two_dims(name, shape):
    with pytest.raises(ValueError):
        getattr(tinit, name)(torch.empty(shape))
    with pytest.raises(ValueError, match=rf"{name}.*\({', '.join(map(str, shape))},?\)"):
        getattr(init, name)(js.zeros(*shape), key=0)


@pytest.mark.parametrize("name, args", [("eye_", ((2, 3, 4),)), ("dirac_", ((3, 3),)),
                                        ("dirac_", ((3, 2, 3), 2)), ("sparse_", ((5,), 0.1))])
def test_shape_errors_match_torch(name, args):
    shape, *rest = args
    with pytest.raises(ValueError):
        getattr(tinit, name)(torch.empty(shape), *rest)
    with pytest.raises(ValueError, match=name):
        getattr(init, name)(js.zeros(*shape), *rest)


@pytest.mark.parametrize("name", ["kaiming_uniform_", "kaiming_normal_"])
def test_kaiming_refuses_bad_mode_and_nonlinearity(name):
    for kwargs in ({"mode": "fan_avg"}, {"nonlinearity": "softplus"}):
        with pytest.raises(ValueError):
            getattr(tinit, name)(torch.empty(3, 4), **kwargs)
        with pytest.raises(ValueError):
            getattr(init, name)(js.zeros(3, 4), **kwargs)


@pytest.mark.parametrize("name", ["uniform_", "normal_", "xavier_uniform_", "orthogonal_"])
def test_integer_tensors_are_refused_as_torch_does(name):
    with pytest.raises(NotImplementedError):
        getattr(tinit, name)(torch.zeros(3, 4, dtype=torch.int64))
    with pytest.raises(NotImplementedError):
        getattr(init, name)(js.zeros(3, 4, dtype="int64"))


@pytest.mark.parametrize("name", DRAWING)
def test_generator_is_refused_with_a_pointer_to_key(name):
    with pytest.raises(TypeError, match="key="):
        DRAWING[name](_param((4, 3), "numpy"), generator=object())


def test_trunc_normal_refuses_swapped_bounds_and_warns_far_mean():
    with pytest.raises(RuntimeError):
        tinit.trunc_normal_(torch.empty(3), 0.0, 1.0, 2.0, 1.0)
    with pytest.raises(RuntimeError, match=r"trunc_normal_.*\(3,\)"):
        init.trunc_normal_(js.zeros(3), 0.0, 1.0, 2.0, 1.0)
    with pytest.warns(UserWarning, match="more than 2 std"):
        init.trunc_normal_(js.zeros(3), 10.0, 1.0, key=0)


@pytest.mark.parametrize("shape", [(0, 3), (4, 0, 2)])
def test_zero_element_tensors_are_left_alone(shape):
    with pytest.warns(UserWarning, match="zero-element"):
        tinit.kaiming_uniform_(torch.empty(shape))
    for name in ["kaiming_uniform_", "kaiming_normal_"]:
        with pytest.warns(UserWarning, match="zero-element"):
            assert getattr(init, name)(js.zeros(*shape)).shape == shape
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert init.orthogonal_(js.zeros(*shape)).shape == shape


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", DRAWING)
def test_key_makes_the_draw_pure(backend, name):
    def draw(key):
        return _values(DRAWING[name](_param((6, 5), backend), key=key))

    np.testing.assert_array_equal(draw(11), draw(11))
    assert not np.array_equal(draw(11), draw(12))
    np.testing.assert_array_equal(draw(jax.random.key(3)), draw(jax.random.key(3)))
    assert not np.array_equal(draw(jax.random.key(3)), draw(jax.random.key(4)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", DRAWING)
def test_global_generator_draws_repeat_after_manual_seed(backend, name):
    def draw():
        return _values(DRAWING[name](_param((6, 5), backend)))

    js.manual_seed(21)
    first, second = draw(), draw()
    js.manual_seed(21)
    np.testing.assert_array_equal(draw(), first)
    assert not np.array_equal(first, second)


@pytest.mark.parametrize("backend", BACKENDS)
def test_orthogonal_signs_are_not_fixed_by_the_factorisation(backend):
    """A QR's R has a sign convention: without undoing it every draw would share the sign of
    its corner, and the matrices would not be uniform over the orthogonal ones."""
    corners = [_values(init.orthogonal_(_param((3, 3), backend), key=k))[0, 0] for k in range(16)]
    assert min(corners) < 0 < max(corners)
