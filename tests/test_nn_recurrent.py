"""The recurrent layers (nn/recurrent.py, nn/recurrent_cells.py) against torch's modules with
the same parameters: outputs, final states, gradients of the input, the initial states and
every parameter, on both backends; second gradients on NumPy; repr, state_dict keys,
initialisation, dropout between layers and the errors."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from helpers import arr
from ops_oracle import close

import jaxstream as js

torch = pytest.importorskip("torch")
tnn = torch.nn

pytestmark = pytest.mark.oracle
BACKENDS = ["numpy", "jax"]
RNG = np.random.default_rng(0)
SEQ, BATCH, INPUT, HIDDEN = 3, 2, 4, 5


def _float(backend):
    return np.float64 if backend == "numpy" else np.float32


def _ours(values, backend, requires_grad=True):
    return js.tensor(np.asarray(values, dtype=_float(backend)), backend=backend,
                     requires_grad=requires_grad)


# name: (the layer, given a library's nn and factory keywords; the input's shape; the
# shapes of the initial states, empty for none)
CASES = {
    "LSTM 2 layers": (lambda m, **f: m.LSTM(INPUT, HIDDEN, 2, **f), (SEQ, BATCH, INPUT),
                      [(2, BATCH, HIDDEN), (2, BATCH, HIDDEN)]),
    "LSTM bidirectional proj batch_first": (
        lambda m, **f: m.LSTM(INPUT, HIDDEN, 2, batch_first=True, bidirectional=True,
                              proj_size=3, **f),
        (BATCH, SEQ, INPUT), [(4, BATCH, 3), (4, BATCH, HIDDEN)]),
    "LSTM unbatched": (lambda m, **f: m.LSTM(INPUT, HIDDEN, **f), (SEQ, INPUT),
                       [(1, HIDDEN), (1, HIDDEN)]),
    "GRU bidirectional": (lambda m, **f: m.GRU(INPUT, HIDDEN, 2, bidirectional=True, **f),
                          (SEQ, BATCH, INPUT), [(4, BATCH, HIDDEN)]),
    "GRU unbatched batch_first": (lambda m, **f: m.GRU(INPUT, HIDDEN, batch_first=True, **f),
                                  (SEQ, INPUT), []),
    "RNN relu no bias batch_first": (
        lambda m, **f: m.RNN(INPUT, HIDDEN, 2, nonlinearity="relu", bias=False,
                             batch_first=True, **f), (BATCH, SEQ, INPUT), []),
    "RNN unbatched": (lambda m, **f: m.RNN(INPUT, HIDDEN, **f), (SEQ, INPUT), [(1, HIDDEN)]),
    "LSTMCell": (lambda m, **f: m.LSTMCell(INPUT, HIDDEN, **f), (BATCH, INPUT),
                 [(BATCH, HIDDEN), (BATCH, HIDDEN)]),
    "LSTMCell unbatched": (lambda m, **f: m.LSTMCell(INPUT, HIDDEN, bias=False, **f), (INPUT,),
                           [(HIDDEN,), (HIDDEN,)]),
    "GRUCell": (lambda m, **f: m.GRUCell(INPUT, HIDDEN, **f), (BATCH, INPUT), [(BATCH, HIDDEN)]),
    "GRUCell unbatched": (lambda m, **f: m.GRUCell(INPUT, HIDDEN, **f), (INPUT,), []),
    "RNNCell relu unbatched": (
        lambda m, **f: m.RNNCell(INPUT, HIDDEN, nonlinearity="relu", **f), (INPUT,), [(HIDDEN,)]),
    "RNNCell no bias": (lambda m, **f: m.RNNCell(INPUT, HIDDEN, bias=False, **f),
                        (BATCH, INPUT), []),
}


def _initial(states):
    """The layer's `hx` argument: None, one tensor or a pair."""
    return None if not states else states[0] if len(states) == 1 else tuple(states)


def _flat(result):
    """The tensors of a result: (output, h_n), (output, (h_n, c_n)), (h, c) or h."""
    if not isinstance(result, tuple):
        return [result]
    return [t for item in result for t in _flat(item)]


def _pair(name, backend):
    """Our layer and torch's (float64) with the same parameters (ours loaded on NumPy and
    moved, which compiles nothing on JAX)."""
    make = CASES[name][0]
    theirs = make(tnn).double()
    ours = make(js.nn, dtype=_float(backend))
    ours.load_state_dict({k: js.tensor(v.detach().numpy().astype(_float(backend)))
                          for k, v in theirs.state_dict().items()})
    return ours.to(backend=backend), theirs


