"""In-place operators and views, as PyTorch's: the leaf rule, values shared between a base
and its views, one version counter, gradients through views modified in place (vs torch).

Each program below is written once and run on jaxstream tensors (both backends) and on
torch tensors: `make(values)` gives a leaf that requires grad, `const(values)` one that
does not.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from helpers import BACKENDS, arr, error_text, leaf, tt
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxstream as js

LEAF_PHRASE = "a leaf Variable that requires grad is being used in an in-place operation."
VIEW_PHRASE = "a view of a leaf Variable that requires grad is being used in an in-place operation."
MODIFIED = r"modified by an in-?place operation"

A = np.arange(1.0, 13.0).reshape(4, 3)
W = np.linspace(-1.0, 2.0, 12).reshape(4, 3)


def tol(backend):
    return {"rtol": 1e-5, "atol": 1e-5} if backend == "jax" else {"rtol": 1e-12, "atol": 1e-12}


def ours(backend):
    return (lambda v: leaf(v, backend=backend),
            lambda v: leaf(v, requires_grad=False, backend=backend))


def theirs(torch):
    return lambda v: tt(torch, v), lambda v: tt(torch, v, requires_grad=False)


def node_name(t):
    """The name of `t.grad_fn`, without torch's C++ namespace."""
    return t.grad_fn.name().split("::")[-1]


def values(t):
    return t.detach().numpy() if hasattr(t, "grad_fn") and not isinstance(t, js.Tensor) else arr(t)


def compare(torch, backend, program):
    """Run `program(make, const) -> tensors` both ways and compare every tensor returned."""
    mine, ref = program(*ours(backend)), program(*theirs(torch))
    assert len(mine) == len(ref)
    for i, (m, r) in enumerate(zip(mine, ref, strict=True)):
        assert (m is None) == (r is None), f"result {i}"
        if m is not None:
            np.testing.assert_allclose(arr(m), values(r), **tol(backend), err_msg=f"result {i}")


# ---------------------------------------------------------------- programs vs torch
def _slice_mul(make, const):
    a, w = make(A), make(W)
    b = a * 1.0
    v = b[1:3]
    v.mul_(2.0)
    (b * w).sum().backward()
    return b, a.grad, w.grad


def _reshape_iadd(make, const):
    a, w = make(A), make(W.reshape(2, 6))
    b = a * 1.0
    v = b.reshape((2, 6))
    v += w * w
    (b * b).sum().backward()
    return b, v, a.grad, w.grad


def _transpose_imul(make, const):
    a, w = make(A), make(W)
    b = a * 2.0
    v = b.T
    v *= v.sum(0) * 0.1
    (b * w).sum().backward()
    return b, a.grad, w.grad


def _swapaxes_sub_div(make, const):
    a, w = make(A), make(W)
    b = a * 1.5 + 0.5
    v = b.swapaxes(0, 1)
    v -= 1.0
    v /= w.T + 3.0
    (b * b).sum().backward()
    return b, a.grad, w.grad


def _setitem_slice(make, const):
    a, w = make(A), make(W)
    b = a * 1.0
    b[0:2] = w[1:3] * 3.0
    b[3, 1:] = 7.0
    b[..., 0] = const([1.0, 2.0, 3.0, 4.0])
    (b * b).sum().backward()
    return b, a.grad, w.grad


def _setitem_integer_array(make, const):
    a, w = make(A), make(W)
    b = a * 1.0
    b[[0, 2]] = w[:2] * 2.0
    b[[1, 3], [2, 0]] = 5.0
    (b * w).sum().backward()
    return b, a.grad, w.grad


def _view_of_view(make, const):
    a, w = make(A), make(W)
    b = a * 1.0
    v = b[1:]
    u = v[:, 0]
    u.mul_(5.0)
    other = b[:2].reshape((6,))
    (b * w).sum().backward(retain_graph=True)
    grads = [a.grad * 1.0, w.grad * 1.0]
    (v * v).sum().backward(retain_graph=True)
    (other * other).sum().backward()
    return b, v, u, other, *grads, a.grad


