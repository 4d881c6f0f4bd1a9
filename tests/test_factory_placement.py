"""Every factory and layer honours `device=`, `dtype=` and `backend=`; `js.tensor(t)` and
`Parameter(t)` keep a tensor's device and backend (a layer's parameters used to land on the cpu
whatever `device=` said, and the model failed later with an error that pointed elsewhere)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import arr

import jaxstream as js

nn = js.nn

FACTORIES = {
    "zeros": lambda **kw: js.zeros(2, 3, **kw), "ones": lambda **kw: js.ones(2, **kw),
    "full": lambda **kw: js.full((2,), 1.5, **kw), "eye": lambda **kw: js.eye(2, **kw),
    "arange": lambda **kw: js.arange(0.0, 3.0, **kw),
    "linspace": lambda **kw: js.linspace(0, 1, 3, **kw), "rand": lambda **kw: js.rand(2, **kw),
    "randn": lambda **kw: js.randn(2, **kw), "tensor": lambda **kw: js.tensor([1.0, 2.0], **kw),
}
LAYERS = {
    "Linear": lambda **kw: nn.Linear(4, 2, **kw), "LayerNorm": lambda **kw: nn.LayerNorm(3, **kw),
    "Embedding": lambda **kw: nn.Embedding(3, 2, **kw),
}
PLACES = [{"device": "sim:0"}, {"device": "sim:1", "backend": "jax"}, {"backend": "jax"},
          {"dtype": "float16"}, {"dtype": "float64"}, {"device": "sim:1", "dtype": "float16"}]


def _expected(kw: dict) -> tuple:
    return (js.device(kw.get("device", "cpu")), kw.get("backend", "numpy"),
            np.dtype(kw.get("dtype", "float32")))


def _placement(t) -> tuple:
    return (t.device, t.backend, t.dtype)


@pytest.mark.parametrize("kw", PLACES, ids=str)
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_factories_honour_device_dtype_and_backend(name, kw):
    assert _placement(FACTORIES[name](**kw)) == _expected(kw)


@pytest.mark.parametrize("kw", PLACES, ids=str)
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_every_parameter_of_a_layer_is_where_its_factory_arguments_say(name, kw):
    layer = LAYERS[name](**kw)
    for pname, p in layer.named_parameters():
        assert _placement(p) == _expected(kw), pname
        assert isinstance(p, nn.Parameter) and p.requires_grad and p.is_leaf


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_a_model_made_on_a_sim_device_trains_there(backend):
    model = nn.Sequential(nn.Linear(4, 3, device="sim:1", backend=backend), nn.ReLU(),
                          nn.LayerNorm(3, device="sim:1", backend=backend))
    x = js.tensor(np.ones((2, 4), np.float32), device="sim:1", backend=backend)
    model(x).sum().backward()
    for p in model.parameters():
        assert p.grad.device == js.device("sim:1") and p.grad.backend == backend


COPY_WARNING = (r"To copy construct from a tensor, it is recommended to use "
                r"sourceTensor.detach\(\).clone\(\) or sourceTensor.detach\(\).clone\(\)"
                r".requires_grad_\(True\), rather than js.tensor\(sourceTensor\).")


@pytest.mark.parametrize("backend", ["numpy", "jax"])
@pytest.mark.parametrize("device", ["cpu", "sim:1"])
def test_tensor_of_a_tensor_is_a_detached_copy_where_the_tensor_is(backend, device):
    source = js.tensor(np.arange(3, dtype=np.float32), backend=backend, device=device,
                       requires_grad=True) * 2
    with pytest.warns(UserWarning, match=COPY_WARNING):
        copy = js.tensor(source)
    assert _placement(copy) == _placement(source)
    assert copy.is_leaf and not copy.requires_grad and copy.grad_fn is None
    with js.no_grad():
        copy.add_(1.0)
    assert arr(source).tolist() == [0.0, 2.0, 4.0] and arr(copy).tolist() == [1.0, 3.0, 5.0]


def test_tensor_of_a_tensor_takes_what_it_is_told():
    source = js.tensor(np.arange(3, dtype=np.float32), device="sim:1")
    with pytest.warns(UserWarning, match="To copy construct from a tensor"):
        half = js.tensor(source, dtype="float16", requires_grad=True)
        moved = js.tensor(source, device="sim:0", backend="jax")
    assert _placement(half) == (js.device("sim:1"), "numpy", np.float16) and half.requires_grad
    assert _placement(moved) == (js.device("sim:0"), "jax", np.float32)


@pytest.mark.oracle
def test_the_warning_is_torchs(torch):
    with pytest.warns(UserWarning) as theirs:
        torch.tensor(torch.ones(2))
    with pytest.warns(UserWarning) as ours:
        js.tensor(js.ones(2))
    assert str(ours[0].message) == str(theirs[0].message).replace("torch.", "js.")


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_parameter_of_a_tensor_keeps_its_device_and_backend_and_shares_it(backend):
    t = js.ones(2, 3, device="sim:1", backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = nn.Parameter(t)
    assert _placement(p) == _placement(t) and p.array is t.array
    assert isinstance(p, nn.Parameter) and p.requires_grad and p.is_leaf
