"""Integer data on JAX without its 64-bit mode: int64 arrays (NumPy's default, every dataset's
labels) become int32 where their values fit, and a value that does not is an error naming it
(Note [64-bit integer data on JAX] in jaxstream/dtypes.py). Asking for int64 by name stays the
x64 error, as float64 does."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from helpers import arr

import jaxstream as js

X64_ERROR = r"needs JAX's 64-bit mode, which is off; enable it with jax.config.update"
TOO_WIDE = (r"the int64 value {} does not fit in int32, the widest integer the jax backend "
            r"holds while JAX's 64-bit mode is off; enable it with jax.config.update")


def test_x64_is_off_here():
    assert not jax.config.x64_enabled


@pytest.mark.parametrize("make", [
    lambda data: js.tensor(data, backend="jax"),
    lambda data: js.tensor(data).to(backend="jax"),
    lambda data: js.tensor(data, backend="jax", device="sim:1"),
    lambda data: js.tensor(data.tolist(), backend="jax"),
])
def test_int64_data_becomes_int32_on_jax(make):
    data = np.array([[0, -3], [7, 2**31 - 1]], dtype=np.int64)
    t = make(data)
    assert (t.backend, t.dtype) == ("jax", np.int32)
    np.testing.assert_array_equal(arr(t), data)


def test_uint64_data_becomes_uint32_and_empty_data_narrows_too():
    assert js.tensor(np.array([0, 2**32 - 1], np.uint64), backend="jax").dtype == np.uint32
    assert js.tensor(np.zeros((0, 3), np.int64), backend="jax").dtype == np.int32


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1, 2**40])
@pytest.mark.parametrize("make", [
    lambda data: js.tensor(data, backend="jax"),
    lambda data: js.tensor(data).to(backend="jax"),
    lambda data: js.tensor(data.tolist(), backend="jax"),
])
def test_a_value_that_does_not_fit_is_an_error_naming_it(make, value):
    with pytest.raises(OverflowError, match=TOO_WIDE.format(value)):
        make(np.array([1, value], dtype=np.int64))


@pytest.mark.oracle
def test_torch_long_tensors_narrow_as_numpy_arrays_do(torch):
    t = js.tensor(torch.tensor([3, 1, 2]), backend="jax")
    assert t.dtype == np.int32 and arr(t).tolist() == [3, 1, 2]
    with pytest.raises(OverflowError, match=TOO_WIDE.format(2**33)):
        js.tensor(torch.tensor([2**33]), backend="jax")


def test_asking_for_int64_by_name_is_still_the_x64_error():
    with pytest.raises(TypeError, match=X64_ERROR):
        js.tensor(np.arange(3), dtype="int64", backend="jax")
    with pytest.raises(TypeError, match=X64_ERROR):
        js.tensor(np.zeros(3), backend="jax")  # float64 data never narrows silently


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_int64_labels_train_a_jax_model(device):
    js.manual_seed(0)
    model = js.nn.Linear(4, 3, backend="jax", device=device)
    x = js.tensor(np.ones((5, 4), np.float32), backend="jax", device=device)
    labels = js.tensor(np.array([0, 1, 2, 1, 0]), backend="jax", device=device)
    loss = js.cross_entropy(model(x), labels)
    loss.backward()
    assert model.weight.grad.shape == (3, 4) and np.isfinite(loss.item())
