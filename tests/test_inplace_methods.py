"""PyTorch's in-place Tensor methods whose op jaxstream has (jaxstream/ops/inplace_methods.py,
restriding.py, inplace_draws.py) against torch: the tensor returned is the tensor changed,
its version is bumped, its values, node and gradient are torch's (or both refuse the
backward), the leaf rule and the write through a view to its base hold, the in-place view
ops (`t_`, `transpose_`, ...) change the shape, and the draws have torch's nodes, ranges,
distributions and errors."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import error_text

import jaxstream as js

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.oracle

SHAPE = (2, 3)
OTHER = np.random.default_rng(1).uniform(0.2, 0.8, SHAPE)
MAT1, MAT2 = np.random.default_rng(2).uniform(-1, 1, (2, 4)), np.full((4, 3), 0.5)
BATCH1, BATCH2 = MAT1[None], MAT2[None]
# name -> arguments after the tensor ("M": a tensor of OTHER's values) and keywords; the
# values are drawn in (0.1, 0.9), where every function here is defined.
CASES = {
    **{name: ((), {}) for name in [
        "abs", "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "square", "sigmoid", "tanh",
        "relu", "sin", "cos", "erf", "erfinv", "floor", "round", "sign", "tril", "t",
        "squeeze"]},
    "round_decimals": ((), {"decimals": 1}),
    "clamp_min": ((0.4,), {}), "clamp_max": ((0.4,), {}), "clamp_min_tensor": (("M",), {}),
    "cumsum": ((1,), {}), "cumprod": ((1,), {}), "triu": ((1,), {}),
    "lerp": (("M", 0.3), {}), "lerp_tensor": (("M", "M"), {}),
    "addmm": ((MAT1, MAT2), {"beta": 0.5, "alpha": 2.0}),
    "floor_divide": ((0.3,), {}), "remainder": ((0.3,), {}), "atan2": (("M",), {}),
    "arctan2": (("M",), {}), "renorm": ((2, 0, 0.5), {}),
    "transpose": ((0, 1), {}), "swapaxes": ((1, 0), {}), "swapdims": ((0, -1), {}),
    "unsqueeze": ((1,), {}), "fill_diagonal": ((2.5,), {}),
}
# torch records a node of its own where jaxstream records the composed op's.
OWN_NODE = {"clamp_min_tensor": "WhereBackward0", "renorm": "MulBackward0"}


def _method(case):
    return case.removesuffix("_decimals").removesuffix("_tensor") + "_"


def _arguments(case, lib, backend="numpy"):
    args, kwargs = CASES[case]
    if lib is js:
        dtype = np.float32 if backend == "jax" else np.float64
        make = lambda v: js.tensor(v.astype(dtype), backend=backend)  # noqa: E731
    else:
        make = torch.tensor
    return [make(OTHER) if isinstance(a, str) else make(a) if isinstance(a, np.ndarray) else a
            for a in args], kwargs


def _node(t):
    return t.grad_fn.name().split("::")[-1]


def _run(lib, case, values, backend="numpy"):
    """A leaf, its copy changed in place by `case`, the result, and the leaf's gradient (or
    the backward's error)."""
    if lib is js:
        x = js.tensor(values, backend=backend, requires_grad=True)
    else:
        x = torch.tensor(values, requires_grad=True)
    y = x * 1.0
    args, kwargs = _arguments(case, lib, backend)
    result = getattr(y, _method(case))(*args, **kwargs)
    w = np.linspace(-1.0, 1.0, y.numel()).reshape(tuple(y.shape)).astype(values.dtype)
    try:
        (y * (js.tensor(w, backend=backend) if lib is js else torch.tensor(w))).sum().backward()
    except RuntimeError as error:
        return y, result, str(error)
    return y, result, x.grad


def test_every_in_place_method_matches_torch():
    values = np.random.default_rng(0).uniform(0.1, 0.9, SHAPE)
    for case in CASES:
        y, result, grad = _run(js, case, values)
        ty, _, tgrad = _run(torch, case, values)
        assert result is y and y._version == ty._version == 1, case
        assert y.shape == tuple(ty.shape) and y.dtype == np.float64, case
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-12, err_msg=case)
        assert _node(y) == OWN_NODE.get(case, _node(ty)), case
        if isinstance(tgrad, str):
            assert isinstance(grad, str) and tgrad in grad, case
        else:
            np.testing.assert_allclose(grad.numpy(), tgrad.numpy(), rtol=1e-10, atol=1e-12,
                                       err_msg=case)


@pytest.mark.parametrize("case", ["exp", "cumsum", "t", "fill_diagonal", "lerp"])
def test_in_place_methods_on_jax_match_torch(case):
    values = np.random.default_rng(0).uniform(0.1, 0.9, SHAPE).astype(np.float32)
    y, result, grad = _run(js, case, values, "jax")
    ty, _, tgrad = _run(torch, case, values.astype(np.float64))
    assert result is y and y._version == 1 and y.backend == "jax" and _node(y) == _node(ty)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grad.numpy(), tgrad.numpy(), rtol=1e-5, atol=1e-6)