def _base_changed_views_follow(make, const):
    a, w = make(A), make(W[:2])
    b = a * 1.0
    v = b[0:2]
    b.mul_(3.0)
    b[3] = 0.0
    (v * w).sum().backward()
    return v, a.grad, w.grad


def _setitem_into_constant(make, const):
    a = make(A)
    z = const(np.zeros((4, 3)))
    z[1:] = a[:3] * 2.0
    z[0] = a[3].exp()
    (z * z).sum().backward()
    return z, a.grad


def _retained_view(make, const):
    a, w = make(A), make(W)
    b = a * 1.0
    v = b[1:3]
    v.retain_grad()
    b.retain_grad()
    v.add_(w[1:3])
    (b * b).sum().backward()
    return v.grad, b.grad, a.grad, w.grad


def _fill_and_zero(make, const):
    a, w = make(A), make(W)
    b = a * w
    b[0].fill_(2.0)
    b[1].zero_()
    b.T[2].copy_(w[:, 0] * 4.0)
    b.sum().backward()
    return b, a.grad, w.grad


def _shape_views(make, const):
    a, w = make(A), make(W)
    b = a * 1.0
    b.view(3, 4).unsqueeze(0)[0, 1].mul_(2.0)
    b.unsqueeze(1).squeeze(1).permute(1, 0)[0] += w[:, 0]
    b.flatten()[::5].fill_(0.5)
    (b * w).sum().backward()
    return b, a.grad, w.grad


PROGRAMS = [
    _slice_mul, _reshape_iadd, _transpose_imul, _swapaxes_sub_div, _setitem_slice,
    _setitem_integer_array, _view_of_view, _base_changed_views_follow,
    _setitem_into_constant, _retained_view, _fill_and_zero, _shape_views,
]


@pytest.mark.oracle
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__.strip("_"))
def test_gradients_through_views_modified_in_place_match_torch(torch, backend, program):
    compare(torch, backend, program)


@pytest.mark.oracle
@pytest.mark.parametrize(
    ("program", "base_node"),
    [(_slice_mul, "CopySlices"), (_setitem_slice, "CopySlices"),
     (_setitem_integer_array, "IndexPutBackward0"), (_setitem_into_constant, "CopySlices")],
)
def test_base_node_names_match_torch(torch, program, base_node):
    names = []

    def record(make, const):
        result = program(make, const)
        names.append(node_name(result[0]))
        return result

    record(*ours("numpy"))
    record(*theirs(torch))
    assert names == [base_node, base_node]


@pytest.mark.oracle
@pytest.mark.parametrize(
    ("op", "node"),
    [(lambda t: t.add_(2.0), "AddBackward0"), (lambda t: t.sub_(2.0), "SubBackward0"),
     (lambda t: t.mul_(2.0), "MulBackward0"), (lambda t: t.div_(2.0), "DivBackward0"),
     (lambda t: t.fill_(2.0), "FillBackward2")],
)
def test_inplace_node_names_match_torch(torch, op, node):
    for make in (ours("numpy")[0], theirs(torch)[0]):
        t = make(A) * 1.0
        assert op(t) is t
        assert node_name(t) == node


# ---------------------------------------------------------------- random views vs torch
def _slices(size):
    start = st.integers(0, size)
    return st.one_of(
        st.integers(-size, size - 1),
        st.builds(slice, start, st.integers(0, size), st.integers(1, 3)),
        st.builds(slice, st.none(), st.none()),
    )


@pytest.mark.oracle
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    first=st.tuples(_slices(4), _slices(3)),
    second=st.one_of(st.just(Ellipsis), _slices(2)),
    backend=st.sampled_from(BACKENDS),
)
def test_random_views_modified_in_place_match_torch(torch, first, second, backend):
    def program(make, const):
        a, w = make(A), make(W)
        b = a * 1.0
        v = b[first]
        other = b[1:, ::2]
        if v.ndim and v.shape[0] >= 2:
            v = v[second]  # a view of a view
        v.mul_(3.0)
        v.add_(2.0)
        (b * w).sum().backward(retain_graph=True)
        grads = [a.grad * 1.0, w.grad]
        (other * other).sum().backward()
        return b, v, other, *grads, a.grad

    compare(torch, backend, program)


