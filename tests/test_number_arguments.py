"""Python numbers reach the JAX backend's compiled calls as cached arrays (Note [Numbers as
cached arrays] in jaxstream/ops/compiled_kernels.py): the same bits and dtypes as the number
itself, one array per number, device and 64-bit mode, and none made while traced."""

from __future__ import annotations

import operator
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import WAIT_S, arr, jax_kernels_uncompiled

import jaxstream as js
from jaxstream.devices.xla import TWIN_ENV
from jaxstream.ops import compiled_kernels

OPS = {
    "mul": (operator.mul, jnp.multiply),
    "add": (operator.add, jnp.add),
    "sub": (operator.sub, jnp.subtract),
    "div": (operator.truediv, jnp.true_divide),
    "rdiv": (lambda t, c: c / t, lambda a, c: jnp.true_divide(c, a)),
    "pow": (operator.pow, jnp.power),
    "maximum": (js.maximum, jnp.maximum),
}
DTYPES = ["float32", "bfloat16", "float16", "int32"]
NUMBERS = [1.0001, -2.5, 1e-8, 3, 7, 2**30]


pytestmark = pytest.mark.usefixtures("fresh_compiled_caches")


@pytest.fixture
def device_puts(monkeypatch):
    """The numbers `jax.device_put` was called with, as the cache makes their arrays."""
    made = []
    put = jax.device_put

    def counted(value, *args, **kwargs):
        if isinstance(value, int | float | complex):
            made.append(value)
        return put(value, *args, **kwargs)

    monkeypatch.setattr(jax, "device_put", counted)
    return made


def _tensor(dtype: str, values=(0.5, 1.5, 3.0)):
    return js.tensor(np.asarray(values, np.float32).astype(jnp.dtype(dtype)), backend="jax")


def _same_bits(got, expected) -> None:
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8))


@pytest.mark.parametrize("number", NUMBERS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(OPS))
def test_a_number_gives_the_bits_and_dtype_of_the_python_number(name, dtype, number):
    ours, theirs = OPS[name]
    x = _tensor(dtype)
    for _ in range(2):  # the number's array made, then taken from the cache
        _same_bits(ours(x, number).array, jax.jit(theirs)(x.array, number))


def test_a_number_is_made_an_array_once(device_puts):
    x = _tensor("float32")
    for _ in range(5):
        x * 1.5
        x + 1.5
    x * 2.5
    assert device_puts == [1.5, 2.5]


def test_a_full_table_of_numbers_starts_over(monkeypatch, device_puts):
    monkeypatch.setattr(compiled_kernels, "CACHE_LIMIT", 2)
    x = _tensor("float32")
    for number in (1.5, 2.5, 3.5, 1.5, 3.5):
        _same_bits((x * number).array, jax.jit(jnp.multiply)(x.array, number))
    assert device_puts == [1.5, 2.5, 3.5, 1.5]  # 3.5 and 1.5 fill the new table


def test_zeros_nan_and_bools_are_passed_as_they_are(device_puts):
    x = _tensor("float32")
    for _ in range(2):
        assert not np.signbit(arr(x * 0.0)).any()
        assert np.signbit(arr(x * -0.0)).all()
        assert np.isnan(arr(x + float("nan"))).all()
        _same_bits((x * True).array, x.array)
    assert device_puts == []


def test_a_huge_int_is_passed_as_it_is_and_raises_the_eager_error(device_puts):
    ints = _tensor("int32")
    with pytest.raises(OverflowError) as compiled:
        ints + 2**40
    assert device_puts == [2**40]  # tried, refused, and the number passed on as it is
    with jax_kernels_uncompiled():
        with pytest.raises(OverflowError) as expected:
            ints + 2**40
    assert str(compiled.value) == str(expected.value)


def test_the_64_bit_mode_keeps_its_own_arrays(device_puts):
    narrow = _tensor("float32")
    expected_narrow = jax.jit(jnp.multiply)(narrow.array, 1.0001)
    _same_bits((narrow * 1.0001).array, expected_narrow)
    jax.config.update("jax_enable_x64", True)
    try:
        wide = js.tensor(np.asarray([0.5, 1.5, 3.0]), backend="jax")
        product = wide * 1.0001
        _same_bits(product.array, np.asarray([0.5, 1.5, 3.0]) * 1.0001)  # no float32 rounding
        _same_bits((narrow * 1.0001).array, jax.jit(jnp.multiply)(narrow.array, 1.0001))
    finally:
        jax.config.update("jax_enable_x64", False)
    _same_bits((narrow * 1.0001).array, expected_narrow)
    assert device_puts == [1.0001, 1.0001]


