"""What a PyTorch user types out of habit: to(), float(), numel(), pickle, deepcopy, .grad
of a non-leaf, and PyTorch's key phrases in error messages."""

from __future__ import annotations

import copy
import pickle
import warnings

import jax.numpy as jnp
import numpy as np
import pytest
from helpers import BACKENDS, arr

import jaxstream as js

NON_LEAF_GRAD = "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed"


def _leaf(backend: str, device: str = "cpu", values=(1.0, -2.0, 3.0)) -> js.Tensor:
    return js.tensor(list(values), backend=backend, device=device, requires_grad=True)


# ------------------------------------------------------------------ casts and moves
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("spec", ["float16", np.float16, np.dtype("float16"), jnp.float16])
def test_to_a_dtype_is_a_differentiable_cast(backend, spec):
    x = _leaf(backend)
    y = x.to(spec)
    assert y.dtype == np.float16 and y.backend == backend
    assert y.grad_fn.name() == "ToCopyBackward0"
    (y * y).sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(arr(x.grad), 2 * arr(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_cast_methods(backend):
    x = _leaf(backend)
    assert x.float() is x
    assert x.half().dtype == np.float16
    assert x.int().dtype == np.int32 and x.bool().dtype == np.bool_
    assert x.int().grad_fn is None and not x.int().requires_grad
    if backend == "numpy":
        assert x.double().dtype == np.float64 and x.long().dtype == np.int64
    else:
        with pytest.raises(TypeError, match="jax_enable_x64"):
            x.double()


@pytest.mark.oracle
def test_a_cast_gradient_matches_torch(torch):
    x = js.tensor([0.5, 1.5], requires_grad=True)
    (x.double() ** 3).sum().backward()
    tx = torch.tensor([0.5, 1.5], requires_grad=True)
    (tx.double() ** 3).sum().backward()
    assert x.grad.dtype == np.float32 and tx.grad.dtype == torch.float32
    np.testing.assert_allclose(arr(x.grad), tx.grad.numpy(), rtol=1e-6)


def test_to_a_device_a_backend_or_both_with_a_dtype():
    x = _leaf("numpy")
    assert x.to("cpu") is x and x.to(dtype="float32") is x
    on_sim = x.to("sim:1")
    assert on_sim.device == js.device("sim:1") and on_sim.dtype == np.float32
    both = x.to("sim:0", "float16")
    assert (both.device, both.dtype) == (js.device("sim:0"), np.float16)
    j = x.to(backend="jax")
    assert j.backend == "jax" and j.grad_fn.name() == "ToCopyBackward0"
    both.astype("float32").sum().backward()
    j.sum().backward()
    assert (x.grad.backend, x.grad.device) == ("numpy", js.device("cpu"))
    np.testing.assert_array_equal(arr(x.grad), np.full(3, 2.0, np.float32))


def test_to_another_tensor_takes_its_device_backend_and_dtype():
    other = js.tensor(np.zeros(2, np.float16), backend="jax", device="sim:1")
    y = _leaf("numpy").to(other)
    assert (y.backend, y.device, y.dtype) == ("jax", js.device("sim:1"), np.float16)


def test_to_float64_numpy_then_jax_casts_before_the_move():
    """A narrowing cast runs before a move to JAX, so it never needs float64 on JAX."""
    x = js.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = x.to(backend="jax", dtype="float32")
    assert (y.backend, y.dtype) == ("jax", np.float32)
    y.sum().backward()
    assert x.grad.dtype == np.float64 and x.grad.backend == "numpy"
    back = y.to(backend="numpy", dtype="float64")
    assert (back.backend, back.dtype) == ("numpy", np.float64)
    with pytest.raises(TypeError, match="jax_enable_x64"):
        x.to(backend="jax")


def test_to_copy_and_bad_arguments():
    x = _leaf("numpy")
    copied = x.to("float32", copy=True)
    assert copied is not x and copied.grad_fn is not None
    with pytest.raises(TypeError, match="at most a device and a dtype"):
        x.to("cpu", "float32", "float16")
    with pytest.raises(TypeError):
        x.to("not-a-dtype")


@pytest.mark.parametrize("backend", BACKENDS)
def test_numel_and_the_builtin_float(backend):
    assert js.zeros(2, 3, 4, backend=backend).numel() == 24
    assert js.zeros(0, 3, backend=backend).numel() == 0
    assert js.tensor(2.5, backend=backend).numel() == 1
    assert float(js.tensor([2.5], backend=backend)) == 2.5
    with pytest.raises(RuntimeError, match="3 elements cannot be converted"):
        float(_leaf(backend))


# ------------------------------------------------------------------ pickle and copies
def _same_tensor(a: js.Tensor, b: js.Tensor) -> None:
    assert (a.dtype, a.shape, a.backend, a.device, a.requires_grad) == (
        b.dtype, b.shape, b.backend, b.device, b.requires_grad)
    np.testing.assert_array_equal(arr(a), arr(b))


def _trained_leaf(backend: str, device: str) -> js.Tensor:
    x = _leaf(backend, device)
    (x * x).sum().backward()
    return x


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("device", ["cpu", "sim:1"])
def test_pickle_keeps_data_and_requires_grad_but_not_grad_nor_graph(backend, device):
    x = _trained_leaf(backend, device)
    back = pickle.loads(pickle.dumps(x))
    _same_tensor(back, x)
    assert back.is_leaf and back.grad is None
    y = x * 2.0
    back_y = pickle.loads(pickle.dumps(y))
    _same_tensor(back_y, y)
    assert back_y.is_leaf and back_y.grad_fn is None
    back_y.sum().backward()
    np.testing.assert_array_equal(arr(back_y.grad), np.ones(3, np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_deepcopy_copies_grad_and_shares_nothing(backend, device):
    x = _trained_leaf(backend, device)
    dup = copy.deepcopy(x)
    _same_tensor(dup, x)
    _same_tensor(dup.grad, x.grad)
    assert dup.grad is not x.grad and dup.array is not x.array
    with js.no_grad():
        dup.mul_(0.0)
    np.testing.assert_array_equal(arr(x), [1.0, -2.0, 3.0])
    assert x._version == 0


def test_deepcopy_of_a_non_leaf_keeps_its_value_as_a_leaf():
    """PyTorch refuses; we keep data and requires_grad and drop the graph."""
    y = _leaf("numpy") * 3.0
    dup = copy.deepcopy(y)
    assert dup.is_leaf and dup.requires_grad and dup.grad_fn is None
    np.testing.assert_array_equal(arr(dup), [3.0, -6.0, 9.0])


def test_deepcopy_keeps_sharing_within_one_copy():
    x = _leaf("numpy")
    pair = copy.deepcopy([x, x])
    assert pair[0] is pair[1] and pair[0] is not x


def test_a_non_grad_tensor_and_a_bfloat16_one_round_trip():
    plain = js.tensor(np.arange(6, dtype=np.int32).reshape(2, 3), backend="jax")
    _same_tensor(pickle.loads(pickle.dumps(plain)), plain)
    half = js.tensor(np.ones(2, np.float32)).astype(jnp.bfloat16)
    _same_tensor(copy.deepcopy(half), half)


def test_copy_copy_is_a_leaf_sharing_the_array():
    x = _trained_leaf("numpy", "cpu")
    shallow = copy.copy(x)
    assert shallow is not x and shallow.array is x.array
    assert shallow.requires_grad and shallow.is_leaf and shallow.grad is None


def test_pickle_keeps_a_subclass_and_its_attributes():
    back = pickle.loads(pickle.dumps(_Tagged.make("w")))
    assert type(back) is _Tagged and back.tag == "w" and back.requires_grad


class _Tagged(js.Tensor):
    """A Tensor subclass with attributes of its own, like a module's parameter."""

    @classmethod
    def make(cls, tag: str) -> _Tagged:
        t = cls.wrap(np.ones(2, np.float32), js.tensor(0.0).array_backend, js.device("cpu"))
        t.requires_grad = True
        t.tag = tag
        return t


# ------------------------------------------------------------------ .grad of a non-leaf
def test_reading_grad_of_a_non_leaf_warns_as_torch():
    y = _leaf("numpy") * 2.0
    with pytest.warns(UserWarning, match=NON_LEAF_GRAD):
        assert y.grad is None


def test_leaves_and_retained_non_leaves_do_not_warn_nor_does_the_engine():
    x = _leaf("numpy")
    y = x * 2.0
    z = y.sin()
    z.retain_grad()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (z * z).sum().backward(retain_graph=True)
        js.grad((z * y).sum(), [x, y], create_graph=True)
        assert x.grad is not None and z.grad is not None


# ------------------------------------------------------------------ PyTorch's key phrases
@pytest.mark.oracle
def test_inplace_modification_error_keeps_torchs_phrase(torch):
    phrase = "modified by an inplace operation"
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    ty = tx * 2.0
    tz = ty.sin()
    ty.add_(1.0)
    with pytest.raises(RuntimeError, match=phrase):
        tz.sum().backward()
    x = _leaf("numpy", values=(1.0, 2.0))
    y = x * 2.0
    z = y.sin()
    y.add_(1.0)
    with pytest.raises(RuntimeError, match=phrase + r".*SinBackward0.*version 1"):
        z.sum().backward()


def test_a_second_backward_keeps_torchs_phrase():
    x = _leaf("numpy")
    y = (x.sin() * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"
                       r" \(through \w+Backward0\).*retain_graph=True"):
        y.backward()


def test_backward_of_a_constant_keeps_torchs_phrase():
    with pytest.raises(RuntimeError,
                       match="does not require grad and does not have a grad_fn"):
        js.tensor([1.0, 2.0]).sum().backward()


def test_a_gradient_of_the_wrong_shape_keeps_torchs_phrase():
    class WrongShape(js.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return js.ones(5)

    x = _leaf("numpy")
    with pytest.raises(RuntimeError, match=r"WrongShapeBackward.*expected shape compatible "
                       r"with \(3,\)"):
        WrongShape.apply(x).sum().backward()
    with pytest.raises(RuntimeError, match=r"expected shape \(3,\) but got \(2,\)"):
        x.grad = js.zeros(2)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_bfloat16_is_floating_for_casts_and_requires_grad(backend):
    """NumPy files bfloat16 under kind "V"; it is still a floating dtype: a cast to it keeps
    the gradient, and a bfloat16 leaf may require grad (as torch.bfloat16)."""
    t = js.tensor([1.0, 2.0], backend=backend, requires_grad=True)
    half = t.astype("bfloat16")
    assert half.requires_grad and half.grad_fn.name() == "ToCopyBackward0"
    half.astype("float32").sum().backward()
    np.testing.assert_allclose(np.asarray(t.grad), [1.0, 1.0])
    assert js.tensor([1.0], backend=backend, dtype="bfloat16", requires_grad=True).requires_grad
    assert not t.astype("int32").requires_grad