# ---------------------------------------------------------------- the leaf rule
INPLACE_OPS = {
    "add_": lambda t: t.add_(1.0),
    "sub_": lambda t: t.sub_(1.0),
    "mul_": lambda t: t.mul_(2.0),
    "div_": lambda t: t.div_(2.0),
    "zero_": lambda t: t.zero_(),
    "fill_": lambda t: t.fill_(3.0),
    "copy_": lambda t: t.copy_(np.ones(t.shape)),
    "+=": lambda t: t.__iadd__(1.0),
    "-=": lambda t: t.__isub__(1.0),
    "*=": lambda t: t.__imul__(2.0),
    "/=": lambda t: t.__itruediv__(2.0),
    "setitem": lambda t: t.__setitem__(0, 5.0),
    "setitem array": lambda t: t.__setitem__([0, 1], 5.0),
}


@pytest.mark.parametrize("op", INPLACE_OPS.values(), ids=INPLACE_OPS.keys())
def test_inplace_on_leaf_that_requires_grad(op):
    x = leaf(A[0])
    with pytest.raises(RuntimeError) as excinfo:
        op(x)
    assert LEAF_PHRASE in str(excinfo.value)
    assert x._version == 0 and x.is_leaf
    np.testing.assert_array_equal(arr(x), A[0])
    with pytest.raises(RuntimeError) as excinfo:
        op(x[0:2])
    assert VIEW_PHRASE in str(excinfo.value) and "base of shape (3,)" in str(excinfo.value)
    with js.no_grad():
        op(x)
    assert x._version == 1 and x.is_leaf and x.requires_grad and x.grad_fn is None
    assert not np.array_equal(arr(x), A[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_grad_update_trains_as_torch(torch, backend):
    """`with no_grad(): p -= lr * p.grad` and `p.grad.zero_()`, three steps, vs torch."""
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((8, 3)), rng.standard_normal(8)

    def train(make, const):
        p, inputs, targets = make(np.zeros(3)), const(x), const(y)
        losses = []
        for _ in range(3):
            loss = ((inputs @ p - targets) ** 2).mean()
            loss.backward()
            with (js.no_grad() if isinstance(p, js.Tensor) else torch.no_grad()):
                p -= 0.1 * p.grad
                p[0] = p[0] * 0.5
            p.grad.zero_()
            losses.append(loss.detach() * 1.0)
        return p, p.grad, *losses

    compare(torch, backend, train)
    p, _, *losses = train(*ours(backend))
    assert p.is_leaf and p.requires_grad
    assert float(arr(losses[2])) < float(arr(losses[0]))


# ---------------------------------------------------------------- shared values and versions
@pytest.mark.parametrize("backend", BACKENDS)
def test_inplace_on_view_changes_base_and_every_view(backend):
    b = leaf(A, requires_grad=False, backend=backend)
    row, col, flat, t, d = b[1], b[:, 2], b.reshape((12,)), b.T, b.detach()
    copied = b[[0, 1]]
    row.mul_(10.0)
    expected = A.copy()
    expected[1] *= 10.0
    for view, value in [(b, expected), (row, expected[1]), (col, expected[:, 2]),
                        (flat, expected.reshape(12)), (t, expected.T), (d, expected)]:
        np.testing.assert_allclose(arr(view), value)
        assert view._version == 1
    np.testing.assert_allclose(arr(copied), A[[0, 1]])  # integer-array indexing copies
    assert copied._version == 0
    d[0, 0] = -1.0
    assert arr(b)[0, 0] == -1.0 and arr(t)[0, 0] == -1.0 and b._version == 2
    assert row._base is b and t._base is b and d._base is None and b._base is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_arrays_from_outside_are_never_written(backend):
    data = leaf(A, requires_grad=False, backend=backend).array
    before = np.array(data)
    t = js.tensor(data)
    t[1:3, 0] = 0.0
    t.reshape((3, 4)).add_(1.0)
    t.T[0].fill_(9.0)
    t[[0, 0], [1, 2]] = 4.0
    np.testing.assert_array_equal(np.asarray(data), before)
    expected = before.copy()
    expected[1:3, 0] = 0.0
    expected += 1.0
    expected[:, 0] = 9.0
    expected[0, 1:] = 4.0
    np.testing.assert_allclose(arr(t), expected)


def test_setitem_values_broadcast_and_convert():
    t = leaf(np.zeros((2, 3)), requires_grad=False)
    t[:] = np.array([1, 2, 3])
    t[1] = 7
    t[:, [0]] = js.tensor(np.array([[5.0], [6.0]], dtype=np.float32))
    np.testing.assert_array_equal(arr(t), [[5.0, 2.0, 3.0], [6.0, 7.0, 7.0]])
    assert t.dtype == np.float64
    for index in (0, [0, 1]):
        with pytest.raises(RuntimeError, match="expanded size") as excinfo:
            t[index] = np.ones(4)
        assert "(4,)" in str(excinfo.value)
    assert t._version == 3


def test_view_modified_in_place_after_save_fails_backward(torch):
    for make in (leaf, lambda v: tt(torch, v)):
        a = make(A)
        b = a * 1.0
        y = b.sin()  # saves b
        b[1:3].mul_(2.0)
        with pytest.raises(RuntimeError, match=MODIFIED):
            y.sum().backward()


def test_detach_zero_changes_values_and_fails_backward_that_saved_them():
    x = leaf(A)
    y = x * 2.0
    z = (y * y).sum()  # saves y
    y.detach().zero_()
    np.testing.assert_array_equal(arr(y), np.zeros_like(A))
    assert y._version == 1 and y.grad_fn.name() == "MulBackward0"
    with pytest.raises(RuntimeError, match=MODIFIED) as excinfo:
        z.backward()
    assert "MulBackward0" in error_text(excinfo)
    x.detach()[0] = 0.0  # allowed on a leaf that requires grad: no history is recorded
    assert x.is_leaf and x._version == 1 and arr(x)[0, 0] == 0.0


@pytest.mark.parametrize("op", [js.exp, js.tanh, js.sqrt], ids=lambda op: op.__name__)
def test_an_op_that_saves_its_output_makes_no_view_of_it(op):
    x = leaf(A + 2.0)
    y = op(x)
    assert y._views is None
    (dy,) = js.grad(y.sum(), x, create_graph=True)
    (grad_twice,) = js.grad(dy.sum(), x, retain_graph=True)
    assert np.all(np.isfinite(arr(grad_twice)))
    y.add_(1.0)  # the saved output changed: its backward must refuse
    with pytest.raises(RuntimeError, match=MODIFIED) as excinfo:
        y.sum().backward()
    assert "output 0" in error_text(excinfo)


def test_other_view_regenerates_history_from_new_base():
    a = leaf(A)
    b = a * 1.0
    v, u = b[0:2], b[1:3]
    old = u.grad_fn
    v.mul_(2.0)
    assert b.grad_fn.name() == "CopySlices"
    assert u.grad_fn is not old
    assert any(fn is b.grad_fn for fn, _ in u.grad_fn.next_functions)


# ---------------------------------------------------------------- what holds what
def test_a_detached_tensor_keeps_no_graph_alive_and_views_keep_their_base():
    x = leaf(A)
    y = x * 2.0
    node = weakref.ref(y.grad_fn)
    detached = y.detach()
    view = y[0]
    base = weakref.ref(y)
    del y
    assert base() is not None  # the view holds its base
    del view
    assert base() is None and node() is None  # the detached tensor holds neither
    detached.add_(1.0)  # its base is gone: it is a tensor of its own now
    np.testing.assert_allclose(arr(detached), 2.0 * A + 1.0)


def test_a_base_holds_its_views_weakly():
    b = leaf(A, requires_grad=False)
    view = weakref.ref(b[0])
    gc.collect()
    assert view() is None
    b.add_(1.0)
    assert len(b._views) == 0
