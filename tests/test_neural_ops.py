"""The neural-net functions against PyTorch: softmax, log_softmax, logsumexp, the losses,
one_hot and dropout (values, first and second gradients, node names, errors), on both
backends."""

from __future__ import annotations

import warnings

import hypothesis.extra.numpy as hnp
import jax
import numpy as np
import pytest
from helpers import BACKENDS, arr, error_text, leaf, tt
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxstream as js

# (rtol, atol) by backend: float64 on NumPy, float32 on JAX.
TOL = {"numpy": (1e-7, 1e-9), "jax": (2e-4, 2e-5)}
REDUCTIONS = ["mean", "sum", "none"]
# Logits with classes on axis 1 (axis 0 for a single sample), as PyTorch reads them.
LOSS_SHAPES = [(5,), (4, 5), (3, 5, 2), (2, 5, 2, 3)]
# Every shape on NumPy; on JAX, where each new shape compiles every op again, one of them.
LOSS_CASES = [("numpy", shape) for shape in LOSS_SHAPES] + [("jax", (3, 5, 2))]


def _close(ours, theirs, backend, scale=1.0):
    rtol, atol = TOL[backend]
    expected = theirs.detach().numpy() if hasattr(theirs, "detach") else theirs
    np.testing.assert_allclose(arr(ours), expected, rtol=rtol * scale, atol=atol * scale)


def assert_matches_torch(torch, js_fn, torch_fn, arrays, backend, constants=((), ())):
    """js_fn and torch_fn agree on values, first gradients and the gradients of the squared
    first gradients (second order) for inputs `arrays`; `constants` are extra arguments
    (ours, torch's) that get no gradient."""
    ours = [leaf(a, backend=backend) for a in arrays]
    theirs = [tt(torch, a) for a in arrays]
    y, y_t = js_fn(*ours, *constants[0]), torch_fn(*theirs, *constants[1])
    _close(y, y_t, backend)
    weights = np.random.default_rng(1).uniform(0.5, 1.5, tuple(y_t.shape))
    g = js.grad((y * js.tensor(weights, dtype=y.dtype, backend=backend)).sum(), ours,
                create_graph=True)
    g_t = torch.autograd.grad((y_t * torch.tensor(weights)).sum(), theirs, create_graph=True)
    for a, b in zip(g, g_t, strict=True):
        _close(a, b, backend)
    second, second_t = sum((a * a).sum() for a in g), sum((b * b).sum() for b in g_t)
    h_t = torch.autograd.grad(second_t, theirs, allow_unused=True)
    # First gradients constant in the inputs (nll_loss's) have no graph: torch's are zero.
    h = js.grad(second, ours, allow_unused=True) if second.requires_grad else [None] * len(h_t)
    for a, b in zip(h, h_t, strict=True):
        if a is None or b is None:
            assert all(c is None or not arr(c).any() for c in (a, b))
        else:
            _close(a, b, backend, scale=10.0)