def _inputs(name):
    _, x_shape, state_shapes = CASES[name]
    return [RNG.standard_normal(s) for s in [x_shape, *state_shapes]]


def _results_and_gradients(layer, xs, ws):
    """The layer's results on `xs` (the input, then the initial states) and the gradients of
    their dot product with the cotangents `ws` wrt `xs` and every parameter."""
    ys = _flat(layer(xs[0], _initial(xs[1:])))
    loss = sum((y * w).sum() for y, w in zip(ys, ws, strict=True))
    return ys, list(js.grad(loss, list(xs) + list(layer.parameters())))


def _torch_results_and_gradients(layer, values):
    """Torch's results and gradients as `_results_and_gradients`, and the cotangents."""
    txs = [torch.tensor(v, requires_grad=True) for v in values]
    tys = _flat(layer(txs[0], _initial(txs[1:])))
    ws = [RNG.standard_normal(tuple(ty.shape)) for ty in tys]
    tloss = sum((ty * torch.tensor(w)).sum() for ty, w in zip(tys, ws, strict=True))
    tgrads = torch.autograd.grad(tloss, txs + list(layer.parameters()))
    return [t.detach().numpy() for t in tys], [g.numpy() for g in tgrads], ws


def _check(name, ys, grads, expected, backend):
    tys, tgrads = expected
    assert len(ys) == len(tys) and len(grads) == len(tgrads)
    for i, (y, ty) in enumerate(zip(ys, tys, strict=True)):
        close(y, ty, backend, f"{name}: result {i}")
    for i, (g, tg) in enumerate(zip(grads, tgrads, strict=True)):
        close(g, tg, backend, f"{name}: gradient {i}")


@pytest.mark.parametrize("name", list(CASES))
def test_layers_match_torch(name):
    ours, theirs = _pair(name, "numpy")
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [tuple(p.shape) for p in ours.parameters()] == [
        tuple(p.shape) for p in theirs.parameters()]
    values = _inputs(name)
    tys, tgrads, ws = _torch_results_and_gradients(theirs, values)
    ys, grads = _results_and_gradients(ours, [_ours(v, "numpy") for v in values],
                                       [_ours(w, "numpy", False) for w in ws])
    _check(name, ys, grads, (tys, tgrads), "numpy")


# On JAX, three cases that take each kind of step (LSTM with its projection, GRU, Elman)
# and the driver's paths (layers, both directions, batch_first, initial states, unbatched),
# as one program: op by op, each new shape would compile each op anew.
JAX_CASES = ["LSTM bidirectional proj batch_first", "GRU bidirectional",
             "RNNCell relu unbatched"]


# One compiled JAX program of the whole family: a minute of XLA compiling on a cold cache,
# so it runs in one of CI's two runs (conftest.py), outside the twin.
@pytest.mark.outside_twin
def test_layers_match_torch_on_jax_in_one_program():
    pairs = [_pair(name, "jax") for name in JAX_CASES]
    values = [_inputs(name) for name in JAX_CASES]
    expected = [_torch_results_and_gradients(theirs, v)
                for (_, theirs), v in zip(pairs, values, strict=True)]
    layers = [ours for ours, _ in pairs]
    sizes = [(len(v), len(e[2])) for v, e in zip(values, expected, strict=True)]

    def program(*tensors):
        tensors, results = list(tensors), []
        for layer, (inputs, outputs) in zip(layers, sizes, strict=True):
            xs, ws = tensors[:inputs], tensors[inputs:inputs + outputs]
            del tensors[:inputs + outputs]
            results.append(_results_and_gradients(layer, xs, ws))
        return results

    flat = [_ours(x, "jax", i < len(v))
            for v, e in zip(values, expected, strict=True) for i, x in enumerate([*v, *e[2]])]
    for (ys, grads), name, (tys, tgrads, _) in zip(js.compile(program)(*flat), JAX_CASES,
                                                   expected, strict=True):
        _check(name, ys, grads, (tys, tgrads), "jax")


