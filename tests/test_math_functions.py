"""PyTorch's elementwise math functions (tan ... copysign, jaxstream/ops/math_functions.py)
against torch: values and dtypes on random and special values (NaN, infinities, signed zeros,
poles, the ends of the domains), first and second gradients there too, node names, float32
and float64 on NumPy, float32 on JAX, integer inputs, the in-place variants and PyTorch's
errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import jaxstream as js

torch = pytest.importorskip("torch")

# NumPy warns where torch does not (the log of 0, 0/0): the values are checked.
pytestmark = [pytest.mark.oracle, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

HYPOTHESIS = settings(max_examples=10, deadline=None, derandomize=True, database=None)
NAN, INF = math.nan, math.inf
# (backend, dtype): float64 on NumPy only, JAX's x64 being off.
PLACES = [("numpy", "float64"), ("numpy", "float32"), ("jax", "float32")]
TOLERANCE = {"float64": (1e-9, 1e-12), "float32": (2e-5, 2e-6)}
SPECIAL = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, 1e-30]
GAMMA_POINTS = [0.0, -0.0, 1.0, 2.0, 1.4616321449683623, 1e-30, 30.0, -30.5, -1.5, -0.5, INF,
                -INF, NAN]
NEGATIVE_INTEGERS = [-1.0, -2.0, -5.0]  # poles, where torch's float32 trigamma rounds its own way


# name -> (ours, torch's, random values' range, special values)
UNARY = {
    "tan": (js.tan, torch.tan, (-1.4, 1.4), SPECIAL),
    "asin": (js.asin, torch.asin, (-0.95, 0.95), SPECIAL),
    "acos": (js.arccos, torch.acos, (-0.95, 0.95), SPECIAL),
    "atan": (js.atan, torch.atan, (-3, 3), SPECIAL),
    "sinh": (js.sinh, torch.sinh, (-3, 3), SPECIAL),
    "cosh": (js.cosh, torch.cosh, (-3, 3), SPECIAL),
    "asinh": (js.asinh, torch.asinh, (-3, 3), SPECIAL),
    "acosh": (js.acosh, torch.acosh, (1.05, 4), SPECIAL + [1.5, 1.0000001]),
    "atanh": (js.arctanh, torch.atanh, (-0.95, 0.95), SPECIAL),
    "ceil": (js.ceil, torch.ceil, (-4, 4), SPECIAL),
    "trunc": (js.fix, torch.trunc, (-4, 4), SPECIAL),
    "frac": (js.frac, torch.frac, (-4, 4), SPECIAL),
    "log2": (js.log2, torch.log2, (0.1, 4), SPECIAL),
    "log10": (js.log10, torch.log10, (0.1, 4), SPECIAL),
    "exp2": (js.exp2, torch.exp2, (-3, 3), SPECIAL),
    "erfc": (js.erfc, torch.erfc, (-4, 4), SPECIAL + [5.0, -5.0, 10.0, 26.0, 30.0, -30.0]),
    "lgamma": (js.lgamma, torch.lgamma, (-4, 6), GAMMA_POINTS),
    "digamma": (js.digamma, torch.digamma, (-4, 6), GAMMA_POINTS),
    "polygamma2": (lambda x: js.polygamma(2, x), lambda x: torch.polygamma(2, x), (-4, 6),
                   GAMMA_POINTS),
    "logit": (js.logit, torch.logit, (0.05, 0.95), SPECIAL + [1e-8, 0.999]),
    "logit_eps": (lambda x: x.logit(0.1), lambda x: x.logit(0.1), (-0.2, 1.2),
                  SPECIAL + [0.1, 0.9, 0.05]),
    "logit_big_eps": (lambda x: js.logit(x, eps=0.6), lambda x: torch.logit(x, eps=0.6), (-1, 2),
                      SPECIAL),
    "sinc": (js.sinc, torch.sinc, (-3, 3), SPECIAL[:-1]),  # test_sinc_near_zero: 1e-30
    "deg2rad": (js.deg2rad, torch.deg2rad, (-400, 400), SPECIAL),
    "rad2deg": (js.rad2deg, torch.rad2deg, (-4, 4), SPECIAL),
    "sgn": (js.sgn, torch.sgn, (-3, 3), SPECIAL),
}


def _both(call, ranges):
    """`call(module, a, b)` on jaxstream and on torch, and the ranges of `a` and `b`."""
    return lambda *xs: call(js, *xs), lambda *xs: call(torch, *xs), ranges


SIGNED = ((-3, 3), (-3, 3))
# name -> (ours, torch's, (range of a, range of b))
BINARY = {
    "xlogy": (js.xlogy, torch.xlogy, ((-2, 2), (0.1, 3))),
    "xlogy_number_other": _both(lambda m, a, b: a.xlogy(2.5) * b, ((-2, 2), (0, 1))),
    "xlogy_number_self": _both(lambda m, a, b: m.xlogy(0.0, b) + m.xlogy(1.5, b),
                               ((0, 1), (0.1, 3))),
    "hypot": (js.hypot, torch.hypot, SIGNED),
    "logaddexp": (js.logaddexp, torch.logaddexp, SIGNED),
    "logaddexp2": _both(lambda m, a, b: a.logaddexp2(b), SIGNED),
    "fmod": (js.fmod, torch.fmod, ((-5, 5), (-2, 2))),
    "fmod_number": _both(lambda m, a, b: a.fmod(1.5) + m.fmod(b, -0.0), ((-5, 5), (-2, 2))),
    "fmax": (js.fmax, torch.fmax, SIGNED),
    "fmin": (js.fmin, torch.fmin, SIGNED),
    "copysign": (js.copysign, torch.copysign, SIGNED),
    "copysign_number": _both(lambda m, a, b: a.copysign(-2.0) * m.copysign(b, 0.0), SIGNED),
    "nextafter": (js.nextafter, torch.nextafter, SIGNED),
    "float_power": (js.float_power, torch.float_power, ((0.2, 3), (-2, 2))),
    "float_power_numbers": _both(lambda m, a, b: m.float_power(a, 2.5) + m.float_power(a, 0)
                                 + m.float_power(0.0, b) + m.float_power(1.5, b),
                                 ((-3, 3), (-2, 2))),
}


def _numpy(x):
    """Our tensor or torch's (its zero tensors too) as an array; None as it is."""
    if x is None or isinstance(x, np.ndarray):
        return x
    return np.asarray(x.numpy()) if isinstance(x, js.Tensor) else x.detach().numpy(force=True)


