"""PyTorch's activations in `js.nn.functional` and `js.nn` against torch's: values, first and
second derivatives (through both inputs of each backward node, the gradient and the input) at
random points and at the kinks, node names and graphs, the one-kernel gradients without
create_graph, `inplace=`, integer and bool inputs, errors, and the modules' outputs and reprs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import ops_passed_to
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import jaxstream as js
import jaxstream.nn.functional as F
from jaxstream.ops import activation_rules as A
from jaxstream.ops import twins

pytestmark = pytest.mark.oracle

HYPOTHESIS = settings(max_examples=25, deadline=None, derandomize=True, database=None)
SHAPE = (4, 6)
PLACES = [("numpy", np.float64), ("jax", np.float32)]  # float32 on NumPy: the twins' test

# name -> (the call, given the functional module and an input of SHAPE; the kinks and other
# values to hit exactly)
CASES = {
    "elu": (lambda f, x: f.elu(x), [0.0, -30.0]),
    "elu_alpha": (lambda f, x: f.elu(x, alpha=2.0), [0.0]),
    "selu": (lambda f, x: f.selu(x), [0.0]),
    "celu": (lambda f, x: f.celu(x, 0.5), [0.0]),
    "celu_negative": (lambda f, x: f.celu(x, alpha=-1.5), [0.0]),
    "relu6": (lambda f, x: f.relu6(x), [0.0, 6.0]),
    "hardtanh": (lambda f, x: f.hardtanh(x), [-1.0, 1.0]),
    "hardtanh_bounds": (lambda f, x: f.hardtanh(x, -2.0, 3.0), [-2.0, 3.0]),
    "hardsigmoid": (lambda f, x: f.hardsigmoid(x), [-3.0, 3.0, 0.0]),
    "hardswish": (lambda f, x: f.hardswish(x), [-3.0, 3.0, 0.0]),
    "mish": (lambda f, x: f.mish(x), [0.0, -20.0, 20.0]),
    "softsign": (lambda f, x: f.softsign(x), [0.0, -50.0]),
    "logsigmoid": (lambda f, x: f.logsigmoid(x), [0.0, -30.0, 30.0]),
    "tanhshrink": (lambda f, x: f.tanhshrink(x), [0.0, 1e-3]),
    "softshrink": (lambda f, x: f.softshrink(x), [-0.5, 0.0, 0.5]),
    "softshrink_lambd": (lambda f, x: f.softshrink(x, 1.5), [-1.5, 1.5]),
    "hardshrink": (lambda f, x: f.hardshrink(x), [-0.5, 0.0, 0.5]),
    "hardshrink_lambd": (lambda f, x: f.hardshrink(x, lambd=1.5), [-1.5, 1.5]),
    "threshold": (lambda f, x: f.threshold(x, 0.5, -2.0), [0.5]),
    "threshold_up": (lambda f, x: f.threshold(x, -1.0, 3.0), [-1.0]),
    "glu": (lambda f, x: f.glu(x), [0.0]),
    "glu_dim": (lambda f, x: f.glu(x, 0), [0.0]),
    "softmin": (lambda f, x: f.softmin(x, 1), [0.0]),
    "softmin_dim": (lambda f, x: f.softmin(x, dim=0), [0.0]),
    "prelu": (lambda f, x: f.prelu(x, x.sum(0) * 0.1), [0.0, -1.0]),
    "prelu_one": (lambda f, x: f.prelu(x, (x.sum() * 0.01).reshape(1)), [0.0]),
}
IN_PLACE = ["elu", "elu_alpha", "selu", "celu", "relu6", "hardtanh", "hardtanh_bounds",
            "hardsigmoid", "hardswish", "mish", "threshold", "threshold_up"]
COMPOSITES = {"softsign", "tanhshrink", "softmin", "softmin_dim"}
NOT_TWICE = {"hardsigmoid"}  # Note [Hardsigmoid has no second derivative]
TORCH_SIXTH = 1 / 6 / 0.1666666716337204  # ours over torch's hardsigmoid slope
WHAT = ["value", "gradient", "second derivative in the input", "in the cotangent"]


@pytest.fixture(scope="module")
def TF(torch):
    return torch.nn.functional


def _values(kinks, seed=0):
    values = np.random.default_rng(seed).uniform(-8.0, 8.0, SHAPE)
    values.flat[: len(kinks)] = kinks
    return values


def _derivatives(grad, y, x, w, v, twice=True):
    """`y`, its gradient under the cotangent `w` (recorded) and the gradients of <that, v>
    wrt the input and `w` (zeros where none: piecewise linear functions)."""
    (g,) = grad((y * w).sum(), [x], create_graph=True)
    if not twice:
        return [y, g]
    hx, hw = grad((g * v).sum(), [x, w], allow_unused=True)
    return [y, g, *(h if h is not None else 0 * x for h in (hx, hw))]


def _numpy(t):
    """The values of one of our tensors, a torch tensor or an array."""
    if isinstance(t, np.ndarray):
        return t
    return np.asarray(t.detach().numpy()) if hasattr(t, "detach") else np.asarray(t.numpy())


def _both(torch, TF, name, backend, dtype, twice=True):
    """Ours and torch's `_derivatives` of case `name`, as arrays."""
    call, kinks = CASES[name]
    values = _values(kinks).astype(dtype)
    theirs = [torch.tensor(values, requires_grad=True)]
    ty = call(TF, theirs[0])
    rng = np.random.default_rng(1)
    w, v = rng.standard_normal(ty.shape).astype(dtype), rng.standard_normal(SHAPE).astype(dtype)
    theirs += [torch.tensor(w, requires_grad=True), torch.tensor(v)]
    expected = _derivatives(torch.autograd.grad, ty, *theirs, twice=twice)
    ours = [js.tensor(a, backend=backend, requires_grad=r)
            for a, r in ((values, True), (w, True), (v, False))]
    return _derivatives(js.autograd.grad, call(F, ours[0]), *ours, twice=twice), expected