def _normals(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _indices(shape, num_classes, backend, seed=0):
    values = np.random.default_rng(seed).integers(0, num_classes, shape)
    return _int_tensor(values, backend)


def _int_tensor(values, backend):
    """Integer class indices: int64 on NumPy, int32 on JAX (x64 off)."""
    dtype = np.int64 if backend == "numpy" else np.int32
    return js.tensor(np.asarray(values, dtype=dtype), backend=backend)


def _target_shape(shape):
    return shape[:1] + shape[2:] if len(shape) > 1 else ()


# ------------------------------------------------------------------ softmax family
# name: (ours(x, axis, keepdims), theirs(torch, x, axis, keepdims)); keepdims is for logsumexp.
SOFTMAX_FAMILY = {
    "softmax": (
        lambda x, axis, keepdims: js.softmax(x, axis),
        lambda torch, x, axis, keepdims: torch.softmax(x, axis),
    ),
    "log_softmax": (
        lambda x, axis, keepdims: js.log_softmax(x, axis),
        lambda torch, x, axis, keepdims: torch.log_softmax(x, axis),
    ),
    "logsumexp": (
        js.logsumexp,
        lambda torch, x, axis, keepdims: torch.logsumexp(x, axis, keepdims),
    ),
}


@st.composite
def _softmax_case(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    return draw(st.sampled_from(sorted(SOFTMAX_FAMILY))), shape, axis, draw(st.booleans())


def _check_softmax_case(torch, backend, case, seed=0):
    name, shape, axis, keepdims = case
    ours, theirs = SOFTMAX_FAMILY[name]
    assert_matches_torch(torch, lambda x: ours(x, axis, keepdims),
                         lambda x: theirs(torch, x, axis, keepdims),
                         [_normals(shape, seed) * 3], backend)


@pytest.mark.oracle
@settings(max_examples=25, deadline=None)
@given(case=_softmax_case(), seed=st.integers(0, 2**16))
def test_softmax_family_matches_torch(torch, case, seed):
    _check_softmax_case(torch, "numpy", case, seed)


@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(SOFTMAX_FAMILY))
@pytest.mark.parametrize("axis", [0, -1])
def test_softmax_family_matches_torch_on_jax(torch, name, axis):
    """A few fixed cases: each new shape costs JAX a compilation of every op."""
    _check_softmax_case(torch, "jax", (name, (3, 4), axis, axis == 0))


@pytest.mark.oracle
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("axis", [None, (0, 2), (-1,)])
def test_logsumexp_over_several_axes(torch, backend, axis):
    torch_axis = tuple(range(3)) if axis is None else axis
    assert_matches_torch(
        torch, lambda x: js.logsumexp(x, axis=axis, keepdims=True),
        lambda x: torch.logsumexp(x, torch_axis, keepdim=True), [_normals((2, 3, 4))], backend,
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_dim_and_keepdim_are_aliases_and_methods_exist(backend):
    x = leaf(_normals((2, 3)), backend=backend)
    np.testing.assert_array_equal(arr(x.softmax(dim=0)), arr(js.softmax(x, axis=0)))
    np.testing.assert_array_equal(arr(x.log_softmax(0)), arr(js.log_softmax(x, dim=0)))
    lse = x.logsumexp(dim=1, keepdim=True)
    assert lse.shape == (2, 1)
    np.testing.assert_array_equal(arr(lse), arr(js.logsumexp(x, axis=1, keepdims=True)))
    assert js.logsumexp(x).shape == ()
    with pytest.raises(TypeError, match="both axis= and its alias dim="):
        js.softmax(x, axis=0, dim=1)


@pytest.mark.parametrize("fn", [js.softmax, js.log_softmax, js.logsumexp])
def test_axis_out_of_range_raises(fn):
    with pytest.raises(IndexError, match=r"Dimension out of range .*\[-2, 1\].* got 2"):
        fn(leaf(_normals((2, 3))), 2)


# ------------------------------------------------------------------ stability
EXTREME = [[1000.0, -1000.0, 0.0, 999.0], [-1000.0, -1000.0, -1000.0, -1000.0]]


@pytest.mark.oracle
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(SOFTMAX_FAMILY))
def test_softmax_family_stable_at_1000(torch, backend, name):
    ours, theirs = SOFTMAX_FAMILY[name]
    x, x_t = leaf(EXTREME, backend=backend), tt(torch, EXTREME)
    y, y_t = ours(x, -1, False), theirs(torch, x_t, -1, False)
    (g,), (g_t,) = js.grad(y.sum() + (y * y).sum(), [x]), torch.autograd.grad(
        y_t.sum() + (y_t * y_t).sum(), [x_t])
    assert np.isfinite(arr(y)).all() and np.isfinite(arr(g)).all()
    _close(y, y_t, backend, scale=10.0)
    _close(g, g_t, backend, scale=10.0)


@pytest.mark.oracle
@pytest.mark.parametrize("backend", BACKENDS)
def test_cross_entropy_stable_at_1000(torch, backend):
    target = [3, 1]
    x, x_t = leaf(EXTREME, backend=backend), tt(torch, EXTREME)
    loss = js.cross_entropy(x, _int_tensor(target, backend))
    loss_t = torch.nn.functional.cross_entropy(x_t, torch.tensor(target))
    (g,), (g_t,) = js.grad(loss, [x]), torch.autograd.grad(loss_t, [x_t])
    assert np.isfinite(arr(loss)) and np.isfinite(arr(g)).all()
    _close(loss, loss_t, backend)
    _close(g, g_t, backend)


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # NumPy's log(0)
def test_logsumexp_keeps_infinite_rows():
    x = js.tensor([[-np.inf, -np.inf], [np.inf, 1.0]])
    np.testing.assert_array_equal(arr(js.logsumexp(x, 1)), [-np.inf, np.inf])


# ------------------------------------------------------------------ losses
@pytest.mark.oracle
@pytest.mark.parametrize("backend, shape", LOSS_CASES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.25])
def test_cross_entropy_with_indices_matches_torch(torch, backend, shape, reduction, smoothing):
    target = _indices(_target_shape(shape), shape[min(1, len(shape) - 1)], backend)
    assert_matches_torch(
        torch,
        lambda x, t: js.cross_entropy(x, t, reduction=reduction, label_smoothing=smoothing),
        lambda x, t: torch.nn.functional.cross_entropy(
            x, t, reduction=reduction, label_smoothing=smoothing),
        [_normals(shape)], backend,
        constants=((target,), (torch.tensor(arr(target), dtype=torch.long),)),
    )