def _second(grads, leaves, directions, grad):
    """The gradients of sum(grads . directions) (None where nothing reaches a leaf)."""
    terms = [(g * v).sum() for g, v in zip(grads, directions, strict=True)
             if g is not None and g.requires_grad]
    return grad(sum(terms), leaves, allow_unused=True) if terms else [None] * len(leaves)


def check(js_fn, torch_fn, values, backend, dtype, tolerance=None):
    """Values, dtype, node name, first and second gradients of ours against torch's, on the
    same values in the same dtype."""
    rtol, atol = tolerance or TOLERANCE[dtype]
    arrays = [np.asarray(v, dtype) for v in values]
    xs = [js.tensor(a, backend=backend, requires_grad=True) for a in arrays]
    txs = [torch.tensor(a, requires_grad=True) for a in arrays]
    y, ty = js_fn(*xs), torch_fn(*txs)
    assert str(y.dtype) == str(ty.dtype).removeprefix("torch.")
    assert y.grad_fn.name() == ty.grad_fn.name()

    def close(ours, theirs, what):
        ours = np.zeros(theirs.shape) if ours is None else _numpy(ours)
        np.testing.assert_allclose(ours, _numpy(theirs), rtol=rtol, atol=atol, err_msg=what)

    close(y, ty, "value")
    rng = np.random.default_rng(0)
    w = rng.standard_normal(y.shape).astype(y.dtype)
    vs = [rng.standard_normal(a.shape).astype(dtype) for a in arrays]
    grads = js.grad((y * js.tensor(w, backend=backend)).sum(), xs, create_graph=True,
                    allow_unused=True)
    tgrads = torch.autograd.grad((ty * torch.tensor(w)).sum(), txs, create_graph=True,
                                 allow_unused=True)
    for i, (g, tg) in enumerate(zip(grads, tgrads, strict=True)):
        close(g, np.zeros(arrays[i].shape) if tg is None else tg, f"gradient of input {i}")
    if backend == "jax":  # without create_graph: the node's rules as one compiled call
        plain = js.grad((y * js.tensor(w, backend=backend)).sum(), xs, retain_graph=True,
                        allow_unused=True)
        for i, (g, tg) in enumerate(zip(plain, tgrads, strict=True)):
            close(g, np.zeros(arrays[i].shape) if tg is None else tg, f"compiled gradient {i}")
    ours = _second(grads, xs, [js.tensor(v, backend=backend) for v in vs], js.grad)
    theirs = _second(tgrads, txs, [torch.tensor(v) for v in vs], torch.autograd.grad)
    for i, (h, th) in enumerate(zip(ours, theirs, strict=True)):
        close(h, np.zeros(arrays[i].shape) if th is None else th, f"second gradient of input {i}")


