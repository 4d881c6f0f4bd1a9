"""Result dtypes: the same on every backend, PyTorch's promotion of integers meeting floats,
weak scalars, bare arrays as constants."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import BACKENDS, arr

import jaxstream as js


def _float_ops():
    """Every op (old and new) on one float32 tensor `x` of shape (2, 3)."""
    index = np.array([[0], [2]])
    return {
        "add": lambda x: x + x, "sub": lambda x: x - 1, "mul": lambda x: x * np.float64(2),
        "div": lambda x: x / 3, "rdiv": lambda x: 2 / (x + 3), "pow": lambda x: x ** 2,
        "rpow": lambda x: 2.0 ** x, "neg": lambda x: -x, "matmul": lambda x: x @ x.T,
        "linear": lambda x: js.linear(x, x, x[0, :2]), "where": lambda x: js.where(x > 0, x, 1.5),
        **{f: getattr(js, f) for f in ("exp", "log", "sin", "cos", "tanh", "sigmoid", "relu",
                                       "softplus", "sqrt", "abs", "square", "log1p", "expm1",
                                       "erf", "gelu", "silu", "leaky_relu", "sum", "mean", "max",
                                       "min", "prod", "var", "std", "vector_norm", "argmax",
                                       "argmin", "flatten", "flip")},
        "maximum": lambda x: js.maximum(x, 0.5), "minimum": lambda x: js.minimum(x, x),
        "clip": lambda x: js.clip(x, -1, 1.5), "floor_divide": lambda x: x // 0.5,
        "remainder": lambda x: x % 0.5, "cumsum": lambda x: js.cumsum(x, 1),
        "reshape": lambda x: x.reshape(3, 2), "transpose": lambda x: x.T,
        "squeeze": lambda x: x[None].squeeze(0), "unsqueeze": lambda x: x.unsqueeze(1),
        "concat": lambda x: js.concat([x, x]), "stack": lambda x: js.stack([x, x]),
        "split": lambda x: js.split(x, 2, dim=1)[0], "getitem": lambda x: x[0],
        "take_along_axis": lambda x: js.take_along_axis(x, index, 1),
        "einsum": lambda x: js.einsum("ij,kj->ik", x, x), "comparison": lambda x: x < 0.5,
    }


@pytest.mark.parametrize("name", sorted(_float_ops()))
def test_result_dtype_is_the_same_on_every_backend(name):
    fn = _float_ops()[name]
    values = np.arange(1, 7, dtype=np.float32).reshape(2, 3) / 4
    dtypes = {b: fn(js.tensor(values, backend=b)).dtype for b in BACKENDS}
    assert dtypes["numpy"] == dtypes["jax"] or {d.kind for d in dtypes.values()} == {"i"}
    if dtypes["numpy"].kind == "f":
        assert dtypes["numpy"] == np.float32


INT_WITH_FLOAT = {
    "add": lambda i: i + 1.5, "radd": lambda i: 1.5 + i, "mul": lambda i: i * np.float64(0.5),
    "sub": lambda i: i - 0.5, "div": lambda i: i / 2, "rdiv": lambda i: 3 / i,
    "div_int": lambda i: i / i, "pow": lambda i: i ** 0.5, "rpow": lambda i: 2.0 ** i,
    "maximum": lambda i: js.maximum(i, 1.5), "clip": lambda i: js.clip(i, 0.5, 2.5),
    "where": lambda i: js.where(i > 1, i, 0.5), "floor_divide": lambda i: i // 1.5,
    "remainder": lambda i: i % 1.5, "float_tensor": lambda i: i * js.tensor(
        np.ones(3, np.float32), backend=i.backend),
    **{f: getattr(js, f) for f in ("exp", "log", "sqrt", "sigmoid", "tanh", "gelu", "silu",
                                   "mean", "var", "std", "vector_norm", "log1p", "softmax",
                                   "log_softmax", "logsumexp")},
    "mse_loss": lambda i: js.mse_loss(i, i),
    "mse_loss_float": lambda i: js.mse_loss(i, i * 0.5),
    "nll_loss": lambda i: js.nll_loss(i, js.tensor(1, backend=i.backend)),
    "cross_entropy": lambda i: js.cross_entropy(i, js.tensor(2, backend=i.backend)),
    "cross_entropy_probs": lambda i: js.cross_entropy(i, js.tensor(
        np.full(3, 1 / 3, np.float32), backend=i.backend)),
}


@pytest.mark.parametrize("name", sorted(INT_WITH_FLOAT))
def test_integer_tensors_meeting_floats_give_the_default_dtype(name):
    for backend in BACKENDS:
        out = INT_WITH_FLOAT[name](js.tensor(np.array([1, 2, 3], dtype=np.int32), backend=backend))
        assert out.dtype == np.float32, (backend, out.dtype)


def test_integer_results_stay_integer():
    for backend in BACKENDS:
        i = js.tensor(np.array([1, 2, 3], dtype=np.int32), backend=backend)
        for out in (i + 1, i * i, i // 2, i % 2, js.maximum(i, 2), i.sum(), js.square(i), -i):
            assert out.dtype.kind == "i", (backend, out.dtype)


def test_default_dtype_decides_what_integers_become():
    js.set_default_dtype("float64")
    try:
        i = js.tensor(np.array([1, 2], dtype=np.int64))
        for out in (i / 2, js.softmax(i), js.cross_entropy(i, js.tensor(1)), js.mse_loss(i, i)):
            assert out.dtype == np.float64
    finally:
        js.set_default_dtype("float32")


@pytest.mark.oracle
@pytest.mark.parametrize("backend", BACKENDS)
def test_casts_to_non_floating_dtypes_record_no_node(torch, backend):
    x = js.tensor(np.array([1.5, -2.0], np.float32), backend=backend, requires_grad=True)
    x_t = torch.tensor([1.5, -2.0], requires_grad=True)
    for dtype, dtype_t in (("int32", torch.int32), ("bool", torch.bool)):
        out, out_t = x.astype(dtype), x_t.to(dtype_t)
        assert (out.requires_grad, out.grad_fn) == (out_t.requires_grad, None)
        np.testing.assert_array_equal(arr(out), out_t.numpy())
    half, half_t = x.astype("float16"), x_t.to(torch.float16)
    assert half.requires_grad and half.grad_fn.name() == half_t.grad_fn.name()
    (g,) = js.grad(half.astype("float32").sum(), x)
    np.testing.assert_array_equal(arr(g), [1.0, 1.0])


def test_scalars_are_weak_in_promotion():
    for backend in BACKENDS:
        x = js.tensor(np.ones(3, np.float32), backend=backend)
        for out in (x * np.float64(2), x + 2.5, np.float64(2) * x, x ** np.int64(2),
                    js.maximum(x, np.float64(0.5))):
            assert out.dtype == np.float32


def test_bare_arrays_are_constants_on_the_tensors_backend():
    x = js.tensor(np.ones(3, np.float32), backend="jax", requires_grad=True)
    for out in (x * np.full(3, 2.0, np.float32), np.full(3, 2.0, np.float32) + x,
                js.maximum(x, np.zeros(3, np.float32)), js.where(np.array([True] * 3), x, 0.0)):
        assert out.backend == "jax" and out.requires_grad
    (g,) = js.grad((x * np.arange(3, dtype=np.float32)).sum(), x)
    assert arr(g).tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_integers_to_negative_integer_powers_raise_on_every_backend(backend: str) -> None:
    """As PyTorch (NumPy raises too, but JAX would compute garbage silently)."""
    t = js.tensor([1, 2, 3], backend=backend)
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
        t**-1
    np.testing.assert_allclose(np.asarray(t.float() ** -1), [1.0, 0.5, 1 / 3], rtol=1e-6)
