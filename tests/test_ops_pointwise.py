"""The elementwise ops beyond the basic ones (sign, floor, round, rsqrt, atan2, lerp, erfinv,
nan_to_num, clamp_min/clamp_max, isclose, masked_fill, any, all) against torch: values,
dtypes, node names, first and second gradients on both backends, under to_jax, and
PyTorch's errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import BACKENDS, arr, error_text
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from ops_oracle import check_against_torch, close, pair, same_structure, uniform_values

import jaxstream as js
from jaxstream.jax_interop import to_jax

# NumPy warns where torch does not (the log of a negative, rsqrt of 0): the values are checked.
pytestmark = [pytest.mark.oracle, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

HYPOTHESIS = settings(max_examples=10, deadline=None)


def _off_boundaries(seed, shape, scale=3.0):
    """Values a rounding at 0, 1 or -1 decimals never meets at a tie, in float32 as well."""
    rng = np.random.default_rng(seed)
    return rng.integers(-1000 * scale, 1000 * scale, size=shape) / 1000 + 0.0004


def _unary_cases(torch):
    return {
        "sign": (js.sign, torch.sign, None),
        "floor": (lambda x: x.floor(), torch.floor, None),
        "round": (js.round, torch.round, None),
        "round_decimals": (lambda x: x.round(decimals=1), lambda x: x.round(decimals=1), None),
        "round_negative": (lambda x: js.round(x * 20, decimals=-1),
                           lambda x: torch.round(x * 20, decimals=-1), None),
        "rsqrt": (lambda x: x.rsqrt(), torch.rsqrt, (0.3, 3.0)),
        "erfinv": (js.erfinv, torch.erfinv, (-0.9, 0.9)),
        "nan_to_num": (lambda x: js.nan_to_num(x.log(), 1.5, 7.0, -7.0),
                       lambda x: torch.nan_to_num(x.log(), 1.5, 7.0, -7.0), None),
        "clamp_min": (lambda x: js.clamp_min(x, 0.3), lambda x: torch.clamp_min(x, 0.3), None),
        "clamp_max": (lambda x: x.clamp_max(-0.2), lambda x: x.clamp_max(-0.2), None),
        "masked_fill": (lambda x: x.masked_fill(x > 0.5, -2.0),
                        lambda x: x.masked_fill(x > 0.5, -2.0), None),
    }


UNARY = ["sign", "floor", "round", "round_decimals", "round_negative", "rsqrt", "erfinv",
         "nan_to_num", "clamp_min", "clamp_max", "masked_fill"]


def _values(domain, seed, shape):
    if domain is None:
        return _off_boundaries(seed, shape)
    return uniform_values(seed, shape, low=domain[0], high=domain[1])[0]


# Every case on NumPy, one per op on JAX (each JAX case compiles its kernels: the suite
# stays fast); test_the_ops_trace_under_jit_and_grad runs every op on JAX again.
JAX_UNARY = ["sign", "floor", "round_decimals", "rsqrt", "erfinv", "nan_to_num", "clamp_min",
             "masked_fill"]


@pytest.mark.parametrize("backend, name", [("numpy", n) for n in UNARY]
                         + [("jax", n) for n in JAX_UNARY])
def test_unary_ops_match_torch(torch, backend, name):
    js_fn, torch_fn, domain = _unary_cases(torch)[name]
    check_against_torch(torch, js_fn, torch_fn, [_values(domain, 2, (3, 4))], backend)


@settings(HYPOTHESIS)
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=4),
       name=st.sampled_from(UNARY), seed=st.integers(0, 2**16))
def test_unary_ops_of_any_shape_match_torch(torch, shape, name, seed):
    js_fn, torch_fn, domain = _unary_cases(torch)[name]
    check_against_torch(torch, js_fn, torch_fn, [_values(domain, seed, shape)], "numpy")


def test_nan_to_num_replaces_nan_and_infinities_as_torch(torch):
    values = np.array([np.nan, np.inf, -np.inf, 1.5], np.float32)
    for kwargs in ({}, {"nan": 2.0}, {"posinf": 3.0, "neginf": -4.0}):
        for backend in BACKENDS:
            ours = js.nan_to_num(js.tensor(values, backend=backend), **kwargs)
            np.testing.assert_array_equal(arr(ours), torch.nan_to_num(torch.tensor(values),
                                                                      **kwargs).numpy())
    x = js.tensor(values.astype(np.float64), requires_grad=True)
    js.nan_to_num(x).sum().backward()
    np.testing.assert_array_equal(arr(x.grad), [0.0, 0.0, 0.0, 1.0])


def _binary_cases(torch):
    return {
        "atan2": (js.atan2, torch.atan2),
        "arctan2": (lambda a, b: a.arctan2(b), lambda a, b: a.arctan2(b)),
        "lerp_number": (lambda a, b: js.lerp(a, b, 0.3), lambda a, b: torch.lerp(a, b, 0.3)),
        "lerp_far": (lambda a, b: a.lerp(b, 0.8), lambda a, b: a.lerp(b, 0.8)),
        "clamp_min_tensor": (js.clamp_min, torch.clamp_min),
        "clamp_max_tensor": (lambda a, b: a.clamp_max(b), lambda a, b: a.clamp_max(b)),
    }


BINARY = ["atan2", "arctan2", "lerp_number", "lerp_far", "clamp_min_tensor", "clamp_max_tensor"]


@pytest.mark.parametrize("backend, name, shapes", [
    *(("numpy", n, s) for n in BINARY for s in (((3, 4), (3, 4)), ((2, 3), (3,)))),
    *(("jax", n, ((2, 3), (3,))) for n in ("atan2", "lerp_number", "clamp_min_tensor")),
], ids=str)
def test_binary_ops_match_torch(torch, backend, name, shapes):
    js_fn, torch_fn = _binary_cases(torch)[name]
    check_against_torch(torch, js_fn, torch_fn, uniform_values(3, *shapes), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_lerp_with_a_tensor_weight_matches_torch_in_all_three_inputs(torch, backend):
    values = uniform_values(4, (2, 3), (3,), (2, 1))
    check_against_torch(torch, js.lerp, torch.lerp, values, backend)
    check_against_torch(torch, lambda a, b, w: a.lerp(b, w * 0.4), lambda a, b, w: a.lerp(
        b, w * 0.4), values, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_masked_fill_with_a_0d_tensor_gives_it_the_masked_gradient(torch, backend):
    mask = np.array([[True, False, True], [False, False, True]])

    def ours(x, v):
        return x.masked_fill(js.tensor(mask, backend=x.backend), v) * x

    def theirs(x, v):
        return x.masked_fill(torch.tensor(mask), v) * x

    check_against_torch(torch, ours, theirs, uniform_values(5, (2, 3), ()), backend)
    check_against_torch(torch, lambda x: js.masked_fill(x, js.tensor(mask[0], backend=x.backend),
                                                        1.0),
                        lambda x: x.masked_fill(torch.tensor(mask[0]), 1.0),
                        uniform_values(6, (2, 3)), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_node_names_are_torchs(torch, backend):
    x, tx = pair(torch, _off_boundaries(7, (2, 3)), backend)
    w, tw = pair(torch, _off_boundaries(8, (2, 3)), backend)
    calls = [
        lambda x, w, m: x.sign(), lambda x, w, m: x.floor(), lambda x, w, m: x.round(),
        lambda x, w, m: x.round(decimals=2), lambda x, w, m: x.abs().rsqrt(),
        lambda x, w, m: x.atan2(w), lambda x, w, m: x.lerp(w, 0.5), lambda x, w, m: x.lerp(w, w),
        lambda x, w, m: (x / 4).erfinv(), lambda x, w, m: x.nan_to_num(),
        lambda x, w, m: x.clamp_min(0.1), lambda x, w, m: x.clamp_max(0.1),
        lambda x, w, m: x.masked_fill(x > 0, 1.0), lambda x, w, m: x.masked_fill(x > 0, m),
    ]
    m = js.tensor(2.0, backend=backend, requires_grad=True)
    tm = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    for call in calls:
        assert call(x, w, m).grad_fn.name() == call(tx, tw, tm).grad_fn.name()


# ------------------------------------------------------------------ dtypes
INTS = np.array([[1, -2], [0, 3]], np.int32)


def _uint8(m, x):
    return x.abs().to("uint8" if m is js else m.uint8)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("call", [
    lambda m, x: m.sign(x), lambda m, x: m.floor(x), lambda m, x: m.round(x),
    lambda m, x: m.rsqrt(x), lambda m, x: m.erfinv(x), lambda m, x: m.atan2(x, x),
    lambda m, x: m.nan_to_num(x), lambda m, x: m.clamp_min(x, 0.5),
    lambda m, x: m.clamp_min(x, 1), lambda m, x: m.clamp_max(x, 1),
    lambda m, x: x.masked_fill(x > 0, 2.7), lambda m, x: m.any(x, 1),
    lambda m, x: m.all(x, dim=(0,), keepdim=True), lambda m, x: m.isclose(x, x + 1, 1.0),
    lambda m, x: m.sign(x > 0), lambda m, x: m.nan_to_num(x > 0), lambda m, x: m.any(x > 0),
    lambda m, x: m.all(_uint8(m, x)), lambda m, x: m.any(_uint8(m, x), 0),
], ids=["sign", "floor", "round", "rsqrt", "erfinv", "atan2", "nan_to_num", "clamp_min_float",
        "clamp_min_int", "clamp_max_int", "masked_fill", "any", "all", "isclose", "sign_bool",
        "nan_to_num_bool", "any_bool", "all_uint8", "any_uint8"])
def test_integer_and_bool_tensors_give_torchs_dtypes(torch, backend, call):
    theirs = call(torch, torch.tensor(INTS))
    ours = call(js, js.tensor(INTS, backend=backend))
    # int64 data becomes int32 on JAX without x64; float32 kernels differ by an ulp
    if backend == "numpy" or theirs.dtype.is_floating_point or theirs.dtype == torch.bool:
        assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")
    np.testing.assert_allclose(arr(ours), theirs.numpy(), rtol=1e-6)


# ------------------------------------------------------------------ tests of values
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kwargs", [{}, {"rtol": 0.1}, {"atol": 0.5, "equal_nan": True}])
def test_isclose_matches_torch(torch, backend, kwargs):
    a = np.array([1.0, 1.05, np.nan, np.inf, -np.inf, 2.0, 1e-9], np.float32)
    b = np.array([1.0, 1.0, np.nan, np.inf, np.inf, 2.4, 0.0], np.float32)
    ours = js.isclose(js.tensor(a, backend=backend), js.tensor(b, backend=backend), **kwargs)
    same_structure(ours, torch.isclose(torch.tensor(a), torch.tensor(b), **kwargs), "numpy")
    assert not ours.requires_grad
    number = js.isclose(js.tensor(a.astype(np.float64), backend="numpy"), 1.0, **kwargs)
    same_structure(number, torch.isclose(torch.tensor(a.astype(np.float64)),
                                         torch.tensor(1.0, dtype=torch.float64), **kwargs),
                   "numpy")


@settings(HYPOTHESIS)
@given(values=hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, max_side=3),
                         elements=st.sampled_from([0.0, 1.0, -2.0])),
       data=st.data(), name=st.sampled_from(["any", "all"]))
def test_any_and_all_over_dims_match_torch(torch, values, data, name):
    ndim = max(values.ndim, 1)
    dim = data.draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1),
                              st.lists(st.integers(0, ndim - 1), unique=True).map(tuple)))
    keepdim = data.draw(st.booleans())
    x, tx = js.tensor(values, requires_grad=True), torch.tensor(values)
    ours = getattr(x, name)(dim=dim, keepdim=keepdim) if dim is not None else getattr(x, name)()
    theirs = (getattr(tx, name)(dim=dim, keepdim=keepdim) if dim is not None
              else getattr(tx, name)())
    same_structure(ours, theirs, "numpy")
    assert not ours.requires_grad


def test_masked_fill_in_place_writes_through_and_keeps_the_gradient(torch):
    x, tx = pair(torch, uniform_values(9, (2, 3))[0], "numpy")
    y, ty = x * 1.0, tx * 1.0
    y.masked_fill_(y > 0, 0.5)
    ty.masked_fill_(ty > 0, 0.5)
    close(y, ty.detach().numpy(), "numpy", "value")
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    close(x.grad, tx.grad.numpy(), "numpy", "gradient")


# ------------------------------------------------------------------ under to_jax
def test_the_ops_trace_under_jit_and_grad(torch):
    """Every op of this module inside one traced loss: jax.jit(jax.grad(to_jax(loss)))
    matches torch."""
    values = uniform_values(10, (3, 4), (3, 4), low=0.2, high=0.9)

    def loss(m, x, w):
        mask = x > 0.5
        y = (m.rsqrt(x) + m.atan2(x, w) + m.erfinv(w * 0.9) + m.sign(x) + m.floor(x * 3)
             + m.round(x, decimals=1) + m.nan_to_num(m.log(x - 0.3)) + m.clamp_min(x, 0.4)
             + m.clamp_max(w, 0.6) + x.masked_fill(mask, 2.0) + m.lerp(x, w, 0.3)
             + m.lerp(x, w, w))
        return (y * y).sum() + m.any(mask).float() + m.all(mask, dim=0).float().sum()

    got = jax.jit(jax.grad(to_jax(lambda x, w: loss(js, x, w)), argnums=(0, 1)))(
        *map(jnp.asarray, values))
    txs = [torch.tensor(v, requires_grad=True) for v in values]
    want = torch.autograd.grad(loss(torch, *txs), txs)
    for g, tg in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), tg.numpy(), rtol=2e-3, atol=2e-4)


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize("call, error, phrases", [
    (lambda: js.floor(js.tensor([True])), NotImplementedError,
     ["\"floor_vml_cpu\" not implemented for 'Bool'", "t.float()"]),
    (lambda: js.round(js.tensor([True])), NotImplementedError, ["round_vml_cpu"]),
    (lambda: js.tensor([1, 2]).round(decimals=1), NotImplementedError,
     ["\"round_cpu\" not implemented for 'Long'", "decimals"]),
    (lambda: js.lerp(js.tensor([1.0]), js.tensor([2.0], dtype="float64"), 0.5), RuntimeError,
     ["expected dtype float for `end` but got dtype double", "end.to('float32')"]),
    (lambda: js.lerp(js.tensor([1.0]), js.tensor([2.0]), js.tensor([0.5], dtype="float64")),
     RuntimeError, ["expected dtype float for `weight` but got dtype double"]),
    (lambda: js.lerp(js.tensor([1]), js.tensor([2]), 0.5), NotImplementedError,
     ["\"lerp_kernel_scalar\" not implemented for 'Long'"]),
    (lambda: js.lerp(js.ones(2, 3), js.ones(3, 2), 0.5), RuntimeError,
     ["The size of tensor a (3) must match the size of tensor b (2) at non-singleton "
      "dimension 1", "lerp"]),
    (lambda: js.isclose(js.tensor([1]), js.tensor([1.0])), RuntimeError,
     ["Long did not match Float", "isclose"]),
    (lambda: js.ones(2).masked_fill(js.tensor([1, 0]), 1.0), RuntimeError,
     ["masked_fill_ only supports boolean masks, but got mask with dtype long"]),
    (lambda: js.ones(2).masked_fill(js.tensor([True, False]), js.ones(2)), RuntimeError,
     ["only supports a 0-dimensional value tensor, but got tensor with 1 dimension(s)"]),
    (lambda: js.ones(2, 3).masked_fill(js.tensor([True, False]), 1.0), RuntimeError,
     ["The size of tensor a (3) must match the size of tensor b (2)", "masked_fill"]),
    (lambda: js.ones(2, 3).any(2), IndexError,
     ["Dimension out of range (expected to be in range of [-2, 1], but got 2)"]),
    (lambda: js.ones(2, 3).all(dim=(0, 0)), ValueError, ["appears multiple times"]),
], ids=["floor_bool", "round_bool", "round_int_decimals", "lerp_end_dtype", "lerp_weight_dtype",
        "lerp_int", "lerp_shapes", "isclose_dtypes", "masked_fill_int_mask",
        "masked_fill_1d_value", "masked_fill_shapes", "any_dim", "all_repeated_dims"])
def test_bad_arguments_raise_torchs_errors(call, error, phrases):
    with pytest.raises(error) as excinfo:
        call()
    for phrase in phrases:
        assert phrase in error_text(excinfo)