# jnp's own kernels, vjps like the others': on NumPy only (each JAX case compiles its kernels).
NUMPY_ONLY = ("ceil", "trunc", "deg2rad", "rad2deg", "cosh", "log10", "logit_big_eps")


@pytest.mark.parametrize(("backend", "dtype", "name"), [
    (backend, dtype, name) for backend, dtype in PLACES for name in sorted(UNARY)
    if backend == "numpy" or name not in NUMPY_ONLY
])
def test_unary_functions_match_torch(backend, dtype, name):
    js_fn, torch_fn, (low, high), _ = UNARY[name]
    points = np.random.default_rng(1).uniform(low, high, 8).tolist() + UNARY[name][3]
    gamma = "gamma" in name and dtype == "float64"
    check(js_fn, torch_fn, [points + (NEGATIVE_INTEGERS if gamma else [])], backend, dtype,
          (1e-8, 1e-12) if gamma else None)


def _pairs(ranges, seed=2):
    """Random pairs in the ranges, then every pair of special values."""
    rng = np.random.default_rng(seed)
    a, b = (rng.uniform(*r, 8) for r in ranges)
    special = [0.0, -0.0, 1.0, -2.0, 2.0, NAN, INF, -INF]
    grid_a, grid_b = np.meshgrid(special, special)
    return np.concatenate([a, grid_a.ravel()]), np.concatenate([b, grid_b.ravel()])


@pytest.mark.parametrize(("backend", "dtype", "name"), [
    (backend, dtype, name) for backend, dtype in PLACES for name in sorted(BINARY)
    # float_power is float64, which JAX refuses without x64: test_float_power_on_jax_asks_for_x64
    if backend == "numpy" or not name.startswith("float_power")
])
def test_binary_functions_match_torch(backend, dtype, name):
    js_fn, torch_fn, ranges = BINARY[name]
    a, b = _pairs(ranges)
    if name.startswith("nextafter") and backend == "numpy":  # one ulp: bit for bit
        ours = js_fn(js.tensor(a.astype(dtype)), js.tensor(b.astype(dtype)))
        np.testing.assert_array_equal(ours.numpy(), torch_fn(torch.tensor(a.astype(dtype)),
                                                             torch.tensor(b.astype(dtype))))
    check(js_fn, torch_fn, [a, b], backend, dtype)


@settings(HYPOTHESIS)
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=4), seed=st.integers(0, 2**16),
       name=st.sampled_from(sorted(UNARY)))
def test_unary_functions_of_any_shape_match_torch(shape, seed, name):
    js_fn, torch_fn, (low, high), _ = UNARY[name]
    values = np.random.default_rng(seed).uniform(low, high, shape)
    check(js_fn, torch_fn, [values], "numpy", "float64", (1e-8, 1e-12))


