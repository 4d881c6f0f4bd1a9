"""Differential checks of jaxstream ops against torch: values, first and second gradients.

A library for the ``test_ops_*`` modules, not a test file.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import arr, error_text

import jaxstream as js


def tensor_of(values, backend, requires_grad=True):
    """float64 on the NumPy backend, float32 on the JAX one (x64 is off)."""
    dtype = np.float64 if backend == "numpy" else np.float32
    return js.tensor(np.asarray(values, dtype=dtype), backend=backend, requires_grad=requires_grad)


def close(actual, expected, backend, what):
    rtol, atol = (1e-9, 1e-11) if backend == "numpy" else (2e-3, 2e-4)
    actual = arr(actual) if isinstance(actual, js.Tensor) else actual
    np.testing.assert_allclose(actual, np.asarray(expected), rtol=rtol, atol=atol, err_msg=what)


def _torch_grads(torch, outputs, inputs, cotangent, create_graph):
    loss = (outputs * cotangent).sum()
    return torch.autograd.grad(loss, inputs, create_graph=create_graph, allow_unused=True)


def check_against_torch(torch, js_fn, torch_fn, values, backend, seed=0, compiled=False):
    """`js_fn` and `torch_fn` agree on `values`: results, gradients and second gradients.

    `compiled`: ours come from one `js.compile` of all three (on JAX one XLA program, where
    each op's kernel and vjps are traced rather than compiled one by one, which is faster).
    """
    rng = np.random.default_rng(seed)
    txs = [torch.tensor(np.asarray(v, dtype=np.float64), requires_grad=True) for v in values]
    ty = torch_fn(*txs)
    w = rng.standard_normal(ty.shape)
    vs = [rng.standard_normal(np.shape(v)) for v in values]
    count = len(values)

    def ours(*tensors):
        return _our_results(js_fn, tensors[:count], tensors[count], tensors[count + 1:])

    y, grads, hs = (js.compile(ours) if compiled else ours)(
        *(tensor_of(v, backend) for v in values), tensor_of(w, backend, False),
        *(tensor_of(v, backend, False) for v in vs))
    close(y, ty.detach().numpy(), backend, "value")
    tgrads = _torch_grads(torch, ty, txs, torch.tensor(w), create_graph=True)
    for i, (g, tg) in enumerate(zip(grads, tgrads, strict=True)):
        close(g, np.zeros(np.shape(values[i])) if tg is None else numpy_of(tg), backend,
               f"gradient of input {i}")
    theirs = _second_gradients(tgrads, txs, [torch.tensor(v) for v in vs], torch.autograd.grad)
    for i, (h, th) in enumerate(zip(hs, theirs, strict=True)):
        close(np.zeros(np.shape(values[i])) if h is None else h, th, backend,
              f"second gradient of input {i}")


def _our_results(js_fn, xs, w, vs):
    """`js_fn(*xs)`, its gradients under the cotangent `w` and the gradients of their dot
    product with `vs` (None where an input gets none)."""
    xs = list(xs)
    y = js_fn(*xs)
    grads = js.grad((y * w).sum(), xs, create_graph=True, allow_unused=True)
    terms = [(g * v).sum() for g, v in zip(grads, vs, strict=True)
             if g is not None and g.requires_grad]
    hs = js.grad(sum(terms), xs, allow_unused=True) if terms else [None] * len(xs)
    return y, grads, hs


def _second_gradients(grads, inputs, directions, grad):
    """The gradient of sum(grads . directions) wrt each input (zeros where it does not
    depend on the input, as for piecewise linear ops)."""
    terms = [(g * v).sum() for g, v in zip(grads, directions, strict=True)
             if g is not None and g.requires_grad]
    if not terms:
        return [np.zeros(x.shape) for x in inputs]
    hs = grad(sum(terms), inputs, allow_unused=True)
    return [np.zeros(x.shape) if h is None else numpy_of(h)
            for h, x in zip(hs, inputs, strict=True)]


def numpy_of(t):
    """A tensor's values (torch's zero tensors included)."""
    return arr(t) if isinstance(t, js.Tensor) else t.detach().numpy(force=True)


def uniform_values(seed, *shapes, low=-2.0, high=2.0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(low, high, size=s) for s in shapes]


def same_structure(ours, theirs, backend):
    """`ours` is what `theirs` is (a tensor, a tuple, or a `(values, indices)` named tuple
    of the same name) and holds its values; its dtypes too on the NumPy backend."""
    if isinstance(theirs, tuple):
        assert type(ours).__name__ == type(theirs).__name__ and len(ours) == len(theirs)
        if hasattr(theirs, "indices"):
            assert ours._fields == ("values", "indices")
        for a, b in zip(ours, theirs, strict=True):
            same_structure(a, b, backend)
        return
    assert ours.shape == tuple(theirs.shape)
    if backend == "numpy":
        assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")
    if theirs.dtype.is_floating_point:
        close(ours, theirs.detach().numpy(), backend, "value")
    else:
        np.testing.assert_array_equal(arr(ours), theirs.numpy())


def pair(torch, values, backend):
    """The same values as a jaxstream leaf (`tensor_of`) and a float64 torch leaf."""
    return tensor_of(values, backend), torch.tensor(np.asarray(values, dtype=np.float64),
                                                     requires_grad=True)


def check_first_order(torch, js_fn, torch_fn, values, backend, seed=0):
    """`js_fn` and `torch_fn` agree on `values`: the result and each input's gradient (for
    ops whose second gradients are not compared, or where torch has none)."""
    rng = np.random.default_rng(seed)
    theirs = [torch.tensor(np.asarray(v, dtype=np.float64), requires_grad=True) for v in values]
    ours = [tensor_of(v, backend) for v in values]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ty, y = torch_fn(*theirs), js_fn(*ours)
    close(y, ty.detach().numpy(), backend, "value")
    w = rng.standard_normal(ty.shape)
    tgrads = torch.autograd.grad((ty * torch.tensor(w)).sum(), theirs, allow_unused=True)
    grads = js.grad((y * tensor_of(w, backend, False)).sum(), ours, allow_unused=True)
    for i, (g, tg) in enumerate(zip(grads, tgrads, strict=True)):
        close(np.zeros(np.shape(values[i])) if g is None else g,
              np.zeros(np.shape(values[i])) if tg is None else numpy_of(tg), backend,
              f"gradient of input {i}")


def same_integers(ours, theirs, backend):
    """Integer (or bool) results: equal values, and torch's dtype (int64 read as int32 on
    JAX without x64)."""
    np.testing.assert_array_equal(arr(ours), theirs.numpy())
    want = str(theirs.dtype).removeprefix("torch.")
    assert str(ours.dtype) == (want.replace("int64", "int32") if backend == "jax" else want)


def raises_saying(error, phrase, fn, *args, **kwargs):
    """`fn(*args, **kwargs)` raises `error` with `phrase` in its message."""
    with pytest.raises(error) as excinfo:
        fn(*args, **kwargs)
    assert phrase in error_text(excinfo), error_text(excinfo)