@pytest.mark.oracle
@pytest.mark.parametrize("backend, shape", LOSS_CASES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.25])
def test_cross_entropy_with_probabilities_matches_torch(torch, backend, shape, reduction,
                                                        smoothing):
    probs = np.exp(_normals(shape, seed=1))
    probs /= probs.sum(axis=min(1, len(shape) - 1), keepdims=True)
    assert_matches_torch(
        torch,
        lambda x, p: js.cross_entropy(x, p, reduction=reduction, label_smoothing=smoothing),
        lambda x, p: torch.nn.functional.cross_entropy(
            x, p, reduction=reduction, label_smoothing=smoothing),
        [_normals(shape), probs], backend,
    )


@pytest.mark.oracle
@pytest.mark.parametrize("backend, shape", LOSS_CASES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss_matches_torch(torch, backend, shape, reduction):
    target = _indices(_target_shape(shape), shape[min(1, len(shape) - 1)], backend, seed=2)
    assert_matches_torch(
        torch, lambda x, t: js.nll_loss(x, t, reduction=reduction),
        lambda x, t: torch.nn.functional.nll_loss(x, t, reduction=reduction),
        [_normals(shape)], backend,
        constants=((target,), (torch.tensor(arr(target), dtype=torch.long),)),
    )


@pytest.mark.oracle
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.25])
def test_ignored_targets_count_for_nothing(torch, backend, reduction, smoothing):
    target = [[0, -100], [-100, 1], [4, 4]]
    t, t_t = _int_tensor(target, backend), torch.tensor(target)
    assert_matches_torch(
        torch,
        lambda x: js.cross_entropy(x, t, reduction=reduction, label_smoothing=smoothing),
        lambda x: torch.nn.functional.cross_entropy(
            x, t_t, reduction=reduction, label_smoothing=smoothing),
        [_normals((3, 5, 2))], backend,
    )


