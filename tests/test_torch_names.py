"""The name rule: a PyTorch name has PyTorch's meaning, arguments and return type.

Reductions and shape queries here (max/min and their `(values, indices)`, std/var's
unbiased default, `size()`/`dim()`, dtype=), diff-tested against torch on both backends:
values, dtypes, returned types and gradients. The shape ops are in
test_torch_names_shapes.py. The array API's spellings (`axis=`, `keepdims=`,
`correction=`) keep the array API's meaning, which is checked beside each.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import BACKENDS, arr, error_text
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from ops_oracle import check_against_torch, close, pair, same_structure, tensor_of, uniform_values

import jaxstream as js

pytestmark = pytest.mark.oracle

HYPOTHESIS = settings(max_examples=12, deadline=None)
TIES = [[1.0, 3.0, 3.0, -1.0], [2.0, 2.0, 0.0, 2.0], [5.0, -4.0, 5.0, 5.0]]


# ------------------------------------------------------------------ max / min
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("call", [
    lambda t, n: getattr(t, n)(1), lambda t, n: getattr(t, n)(dim=1),
    lambda t, n: getattr(t, n)(-1, True), lambda t, n: getattr(t, n)(0, keepdim=True),
], ids=["positional", "dim", "keepdim-positional", "keepdim"])
def test_max_over_a_dim_is_values_and_indices(torch, backend, name, call):
    x, tx = pair(torch, TIES, backend)
    ours, theirs = call(x, name), call(tx, name)
    assert type(ours).__name__ == name and isinstance(ours, tuple)
    assert ours.values is ours[0] and ours.indices is ours[1]
    same_structure(ours, theirs, backend)
    assert ours.values.grad_fn.name() == theirs.values.grad_fn.name()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["max", "min"])
def test_the_gradient_over_a_dim_goes_to_the_index_alone(torch, backend, name):
    """A tie's gradient is the indexed element's (torch's MaxBackward0), not a share."""
    check_against_torch(torch, lambda x: getattr(x, name)(1)[0] ** 2,
                        lambda x: getattr(x, name)(1)[0] ** 2, [TIES], backend)
    check_against_torch(torch, lambda x: getattr(js, name)(x, 0, True).values,
                        lambda x: getattr(torch, name)(x, 0, True).values, [TIES], backend)


@settings(HYPOTHESIS)
@given(values=hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, max_side=4),
                         elements=st.integers(-2, 2).map(float)),
       data=st.data(), name=st.sampled_from(["max", "min", "argmax", "argmin"]))
def test_any_shape_and_dim_matches_torch(torch, values, data, name):
    dim = data.draw(st.integers(-max(values.ndim, 1), max(values.ndim, 1) - 1))
    keepdim = data.draw(st.booleans())
    x, tx = pair(torch, values, "numpy")
    same_structure(getattr(x, name)(dim, keepdim), getattr(tx, name)(dim, keepdim), "numpy")
    same_structure(getattr(x, name)(), getattr(tx, name)(), "numpy")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["max", "min"])
def test_max_of_everything_is_a_scalar_and_ties_share(torch, backend, name):
    x, tx = pair(torch, TIES, backend)
    ours, theirs = getattr(x, name)(), getattr(tx, name)()
    assert isinstance(ours, js.Tensor) and ours.shape == ()
    assert ours.grad_fn.name() == theirs.grad_fn.name() == f"{name.title()}Backward1"
    check_against_torch(torch, lambda x: getattr(js, name)(x), lambda x: getattr(x, name)(),
                        [TIES], backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["max", "min"])
def test_max_of_another_tensor_is_elementwise(torch, backend, name):
    values = uniform_values(1, (3, 4), (3, 4))
    check_against_torch(torch, lambda x, y: getattr(x, name)(y), lambda x, y: getattr(x, name)(y),
                        values, backend)
    check_against_torch(torch, lambda x, y: getattr(js, name)(x, y),
                        lambda x, y: getattr(torch, name)(x, y), values, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["max", "min"])
def test_the_array_api_spelling_gives_values(torch, backend, name):
    """`axis=` is the array API's max: values, over any axes, ties sharing (torch.amax)."""
    amax = getattr(torch, "a" + name)
    for axis, keep in [(1, False), ((0, 1), True), (None, False)]:
        check_against_torch(torch,
                            lambda x, a=axis, k=keep: getattr(js, name)(x, axis=a, keepdims=k),
                            lambda x, a=axis, k=keep: amax(x, () if a is None else a, k), [TIES],
                            backend)
    check_against_torch(torch, lambda x: getattr(x, "a" + name)(1), lambda x: amax(x, 1),
                        [TIES], backend)
    check_against_torch(torch, lambda x: getattr(js, "a" + name)(x, dim=(0, 1)),
                        lambda x: amax(x, (0, 1)), [TIES], backend)