@pytest.mark.parametrize("name", ["LSTM bidirectional proj batch_first", "GRU bidirectional"])
def test_second_gradients_match_torch(name):
    ours, theirs = _pair(name, "numpy")
    values = _inputs(name)
    xs = [_ours(v, "numpy") for v in values]
    txs = [torch.tensor(v, requires_grad=True) for v in values]
    wrt, twrt = xs + list(ours.parameters()), txs + list(theirs.parameters())
    ys, tys = _flat(ours(xs[0], _initial(xs[1:]))), _flat(theirs(txs[0], _initial(txs[1:])))
    ws = [RNG.standard_normal(tuple(ty.shape)) for ty in tys]
    vs = [RNG.standard_normal(tuple(t.shape)) for t in twrt]
    grads = js.grad(sum((y * js.tensor(w)).sum() for y, w in zip(ys, ws, strict=True)), wrt,
                    create_graph=True)
    tgrads = torch.autograd.grad(sum((ty * torch.tensor(w)).sum()
                                     for ty, w in zip(tys, ws, strict=True)), twrt,
                                 create_graph=True)
    hs = js.grad(sum((g * js.tensor(v)).sum() for g, v in zip(grads, vs, strict=True)), wrt)
    ths = torch.autograd.grad(sum((g * torch.tensor(v)).sum()
                                  for g, v in zip(tgrads, vs, strict=True)), twrt)
    for i, (h, th) in enumerate(zip(hs, ths, strict=True)):
        close(h, th.numpy(), "numpy", f"second gradient {i}")


REPRS = [
    lambda m: m.RNN(4, 5),
    lambda m: m.RNN(4, 5, 3, nonlinearity="relu", bias=False, batch_first=True, dropout=0.25),
    lambda m: m.LSTM(4, 5, 2, bidirectional=True, proj_size=2, dropout=1),
    lambda m: m.GRU(4, 5, num_layers=2, dropout=0.5),
    lambda m: m.RNNCell(4, 5, bias=False, nonlinearity="relu"),
    lambda m: m.LSTMCell(4, 5),
    lambda m: m.GRUCell(4, 5, bias=False),
]


@pytest.mark.parametrize("make", REPRS)
def test_repr_state_dict_and_all_weights_as_torch(make):
    ours, theirs = make(js.nn), make(tnn)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    if hasattr(theirs, "all_weights"):
        assert [[tuple(p.shape) for p in ps] for ps in ours.all_weights] == [
            [tuple(p.shape) for p in ps] for ps in theirs.all_weights]
        assert ours.flatten_parameters() is None


def test_initialisation_is_pure_and_uniform_in_torch_bounds():
    a = js.nn.LSTM(INPUT, HIDDEN, 2, bidirectional=True, proj_size=3, key=7)
    b = js.nn.LSTM(INPUT, HIDDEN, 2, bidirectional=True, proj_size=3, key=7)
    values = [arr(p) for p in a.parameters()]
    for va, pb in zip(values, b.parameters(), strict=True):
        np.testing.assert_array_equal(va, arr(pb))
    assert max(np.abs(v).max() for v in values) <= 1 / math.sqrt(HIDDEN)
    assert not np.array_equal(values[2], values[3])  # each parameter draws its own values
    every = np.concatenate([v.ravel() for v in values])
    assert every.min() < -0.3 and every.max() > 0.3  # spread over the whole bound
    cell = js.nn.GRUCell(INPUT, HIDDEN, key=7, backend="jax")
    assert [(p.backend, str(p.dtype)) for p in cell.parameters()] == [("jax", "float32")] * 4
    assert max(np.abs(arr(p)).max() for p in cell.parameters()) <= 1 / math.sqrt(HIDDEN)


def test_dropout_between_layers_only_in_training():
    make = lambda m, **f: m.LSTM(INPUT, HIDDEN, 2, dropout=0.5, **f)  # noqa: E731
    theirs = make(tnn).double().eval()
    ours = make(js.nn, dtype=np.float64)
    ours.load_state_dict({k: js.tensor(v.detach().numpy()) for k, v in
                          theirs.state_dict().items()})
    x = RNG.standard_normal((SEQ, BATCH, INPUT))
    trained, (h_train, _) = ours(js.tensor(x), key=3)
    again, _ = ours(js.tensor(x), key=3)
    np.testing.assert_array_equal(arr(trained), arr(again))
    ours.eval()
    evaluated, (h_eval, _) = ours(js.tensor(x), key=3)
    expected, (th, _) = theirs(torch.tensor(x))
    close(evaluated, expected.detach().numpy(), "numpy", "eval output")
    close(h_eval, th.detach().numpy(), "numpy", "eval h_n")
    assert not np.allclose(arr(trained), arr(evaluated))
    ours.train()
    js.manual_seed(1)
    drawn, _ = ours(js.tensor(x))
    js.manual_seed(1)
    np.testing.assert_array_equal(arr(ours(js.tensor(x))[0]), arr(drawn))
    # the first layer's final state comes before any dropout
    close(h_train[0], th[0].detach().numpy(), "numpy", "first layer")