@settings(HYPOTHESIS)
@given(shapes=st.sampled_from([((3, 1), (4,)), ((), (2, 3)), ((2, 1, 3), (1, 4, 1))]),
       seed=st.integers(0, 2**16), name=st.sampled_from(sorted(BINARY)))
def test_binary_functions_broadcast_as_torch(shapes, seed, name):
    js_fn, torch_fn, ranges = BINARY[name]
    rng = np.random.default_rng(seed)
    values = [rng.uniform(*r, s) for r, s in zip(ranges, shapes, strict=True)]
    check(js_fn, torch_fn, values, "numpy", "float64")


NODES = {  # name -> call of (module, a, b), its first gradients' nodes compared too
    "xlogy": lambda m, a, b: m.xlogy(a, b), "xlogy_number_other": lambda m, a, b: a.xlogy(2.0),
    "xlogy_number_self": lambda m, a, b: m.xlogy(2.0, b), "fmod": lambda m, a, b: a.fmod(b),
    "fmod_number": lambda m, a, b: m.fmod(a, 2.0), "copysign": lambda m, a, b: a.copysign(b),
    "copysign_number": lambda m, a, b: m.copysign(a, -2.0),
    "float_power": lambda m, a, b: m.float_power(a, b),
    "float_power_number": lambda m, a, b: a.float_power(2.0),
    "float_power_number_base": lambda m, a, b: m.float_power(2.0, b),
    "logit_eps": lambda m, a, b: a.logit(eps=0.1), "polygamma0": lambda m, a, b: m.polygamma(0, a),
    "polygamma3": lambda m, a, b: a.polygamma(3), "sinc": lambda m, a, b: m.sinc(a),
    "atan": lambda m, a, b: a.arctan(), "atanh": lambda m, a, b: m.atanh(a),
    "log2": lambda m, a, b: a.log2(), "hypot": lambda m, a, b: m.hypot(a, b),
    "logaddexp": lambda m, a, b: m.logaddexp(a, b), "fmax": lambda m, a, b: a.fmax(b),
    "nextafter": lambda m, a, b: m.nextafter(a, b), "tan": lambda m, a, b: a.tan(),
}


@pytest.mark.parametrize("name", sorted(NODES))
def test_node_names_are_torchs(name):
    values = ([0.25, 0.5, 0.0], [0.75, -1.5, 2.0])
    xs = [js.tensor(v, dtype=np.float64, requires_grad=True) for v in values]
    txs = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in values]
    y, ty = NODES[name](js, *xs), NODES[name](torch, *txs)
    assert y.grad_fn.name() == ty.grad_fn.name()
    grads = js.grad(y.sum(), xs, create_graph=True, allow_unused=True)
    tgrads = torch.autograd.grad(ty.sum(), txs, create_graph=True, allow_unused=True)
    node = lambda g: None if g is None or g.grad_fn is None else g.grad_fn.name()
    assert [node(g) for g in grads] == [node(g) for g in tgrads]


@pytest.mark.parametrize("name", ["tan", "asinh", "erfc", "lgamma", "digamma", "logit", "sinc",
                                  "log2", "hypot", "logaddexp2", "xlogy", "copysign"])
def test_half_precision_values_match_torch(name):
    rng = np.random.default_rng(6)
    values = [rng.uniform(0.05, 0.95, 6).astype(np.float16) for _ in range(2)]
    fn, torch_fn = getattr(js, name), getattr(torch, name)
    arguments = values if name in ("hypot", "logaddexp2", "xlogy", "copysign") else values[:1]
    ours = fn(*[js.tensor(v) for v in arguments])
    theirs = torch_fn(*[torch.tensor(v) for v in arguments])
    assert ours.dtype == np.float16 and theirs.dtype == torch.float16
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=2e-3, atol=1e-3)


