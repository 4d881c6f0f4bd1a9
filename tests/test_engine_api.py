"""``js.grad`` / ``js.backward`` / ``Tensor.backward`` and the tensor autograd
API, ported from PyTorch's autograd test-suite: their semantics and the errors
they raise.  Where PyTorch is installed, results are compared with
``torch.autograd`` on the same inputs.
"""

import re
import threading
import warnings

import numpy as np
import pytest
from helpers import BACKENDS, WAIT_S, arr, error_text, leaf, tt

import jaxstream as js

# ------------------------------------------------------------- happy paths


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_returns_tuple_and_does_not_touch_dot_grad(backend):
    x = leaf([1.0, 2.0, 3.0], backend=backend)
    y = (x * x).sum()
    result = js.grad(y, x)
    assert isinstance(result, tuple) and len(result) == 1
    np.testing.assert_allclose(arr(result[0]), [2.0, 4.0, 6.0], rtol=1e-6)
    assert x.grad is None
    assert not result[0].requires_grad


def test_grad_with_several_outputs_and_inputs():
    x = leaf([1.0, 2.0])
    w = leaf([3.0, 4.0])
    y1 = (x * w).sum()
    y2 = (x * x).sum()
    gx, gw = js.grad([y1, y2], [x, w])
    np.testing.assert_allclose(arr(gx), [3.0 + 2.0, 4.0 + 4.0])
    np.testing.assert_allclose(arr(gw), [1.0, 2.0])


def test_grad_with_grad_outputs():
    x = leaf([1.0, 2.0])
    y = x * 3.0
    (gx,) = js.grad(y, x, grad_outputs=leaf([10.0, 100.0], requires_grad=False))
    np.testing.assert_allclose(arr(gx), [30.0, 300.0])


def test_grad_wrt_non_leaf():
    x = leaf([1.0, 2.0])
    y = x * 2.0
    z = (y * y).sum()
    (gy,) = js.grad(z, y)
    np.testing.assert_allclose(arr(gy), [4.0, 8.0])
    assert x.grad is None


def test_backward_function_with_grad_tensors():
    x = leaf([1.0, 2.0])
    a = x * 2.0
    b = x * x
    js.backward([a, b], grad_tensors=[leaf([1.0, 1.0], False), leaf([10.0, 10.0], False)])
    np.testing.assert_allclose(arr(x.grad), [2.0 + 20.0, 2.0 + 40.0])


def test_tensor_backward_with_gradient():
    x = leaf([1.0, 2.0])
    (x * 3.0).backward(gradient=leaf([1.0, -1.0], requires_grad=False))
    np.testing.assert_allclose(arr(x.grad), [3.0, -3.0])