def _close(got, want, dtype, what=""):
    rtol, atol = (1e-9, 1e-12) if dtype == np.float64 else (2e-5, 2e-6)
    np.testing.assert_allclose(_numpy(got), _numpy(want), rtol=rtol, atol=atol, err_msg=what)


@pytest.mark.parametrize(("backend", "dtype"), PLACES, ids=["numpy64", "jax32"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_two_derivatives_are_torchs(torch, TF, name, backend, dtype):
    """At random points and at the kinks, where each gradient takes torch's side."""
    ours, theirs = _both(torch, TF, name, backend, dtype, twice=name not in NOT_TWICE)
    assert str(ours[0].dtype) == str(theirs[0].dtype).removeprefix("torch.")
    for what, got, want in zip(WHAT[: len(ours)], ours, theirs, strict=True):
        if name == "hardsigmoid" and what == "gradient":
            want = want * TORCH_SIXTH  # torch's slope is float32's 1/6, in float64 too
        _close(got, want, dtype, f"{name}: {what}")


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_hardsigmoid_has_no_second_derivative_as_in_torch(torch, TF, backend):
    """Note [Hardsigmoid has no second derivative] in activation_rules.py."""
    values = _values([-3.0, 3.0]).astype(np.float32)
    for lib, f, x in ((js, F, js.tensor(values, backend=backend, requires_grad=True)),
                      (torch, TF, torch.tensor(values, requires_grad=True))):
        (g,) = lib.autograd.grad(f.hardsigmoid(x).sum(), [x], create_graph=True)
        assert g.grad_fn.name() == "torch::autograd::NotImplemented"
        with pytest.raises(RuntimeError, match="derivative for aten::hardsigmoid_backward"):
            lib.autograd.grad(g.sum(), [x])


def _graph(node, depth):
    """The names of a node and the nodes below it, `depth` levels down, torch's prefix off."""
    if node is None or depth == 0:
        return None
    below = [_graph(n, depth - 1) for n, _ in node.next_functions]
    return (node.name().removeprefix("torch::autograd::"), below)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_graphs_are_torchs(torch, TF, name):
    """The forward's nodes, composites' included, and the gradient's under create_graph (a
    composite's are its ops' own: only its first is checked here)."""
    (y, g), (ty, tg) = _both(torch, TF, name, "numpy", np.float64, twice=False)
    assert _graph(y.grad_fn, 4) == _graph(ty.grad_fn, 4)
    depth = 1 if name in COMPOSITES else 2 if name.startswith("prelu") else 3
    assert _graph(g.grad_fn, depth) == _graph(tg.grad_fn, depth)


# The ops with a one-kernel gradient, and where it comes from without create_graph: the array
# twins on the host, the compiled rules on JAX, the dispatched ops on a simulated accelerator.
TWINNED = ["elu", "selu", "celu", "relu6", "hardtanh", "hardsigmoid", "hardswish", "mish",
           "logsigmoid", "softshrink", "hardshrink", "threshold", "glu", "prelu"]
TWIN_PLACES = [("numpy", None), ("jax", None), ("numpy", "sim:0")]


@pytest.mark.parametrize(("backend", "device"), TWIN_PLACES)
@pytest.mark.parametrize("name", TWINNED)
def test_the_gradient_without_create_graph_is_the_recorded_one(torch, TF, name, backend, device):
    call, kinks = CASES[name]
    values = _values(kinks).astype(np.float32)
    tx = torch.tensor(values, requires_grad=True)
    ty = call(TF, tx)
    w = np.random.default_rng(2).standard_normal(ty.shape).astype(np.float32)
    x = js.tensor(values, backend=backend, device=device, requires_grad=True)
    weights = js.tensor(w, backend=backend, device=device)
    fast = js.autograd.grad((call(F, x) * weights).sum(), [x])[0]
    recorded = js.autograd.grad((call(F, x) * weights).sum(), [x], create_graph=True)[0]
    (want,) = torch.autograd.grad((ty * torch.tensor(w)).sum(), [tx])
    _close(fast, want, np.float32, name)
    np.testing.assert_allclose(fast.numpy(), recorded.numpy(), rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("name", ["elu", "relu6", "hardtanh", "threshold", "softshrink", "mish"])
def test_on_the_host_the_array_twins_run_and_no_rule_dispatches(monkeypatch, name):
    seen = ops_passed_to(monkeypatch, "apply", A, twins)
    x = js.tensor(_values(CASES[name][1]), requires_grad=True)
    CASES[name][0](F, x).sum().backward()
    assert seen == [] and x.grad.shape == SHAPE


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning")
@pytest.mark.parametrize("name", ["elu", "selu", "hardtanh", "hardswish", "mish", "logsigmoid",
                                  "softshrink", "hardshrink", "threshold_up", "prelu"])
def test_nan_and_infinities_are_torchs(torch, TF, name):
    """On torch's vectorized loop, which all 64 elements take (its scalar loop, which takes a
    tensor's last few elements, differs at a NaN for some)."""
    values = np.tile([np.nan, np.inf, -np.inf, 100.0, -100.0, 0.0, 3.0, -3.0], (8, 1))
    call = CASES[name][0]
    x = js.tensor(values.astype(np.float32), requires_grad=True)
    tx = torch.tensor(values.astype(np.float32), requires_grad=True)
    y, ty = call(F, x), call(TF, tx)
    for create_graph in (False, True):
        (g,) = js.autograd.grad(y.sum(), [x], create_graph=create_graph, retain_graph=True)
        (tg,) = torch.autograd.grad(ty.sum(), [tx], retain_graph=True)
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-6, atol=1e-30)
    np.testing.assert_allclose(y.numpy(), _numpy(ty), rtol=1e-6, atol=1e-30)


@settings(HYPOTHESIS)
@given(name=st.sampled_from(sorted(set(CASES) - {"glu", "glu_dim", "softmin", "softmin_dim"})),
       data=st.data())
def test_any_values_near_the_kinks_are_torchs(torch, name, data):
    call, kinks = CASES[name]
    near = st.sampled_from(kinks).flatmap(
        lambda k: st.sampled_from([k, np.nextafter(k, 9.0), np.nextafter(k, -9.0), k + 1e-7]))
    values = data.draw(hnp.arrays(np.float64, SHAPE, elements=near | st.floats(-9.0, 9.0)))
    x = js.tensor(values, requires_grad=True)
    tx = torch.tensor(values, requires_grad=True)
    y, ty = call(F, x), call(torch.nn.functional, tx)
    y.sum().backward()
    ty.sum().backward()
    _close(y, ty, np.float64, name)
    _close(x.grad, tx.grad * (TORCH_SIXTH if name == "hardsigmoid" else 1), np.float64, name)


# ------------------------------------------------------------------ inplace=
@pytest.mark.parametrize("name", IN_PLACE)
def test_inplace_rebinds_the_input_as_torchs(torch, TF, name):
    """The same values, the input itself returned and changed, torch's node (EluBackward1,
    ThresholdBackward1, ...) and torch's gradient through it."""
    call = CASES[name][0]
    values = _values(CASES[name][1])
    results = []
    for lib, f in ((js, F), (torch, TF)):
        leaf = lib.tensor(values, requires_grad=True)
        x = leaf * 1.0
        out = call(_InPlace(f), x)
        assert out is x
        (out * out).sum().backward()
        results.append((x.grad_fn.name(), _numpy(x), _numpy(leaf.grad)))
    (name_ours, *ours), (name_torch, *theirs) = results
    assert name_ours == name_torch
    for got, want in zip(ours, theirs, strict=True):
        _close(got, want * (TORCH_SIXTH if name == "hardsigmoid" and got is ours[1] else 1),
               np.float64, name)


class _InPlace:
    """The functional module, every call with `inplace=True`."""

    def __init__(self, f):
        self.f = f

    def __getattr__(self, name):
        return lambda *args, **kwargs: getattr(self.f, name)(*args, **kwargs, inplace=True)


@pytest.mark.parametrize("name", IN_PLACE)
def test_inplace_on_a_leaf_that_requires_grad_raises_as_torchs(torch, TF, name):
    call = CASES[name][0]
    for lib, f in ((js, F), (torch, TF)):
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            call(_InPlace(f), lib.tensor(_values([0.0]), requires_grad=True))
    plain = js.tensor(_values([0.0]))
    assert call(_InPlace(F), plain) is plain  # a tensor without grad changes in place


@pytest.mark.parametrize("name", ["elu", "celu"])
def test_an_inplace_elu_with_a_negative_alpha_refuses_its_backward_as_torchs(torch, TF, name):
    for lib, f in ((js, F), (torch, TF)):
        leaf = lib.tensor(_values([0.0]), requires_grad=True)
        out = getattr(f, name)(leaf * 1.0, alpha=-0.5, inplace=True)  # the forward runs
        with pytest.raises(RuntimeError, match="In-place elu backward .* negative slope"):
            out.sum().backward()


# ------------------------------------------------------------------ integers, bools, errors
INTEGER_CALLS = {name: call for name, (call, _) in CASES.items()
                 if not name.startswith(("prelu", "glu"))}
INTEGER_CALLS["glu"] = lambda f, x: f.glu(x)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
@pytest.mark.parametrize("name", sorted(INTEGER_CALLS))
def test_integer_and_bool_inputs_are_torchs(torch, TF, name, backend):
    """hardtanh, relu6 and threshold keep the integer dtype, softsign and tanhshrink make it
    floating, the others raise torch's error; bools likewise."""
    call = INTEGER_CALLS[name]
    dtype = np.int64 if backend == "numpy" else np.int32
    for values in (np.arange(-12, 12).reshape(SHAPE).astype(dtype), np.eye(4, 6, dtype=bool)):
        try:
            want = call(TF, torch.tensor(values))
        except (RuntimeError, NotImplementedError) as error:
            with pytest.raises(type(error)):
                call(F, js.tensor(values, backend=backend))
            continue
        got = call(F, js.tensor(values, backend=backend))
        assert str(got.dtype) == str(want.dtype).removeprefix("torch.")
        np.testing.assert_allclose(_numpy(got), _numpy(want), rtol=1e-6)


ERRORS = {
    "glu on an odd dim": lambda f, t: f.glu(t.ones(4, 5)),
    "glu on an odd dim 0": lambda f, t: f.glu(t.ones(5, 6), 0),
    "glu on a scalar": lambda f, t: f.glu(t.ones(())),
    "glu on a dim out of range": lambda f, t: f.glu(t.ones(4, 6), 2),
    "hardtanh, min_val > max_val": lambda f, t: f.hardtanh(t.ones(3), 2.0, 1.0),
    "softshrink, lambd < 0": lambda f, t: f.softshrink(t.ones(3), -0.5),
    "celu, alpha 0": lambda f, t: f.celu(t.ones(3), 0.0),
    "prelu, a weight per channel off": lambda f, t: f.prelu(t.ones(2, 3), t.ones(4)),
    "prelu, a weight of 2 dims": lambda f, t: f.prelu(t.ones(2, 3), t.ones(1, 3)),
    "prelu, weights for a vector": lambda f, t: f.prelu(t.ones(4), t.ones(4)),
    "prelu, two dtypes": lambda f, t: f.prelu(t.ones(2, 3), t.ones(3).double()),
    "prelu, an integer input": lambda f, t: f.prelu(t.ones(2, 3).long(), t.ones(3)),
    "prelu, integers": lambda f, t: f.prelu(t.ones(2, 3).long(), t.ones(3).long()),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_bad_arguments_raise_what_torch_raises(torch, TF, case):
    with pytest.raises(Exception) as theirs:
        ERRORS[case](TF, torch)
    with pytest.raises(type(theirs.value)) as ours:
        ERRORS[case](F, js)
    assert type(ours.value) is type(theirs.value)


@pytest.mark.parametrize(("shape", "dim"), [((), 0), ((5,), 0), ((3, 4), 1), ((2, 3, 4), 0),
                                            ((2, 3, 4, 5), 1)])
def test_softmin_without_dim_warns_and_chooses_as_torch(torch, TF, shape, dim):
    values = np.random.default_rng(0).standard_normal(shape)
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmin"):
        got = F.softmin(js.tensor(values))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _close(got, TF.softmin(torch.tensor(values)), np.float64)
    _close(got, TF.softmin(torch.tensor(values), dim), np.float64)


def test_softmin_casts_to_dtype_after_negating_as_torch(torch, TF):
    values = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    y = F.softmin(js.tensor(values, requires_grad=True), 1, dtype=np.float64)
    ty = TF.softmin(torch.tensor(values, requires_grad=True), 1, dtype=torch.float64)
    assert y.dtype == np.float64 and _graph(y.grad_fn, 4) == _graph(ty.grad_fn, 4)
    _close(y, ty, np.float64)
    with pytest.raises(NotImplementedError):
        F.softmin(js.tensor([[1, 2]]), 1)
    assert F.softmin(js.tensor([[1, 2]]), 1, dtype=np.float32).dtype == np.float32


# ------------------------------------------------------------------ modules
MODULES = [
    ("LeakyReLU", ()), ("LeakyReLU", (0.2, True)), ("Softmax", (1,)), ("Softmax", (-1,)),
    ("LogSoftmax", (0,)), ("Softmin", (2,)), ("Softplus", ()), ("Softplus", (2, 1.5)),
    ("ELU", ()), ("ELU", (0.5, True)), ("SELU", ()), ("SELU", (True,)), ("CELU", (2.0, True)),
    ("ReLU6", ()), ("ReLU6", (True,)), ("Hardtanh", ()), ("Hardtanh", (-2, 2, True)),
    ("Hardsigmoid", (True,)), ("Hardswish", ()), ("Mish", (True,)), ("Softsign", ()),
    ("LogSigmoid", ()), ("Tanhshrink", ()), ("Softshrink", (1,)), ("Hardshrink", ()),
    ("Threshold", (0.1, 20)), ("Threshold", (0.1, 20, True)), ("GLU", ()), ("GLU", (0,)),
    ("PReLU", ()), ("PReLU", (4, 0.1)),
]


@pytest.mark.parametrize(("name", "args"), MODULES, ids=[f"{n}{a}" for n, a in MODULES])
def test_modules_are_torchs(torch, name, args):
    """The same repr and outputs as torch's module built alike; a parameter's gradient too."""
    ours, theirs = getattr(js.nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(ours) == repr(theirs)
    values = np.random.default_rng(0).standard_normal((2, 4, 6)).astype(np.float32)
    x, tx = js.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
    y, ty = ours(x * 1.0), theirs(tx * 1.0)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    _close(y, ty, np.float32, name)
    _close(x.grad, tx.grad, np.float32, name)
    for (key, p), (tkey, tp) in zip(ours.named_parameters(), theirs.named_parameters(),
                                    strict=True):
        assert key == tkey and p.shape == tuple(tp.shape)
        _close(p.grad, tp.grad, np.float32, key)


def test_prelu_is_a_module_with_torchs_parameter(torch):
    layer = js.nn.PReLU(3, init=1, dtype=np.float64)
    assert layer.weight.dtype == np.float64 and isinstance(layer.weight, js.nn.Parameter)
    np.testing.assert_array_equal(layer.weight.numpy(), [1.0, 1.0, 1.0])
    with js.no_grad():
        layer.weight.mul_(0.0)
    layer.reset_parameters()
    np.testing.assert_array_equal(layer.weight.numpy(), [1.0, 1.0, 1.0])
    assert list(layer.state_dict()) == list(torch.nn.PReLU(3).state_dict()) == ["weight"]
    assert js.nn.PReLU(backend="jax").weight.backend == "jax"


def test_hardtanh_modules_check_their_bounds_as_torchs(torch):
    for lib in (js, torch):
        with pytest.raises(AssertionError, match="must be greater than min_val"):
            lib.nn.Hardtanh(1.0, 1.0)
        with pytest.warns(FutureWarning, match="`min_value` is deprecated"):
            assert repr(lib.nn.Hardtanh(min_value=-2.0)) == "Hardtanh(min_val=-2.0, max_val=1.0)"
    assert (js.nn.ReLU6().min_val, js.nn.ReLU6().max_val) == (0.0, 6.0)
    assert isinstance(js.nn.ReLU6(), js.nn.Hardtanh)


def test_softmax_modules_without_dim_warn_at_the_call(torch):
    values = np.ones((2, 3))
    for name in ("Softmax", "LogSoftmax", "Softmin"):
        assert repr(getattr(js.nn, name)()) == f"{name}(dim=None)"
        with pytest.warns(UserWarning, match="Implicit dimension choice") as record:
            y = getattr(js.nn, name)()(js.tensor(values))
        assert record[0].filename == __file__
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _close(y, getattr(torch.nn, name)()(torch.tensor(values)), np.float64)


@pytest.mark.parametrize("name", ["ReLU", "SiLU"])
def test_relu_and_silu_modules_take_inplace_as_torchs(torch, name):
    for inplace in (False, True):
        ours, theirs = getattr(js.nn, name)(inplace=inplace), getattr(torch.nn, name)(inplace)
        assert repr(ours) == repr(theirs)
        x = js.tensor(np.array([-1.0, 2.0], np.float32)) * 1.0
        y = ours(x)
        assert (y is x) == inplace
        expected = theirs(torch.tensor([-1.0, 2.0]))
        np.testing.assert_allclose(_numpy(y), expected.numpy(), rtol=1e-6)