@pytest.mark.parametrize(("backend", "n"), [("numpy", 0), ("numpy", 1), ("numpy", 2),
                                             ("numpy", 3), ("jax", 0), ("jax", 3)])
def test_polygamma_and_its_derivatives_match_torch(backend, n):
    dtype = "float64" if backend == "numpy" else "float32"
    values = np.concatenate([np.random.default_rng(3).uniform(-4, 6, 12), [0.25, 7.5, -2.5]])
    check(lambda x: x.polygamma(n), lambda x: x.polygamma(n), [values], backend, dtype,
          (1e-8, 1e-12) if dtype == "float64" else (1e-4, 1e-5))


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_third_derivative_of_lgamma_matches_torch(backend):
    values = np.array([0.3, 1.7, 4.2, -0.5, -2.25])
    dtype = np.float64 if backend == "numpy" else np.float32
    x = js.tensor(values.astype(dtype), backend=backend, requires_grad=True)
    tx = torch.tensor(values.astype(dtype), requires_grad=True)
    g, tg = js.lgamma(x), torch.lgamma(tx)
    for _ in range(3):
        (g,) = js.grad(g.sum(), [x], create_graph=True)
        (tg,) = torch.autograd.grad(tg.sum(), tx, create_graph=True)
    assert g.grad_fn.name() == tg.grad_fn.name() == "MulBackward0"
    np.testing.assert_allclose(_numpy(g), _numpy(tg), rtol=1e-8 if backend == "numpy" else 1e-4)


TESTS = ["isnan", "isinf", "isfinite", "isposinf", "isneginf", "isreal", "signbit"]


@pytest.mark.parametrize("backend", ["numpy", "jax"])
@pytest.mark.parametrize("name", TESTS)
def test_the_tests_give_bool_tensors_as_torch(backend, name):
    floats = np.array([NAN, -NAN, INF, -INF, 0.0, -0.0, 1.5, -2.0], np.float32)
    for values in (floats, np.array([-3, 0, 7], np.int32), np.array([True, False])):
        x = js.tensor(values, backend=backend, requires_grad=bool(values.dtype == np.float32))
        for ours in (getattr(js, name)(x), getattr(x, name)()):
            theirs = getattr(torch, name)(torch.tensor(values))
            assert ours.dtype == np.bool_ and not ours.requires_grad and ours.grad_fn is None
            np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


FLOATING = ["tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "arcsin",
            "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "log2", "log10", "exp2", "erfc",
            "lgamma", "digamma", "logit", "sinc", "deg2rad", "rad2deg"]
ROUNDING = ["ceil", "trunc", "fix", "sgn", "absolute"]
# Every function on NumPy; on JAX (each kernel compiled for each dtype) a few.
JAX_INTEGER_CASES = ["tan", "atanh", "lgamma", "digamma", "logit", "sinc", "ceil", "sgn"]


@pytest.mark.parametrize(("backend", "name"), [("numpy", n) for n in FLOATING + ROUNDING]
                         + [("jax", n) for n in JAX_INTEGER_CASES])
def test_integer_and_bool_inputs_give_torchs_dtypes(backend, name):
    for values in (np.array([-3, 0, 1, 7], np.int32), np.array([True, False])):
        if values.dtype == np.bool_ and name in ("ceil", "trunc", "fix", "absolute"):
            continue  # PyTorch has no bool kernel (test_errors_are_torchs)
        x = js.tensor(values, backend=backend)
        ours, theirs = getattr(x, name)(), getattr(torch.tensor(values), name)()
        assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-6)
        if name in ("ceil", "trunc", "fix"):
            assert ours is not x


JAX_INTEGERS = {"int64": "int32"}  # the backend's own, with x64 off


