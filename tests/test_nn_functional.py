"""`jaxstream.nn.functional` against `torch.nn.functional`: the same names and parameters,
values and first and second gradients on both backends, `inplace=`, the implicit softmax
dim and the legacy loss arguments with PyTorch's warnings, and the refusal of `weight=`."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from helpers import arr
from ops_oracle import check_against_torch, close, pair, uniform_values

import jaxstream as js
import jaxstream.nn.functional as F

pytestmark = pytest.mark.oracle


def test_it_is_js_nn_functional():
    assert js.nn.functional is F


def _torch_parameters(fn):
    """The parameter names of a torch function; a builtin's from its docstring's opening,
    `name(input, approximate = 'none') -> Tensor` (which may run over several lines); a
    boolean-dispatched one's (`max_pool2d(*args, **kwargs)`) from its `_with_indices` twin."""
    fn = getattr(inspect.getmodule(fn), f"{fn.__name__}_with_indices", fn)
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        line = fn.__doc__.strip()
        inside = line[line.index("(") + 1: line.index(")")]
        return [p.split("=")[0].strip() for p in inside.split(",") if p.strip() != "*"]


def test_every_name_has_torchs_parameters(torch):
    """Torch's parameters, besides the keyword-only `key=` of the functions that draw."""
    for name in F.__all__:
        ours = [p for p, v in inspect.signature(getattr(F, name)).parameters.items()
                if not (p == "key" and v.kind is inspect.Parameter.KEYWORD_ONLY)]
        assert ours == _torch_parameters(getattr(torch.nn.functional, name)), name


def _cases(torch):
    TF = torch.nn.functional
    return {
        "relu": lambda m, x: m.relu(x) * x,
        "leaky_relu": lambda m, x: m.leaky_relu(x, 0.2) * x,
        "silu": lambda m, x: m.silu(x),
        "gelu": lambda m, x: m.gelu(x),
        "gelu_tanh": lambda m, x: m.gelu(x, approximate="tanh"),
        "sigmoid": lambda m, x: m.sigmoid(x),
        "tanh": lambda m, x: m.tanh(x),
        "softplus": lambda m, x: m.softplus(x),
        "softplus_beta": lambda m, x: m.softplus(x, beta=2.0, threshold=1.5),
        "softmax": lambda m, x: m.softmax(x, dim=0),
        "log_softmax": lambda m, x: m.log_softmax(x, 1) ** 2,
        "linear": lambda m, x: m.linear(x, x[:2] * 0.5, x[0, :2]),
        "mse_loss": lambda m, x: m.mse_loss(x, x.flip(0) * 0.3, reduction="sum"),
        "cross_entropy": lambda m, x: m.cross_entropy(x, _labels(m, x), None, None, 1),
        "nll_loss": lambda m, x: m.nll_loss(m.log_softmax(x, 1), _labels(m, x),
                                            reduction="none"),
    }, TF


def _labels(m, x):
    labels = np.array([0, 2, 1])
    return js.tensor(labels, backend=x.backend) if m is F else x.new_tensor(labels).long()


NAMES = ["relu", "leaky_relu", "silu", "gelu", "gelu_tanh", "sigmoid", "tanh", "softplus",
         "softplus_beta", "softmax", "log_softmax", "linear", "mse_loss", "cross_entropy",
         "nll_loss"]


# Every case on NumPy; on JAX the few that are more than the `js` op they call (tested on
# JAX with it).
@pytest.mark.parametrize("backend, name", [("numpy", n) for n in NAMES] + [
    ("jax", n) for n in ("softplus_beta", "softmax", "cross_entropy")])
def test_functions_match_torch(torch, backend, name):
    cases, TF = _cases(torch)
    check_against_torch(torch, lambda x: cases[name](F, x), lambda x: cases[name](TF, x),
                        uniform_values(1, (3, 4)), backend)


def test_one_hot_and_dropout_outside_training_are_torchs(torch):
    TF = torch.nn.functional
    labels = np.array([2, 0, 1])
    np.testing.assert_array_equal(arr(F.one_hot(js.tensor(labels), 4)),
                                  TF.one_hot(torch.tensor(labels), 4).numpy())
    x, tx = pair(torch, uniform_values(2, (3, 4))[0], "numpy")
    for kwargs in ({"training": False}, {"p": 0.0}):
        np.testing.assert_array_equal(arr(F.dropout(x, **kwargs)),
                                      TF.dropout(tx, **kwargs).detach().numpy())
    np.testing.assert_array_equal(arr(F.dropout(x, 1.0)), np.zeros((3, 4)))
    kept = arr(F.dropout(x, 0.5, key=3)) != 0
    np.testing.assert_allclose(arr(F.dropout(x, 0.5, key=3))[kept], arr(x)[kept] * 2)


@pytest.mark.parametrize("name", ["relu", "leaky_relu", "silu", "dropout"])
def test_inplace_rebinds_the_input_as_torch(torch, name):
    x, tx = pair(torch, uniform_values(3, (3, 4))[0], "numpy")
    y, ty = x * 1.5, tx * 1.5
    kwargs = {"p": 0.0} if name == "dropout" else {}
    out, tout = getattr(F, name)(y, inplace=True, **kwargs), getattr(
        torch.nn.functional, name)(ty, inplace=True, **kwargs)
    assert out is y and tout is ty
    close(y, ty.detach().numpy(), "numpy", "value")
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    close(x.grad, tx.grad.numpy(), "numpy", "gradient")


@pytest.mark.parametrize("shape", [(4,), (2, 3), (2, 3, 4), (2, 2, 2, 2)], ids=str)
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_the_implicit_dim_is_torchs_with_its_warning(torch, shape, name):
    x, tx = pair(torch, uniform_values(4, shape)[0], "numpy")
    with pytest.warns(UserWarning, match=f"Implicit dimension choice for {name} has been "
                                         "deprecated"):
        ours = getattr(F, name)(x)
    with pytest.warns(UserWarning):
        theirs = getattr(torch.nn.functional, name)(tx)
    close(ours, theirs.detach().numpy(), "numpy", name)
    assert str(getattr(F, name)(x, 0, dtype="float32").dtype) == "float32"


@pytest.mark.parametrize("legacy, reduction", [
    ({"size_average": False}, "sum"), ({"reduce": False}, "none"),
    ({"size_average": True, "reduce": True}, "mean"),
])
def test_the_legacy_loss_arguments_are_torchs(torch, legacy, reduction):
    x, tx = pair(torch, uniform_values(5, (3, 4))[0], "numpy")
    with pytest.warns(UserWarning, match=f"please use reduction='{reduction}' instead"):
        ours = F.mse_loss(x, x * 0.5, **legacy)
    with pytest.warns(UserWarning):
        theirs = torch.nn.functional.mse_loss(tx, tx * 0.5, **legacy)
    close(ours, theirs.detach().numpy(), "numpy", "loss")