def test_the_leaf_rule_is_torchs():
    """On a leaf that requires grad and on a view of one, as torch (whose fill_diagonal_
    writes through a view of the leaf)."""
    for case in [*CASES, "random", "exponential", "cauchy"]:
        args, kwargs = _arguments(case, js) if case in CASES else ((), {})
        targs, _ = _arguments(case, torch) if case in CASES else ((), {})
        for pick in (lambda t: t, lambda t: t[0:1]):
            leaf = js.tensor(np.full(SHAPE, 0.5), requires_grad=True)
            tleaf = torch.full(SHAPE, 0.5, dtype=torch.float64, requires_grad=True)
            with pytest.raises(RuntimeError) as theirs:
                getattr(pick(tleaf), _method(case))(*targs, **kwargs)
            with pytest.raises(RuntimeError) as ours:
                getattr(pick(leaf), _method(case))(*args, **kwargs)
            assert str(theirs.value) in str(ours.value), case
            assert leaf._version == 0 and leaf.shape == SHAPE
        with js.no_grad():  # where the leaf's update is allowed
            getattr(leaf, _method(case))(*args, **kwargs)
        assert leaf._version == 1 and leaf.grad_fn is None, case


@pytest.mark.parametrize("case", ["erf", "cumsum", "t", "transpose", "squeeze", "unsqueeze",
                                  "fill_diagonal", "addmm"])
def test_in_place_on_a_view_changes_its_base(case):
    """The view's values, its base's, the shared version and the gradient, as torch's; then an
    op in place on the view again (after a shape change, at the view's new place)."""
    base_values = np.random.default_rng(3).uniform(0.1, 0.9, (3, 4))

    def program(lib):
        x = (js.tensor if lib is js else torch.tensor)(base_values, requires_grad=True)
        base = x * 1.0
        view = base[1:3, 0:3]
        args, kwargs = _arguments(case, lib)
        getattr(view, _method(case))(*args, **kwargs)
        view.add_(1.0)
        w = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
        (base * (js.tensor(w) if lib is js else torch.tensor(w))).sum().backward()
        return view, base, x.grad

    (view, base, grad), (tview, tbase, tgrad) = program(js), program(torch)
    assert view.shape == tuple(tview.shape) and base._version == tbase._version == 2
    for ours, theirs in ((view, tview), (base, tbase), (grad, tgrad)):
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12)


@pytest.mark.parametrize("case", ["t", "transpose", "squeeze", "unsqueeze"])
def test_views_of_a_tensor_that_changes_shape_keep_their_elements(case):
    """As a torch view keeps reading the same memory: a row and a detached copy of the
    tensor read the same elements after `t_()`, and see a later write there."""

    def program(lib):
        t = (js.tensor if lib is js else torch.tensor)(np.arange(6.0).reshape(2, 3)) * 1.0
        row, whole = t[1], t.detach()
        getattr(t, _method(case))(*_arguments(case, lib)[0])
        t.mul_(10.0)
        return t, row, whole

    for ours, theirs in zip(program(js), program(torch), strict=True):
        assert ours.shape == tuple(theirs.shape)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_squeeze_and_unsqueeze_record_torchs_overloads():
    for call in (lambda t: t.squeeze_(), lambda t: t.squeeze_(0), lambda t: t.squeeze_((0, 2)),
                 lambda t: t.unsqueeze_(-1)):
        ours = js.tensor(np.ones((1, 2, 1)), requires_grad=True) * 1.0
        theirs = torch.ones(1, 2, 1, dtype=torch.float64, requires_grad=True) * 1.0
        call(ours), call(theirs)
        assert ours.shape == tuple(theirs.shape) and _node(ours) == _node(theirs)
    with pytest.raises(RuntimeError, match="expects a tensor with <= 2 dimensions, but self "
                                           "is 3D"):
        torch.ones(1, 2, 1).t_()
    ours = js.ones(1, 2, 1)
    with pytest.raises(RuntimeError, match="expects a tensor with <= 2 dimensions, but self "
                                           "is 3D"):
        ours.t_()
    assert ours.shape == (1, 2, 1) and ours._version == 0


def test_dtypes_and_refused_backwards_are_torchs():
    ints = js.tensor(np.array([5, -7, 9]))
    assert ints.floor_divide_(2) is ints and ints.numpy().tolist() == [2, -4, 4]
    assert ints.square_().numpy().tolist() == [4, 16, 16] and ints.dtype == np.int64
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        ints.sqrt_()
    assert ints._version == 2
    x = js.tensor([1.5, 2.5], requires_grad=True) * 1.0
    x.floor_divide_(js.tensor([1.0, 2.0], requires_grad=True))
    with pytest.raises(RuntimeError, match="derivative for aten::floor_divide_ is not "
                                           "implemented"):
        x.sum().backward()
    with pytest.raises(RuntimeError, match="in-place result has shape"):
        js.tensor(np.ones(3)).addmm_(js.tensor(MAT1), js.tensor(MAT2))


@pytest.mark.parametrize("shape, wrap", [((5, 3), True), ((5, 3), False), ((7, 3), True),
                                         ((3, 5), True), ((4, 4), False), ((2, 2, 2), False),
                                         ((3, 0), False)])