@pytest.mark.parametrize("shape", [(), (1,), (1, 1)])
def test_one_element_output_needs_no_grad_outputs(shape):
    x = js.tensor(np.full(shape, 2.0), requires_grad=True)
    (x * x).backward()
    np.testing.assert_allclose(arr(x.grad), np.full(shape, 4.0))
    (gx,) = js.grad(x * 3.0, x)
    np.testing.assert_allclose(arr(gx), np.full(shape, 3.0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_accumulates_across_backward_calls(backend):
    x = leaf([1.0, 2.0], backend=backend)
    (x * x).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_allclose(arr(x.grad), [4.0, 8.0], rtol=1e-6)
    x.grad = None
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(arr(x.grad), [3.0, 3.0])


def test_grad_is_settable_and_backward_accumulates_onto_it():
    x = leaf([1.0, 2.0])
    x.grad = leaf([10.0, 20.0], requires_grad=False)
    np.testing.assert_allclose(arr(x.grad), [10.0, 20.0])
    (x * 2.0).sum().backward()
    np.testing.assert_allclose(arr(x.grad), [12.0, 22.0])
    x.grad = None
    assert x.grad is None


def test_assigning_grad_of_wrong_shape_raises():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="size|shape"):
        x.grad = leaf([1.0, 2.0, 3.0], requires_grad=False)
    assert x.grad is None


def test_leaf_not_requiring_grad_gets_no_grad():
    x = leaf([1.0, 2.0])
    c = leaf([3.0, 4.0], requires_grad=False)
    (x * c).sum().backward()
    assert c.grad is None
    np.testing.assert_allclose(arr(x.grad), [3.0, 4.0])


def test_backward_inputs_accumulates_only_into_those():
    x = leaf([1.0, 2.0])
    w = leaf([3.0, 4.0])
    (x * w).sum().backward(inputs=[x])
    np.testing.assert_allclose(arr(x.grad), [3.0, 4.0])
    assert w.grad is None
    js.backward((x * w).sum(), inputs=[w])
    np.testing.assert_allclose(arr(w.grad), [1.0, 2.0])
    np.testing.assert_allclose(arr(x.grad), [3.0, 4.0])


def test_backward_inputs_with_non_leaf_populates_its_grad():
    x = leaf([1.0, 2.0])
    w = leaf([3.0, 4.0])
    y = x * w
    loss = (y * y).sum()
    loss.backward(inputs=[y, w], retain_graph=True)
    np.testing.assert_allclose(arr(y.grad), [6.0, 16.0])
    np.testing.assert_allclose(arr(w.grad), [2.0 * 3.0 * 1.0, 2.0 * 8.0 * 2.0])
    assert x.grad is None
    loss.backward(inputs=[y])
    np.testing.assert_allclose(arr(y.grad), [12.0, 32.0])


def test_backward_inputs_accepts_a_single_tensor():
    x = leaf([1.0, 2.0])
    w = leaf([3.0, 4.0])
    (x * w).sum().backward(inputs=x)
    np.testing.assert_allclose(arr(x.grad), [3.0, 4.0])
    assert w.grad is None


def test_gradient_is_cast_to_the_dtype_of_the_input():
    x = js.tensor(np.ones(2, dtype=np.float32), requires_grad=True)
    w = js.tensor(np.array([2.0, 3.0]))  # float64: the product promotes
    (x * w).sum().backward()
    assert x.grad.numpy().dtype == np.float32
    assert x.grad.dtype == x.dtype
    np.testing.assert_allclose(arr(x.grad), [2.0, 3.0])
    (gx,) = js.grad((x * w).sum(), x)
    assert gx.numpy().dtype == np.float32


def test_backward_with_empty_inputs_raises():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="empty"):
        (x * 2.0).sum().backward(inputs=[])


@pytest.mark.oracle
def test_backward_inputs_matches_torch(torch):
    def program(mod, make):
        x = make([1.0, 2.0])
        w = make([3.0, -4.0])
        y = x * w
        loss = (y * y * w).sum()
        loss.backward(inputs=[y, w], retain_graph=True)
        loss.backward(inputs=[x])
        return x.grad, w.grad, y.grad

    ours = program(js, leaf)
    ref = program(torch, lambda v: tt(torch, v))
    for a, b in zip(ours, ref, strict=True):
        np.testing.assert_allclose(arr(a), b.numpy(), rtol=1e-12)


# ------------------------------------------------------------------- errors


def test_non_scalar_output_without_grad_outputs_raises():
    x = leaf([1.0, 2.0])
    y = x * 2.0
    with pytest.raises(RuntimeError, match="grad can be implicitly created"):
        y.backward()
    with pytest.raises(RuntimeError, match="grad can be implicitly created"):
        js.grad(y, x)
    assert x.grad is None


def test_output_not_requiring_grad_raises():
    x = leaf([1.0, 2.0])
    c = leaf([1.0, 2.0], requires_grad=False)
    with pytest.raises(RuntimeError, match="does not require grad"):
        (c * 2.0).sum().backward()
    with pytest.raises(RuntimeError, match="does not require grad"):
        js.grad((c * 2.0).sum(), x)


