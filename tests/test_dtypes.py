"""dtypes: the default dtype, the dtypes of Python data, float64 on JAX without x64, and the
same result dtype for every op on every backend."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import BACKENDS, arr

import jaxstream as js

F32, F64, I64, I32, BOOL = (np.dtype(d) for d in ("float32", "float64", "int64", "int32", "bool"))
X64_ERROR = (r"needs JAX's 64-bit mode, which is off; enable it with "
             r"jax.config.update\('jax_enable_x64'")


@pytest.fixture
def float64_default():
    js.set_default_dtype("float64")
    yield
    js.set_default_dtype("float32")


def python_int(backend: str) -> np.dtype:
    return I32 if backend == "jax" else I64


# ------------------------------------------------------------------ Python data
@pytest.mark.oracle
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("data", [1.5, [1.0, 2.0], [[1.0, 2.0], [3.0, 4.5]], [1, 2.5], 3, [[1, 2]],
                                  True, [True, False], [], (1.0, 2), 1j, [1j, 2.0]])
def test_python_data_takes_torchs_dtype(torch, backend, data):
    ours, theirs = js.tensor(data, backend=backend), torch.tensor(data)
    expected = np.dtype(str(theirs.dtype).removeprefix("torch."))
    assert ours.dtype == (python_int(backend) if expected == I64 else expected)
    np.testing.assert_array_equal(arr(ours), theirs.numpy())


def test_the_default_dtype_applies_to_python_floats_and_factories(float64_default):
    assert js.get_default_dtype() == F64
    for t in (js.tensor(1.5), js.tensor([[1.0], [2.0]]), js.zeros(2), js.full(2, 0.5),
              js.arange(0.0, 1.0, 0.5), js.linspace(0, 1, 3), js.eye(2), js.rand(2)):
        assert t.dtype == F64
    assert js.tensor([1j]).dtype == np.complex128
    assert js.tensor([1, 2]).dtype == I64 and js.arange(3).dtype == I64


def test_float64_default_on_jax_without_x64_is_an_error(float64_default):
    with pytest.raises(TypeError, match=X64_ERROR):
        js.tensor([1.0, 2.0], backend="jax")
    with pytest.raises(TypeError, match=X64_ERROR):
        js.zeros(2, backend="jax")


def test_set_default_dtype_takes_floating_dtypes_only():
    with pytest.raises(TypeError, match="only floating dtypes can be the default, got int32"):
        js.set_default_dtype("int32")
    assert js.get_default_dtype() == F32


@pytest.mark.parametrize("backend", BACKENDS)
def test_arrays_and_explicit_dtypes_are_kept(backend):
    assert js.tensor(np.arange(3, dtype=np.int16), backend=backend).dtype == np.int16
    assert js.tensor(np.ones(2, np.float16), backend=backend).dtype == np.float16
    assert js.tensor([1, 2], dtype="float32", backend=backend).dtype == F32
    assert js.tensor(np.float32(2.0), backend=backend).dtype == F32
    assert js.tensor(jnp.ones(2, jnp.bfloat16), backend=backend).dtype == jnp.bfloat16


def test_numpy_float64_arrays_stay_float64_on_numpy():
    assert js.tensor(np.zeros(2)).dtype == F64
    assert js.tensor(np.float64(1.0)).dtype == F64


@pytest.mark.parametrize("bad, name", [("abc", "str"), (None, "NoneType"), (object(), "object"),
                                       ({"a": 1}, "dict"), ([1, "a"], "list")])
def test_data_that_is_not_numbers_is_a_type_error_naming_its_type(bad, name):
    with pytest.raises(TypeError, match=rf"cannot make a tensor from {name} .*expected an array "
                       r"\(NumPy, JAX, CuPy or any DLPack producer\), a Python number"):
        js.tensor(bad)


def test_a_ragged_list_is_a_value_error():
    with pytest.raises(ValueError, match="ragged nested list"):
        js.tensor([[1.0, 2.0], [3.0]])


# ------------------------------------------------------------------ 64-bit on JAX
def test_x64_is_off_in_the_tests():
    assert not jax.config.x64_enabled


@pytest.mark.parametrize("make", [
    lambda: js.tensor(np.zeros(2), backend="jax"),
    lambda: js.tensor([1.0], dtype="float64", backend="jax"),
    lambda: js.tensor(jnp.ones(2), dtype=np.int64),
    lambda: js.tensor(np.zeros(2)).to(backend="jax"),
    lambda: js.tensor([1.0], backend="jax").astype("float64"),
    lambda: js.tensor([1.0], backend="jax").to(np.float64),
    lambda: js.ones(2, dtype="float64", backend="jax"),
    lambda: js.full(2, 1, dtype="int64", backend="jax"),
    lambda: js.eye(2, dtype=np.complex128, backend="jax"),
    lambda: js.arange(3, dtype="int64", backend="jax"),
    lambda: js.linspace(0, 1, 2, dtype="float64", backend="jax"),
])
def test_asking_jax_for_a_64_bit_dtype_without_x64_raises(make):
    with pytest.raises(TypeError, match=X64_ERROR):
        make()


@pytest.mark.oracle
def test_a_torch_float64_tensor_on_jax_raises_too(torch):
    with pytest.raises(TypeError, match=X64_ERROR):
        js.tensor(torch.zeros(2, dtype=torch.float64), backend="jax")
    assert js.tensor(torch.zeros(2), backend="jax").dtype == F32


@pytest.mark.parametrize("dtype", ["float32", "int32", "complex64", "bfloat16", "float16"])
def test_32_bit_and_narrower_dtypes_are_fine_on_jax(dtype):
    assert js.zeros(2, dtype=np.dtype(jnp.dtype(dtype)), backend="jax").dtype == jnp.dtype(dtype)


# ------------------------------------------------------------------ every op, both backends
class Inputs:
    """The sample operands of one run: `x`, `y` of one dtype kind (float32 or int), and
    integer `labels`/`index` the ops that take indices need."""

    def __init__(self, backend: str, kind: str) -> None:
        dtype = F32 if kind == "float" else None
        self.x = js.tensor([[1, 2, 3], [4, 5, 6]], dtype=dtype, backend=backend)
        self.y = js.tensor([[2, 1, 2], [1, 3, 1]], dtype=dtype, backend=backend)
        self.v = js.tensor([1, 2, 3], dtype=dtype, backend=backend)
        self.labels = js.tensor([0, 2], backend=backend)
        self.index = js.tensor([[0, 2, 1], [1, 0, 0]], backend=backend)


# One sample call per public op of API.md's op lists (and the operators), keyed by the op's name.
OP_CALLS = {
    "add": lambda s: s.x + s.y, "sub": lambda s: s.x - s.y, "mul": lambda s: s.x * s.y,
    "div": lambda s: s.x / s.y, "pow": lambda s: s.x ** s.y, "pow_scalar": lambda s: s.x ** 2,
    "rpow": lambda s: 2.0 ** s.x, "neg": lambda s: -s.x, "matmul": lambda s: s.x @ s.y.T,
    "add_int_scalar": lambda s: s.x + 1, "mul_float_scalar": lambda s: s.x * 2.5,
    "mul_numpy_scalar": lambda s: s.x * np.float64(2.0),
    "add_int64_scalar": lambda s: s.x + np.int64(1),
    "div_scalar": lambda s: s.x / 2, "rsub_scalar": lambda s: 1.0 - s.x,
    "add_bare_array": lambda s: s.x + np.ones(3, np.float32),
    "floor_divide": lambda s: s.x // s.y, "remainder": lambda s: s.x % s.y,
    "maximum": lambda s: js.maximum(s.x, s.y), "minimum": lambda s: js.minimum(s.x, s.y),
    "abs": lambda s: js.abs(s.x), "square": lambda s: js.square(s.x),
    "exp": lambda s: js.exp(s.x), "log": lambda s: js.log(s.x), "log1p": lambda s: js.log1p(s.x),
    "expm1": lambda s: js.expm1(s.x), "sin": lambda s: js.sin(s.x), "cos": lambda s: js.cos(s.x),
    "tanh": lambda s: js.tanh(s.x), "sigmoid": lambda s: js.sigmoid(s.x),
    "relu": lambda s: js.relu(s.x), "softplus": lambda s: js.softplus(s.x),
    "sqrt": lambda s: js.sqrt(s.x), "gelu": lambda s: js.gelu(s.x),
    "gelu_tanh": lambda s: js.gelu(s.x, approximate="tanh"), "silu": lambda s: js.silu(s.x),
    "leaky_relu": lambda s: js.leaky_relu(s.x, 0.2), "clip": lambda s: js.clip(s.x, 2, 5),
    "clamp": lambda s: js.clamp(s.x, min=2.5), "where": lambda s: js.where(s.x > 2, s.x, s.y),
    "equal": lambda s: s.x == s.y, "less": lambda s: s.x < s.y,
    "logical_and": lambda s: (s.x > 1) & (s.y > 1),
    "sum": lambda s: js.sum(s.x), "sum_axis": lambda s: s.x.sum(dim=1, keepdim=True),
    "mean": lambda s: js.mean(s.x, axis=0), "max": lambda s: js.max(s.x, axis=1),
    "min": lambda s: js.min(s.x), "prod": lambda s: js.prod(s.x, axis=0),
    "var": lambda s: js.var(s.x, axis=1, correction=1), "std": lambda s: js.std(s.x),
    "logsumexp": lambda s: js.logsumexp(s.x, axis=1), "cumsum": lambda s: js.cumsum(s.x, 1),
    "vector_norm": lambda s: js.vector_norm(s.x, axis=1),
    "argmax": lambda s: js.argmax(s.x, axis=1), "argmin": lambda s: js.argmin(s.x),
    "reshape": lambda s: s.x.reshape(3, 2), "view": lambda s: s.x.view(6),
    "transpose": lambda s: js.transpose(s.x, 0, 1), "swapaxes": lambda s: s.x.swapaxes(0, 1),
    "broadcast_to": lambda s: s.v.broadcast_to((2, 3)), "getitem": lambda s: s.x[1, ::2],
    "getitem_array": lambda s: s.x[js.tensor([1, 0])],
    "concat": lambda s: js.concat([s.x, s.y], axis=1), "cat": lambda s: js.cat([s.x, s.y]),
    "concatenate": lambda s: js.concatenate([s.x, s.y]), "stack": lambda s: js.stack([s.x, s.y]),
    "split": lambda s: js.split(s.x, 2, dim=1)[0], "chunk": lambda s: js.chunk(s.x, 2, 1)[1],
    "unbind": lambda s: js.unbind(s.x)[0], "expand": lambda s: s.v.expand(2, -1),
    "repeat": lambda s: s.x.repeat(1, 2), "max_dim": lambda s: s.x.max(1).values,
    "amax": lambda s: js.amax(s.x, 1), "squeeze": lambda s: js.squeeze(s.x[:1], 0),
    "expand_dims": lambda s: js.expand_dims(s.x, 0), "unsqueeze": lambda s: js.unsqueeze(s.x, 1),
    "flatten": lambda s: js.flatten(s.x), "permute_dims": lambda s: js.permute_dims(s.x, (1, 0)),
    "flip": lambda s: js.flip(s.x, axis=1),
    "take_along_axis": lambda s: js.take_along_axis(s.x, s.index, axis=1),
    "einsum": lambda s: js.einsum("ij,kj->ik", s.x, s.y),
    "linear": lambda s: js.linear(s.x, s.y, s.v[:2]),
    "softmax": lambda s: js.softmax(s.x, axis=1), "log_softmax": lambda s: js.log_softmax(s.x),
    "cross_entropy": lambda s: js.cross_entropy(s.x, s.labels),
    "cross_entropy_probs": lambda s: js.cross_entropy(s.x, js.softmax(s.y)),
    "nll_loss": lambda s: js.nll_loss(s.x, s.labels), "mse_loss": lambda s: js.mse_loss(s.x, s.y),
    "one_hot": lambda s: js.one_hot(s.labels, 3), "dropout": lambda s: js.dropout(s.x, key=0),
    "astype": lambda s: s.x.astype("float16"), "clone": lambda s: s.x.clone(),
    "to": lambda s: s.x.to("float16"),
    "zeros_like": lambda s: js.zeros_like(s.x), "ones_like": lambda s: js.ones_like(s.x),
}


def _outcome(call, backend: str, kind: str):
    """The result's dtype (int64 for JAX's int32), or the type of the error the call raised."""
    try:
        dtype = call(Inputs(backend, kind)).dtype
    except Exception as err:  # the backends must agree on failing too
        return type(err)
    return I64 if dtype == I32 and backend == "jax" else np.dtype(dtype)


@pytest.mark.parametrize("kind", ["float", "int"])
@pytest.mark.parametrize("name", sorted(OP_CALLS))
def test_every_op_has_one_result_dtype_on_every_backend(name, kind):
    on_numpy = _outcome(OP_CALLS[name], "numpy", kind)
    assert on_numpy == _outcome(OP_CALLS[name], "jax", kind)
    if kind == "float" and not isinstance(on_numpy, type):
        assert on_numpy in (F32, BOOL, I64, np.dtype("float16")), name


@pytest.mark.parametrize("name", ["mul_numpy_scalar", "add_int64_scalar", "mul_float_scalar",
                                  "rpow", "div_scalar"])
def test_float32_operands_stay_float32_with_python_and_numpy_scalars(name):
    """Scalars are weak in promotion, on both backends."""
    for backend in BACKENDS:
        assert _outcome(OP_CALLS[name], backend, "float") == F32


def test_the_table_covers_api_md_ops():
    api_ops = {
        "square", "log1p", "expm1", "maximum", "minimum", "clip", "clamp", "gelu", "silu",
        "leaky_relu", "floor_divide", "remainder", "min", "prod", "var", "std", "logsumexp",
        "cumsum", "vector_norm", "argmax", "argmin", "concat", "cat", "split", "squeeze",
        "expand_dims", "unsqueeze", "flatten", "permute_dims", "flip", "take_along_axis",
        "einsum", "view", "softmax", "log_softmax", "cross_entropy", "nll_loss", "mse_loss",
        "one_hot", "dropout", "matmul", "linear", "relu", "tanh", "softplus", "sigmoid", "exp",
        "log", "sum", "mean", "max", "where", "concatenate", "stack", "abs", "sqrt", "sin", "cos",
        "pow", "reshape", "transpose", "swapaxes", "broadcast_to", "getitem", "astype", "to",
    }
    assert api_ops <= set(OP_CALLS), sorted(api_ops - set(OP_CALLS))