def test_fill_diagonal_matches_torch(shape, wrap):
    ours, theirs = js.zeros(*shape, dtype="int64"), torch.zeros(*shape, dtype=torch.long)
    assert ours.fill_diagonal_(7, wrap) is ours
    np.testing.assert_array_equal(ours.numpy(), theirs.fill_diagonal_(7, wrap).numpy())


@pytest.mark.parametrize("shape, phrase", [((3,), "dimensions must larger than 1"),
                                           ((2, 3, 2), "all dimensions of input must be of "
                                                       "equal length")])
def test_fill_diagonal_refuses_torchs_shapes(shape, phrase):
    with pytest.raises(RuntimeError, match=phrase) as excinfo:
        js.zeros(*shape).fill_diagonal_(1.0)
    assert str(shape) in error_text(excinfo)
    with pytest.raises(RuntimeError, match=phrase):
        torch.zeros(*shape).fill_diagonal_(1.0)


DRAWS = {  # name -> (arguments, the distribution's median, torch's node)
    "exponential_": ((2.0,), np.log(2) / 2, "ExponentialBackward0"),
    "geometric_": ((0.3,), 2.0, "GeometricBackward0"),
    "log_normal_": ((1.0, 0.5), np.e, "LogNormalBackward0"),
    "cauchy_": ((1.0, 2.0), 1.0, "CauchyBackward0"),
    "random_": ((3, 9), 5.5, "RandomBackward0"),
}


@pytest.mark.parametrize("backend, names", [("numpy", sorted(DRAWS)),
                                            ("jax", ["exponential_", "random_"])])
def test_draws_have_torchs_nodes_and_distributions(backend, names):
    for name in names:
        args, median, node = DRAWS[name]
        x = js.zeros(4000, backend=backend, requires_grad=True) * 1.0
        tx = torch.zeros(2, requires_grad=True) * 1.0
        assert getattr(x, name)(*args, key=5) is x and x._version == 1
        getattr(tx, name)(*args)
        assert x.grad_fn.name() == tx.grad_fn.name() == node
        drawn = x.detach().numpy()
        assert abs(np.median(drawn) - median) < 0.15 * max(median, 1.0), name
        again = js.zeros(4000, backend=backend)
        np.testing.assert_array_equal(getattr(again, name)(*args, key=5).numpy(), drawn)
        x.sum().backward()  # zero gradients, as torch's
    assert set(np.unique(drawn)) == set(range(3, 9))  # random_'s, the last


def test_random_takes_torchs_overloads_and_ranges():
    for args, node in (((), 2), ((4,), 1), ((-2, 3), 0), ((5, None), 0)):
        for dtype, top in (("float32", 2**24), ("float64", 2**53), ("int8", 127),
                           ("bool", 1)):
            if dtype == "bool" and args:
                continue
            t = js.zeros(3000, dtype=dtype)
            if dtype.startswith("float"):
                t = t.requires_grad_() * 1.0
            t.random_(*args, key=1)
            low, high = (0, top) if not args else (0, args[0] - 1) if len(args) == 1 else (
                args[0], top if args[1] is None else args[1] - 1)
            values = t.numpy().astype(np.float64)
            assert values.min() >= low and values.max() <= high and t.dtype == dtype
            assert np.all(values == np.round(values))
            if t.requires_grad:
                assert t.grad_fn.name() == f"RandomBackward{node}"
    assert js.zeros(3).random_(to=2).numpy().max() <= 1


ERRORS = [  # (call on a tensor of `dtype`, dtype): torch's error is ours
    (lambda t: t.random_(5, 3), "float64"),
    (lambda t: t.random_(0), "float64"),
    (lambda t: t.random_(-1, 3), "uint8"),
    (lambda t: t.random_(0, 1000), "int8"),
    (lambda t: t.random_(0, 3), "bool"),
    (lambda t: t.exponential_(-1.0), "float64"),
    (lambda t: t.exponential_(), "int64"),
    (lambda t: t.geometric_(1.0), "float64"),
    (lambda t: t.geometric_(0.0), "float64"),
    (lambda t: t.log_normal_(0.0, -1.0), "float64"),
    (lambda t: t.log_normal_(), "int64"),
    (lambda t: t.cauchy_(0.0, 0.0), "float64"),
    (lambda t: t.cauchy_(), "int64"),
]


def test_draws_refuse_as_torch():
    for call, dtype in ERRORS:
        with pytest.raises((RuntimeError, NotImplementedError)) as theirs:
            call(torch.zeros(3, dtype=getattr(torch, dtype)))
        with pytest.raises(theirs.type) as ours:
            call(js.zeros(3, dtype=dtype))
        assert str(theirs.value) in str(ours.value)


def test_geometric_fills_an_integer_tensor_and_the_draw_is_the_key():
    t = js.zeros(500, dtype="int64")
    assert t.geometric_(0.5, key=js.tensor(3)).dtype == np.int64 and t.numpy().min() >= 1
    u = js.zeros(500, dtype="int64").geometric_(0.5, key=4)
    assert not np.array_equal(t.numpy(), u.numpy())