def test_grad_outputs_of_wrong_shape_raise():
    x = leaf([1.0, 2.0, 3.0])
    y = x * 2.0
    wrong = leaf([1.0, 1.0], requires_grad=False)
    with pytest.raises(RuntimeError, match="shape"):
        js.grad(y, x, grad_outputs=wrong)
    with pytest.raises(RuntimeError, match="shape"):
        y.backward(gradient=wrong)
    assert x.grad is None


def test_grad_outputs_count_mismatch_raises():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=r"2.*1|1.*2"):
        js.grad([(x * 2.0).sum(), (x * 3.0).sum()], x,
                grad_outputs=[leaf(1.0, requires_grad=False)])


WRONG_KINDS = [
    pytest.param(np.ones(2), "ndarray", id="numpy-array"),
    pytest.param("ab", "str", id="string"),
    pytest.param(1.0, "float", id="number"),
    pytest.param({0: None}, "dict", id="mapping"),
]


@pytest.mark.parametrize(("wrong", "kind"), WRONG_KINDS)
def test_seed_gradients_of_a_wrong_kind_are_a_type_error_saying_what_is_expected(wrong, kind):
    x = leaf([1.0, 2.0])
    y = x * 2.0
    expected = r"expected a Tensor, None or a sequence of Tensors and Nones.* got (a |an )?"
    for call, name in [
        (lambda: js.grad(y, x, grad_outputs=wrong), "grad_outputs"),
        (lambda: js.autograd.grad(y, x, wrong), "grad_outputs"),
        (lambda: y.backward(gradient=wrong), "gradient"),
        (lambda: js.backward([y], grad_tensors=wrong), "grad_tensors"),
        (lambda: js.autograd.backward(y, wrong), "grad_tensors"),
    ]:
        with pytest.raises(TypeError, match=rf"^{name}: {expected}{kind}"):
            call()
    assert x.grad is None


@pytest.mark.parametrize(("wrong", "kind"), [(np.ones(2), "ndarray"), (1.0, "float"),
                                             ("ab", "str")])
def test_a_seed_gradient_entry_of_a_wrong_kind_names_its_index(wrong, kind):
    x = leaf([1.0, 2.0])
    a, b = x * 2.0, x * 3.0
    with pytest.raises(TypeError, match=rf"grad_outputs\[1\] is a {kind}; expected a Tensor or "
                       r"None.*js\.tensor\("):
        js.grad([a, b], x, grad_outputs=[js.ones(2), wrong])
    with pytest.raises(TypeError, match=rf"gradient\[0\] is a {kind}"):
        a.backward(gradient=[wrong])
    assert x.grad is None


def test_seed_gradients_in_each_accepted_form():
    x = leaf([1.0, 2.0])
    y = x * 2.0
    seed = leaf([1.0, 10.0], requires_grad=False)
    for grad_outputs in (seed, [seed], (seed,)):
        (gx,) = js.grad(y, x, grad_outputs=grad_outputs, retain_graph=True)
        np.testing.assert_allclose(arr(gx), [2.0, 20.0])
    s = (x * 2.0).sum()
    for grad_outputs in (None, [None], (None,)):
        (gx,) = js.grad(s, x, grad_outputs=grad_outputs, retain_graph=True)
        np.testing.assert_allclose(arr(gx), [2.0, 2.0])
    y.backward(gradient=[seed])
    np.testing.assert_allclose(arr(x.grad), [2.0, 20.0])


@pytest.mark.parametrize(("wrong", "kind"), [(np.ones(2), "ndarray"), ("ab", "str"),
                                             (1.0, "float")])