def test_max_over_several_dims_says_where_the_values_are():
    x = js.tensor(np.ones((2, 3)))
    with pytest.raises(TypeError, match="amax") as excinfo:
        x.max(dim=(0, 1))
    assert "(2, 3)" in error_text(excinfo)
    with pytest.raises(IndexError, match=r"expected to be in range of \[-2, 1\], but got 2"):
        x.max(2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_0d_tensor_has_a_max_over_dim_0(torch, backend):
    x, tx = pair(torch, 5.0, backend)
    same_structure(x.max(0), tx.max(0), backend)
    check_against_torch(torch, lambda x: x.min(-1, True).values, lambda x: x.min(-1, True)[0],
                        [2.0], backend)


# ------------------------------------------------------------------ std / var
@pytest.mark.parametrize("backend", BACKENDS)
def test_std_and_var_are_unbiased_by_default(backend):
    x = tensor_of([1.0, 2.0, 3.0, 4.0], backend)
    for value in (x.std(), js.std(x), x.std(0), js.std(x, axis=0)):
        close(value, 1.2909944487, backend, "unbiased std")
    close(x.var(), 5 / 3, backend, "unbiased var")
    close(js.var(x, correction=0), 1.25, backend, "the array API's var, asked for")
    close(js.std(x, axis=0, correction=0), np.std([1, 2, 3, 4]), backend, "correction=0")


SPREADS = {
    "default": lambda x, f: getattr(x, f)(),
    "dim": lambda x, f: getattr(x, f)(1),
    "dims": lambda x, f: getattr(x, f)((0, 2), keepdim=True),
    "unbiased-positional": lambda x, f: getattr(x, f)(1, False, True),
    "unbiased-only": lambda x, f: getattr(x, f)(False),
    "unbiased": lambda x, f: getattr(x, f)(dim=-1, unbiased=True),
    "correction": lambda x, f: getattr(x, f)(dim=0, correction=2),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", ["std", "var"])
@pytest.mark.parametrize("spelling", SPREADS)
def test_std_and_var_take_torchs_arguments(torch, backend, fn, spelling):
    call = SPREADS[spelling]
    check_against_torch(torch, lambda x: call(x, fn), lambda x: call(x, fn),
                        uniform_values(3, (3, 4, 2)), backend)


@settings(HYPOTHESIS)
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=2, max_side=4), data=st.data(),
       fn=st.sampled_from(["std", "var"]))
def test_std_of_any_shape_matches_torch(torch, shape, data, fn):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    keepdim = data.draw(st.booleans())
    check_against_torch(torch, lambda x: getattr(js, fn)(x, dim, keepdim=keepdim),
                        lambda x: getattr(torch, fn)(x, dim, keepdim=keepdim),
                        uniform_values(0, shape), "numpy")


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_unbiased_std_of_one_element_warns_as_torch(torch, backend):
    with pytest.warns(UserWarning, match=r"std\(\): degrees of freedom is <= 0"):
        ours = tensor_of([1.5], backend).std()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.tensor([1.5]).std()
    assert np.isnan(arr(ours)) and bool(theirs.isnan())


def test_std_takes_correction_or_unbiased_not_both():
    with pytest.raises(TypeError, match="correction= or unbiased="):
        js.tensor(np.ones(3)).std(0, unbiased=True, correction=2)


# ------------------------------------------------------------------ size, dim, numel
@pytest.mark.parametrize("backend", BACKENDS)
def test_size_is_a_method_as_torchs(torch, backend):
    x, tx = js.zeros(2, 3, 4, backend=backend), torch.zeros(2, 3, 4)
    assert x.size() == tuple(tx.size()) == (2, 3, 4) and isinstance(x.size(), js.Size)
    assert isinstance(x.size(), tuple) and x.size().numel() == tx.size().numel() == 24
    assert [x.size(d) for d in (0, 1, -1)] == [tx.size(d) for d in (0, 1, -1)] == [2, 3, 4]
    assert x.size(dim=1) == 3 and x.dim() == x.ndimension() == tx.dim() == 3
    assert x.numel() == 24 and repr(x.size()) == "jaxstream.Size([2, 3, 4])"
    assert js.tensor(1.0, backend=backend).size() == () and js.tensor(1.0).dim() == 0


def test_size_of_a_dim_out_of_range_is_torchs_error(torch):
    with pytest.raises(IndexError) as ours:
        js.zeros(2, 3).size(2)
    with pytest.raises(IndexError) as theirs:
        torch.zeros(2, 3).size(2)
    assert str(theirs.value) in str(ours.value)
    assert "Dimension out of range (expected to be in range of [-2, 1], but got 2)" in str(
        ours.value)


# ------------------------------------------------------------------ dtype=
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["sum", "mean", "prod", "cumsum"])
def test_reductions_take_a_dtype(torch, backend, name):
    x = js.tensor(np.arange(1, 7, dtype=np.int32).reshape(2, 3), backend=backend)
    tx = torch.arange(1, 7, dtype=torch.int32).reshape(2, 3)
    ours, theirs = getattr(x, name)(1, dtype="float32"), getattr(tx, name)(1, dtype=torch.float32)
    assert ours.dtype == np.float32
    same_structure(ours, theirs, backend)
    x, tx = pair(torch, uniform_values(2, (3, 2))[0], backend)
    y = getattr(js, name)(x, 0, dtype="float32")
    ty = getattr(torch, name)(tx, 0, dtype=torch.float32)
    (g,), (tg,) = js.grad((y * y).sum(), x), torch.autograd.grad((ty * ty).sum(), tx)
    assert y.dtype == np.float32 and g.dtype == x.dtype
    np.testing.assert_allclose(arr(g), tg.numpy(), rtol=1e-5)


def test_an_integer_sum_is_int64_as_torchs(torch):
    x = js.tensor(np.arange(4, dtype=np.int32))
    assert x.sum().dtype == np.int64 == js.tensor([True, False]).sum().dtype
    assert torch.arange(4, dtype=torch.int32).sum().dtype == torch.int64