@pytest.mark.oracle
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shapes", [((3, 5, 2), (3, 5, 2)), ((3, 4), (4,))])
def test_mse_loss_matches_torch(torch, backend, reduction, shapes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns when the shapes broadcast
        assert_matches_torch(
            torch, lambda a, b: js.mse_loss(a, b, reduction=reduction),
            lambda a, b: torch.nn.functional.mse_loss(a, b, reduction=reduction),
            [_normals(shapes[0]), _normals(shapes[1], seed=1)], backend,
        )


def _torch_loss_node(node):
    """The loss node of a torch result: PyTorch reshapes 3-d and 5-d inputs around its 2-d
    kernel, so that their losses without reduction come out of a view."""
    return node.next_functions[0][0] if node.name() == "ViewBackward0" else node


@pytest.mark.oracle
@pytest.mark.parametrize("shape", LOSS_SHAPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("probabilities", [False, True])
def test_loss_nodes_are_named_as_torch_names_them(torch, shape, reduction, smoothing,
                                                  probabilities):
    x, x_t = leaf(_normals(shape)), tt(torch, _normals(shape))
    if probabilities:
        t = js.softmax(leaf(_normals(shape), requires_grad=False), min(1, len(shape) - 1))
        t_t = torch.tensor(arr(t))
    else:
        t = _indices(_target_shape(shape), shape[min(1, len(shape) - 1)], "numpy")
        t_t = torch.tensor(arr(t))
    loss = js.cross_entropy(x, t, reduction=reduction, label_smoothing=smoothing)
    loss_t = torch.nn.functional.cross_entropy(x_t, t_t, reduction=reduction,
                                               label_smoothing=smoothing)
    assert loss.grad_fn.name() == _torch_loss_node(loss_t.grad_fn).name()
    if not probabilities and not smoothing:
        assert loss.grad_fn.next_functions[0][0].name() == "LogSoftmaxBackward0"


@pytest.mark.oracle
def test_other_nodes_are_named_as_torch_names_them(torch):
    x, x_t = leaf(_normals((3, 4))), tt(torch, _normals((3, 4)))
    cases = [
        (js.softmax(x, 1), torch.softmax(x_t, 1)),
        (js.log_softmax(x, 1), torch.log_softmax(x_t, 1)),
        (js.logsumexp(x, 1), torch.logsumexp(x_t, 1)),
        (js.mse_loss(x, x * 2), torch.nn.functional.mse_loss(x_t, x_t * 2)),
        (js.dropout(x, 0.5), torch.nn.functional.dropout(x_t, 0.5)),
    ]
    for ours, theirs in cases:
        assert ours.grad_fn.name() == theirs.grad_fn.name()


# ------------------------------------------------------------------ loss errors
@pytest.mark.parametrize("backend", BACKENDS)
def test_float_target_of_index_shape_raises(backend):
    x = leaf(_normals((4, 3)), backend=backend)
    with pytest.raises(RuntimeError, match=r"expected scalar type Long") as info:
        js.cross_entropy(x, leaf([0.0, 1.0, 2.0, 1.0], requires_grad=False, backend=backend))
    assert "(4,)" in error_text(info) and "(4, 3)" in error_text(info)
    assert "float" in error_text(info)


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_target_of_logits_shape_raises(backend):
    x = leaf(_normals((4, 3)), backend=backend)
    with pytest.raises(RuntimeError, match=r"Expected floating point type for target") as info:
        js.cross_entropy(x, _int_tensor(np.zeros((4, 3)), backend))
    assert "int" in error_text(info) and "(4, 3)" in error_text(info)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [3, -2])
@pytest.mark.parametrize("loss", [js.cross_entropy, js.nll_loss])
def test_out_of_range_class_index_raises(backend, bad, loss):
    with pytest.raises(IndexError, match=f"Target {bad} is out of bounds"):
        loss(leaf(_normals((2, 3)), backend=backend), _int_tensor([0, bad], backend))


def test_target_of_wrong_shape_raises():
    with pytest.raises(ValueError, match=r"expected target shape \(4,\).*got \(3,\)"):
        js.cross_entropy(leaf(_normals((4, 3))), _int_tensor([0, 1, 2], "numpy"))


@pytest.mark.parametrize("call", [
    lambda x, t: js.cross_entropy(x, t, reduction="avg"),
    lambda x, t: js.nll_loss(x, t, reduction="avg"),
    lambda x, t: js.mse_loss(x, x, reduction="avg"),
])
def test_unknown_reduction_raises(call):
    with pytest.raises(ValueError, match="'avg' is not a valid value for reduction"):
        call(leaf(_normals((2, 3))), _int_tensor([0, 1], "numpy"))


@pytest.mark.parametrize("smoothing", [-0.1, 1.5])
def test_label_smoothing_out_of_range_raises(smoothing):
    with pytest.raises(ValueError, match="label_smoothing must be between 0.0 and 1.0"):
        js.cross_entropy(leaf(_normals((2, 3))), _int_tensor([0, 1], "numpy"),
                         label_smoothing=smoothing)


def test_cross_entropy_runs_under_jax_tracing():
    """The bounds check needs concrete targets; under `jax.grad` it steps aside."""
    target = _int_tensor([0, 2], "jax")
    loss = js.to_jax(lambda x: js.cross_entropy(x, target))
    logits = np.asarray(_normals((2, 3)), dtype=np.float32)
    g = jax.grad(loss)(jax.numpy.asarray(logits))
    x = leaf(logits, backend="jax")
    (g_eager,) = js.grad(js.cross_entropy(x, target), [x])
    np.testing.assert_allclose(np.asarray(g), arr(g_eager), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ one_hot
@pytest.mark.oracle
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("num_classes", [-1, 6])
def test_one_hot_matches_torch(torch, backend, num_classes):
    labels = [[0, 3], [4, 1], [2, 2]]
    ours = js.one_hot(_int_tensor(labels, backend), num_classes)
    theirs = torch.nn.functional.one_hot(torch.tensor(labels), num_classes)
    np.testing.assert_array_equal(arr(ours), theirs.numpy())
    assert np.issubdtype(ours.dtype, np.integer) and not ours.requires_grad
    if backend == "numpy":
        assert ours.dtype == np.int64


@pytest.mark.parametrize("labels, num_classes, message", [
    ([0, 3], 3, "Class values must be smaller than num_classes."),
    ([0, -1], 3, "Class values must be non-negative"),
    ([], -1, "Can not infer total number of classes from empty tensor."),
])
def test_one_hot_rejects_labels_out_of_range(labels, num_classes, message):
    with pytest.raises(RuntimeError, match=message):
        js.one_hot(_int_tensor(labels, "numpy"), num_classes)


def test_one_hot_rejects_float_labels():
    with pytest.raises(RuntimeError, match="index tensor of integer type, got float64"):
        js.one_hot(leaf([0.0, 1.0], requires_grad=False), 2)


# ------------------------------------------------------------------ dropout
@pytest.mark.parametrize("backend", BACKENDS)
def test_dropout_keeps_the_mean_and_scales_survivors(backend):
    p, n = 0.3, 40_000
    y = js.dropout(js.ones(n, backend=backend), p, key=0)
    values = arr(y)
    assert set(np.unique(values)) <= {0.0, np.float32(1 / (1 - p))}
    # Each element has mean 1 and variance p / (1 - p): stay within 5 standard errors.
    assert abs(values.mean() - 1.0) < 5 * np.sqrt(p / (1 - p) / n)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dropout_gradient_is_the_scaled_mask(backend):
    p = 0.4
    x = leaf(_normals((50, 20)) + 3.0, backend=backend)
    y = js.dropout(x, p)
    (g,) = js.grad((y * 2.0).sum(), [x])
    mask = arr(y) != 0
    assert 0 < mask.mean() < 1
    np.testing.assert_allclose(arr(g), 2.0 * mask / (1 - p), rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dropout_draws_reproducibly_from_the_global_generator(backend):
    x = js.ones((64,), backend=backend)
    js.manual_seed(7)
    first, second = arr(js.dropout(x)), arr(js.dropout(x))
    js.manual_seed(7)
    np.testing.assert_array_equal(arr(js.dropout(x)), first)
    assert (first != second).any()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key", [5, jax.random.PRNGKey(5)])
def test_dropout_with_a_key_is_pure(backend, key):
    x = js.ones((64,), backend=backend)
    with_key = arr(js.dropout(x, key=key))
    js.dropout(x)  # the global generator moves on; the keyed draw does not
    np.testing.assert_array_equal(arr(js.dropout(x, key=key)), with_key)
    assert not (with_key == arr(js.dropout(x, key=6))).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_dropout_outside_training_and_at_the_extremes(backend):
    x = leaf(_normals((3, 4)), backend=backend)
    assert js.dropout(x, 0.5, training=False) is x
    assert js.dropout(x, 0.0) is x
    zeros = js.dropout(x, 1.0)
    assert not arr(zeros).any()
    (g,) = js.grad(zeros.sum(), [x])
    assert not arr(g).any()


@pytest.mark.parametrize("p", [-0.1, 1.1])
def test_dropout_rejects_probabilities_outside_0_1(p):
    with pytest.raises(ValueError, match=f"has to be between 0 and 1, but got {p}"):
        js.dropout(leaf([1.0, 2.0]), p)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_mse_loss_against_a_python_number_target(backend: str) -> None:
    """A scalar target has no shape; the mean still divides by the input's element count."""
    x = js.tensor([1.0, 2.0, 4.0], backend=backend, requires_grad=True)
    loss = js.mse_loss(x, 0.5)
    loss.backward()
    np.testing.assert_allclose(loss.item(), (0.25 + 2.25 + 12.25) / 3, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(x.grad), [1 / 3, 1.0, 7 / 3], rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_relu_at_nan_and_signed_zero_matches_torch(torch, backend):
    values = [np.nan, -1.0, -0.0, 0.0, 2.0]
    x, tx = leaf(values, backend=backend), tt(torch, values)
    y, ty = js.relu(x), torch.relu(tx)
    np.testing.assert_array_equal(arr(y), ty.detach().numpy())  # NaN stays NaN
    y.backward(js.ones_like(y) * 3.0)
    ty.backward(torch.full_like(ty, 3.0))
    np.testing.assert_array_equal(arr(x.grad), tx.grad.numpy())  # NaN passes the gradient
    assert y.grad_fn.name() == ty.grad_fn.name() == "ReluBackward0"
    with pytest.raises(RuntimeError, match="only tensors of floating point dtype"):
        js.relu(js.tensor([1, -2])).requires_grad_()  # an integer result has no gradient