@pytest.mark.parametrize("backend", ["numpy", "jax"])
@pytest.mark.parametrize(("name", "a", "b"), [
    ("xlogy", [1, 0, 3], [2, 5, 1]), ("xlogy", [1, 0, 3], 2.5), ("xlogy", 2, [1, 2, 3]),
    ("copysign", [1, -2, 3], [-1, 1, -1]), ("copysign", [1, -2, 3], -1),
    ("fmod", [5, -5, 7], [3, 3, -2]), ("fmod", [5, -5, 7], 2), ("fmod", [5, -5, 7], 2.5),
    ("fmax", [5, -5, 7], [3, 3, -2]), ("fmin", [True, False], [False, False]),
    ("hypot", [1, 2, 3], [1.5, 2.5, 0.5]), ("heaviside", [-1, 0, 2], [7, 7, 7]),
])
def test_binary_dtypes_are_torchs(backend, name, a, b):
    ours = getattr(js, name)(*[js.tensor(v, backend=backend) if isinstance(v, list) else v
                               for v in (a, b)])
    theirs = getattr(torch, name)(*[torch.tensor(v) if isinstance(v, list) else v for v in (a, b)])
    expected = str(theirs.dtype).removeprefix("torch.")
    assert str(ours.dtype) == (JAX_INTEGERS.get(expected, expected) if backend == "jax" else
                               expected)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["int32", "bool", "float32", "float64"])
def test_float_power_is_float64(dtype):
    values = np.array([1, 0, 3], dtype)
    for call in (lambda m, x: m.float_power(x, 2), lambda m, x: m.float_power(2, x),
                 lambda m, x: x.float_power(x)):
        ours, theirs = call(js, js.tensor(values)), call(torch, torch.tensor(values))
        assert ours.dtype == np.float64 and theirs.dtype == torch.float64
        np.testing.assert_allclose(ours.numpy(), theirs.numpy())


def test_float_power_on_jax_asks_for_x64():
    with pytest.raises(TypeError, match="64-bit mode"):
        js.float_power(js.tensor([1.0, 2.0], backend="jax"), 2.0)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
@pytest.mark.parametrize("name", ["heaviside", "heaviside_"])
def test_heaviside_has_no_gradient_as_torch(backend, name):
    values = [-1.0, 0.0, 2.0, NAN, -0.0]
    x, tx = js.tensor(values, backend=backend, requires_grad=True), torch.tensor(values)
    y = getattr(x * 1.0, name)(js.tensor([0.5], backend=backend))
    ty = getattr(tx.requires_grad_() * 1.0, name)(torch.tensor([0.5]))
    assert y.requires_grad and y.grad_fn.name() == ty.grad_fn.name()
    np.testing.assert_array_equal(y.numpy(), ty.detach().numpy())
    with pytest.raises(RuntimeError) as error:
        ty.sum().backward()
    with pytest.raises(RuntimeError, match=str(error.value)):
        y.sum().backward()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_sinc_near_zero(dtype):
    """Values and gradients at tiny arguments (the second gradient there is cancellation)."""
    values = np.array([1e-30, -1e-20, 1e-8, 1e-4], dtype)
    x, tx = js.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
    y, ty = js.sinc(x), torch.sinc(tx)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-7)
    (g,), (tg,) = js.grad(y.sum(), [x]), torch.autograd.grad(ty.sum(), tx)
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-6, atol=1e-12)


IN_PLACE = {  # name -> (arguments after the tensor, random values' range)
    **{n: ((), UNARY[n][2]) for n in UNARY if n in FLOATING + ROUNDING + ["frac"]},
    "arcsin": ((), (-0.9, 0.9)), "arccos": ((), (-0.9, 0.9)), "arctan": ((), (-2, 2)),
    "arcsinh": ((), (-2, 2)), "arccosh": ((), (1.1, 3)), "arctanh": ((), (-0.9, 0.9)),
    "fix": ((), (-3, 3)), "absolute": ((), (-3, 3)), "polygamma": ((1,), (0.5, 3)),
    "xlogy": ((1.5,), (-2, 2)), "hypot": (([0.5, -1.0],), (-2, 2)), "fmod": ((0.7,), (-2, 2)),
    "copysign": ((-1.0,), (-2, 2)), "nextafter": (([1.0, -1.0],), (-2, 2)),
    "float_power": ((2.5,), (0.5, 2)),
}