def test_outputs_and_inputs_of_a_wrong_kind_are_a_type_error(wrong, kind):
    x = leaf([1.0, 2.0])
    with pytest.raises(TypeError, match=rf"^outputs: expected a Tensor or a sequence of Tensors, "
                       rf"got (a |an )?{kind}"):
        js.grad(wrong, x)
    with pytest.raises(TypeError, match=rf"^tensors: expected a Tensor or a sequence of Tensors, "
                       rf"got (a |an )?{kind}"):
        js.backward(wrong)
    with pytest.raises(TypeError, match=rf"^inputs: expected a Tensor or a sequence of Tensors, "
                       rf"got (a |an )?{kind}"):
        js.grad((x * 2.0).sum(), wrong)


def test_input_not_requiring_grad_raises():
    x = leaf([1.0, 2.0])
    c = leaf([1.0, 2.0], requires_grad=False)
    with pytest.raises(RuntimeError, match="does not require grad"):
        js.grad((x * c).sum(), c)


def test_grad_with_empty_inputs_raises():
    x = leaf([1.0, 2.0])
    with pytest.raises((RuntimeError, ValueError), match="empty|non-empty"):
        js.grad((x * 2.0).sum(), [])


def test_unused_input_raises_unless_allow_unused():
    x = leaf([1.0, 2.0])
    unused = leaf([5.0, 6.0])
    y = (x * 2.0).sum()
    with pytest.raises(RuntimeError, match="allow_unused"):
        js.grad(y, [x, unused], retain_graph=True)
    gx, gu = js.grad(y, [x, unused], allow_unused=True)
    np.testing.assert_allclose(arr(gx), [2.0, 2.0])
    assert gu is None


@pytest.mark.oracle
def test_error_kinds_match_torch(torch):
    """Every case that raises in PyTorch raises a RuntimeError here too."""
    cases = {
        "non_scalar": lambda m, g, x: m.backward((x * 2.0), inputs=None),
        "no_grad_output": lambda m, g, x: g((x.detach() * 2.0).sum(), x),
        "unused": lambda m, g, x: g((x * 2.0).sum(), [x, x.detach().requires_grad_()]),
    }
    for name, case in cases.items():
        tx = tt(torch, [1.0, 2.0])
        with pytest.raises(RuntimeError):
            case(torch.autograd, torch.autograd.grad, tx)
        x = leaf([1.0, 2.0])
        try:
            case(js, js.grad, x)
        except RuntimeError:
            continue
        pytest.fail(f"case {name!r} did not raise RuntimeError")


# -------------------------------------------------------------- retain_graph


def test_second_backward_after_freeing_saved_tensors_raises():
    x = leaf([1.0, 2.0])
    w = leaf([3.0, 4.0])
    loss = (x * w).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match=re.escape("retain_graph=True")):
        loss.backward()
    np.testing.assert_allclose(arr(x.grad), [3.0, 4.0])


def test_second_grad_after_freeing_saved_tensors_raises():
    x = leaf([1.0, 2.0])
    loss = (x.sin() * x).sum()
    js.grad(loss, x)
    with pytest.raises(RuntimeError, match=re.escape("retain_graph=True")):
        js.grad(loss, x)


def test_retain_graph_allows_second_backward():
    x = leaf([1.0, 2.0])
    w = leaf([3.0, 4.0])
    loss = (x * w).sum()
    loss.backward(retain_graph=True)
    loss.backward(retain_graph=True)
    loss.backward()
    np.testing.assert_allclose(arr(x.grad), [9.0, 12.0])
    with pytest.raises(RuntimeError, match=re.escape("retain_graph=True")):
        loss.backward()


def test_graph_without_saved_tensors_can_be_backpropagated_twice():
    x = leaf([1.0, 2.0])
    loss = (-(x + 1.0)).sum()
    loss.backward()
    loss.backward()
    np.testing.assert_allclose(arr(x.grad), [-2.0, -2.0])


# -------------------------------------------------------------- create_graph