def test_dropout_with_one_layer_warns_as_torch():
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        tnn.GRU(INPUT, HIDDEN, dropout=0.5)
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        js.nn.GRU(INPUT, HIDDEN, dropout=0.5)
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]


def _raises_like_torch(call):
    """`call(nn, tensor)` raises for torch; ours raises the same type, its message first."""
    with pytest.raises(Exception) as expected:
        call(tnn, torch.zeros)
    with pytest.raises(expected.type) as got:
        call(js.nn, lambda *shape: js.zeros(*shape, dtype=np.float32))
    assert str(got.value).startswith(str(expected.value))


ERRORS = {  # name: call(nn, zeros)
    "input size": lambda m, z: m.LSTM(4, 5)(z(3, 2, 6)),
    "input dims": lambda m, z: m.GRU(4, 5)(z(3, 2, 4, 1)),
    "RNN input dims": lambda m, z: m.RNN(4, 5)(z(4)),
    "h0 shape": lambda m, z: m.GRU(4, 5)(z(3, 2, 4), z(2, 2, 5)),
    "h0 dims": lambda m, z: m.RNN(4, 5)(z(3, 2, 4), z(2, 5)),
    "h0 dims unbatched": lambda m, z: m.RNN(4, 5)(z(3, 4), z(1, 1, 5)),
    "c0 shape": lambda m, z: m.LSTM(4, 5)(z(3, 2, 4), (z(1, 2, 5), z(1, 3, 5))),
    "h0 shape proj": lambda m, z: m.LSTM(4, 5, proj_size=2)(z(3, 2, 4), (z(1, 2, 5), z(1, 2, 5))),
    "hx dims": lambda m, z: m.LSTM(4, 5)(z(3, 2, 4), (z(2, 5), z(1, 2, 5))),
    "bad nonlinearity": lambda m, z: m.RNN(4, 5, nonlinearity="gelu"),
    "cell bad nonlinearity": lambda m, z: m.RNNCell(4, 5, nonlinearity="gelu")(z(2, 4)),
    "proj_size >= hidden_size": lambda m, z: m.LSTM(4, 5, proj_size=5),
    "negative proj_size": lambda m, z: m.LSTM(4, 5, proj_size=-1),
    "dropout above 1": lambda m, z: m.LSTM(4, 5, dropout=1.5),
    "dropout below 0": lambda m, z: m.GRU(4, 5, dropout=-0.1),
    "hidden_size 0": lambda m, z: m.GRU(4, 0),
    "bias not bool": lambda m, z: m.GRU(4, 5, bias=1),
    "cell input size": lambda m, z: m.GRUCell(4, 5)(z(2, 3)),
    "cell input dims": lambda m, z: m.LSTMCell(4, 5)(z(2, 3, 4)),
    "cell hidden size": lambda m, z: m.RNNCell(4, 5)(z(2, 4), z(2, 6)),
    "cell hidden batch": lambda m, z: m.LSTMCell(4, 5)(z(2, 4), (z(3, 5), z(2, 5))),
    "cell c size": lambda m, z: m.LSTMCell(4, 5)(z(2, 4), (z(2, 5), z(2, 6))),
    "cell hx dims": lambda m, z: m.LSTMCell(4, 5)(z(2, 4), (z(2, 5), z(1, 2, 5))),
    "cell hidden dims": lambda m, z: m.GRUCell(4, 5)(z(2, 4), z(1, 2, 5)),
    "cell unbatched input, batched hidden": lambda m, z: m.GRUCell(4, 5)(z(4), z(1, 5)),
    "hx dims before input size": lambda m, z: m.RNN(4, 5)(z(3, 2, 6), z(2, 5)),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_as_torch(name):
    _raises_like_torch(ERRORS[name])


def test_packed_sequence_is_refused_with_the_padding_alternative():
    packed = tnn.utils.rnn.pack_padded_sequence(torch.zeros(3, 2, 4), [3, 2])
    for layer in (js.nn.LSTM(4, 5), js.nn.GRU(4, 5), js.nn.RNN(4, 5)):
        with pytest.raises(NotImplementedError, match="pad_sequence"):
            layer(packed)


def test_input_dtype_must_match_the_weights():
    with pytest.raises(ValueError, match="does not match weight dtype"):
        js.nn.GRU(4, 5)(js.zeros(3, 2, 4, dtype=np.float64))