def test_numbers_stay_literals_while_traced(device_puts):
    values = jnp.asarray([0.5, 1.5], jnp.float32)
    traced = jax.jit(js.to_jax(lambda t: (t * 1.0001 + 2).tanh().sum()))
    np.testing.assert_allclose(traced(values), jnp.sum(jnp.tanh(values * 1.0001 + 2)),
                               rtol=1e-6)
    w = js.tensor(np.asarray([0.5, 1.5], np.float32), backend="jax", requires_grad=True)

    @js.compile
    def step():
        loss = (w * 1.0001).tanh().sum()
        loss.backward()
        with js.no_grad():
            w.sub_(0.1 * w.grad)
            w.grad = None
        return loss

    for _ in range(2):
        step()
    assert device_puts == []
    assert w.grad is None


def test_the_backward_of_a_product_passes_the_forwards_array(device_puts):
    x = js.tensor(np.asarray([0.5, 1.5, 3.0], np.float32), backend="jax", requires_grad=True)
    for _ in range(2):
        x.grad = None
        (x * 1.0001).tanh().sum().backward()
    seed = jnp.ones(3, jnp.float32)
    expected = jax.jit(lambda g, y, c: g * (1 - y * y) * c)(
        seed, jnp.tanh(x.array * 1.0001), 1.0001
    )
    np.testing.assert_allclose(arr(x.grad), expected, rtol=1e-6)
    assert device_puts == [1.0001]


def test_the_number_is_placed_as_the_first_array_is():
    uncommitted = _tensor("float32")
    committed = js.tensor(jax.device_put(np.ones(3, np.float32), jax.devices("cpu")[0]),
                          backend="jax")
    for x in (uncommitted, committed, uncommitted):
        for _ in range(2):
            ours, theirs = (x * 1.5).array, jax.jit(jnp.multiply)(x.array, 1.5)
            assert (ours.committed, ours.sharding) == (theirs.committed, theirs.sharding)


_SEVERAL_DEVICES = """
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
import jaxstream as js

put = jax.device_put
made = []
jax.device_put = lambda value, *a, **k: (made.append(value), put(value, *a, **k))[1]
first, second = jax.devices("cpu")
on_second = js.tensor(put(np.arange(4, dtype=np.float32), second), backend="jax")
for _ in range(2):
    out = (on_second * 1.5).array
    assert out.devices() == {second} and out.committed, out.sharding
sharding = NamedSharding(Mesh(np.array([first, second]), ("x",)), PartitionSpec("x"))
spread = js.tensor(put(np.arange(4, dtype=np.float32), sharding), backend="jax")
for _ in range(2):
    out = (spread * 1.5).array
    assert out.sharding == sharding, out.sharding
    np.testing.assert_array_equal(np.asarray(out), np.arange(4) * 1.5)
assert made.count(1.5) == 1, made  # once for the second device, never for the spread array
from jaxstream.ops import compiled_kernels, rules
assert callable(compiled_kernels._kernels[rules.MUL])  # no call failed and fell back
print("ok")
"""


def test_numbers_on_another_device_and_across_devices():
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
           "JAX_PLATFORMS": "cpu", TWIN_ENV: "0"}  # two JAX devices, neither a sim device's
    done = subprocess.run([sys.executable, "-c", _SEVERAL_DEVICES], env=env, text=True,
                          capture_output=True, timeout=WAIT_S * 4)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"


def test_a_result_never_shares_memory_with_a_cached_number(device_puts):
    """A result exported through DLPack and written in place must not change a number that
    later calls reuse."""
    t = js.tensor(np.float32(1.0), backend="jax")
    results = [js.where(t > 0, 1.5, t), js.maximum(t, 1.5), t * 1.5 / 1.5]
    numbers = list(compiled_kernels._numbers.values())
    assert len(numbers) == 1 and device_puts == [1.5]
    for result in results:
        pointer = result.array.unsafe_buffer_pointer()
        assert all(pointer != n.unsafe_buffer_pointer() for n in numbers)