@pytest.mark.parametrize("backend", BACKENDS)
def test_create_graph_double_backward(backend):
    x = leaf([1.0, 2.0], backend=backend)
    (g,) = js.grad((x * x * x).sum(), x, create_graph=True)
    assert g.requires_grad and g.grad_fn is not None
    np.testing.assert_allclose(arr(g), [3.0, 12.0], rtol=1e-6)
    (gg,) = js.grad(g.sum(), x, create_graph=True)
    np.testing.assert_allclose(arr(gg), [6.0, 12.0], rtol=1e-6)
    (ggg,) = js.grad(gg.sum(), x)
    np.testing.assert_allclose(arr(ggg), [6.0, 6.0], rtol=1e-6)


def test_create_graph_retains_graph_by_default():
    x = leaf([1.0, 2.0])
    w = leaf([3.0, 4.0])
    loss = (x * w).sum()
    js.grad(loss, x, create_graph=True)
    (gx,) = js.grad(loss, x)
    np.testing.assert_allclose(arr(gx), [3.0, 4.0])


def test_backward_create_graph_makes_differentiable_grad():
    x = leaf([1.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (x * x * x).sum().backward(create_graph=True)
    assert x.grad.requires_grad
    (gg,) = js.grad(x.grad.sum(), x)
    np.testing.assert_allclose(arr(gg), [6.0, 12.0])


@pytest.mark.oracle
def test_double_backward_matches_torch(torch):
    values = [0.3, -1.2, 2.0]

    def program(mod, make):
        x = make(values)
        y = (x.sin() * x.exp() + x * x * x).sum()
        (g,) = mod.grad(y, x, create_graph=True)
        (gg,) = mod.grad((g * g).sum(), x)
        return g, gg

    ours = program(js, leaf)
    ref = program(torch.autograd, lambda v: tt(torch, v))
    np.testing.assert_allclose(arr(ours[0]), ref[0].detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(arr(ours[1]), ref[1].numpy(), rtol=1e-10)


# ---------------------------------------------------- detach / requires_grad


def test_detach():
    x = leaf([1.0, 2.0])
    y = x * 2.0
    d = y.detach()
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    np.testing.assert_allclose(arr(d), [2.0, 4.0])
    (d * x).sum().backward()
    np.testing.assert_allclose(arr(x.grad), [2.0, 4.0])


def test_requires_grad_flag_on_leaves():
    x = leaf([1.0, 2.0], requires_grad=False)
    assert x.is_leaf and not x.requires_grad
    assert x.requires_grad_() is x
    assert x.requires_grad
    x.requires_grad_(False)
    assert not x.requires_grad
    x.requires_grad = True
    (x * 2.0).sum().backward()
    np.testing.assert_allclose(arr(x.grad), [2.0, 2.0])


def test_requires_grad_cannot_be_cleared_on_non_leaf():
    x = leaf([1.0, 2.0])
    y = x * 2.0
    assert not y.is_leaf and y.requires_grad
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad_(False)
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad = False
    assert y.requires_grad
    y.requires_grad_(True)  # a no-op, as in PyTorch


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
def test_integer_tensor_cannot_require_grad(dtype):
    data = np.array([1, 0], dtype=dtype)
    with pytest.raises(RuntimeError, match="floating point"):
        js.tensor(data, requires_grad=True)
    t = js.tensor(data)
    with pytest.raises(RuntimeError, match="floating point"):
        t.requires_grad_()
    assert not t.requires_grad


def test_results_of_ops_on_no_grad_tensors_do_not_require_grad():
    a = leaf([1.0, 2.0], requires_grad=False)
    y = a * 2.0 + a
    assert not y.requires_grad and y.grad_fn is None and y.is_leaf


def test_numpy_of_tensor_requiring_grad_is_read_only():
    x = leaf([1.0, 2.0])
    view = x.numpy()
    np.testing.assert_allclose(view, [1.0, 2.0])
    with pytest.raises(ValueError):
        view[0] = 5.0


# ------------------------------------------------------------- in-place ops


def test_version_bumps_on_every_inplace_op():
    a = leaf([1.0, 2.0], requires_grad=False)
    b = leaf([5.0, 6.0], requires_grad=False)
    assert a._version == 0
    assert a.add_(1.0) is a
    assert a._version == 1
    a.mul_(2.0)
    assert a._version == 2
    a.zero_()
    assert a._version == 3
    a.copy_(b)
    assert a._version == 4
    np.testing.assert_allclose(arr(a), [5.0, 6.0])
    _ = a * 2.0 + a
    assert a._version == 4
    assert (a * 2.0)._version == 0


def test_inplace_does_not_write_arrays_shared_with_other_libraries():
    data = np.ones(3)
    t = js.tensor(data)
    t.add_(1.0)
    np.testing.assert_allclose(arr(t), [2.0, 2.0, 2.0])
    np.testing.assert_allclose(data, [1.0, 1.0, 1.0])


def test_inplace_on_leaf_requiring_grad_raises_under_grad_mode():
    x = leaf([1.0, 2.0])
    for op in (lambda: x.add_(1.0), lambda: x.mul_(2.0), lambda: x.zero_(),
               lambda: x.copy_(leaf([0.0, 0.0], False))):
        with pytest.raises(RuntimeError, match="leaf"):
            op()
    assert x._version == 0
    np.testing.assert_allclose(arr(x), [1.0, 2.0])
    with js.no_grad():
        x.add_(1.0)
    assert x._version == 1 and x.is_leaf and x.requires_grad
    np.testing.assert_allclose(arr(x), [2.0, 3.0])
    (x * x).sum().backward()
    np.testing.assert_allclose(arr(x.grad), [4.0, 6.0])


def test_inplace_on_saved_tensor_makes_backward_raise():
    x = leaf([1.0, 2.0])
    y = x * 2.0
    z = y.sin()  # SinBackward0 saves y (version 0)
    y.add_(1.0)
    y.add_(1.0)
    y.add_(1.0)
    assert y._version == 3
    with pytest.raises(RuntimeError, match="version") as excinfo:
        z.sum().backward()
    text = error_text(excinfo)
    assert "SinBackward0" in text
    assert re.search(r"\b3\b", str(excinfo.value)) and re.search(r"\b0\b", str(excinfo.value))
    assert x.grad is None
    # the engine stays usable
    (x * 2.0).sin().sum().backward()
    np.testing.assert_allclose(arr(x.grad), 2.0 * np.cos(2.0 * np.array([1.0, 2.0])))


def test_inplace_on_tensor_not_saved_is_fine():
    x = leaf([1.0, 2.0])
    y = x * 2.0
    z = y + 1.0  # AddBackward0 saves nothing
    y.mul_(10.0)
    z.sum().backward()
    np.testing.assert_allclose(arr(x.grad), [2.0, 2.0])


@pytest.mark.oracle
def test_inplace_version_error_matches_torch(torch):
    tx = tt(torch, [1.0, 2.0])
    ty = tx * 2.0
    tz = ty.sin()
    ty.add_(1.0)
    with pytest.raises(RuntimeError, match="version"):
        tz.sum().backward()
    x = leaf([1.0, 2.0])
    y = x * 2.0
    z = y.sin()
    y.add_(1.0)
    assert (x._version, y._version) == (tx._version, ty._version)
    with pytest.raises(RuntimeError, match="version"):
        z.sum().backward()


# ---------------------------------------------------------------- grad mode


def test_no_grad_context():
    x = leaf([1.0, 2.0])
    assert js.is_grad_enabled()
    with js.no_grad():
        assert not js.is_grad_enabled()
        y = x * 2.0
    assert js.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None


def test_enable_grad_inside_no_grad():
    x = leaf([1.0, 2.0])
    with js.no_grad():
        with js.enable_grad():
            assert js.is_grad_enabled()
            y = x * 2.0
        assert not js.is_grad_enabled()
    assert y.requires_grad and y.grad_fn is not None


def test_grad_mode_decorators():
    @js.no_grad()
    def off(t):
        assert not js.is_grad_enabled()
        return t * 2.0

    @js.enable_grad()
    def on(t):
        assert js.is_grad_enabled()
        return t * 2.0

    @js.set_grad_enabled(False)
    def off_again(t):
        return t * 2.0

    x = leaf([1.0, 2.0])
    assert not off(x).requires_grad
    assert js.is_grad_enabled()
    with js.no_grad():
        assert on(x).requires_grad
        assert not js.is_grad_enabled()
    assert not off_again(x).requires_grad
    assert js.is_grad_enabled()


def test_set_grad_enabled_as_function_and_context():
    x = leaf([1.0, 2.0])
    try:
        js.set_grad_enabled(False)
        assert not js.is_grad_enabled()
        assert not (x * 2.0).requires_grad
    finally:
        js.set_grad_enabled(True)
    assert js.is_grad_enabled()
    with js.set_grad_enabled(False):
        assert not js.is_grad_enabled()
        with js.set_grad_enabled(True):
            assert (x * 2.0).requires_grad
        assert not js.is_grad_enabled()
    assert js.is_grad_enabled()


def test_grad_mode_restored_after_exception():
    with pytest.raises(ZeroDivisionError):
        with js.no_grad():
            1 / 0  # noqa: B018
    assert js.is_grad_enabled()


def test_grad_mode_is_thread_local():
    seen = []
    with js.no_grad():
        worker = threading.Thread(target=lambda: seen.append(js.is_grad_enabled()))
        worker.start()
        worker.join(timeout=WAIT_S)
        assert not worker.is_alive()
        assert not js.is_grad_enabled()
    assert seen == [True]


# -------------------------------------------------------------- backends


def test_mixing_backends_in_one_op_raises_with_a_hint():
    jnp = pytest.importorskip("jax.numpy")
    a = js.tensor(np.ones(2, dtype=np.float32), requires_grad=True)
    b = js.tensor(jnp.ones(2, dtype=jnp.float32))
    assert (a.backend, b.backend) == ("numpy", "jax")
    with pytest.raises(RuntimeError) as excinfo:
        a * b
    message = str(excinfo.value).lower()
    assert "numpy" in message and "jax" in message
    assert re.search(r"\.(jax|numpy)\(\)|backend=|\.to\(|from_dlpack", message)
    # converting one side makes the op work
    c = a * js.tensor(np.asarray(b.numpy()))
    assert c.backend == "numpy"


# ----------------------------------------------------- recovery after errors


def _fails_non_scalar(x):
    (x * 2.0).backward()


def _fails_hook(x):
    y = x * 2.0
    y.register_hook(lambda g: 1 / 0)
    y.sum().backward()


def _fails_freed_graph(x):
    loss = (x * x).sum()
    loss.backward()
    loss.backward()


def _fails_unused(x):
    js.grad((x * 2.0).sum(), [x, leaf([1.0, 1.0])])


def _fails_inplace_saved(x):
    y = x * 1.0
    z = y * y
    y.mul_(2.0)
    z.sum().backward()


@pytest.mark.parametrize(
    "failing",
    [_fails_non_scalar, _fails_hook, _fails_freed_graph, _fails_unused, _fails_inplace_saved],
)
def test_next_backward_works_after_any_error(failing):
    x = leaf([1.0, 2.0])
    with pytest.raises((RuntimeError, ZeroDivisionError)):
        failing(x)
    x.grad = None
    w = leaf([3.0, 4.0])
    (x * w).sum().backward()
    np.testing.assert_allclose(arr(x.grad), [3.0, 4.0])
    np.testing.assert_allclose(arr(w.grad), [1.0, 2.0])
    (gx,) = js.grad((x * x).sum(), x)
    np.testing.assert_allclose(arr(gx), [2.0, 4.0])
