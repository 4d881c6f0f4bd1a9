"""Every op gives the same values and gradients on every backend (CuPy where a GPU is)."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import jaxstream as js
from experiments.harness import cupy_stand_in

BACKENDS = ["numpy", "jax", pytest.param("cupy", marks=pytest.mark.cuda)]

RNG = np.random.default_rng(7)
A = RNG.uniform(0.5, 1.5, (3, 4)).astype(np.float32)
B = RNG.uniform(0.5, 1.5, (4,)).astype(np.float32)
M = RNG.uniform(-1.0, 1.0, (4, 2)).astype(np.float32)

CASES = {
    "add": lambda a, b, m: a + b,
    "sub": lambda a, b, m: a - b,
    "mul": lambda a, b, m: a * b,
    "div": lambda a, b, m: a / b,
    "pow_scalar": lambda a, b, m: a**3.0,
    "pow_tensor": lambda a, b, m: a**b,
    "rpow": lambda a, b, m: 2.0**a,
    "neg": lambda a, b, m: -a,
    "exp": lambda a, b, m: a.exp(),
    "log": lambda a, b, m: a.log(),
    "sin": lambda a, b, m: a.sin(),
    "cos": lambda a, b, m: a.cos(),
    "tanh": lambda a, b, m: a.tanh(),
    "sigmoid": lambda a, b, m: a.sigmoid(),
    "relu": lambda a, b, m: (a - 1.0).relu(),
    "softplus": lambda a, b, m: a.softplus(),
    "sqrt": lambda a, b, m: a.sqrt(),
    "abs": lambda a, b, m: (a - 1.0).abs(),
    "sum_axis": lambda a, b, m: a.sum(axis=1),
    "mean_keepdims": lambda a, b, m: a.mean(axis=0, keepdims=True),
    "max": lambda a, b, m: a.max(axis=1),
    "reshape": lambda a, b, m: a.reshape(4, 3),
    "transpose": lambda a, b, m: a.transpose(0, 1),
    "max_dim": lambda a, b, m: a.max(dim=1).values,
    "std": lambda a, b, m: a.std(1),
    "expand": lambda a, b, m: b.expand(2, -1),
    "repeat": lambda a, b, m: a.repeat(2, 1),
    "swapaxes": lambda a, b, m: a.swapaxes(0, 1),
    "T": lambda a, b, m: a.T,
    "broadcast_to": lambda a, b, m: b.broadcast_to((2, 4)),
    "getitem_basic": lambda a, b, m: a[1:, ::2],
    "getitem_array": lambda a, b, m: a[np.array([0, 2, 0])],
    "matmul": lambda a, b, m: a @ m,
    "matvec": lambda a, b, m: a @ b,
    "linear": lambda a, b, m: js.linear(a, m.T, b[:2]),
    "where": lambda a, b, m: js.where(a > 1.0, a, b),
    "concatenate": lambda a, b, m: js.concatenate([a, b.reshape(1, 4)], axis=0),
    "stack": lambda a, b, m: js.stack([a[0], b], axis=1),
    "clone": lambda a, b, m: a.clone(),
}


def _run(backend: str, case: str):
    a, b, m = (js.tensor(v, backend=backend, requires_grad=True) for v in (A, B, M))
    out = CASES[case](a, b, m)
    seed = np.linspace(0.5, 1.5, out.numel(), dtype=np.float32).reshape(out.shape)
    grads = js.grad(out, (a, b, m), js.tensor(seed, backend=backend), allow_unused=True)
    return out, grads


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_values_and_grads_match_numpy(backend: str, case: str) -> None:
    _check_against_numpy(backend, case)


@pytest.fixture
def stand_in_cupy(monkeypatch):
    """The CuPy stand-in (Note [The CuPy stand-in]), with NumPy's `add.at` as the
    `cupyx.scatter_add` that the backward of indexing calls on the cupy backend."""
    monkeypatch.setitem(sys.modules, "cupyx", types.SimpleNamespace(scatter_add=np.add.at))
    with cupy_stand_in.installed():
        yield


@pytest.mark.parametrize("case", sorted(CASES))
def test_cupy_over_the_stand_in_matches_numpy(stand_in_cupy, case: str) -> None:
    """The cupy cases on any machine: host data given no device becomes a tensor on CuPy's
    current GPU (Note [New tensors with no device] in jaxstream/construction.py)."""
    assert _check_against_numpy("cupy", case).device == "cuda:0"


def _check_against_numpy(backend: str, case: str) -> js.Tensor:
    ref_out, ref_grads = _run("numpy", case)
    out, grads = _run(backend, case)
    assert out.backend == backend
    assert out.dtype == np.float32 and out.shape == ref_out.shape
    np.testing.assert_allclose(out.numpy(), ref_out.numpy(), rtol=1e-5, atol=1e-6)
    for g, ref in zip(grads, ref_grads, strict=True):
        assert (g is None) == (ref is None)
        if g is not None:
            assert g.backend == backend and g.dtype == np.float32
            np.testing.assert_allclose(g.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_copy_wrap_and_read_only_numpy_view(backend: str) -> None:
    _check_read_only_view(backend)


def test_read_only_numpy_view_of_cupy_over_the_stand_in(stand_in_cupy) -> None:
    _check_read_only_view("cupy")


def _check_read_only_view(backend: str) -> None:
    if backend == "numpy":
        arr = np.arange(4.0)
        t = js.tensor(arr)
        assert t.data is arr
        view = t.numpy()
        assert np.shares_memory(view, arr)
    else:
        t = js.tensor(A, backend=backend)
        view = t.numpy()
    with pytest.raises(ValueError):
        view[0] = 1.0


def test_two_backends_in_one_op_is_a_clear_error() -> None:
    a = js.tensor(A, requires_grad=True)
    b = js.tensor(A, backend="jax")
    with pytest.raises(RuntimeError, match=r"jax tensor.*numpy tensor.*to\(backend='numpy'\)"):
        a + b
    c = a.to(backend="jax")
    assert c.backend == "jax" and c.grad_fn.name() == "ToCopyBackward0"
    (c + b).sum().backward()
    assert a.grad.backend == "numpy"
    np.testing.assert_allclose(a.grad.numpy(), np.ones_like(A))


def test_unknown_backend_and_bad_dtype_requiring_grad() -> None:
    with pytest.raises(ValueError, match="unknown backend"):
        js.tensor([1.0], backend="tensorflow")
    with pytest.raises(RuntimeError, match="floating point"):
        js.tensor(np.arange(3), requires_grad=True)


def test_the_cupy_backend_without_cupy_says_what_to_install() -> None:
    import importlib.util

    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed here")
    with pytest.raises(RuntimeError, match=r"jaxstream\[cuda13\]"):
        js.tensor([1.0]).cupy()
    with pytest.raises(RuntimeError, match="CuPy and a CUDA GPU"):
        js.tensor([1.0], backend="cupy")
