"""`js.set_float32_matmul_precision`: PyTorch's setting, passed as the `precision=` of every
product and convolution the JAX backend runs (Note [Float32 matrix products]).

On a CPU XLA computes float32 in float32 at every precision, so these tests read the
programs' text, where the precision is written whatever the machine.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.core import ClosedJaxpr, Jaxpr

import jaxstream as js
from jaxstream.nn import functional as F
from jaxstream.ops import compiled_backward, compiled_kernels

_PRODUCTS = ("dot_general", "conv_general_dilated")
_SETTINGS = {"highest": "HIGHEST/HIGHEST", "high": "HIGH/HIGH", "medium": "DEFAULT/DEFAULT"}


@pytest.fixture(autouse=True)
def restored_precision():
    before = js.get_float32_matmul_precision()
    yield
    js.set_float32_matmul_precision(before)


def _every_product(x, w, c, k):
    """Each product and convolution jaxstream has, summed into one loss."""
    b = x.reshape((2, 3, 2))
    return (js.matmul(x, w).sum() + (x @ w).sum() + js.linear(x, w.T, c).sum()
            + js.bmm(b, b.swapaxes(1, 2)).sum() + js.addmm(c, x, w).sum()
            + js.baddbmm(b.sum(), b, b.swapaxes(1, 2)).sum()
            + js.einsum("ij,jk->ik", x, w).sum() + js.conv1d(x[None], k).sum()
            + F.conv2d(x[None, None], k[:, :1, None]).sum())


def _arguments():
    rng = np.random.default_rng(0)
    shapes = [(3, 4), (4, 2), (2,), (5, 3, 2)]
    return [jnp.asarray(rng.standard_normal(s), jnp.float32) for s in shapes]


def _walk(jaxpr: Jaxpr) -> list:
    """The `precision` param of every product in `jaxpr` and the jaxprs nested in it."""
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in _PRODUCTS:
            found.append(eqn.params["precision"])
        for value in eqn.params.values():
            for sub in value if isinstance(value, tuple | list) else (value,):
                if isinstance(sub, ClosedJaxpr | Jaxpr):
                    found += _walk(sub.jaxpr if isinstance(sub, ClosedJaxpr) else sub)
    return found


def _precisions(fn, *args) -> list:
    """The precision of each product that `fn`'s program runs: names, or None for JAX's."""
    return [p if p is None else "/".join(q.name for q in p)
            for p in _walk(jax.make_jaxpr(fn)(*args).jaxpr)]


def test_the_default_is_highest_as_pytorchs():
    assert js.get_float32_matmul_precision() == "highest"
    found = _precisions(js.to_jax(_every_product), *_arguments())
    assert len(found) == 9 and set(found) == {"HIGHEST/HIGHEST"}


@pytest.mark.parametrize("setting", sorted(_SETTINGS))
@pytest.mark.parametrize("mode", ["engine", "native"])
def test_traced_products_and_their_gradients_run_at_the_setting(setting, mode):
    js.set_float32_matmul_precision(setting)
    assert js.get_float32_matmul_precision() == setting
    grads = jax.grad(js.to_jax(_every_product, mode=mode), argnums=(0, 1, 2, 3))
    found = _precisions(grads, *_arguments())
    # The forward's products and each input's gradient products, all at the setting.
    assert len(found) >= 3 * 9 and set(found) == {_SETTINGS[setting]}


def test_user_jax_code_keeps_jaxs_own_precision():
    js.set_float32_matmul_precision("highest")
    inner = js.jax_function(lambda a, b: a @ b)
    found = _precisions(js.to_jax(lambda a, b: inner(a, b).sum()), *_arguments()[:2])
    assert found == [None]  # JAX's own: jax.default_matmul_precision decides


def test_a_change_empties_the_compiled_kernels_traced_at_the_old_one():
    x, w = (js.tensor(a, backend="jax", requires_grad=True) for a in _arguments()[:2])
    (x @ w).sum().backward()
    assert compiled_kernels.cache_size() > 0
    js.set_float32_matmul_precision("medium")
    assert compiled_kernels.cache_size() == compiled_backward.cache_size() == 0
    y = x @ w
    np.testing.assert_allclose(y.numpy(), x.numpy() @ w.numpy(), rtol=1e-2, atol=1e-2)
    js.set_float32_matmul_precision("medium")  # no change: the tables are kept
    assert compiled_kernels.cache_size() > 0


def test_js_compile_traces_again_after_a_change():
    x, w = (js.tensor(a, backend="jax") for a in _arguments()[:2])
    step = js.compile(lambda x, w: (x @ w).sum())
    step(x, w)
    js.set_float32_matmul_precision("medium")
    step(x, w)
    assert step.cache_size() == 2
    js.set_float32_matmul_precision("highest")
    step(x, w)
    assert step.cache_size() == 2  # the first program, traced at highest


def test_numpy_products_do_not_change():
    x, w = (np.asarray(a) for a in _arguments()[:2])
    js.set_float32_matmul_precision("medium")
    np.testing.assert_array_equal(js.matmul(js.tensor(x), js.tensor(w)).numpy(), x @ w)


def test_another_value_is_refused_as_pytorch_refuses_it():
    js.set_float32_matmul_precision("medium")
    with pytest.warns(UserWarning, match=r"HIGH is not one of 'highest', 'high', or 'medium'; "
                                         r"the current set_float32_matmul_precision call has "
                                         r"no effect"):
        js.set_float32_matmul_precision("HIGH")
    assert js.get_float32_matmul_precision() == "medium"
    with pytest.raises(RuntimeError, match=r"expects a str, but got Precision"):
        js.set_float32_matmul_precision(jax.lax.Precision.HIGHEST)
    assert js.get_float32_matmul_precision() == "medium"


def test_average_pooling_keeps_every_bit_whatever_the_setting():
    js.set_float32_matmul_precision("medium")
    x = _arguments()[0][None, None]
    found = _precisions(jax.grad(js.to_jax(lambda x: F.avg_pool2d(x, 2, 1).sum())), x)
    assert found and set(found) == {"HIGHEST/HIGHEST"}  # a sum, not a product (Note)


def _experiment_losses() -> dict:
    """Each JAX peer of the experiments, as a function and its arguments."""
    from experiments import jax_overhead
    from experiments.compiled import mlp
    from experiments.workloads import digits_mlp, hessian_model

    params = hessian_model.init_parameters()
    x = hessian_model.init_inputs(4)
    state = digits_mlp.init_state()
    features = np.zeros((4, digits_mlp.FEATURES), np.float32)
    return {
        "hessian A": (hessian_model.jax_input_hessian, params, x),
        "hessian B": (jax.grad(hessian_model.jax_training_loss), params, x),
        "digits": (jax.grad(digits_mlp.jax_loss), state, features, np.zeros(4, np.int32)),
        "compiled mlp": (jax.grad(mlp._jax_loss), mlp.init_parameters(), *mlp.init_batch(4)),
        "jax_overhead": (jax.grad(jax_overhead.block_loss),
                         *jax_overhead.init(jax_overhead.SIZES["smoke"])),
    }


@pytest.mark.parametrize("name", ["hessian A", "hessian B", "digits", "compiled mlp",
                                  "jax_overhead"])
def test_the_experiments_jax_peers_compute_float32_products_as_the_others(name):
    """Note [Float32 products in every peer] in experiments/harness/peers.py."""
    fn, *args = _experiment_losses()[name]
    found = _precisions(fn, *args)
    assert found and set(found) == {"HIGHEST/HIGHEST"}