@pytest.mark.parametrize("name", sorted(IN_PLACE))
def test_in_place_variants_match_torch(name):
    extra, (low, high) = IN_PLACE[name]
    values = np.random.default_rng(4).uniform(low, high, (3, 2))
    x, tx = js.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
    y, ty = x * 1.0, tx * 1.0
    args = [js.tensor(a) if isinstance(a, list) else a for a in extra]
    targs = [torch.tensor(a, dtype=torch.float64) if isinstance(a, list) else a for a in extra]
    assert getattr(y, name + "_")(*args) is y
    getattr(ty, name + "_")(*targs)
    assert y._version == 1 and y.grad_fn.name() == ty.grad_fn.name()
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-9)
    w = np.random.default_rng(5).standard_normal((3, 2))
    if name == "sgn":  # torch's first backward through sgn_ takes over a second
        (y * js.tensor(w)).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.zeros((3, 2)))
        return
    try:
        (ty * torch.tensor(w)).sum().backward()
    except NotImplementedError as error:  # the inverse hyperbolic ones: torch has no gradient
        with pytest.raises(NotImplementedError, match=str(error).replace(".", r"\.")):
            (y * js.tensor(w)).sum().backward()
        return
    (y * js.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), _numpy(tx.grad), rtol=1e-8, atol=1e-12)


def test_in_place_keeps_the_dtype_as_torch():
    ints = js.tensor(np.array([1, 2, 3], np.int32))
    assert ints.ceil_() is ints and ints.dtype == np.int32
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired"):
        ints.tan_()
    with pytest.raises(RuntimeError, match="the base given to float_power_ has dtype Float but "
                                           "the operation's result requires dtype Double"):
        js.tensor([1.0, 2.0]).float_power_(2)


ERRORS = [  # (call on (module, tensor)), the tensor's dtype
    (lambda m, x: m.frac(x), "int32"), (lambda m, x: m.frac(x), "bool"),
    (lambda m, x: m.ceil(x), "bool"), (lambda m, x: m.trunc(x), "bool"),
    (lambda m, x: m.hypot(x, x), "int32"), (lambda m, x: m.logaddexp(x, x), "int64"),
    (lambda m, x: m.logaddexp2(x, x), "bool"), (lambda m, x: m.nextafter(x, x), "int32"),
    (lambda m, x: m.fmod(x, x), "bool"), (lambda m, x: m.hypot(x, 2.0), "float32"),
    (lambda m, x: m.fmax(1.0, x), "float32"), (lambda m, x: m.heaviside(x, 0.5), "float32"),
    (lambda m, x: m.fmod(2.0, x), "float32"), (lambda m, x: m.copysign(2.0, x), "float32"),
    (lambda m, x: m.heaviside(x, x.double()), "float32"),
    (lambda m, x: m.polygamma(-1, x), "float32"), (lambda m, x: m.polygamma(1.5, x), "float32"),
]


@pytest.mark.parametrize(("call", "dtype"), ERRORS)
def test_errors_are_torchs(call, dtype):
    values = np.array([1, 2], dtype)
    ours, theirs = js.tensor(values), torch.tensor(values)
    with pytest.raises(Exception) as expected:
        call(torch, theirs)
    with pytest.raises(type(expected.value)) as got:
        call(js, ours)
    said = str(expected.value).split("\n")[0].split(", but expected")[0]
    assert said in str(got.value)  # torch's words, then what to do
    assert "e.g." in str(got.value) or "use " in str(got.value)


def test_aliases_are_one_function():
    assert js.arcsin is js.asin and js.arccosh is js.acosh and js.fix is js.trunc
    assert js.absolute is js.abs and js.Tensor.absolute is js.abs
    x = js.tensor([0.25, 0.5])
    np.testing.assert_array_equal(x.arctanh().numpy(), js.atanh(x).numpy())
    np.testing.assert_array_equal(x.polygamma(1).numpy(), js.polygamma(1, x).numpy())
