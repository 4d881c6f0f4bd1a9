"""The modules of nn/instance_norm.py, nn/more_pooling.py, nn/embedding_bag.py and
nn/parameter_containers.py against torch's with the same parameters (torch's state_dict
loaded): outputs, input and parameter gradients, buffers after a training-mode call,
reprs, state_dict keys, the container API and the errors; on NumPy (float64) each, on
JAX (float32) a few as one compiled program. (The MaxUnpool modules are tested with
their functionals, in test_nn_remaining_functionals.py.)"""

from __future__ import annotations

import warnings
from collections import OrderedDict

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import arr
from ops_oracle import close, tensor_of

import jaxstream as js

torch = pytest.importorskip("torch")
tnn = torch.nn

pytestmark = pytest.mark.oracle
RNG = np.random.default_rng(0)
X3, X4, X5 = (RNG.standard_normal(s) for s in ((2, 3, 6), (2, 3, 4, 6), (1, 3, 2, 4, 4)))
COLUMNS = RNG.standard_normal((2, 12, 6))
BAGS, OFFSETS = np.array([1, 2, 4, 5, 4, 3, 2, 9]), np.array([0, 3, 3, 5])


def _float(backend):
    return np.float64 if backend == "numpy" else np.float32


# name: (module of a library, inputs (float arrays, or integer ones that take no gradient),
#        forward keyword arguments)
CASES = {
    "InstanceNorm1d affine": (lambda m: m.InstanceNorm1d(3, affine=True), [X3], {}),
    "InstanceNorm1d unbatched": (lambda m: m.InstanceNorm1d(3, eps=1e-3), [X3[0]], {}),
    "InstanceNorm2d": (lambda m: m.InstanceNorm2d(3), [X4], {}),
    "InstanceNorm3d affine no bias": (lambda m: m.InstanceNorm3d(3, affine=True, bias=False),
                                      [X5], {}),
    "LocalResponseNorm": (lambda m: m.LocalResponseNorm(3, alpha=0.1, beta=0.5, k=2.0), [X4],
                          {}),
    "LPPool1d": (lambda m: m.LPPool1d(2, 3, stride=2), [X3], {}),
    "LPPool2d": (lambda m: m.LPPool2d(3, (2, 3), ceil_mode=True), [np.abs(X4)], {}),
    "LPPool3d": (lambda m: m.LPPool3d(1.5, 2), [np.abs(X5)], {}),
    "Unfold": (lambda m: m.Unfold((2, 3), dilation=(1, 2), padding=1, stride=2), [X4], {}),
    "Fold": (lambda m: m.Fold((3, 4), 2), [COLUMNS], {}),
    "UpsamplingNearest2d": (lambda m: m.UpsamplingNearest2d(scale_factor=2), [X4], {}),
    "UpsamplingBilinear2d": (lambda m: m.UpsamplingBilinear2d(size=(5, 7)), [X4], {}),
    "EmbeddingBag": (lambda m: m.EmbeddingBag(10, 3, padding_idx=4), [BAGS, OFFSETS], {}),
    "EmbeddingBag sum": (lambda m: m.EmbeddingBag(10, 3, mode="sum",
                                                  include_last_offset=True),
                         [BAGS, np.array([0, 3, 8])],
                         {"per_sample_weights": RNG.uniform(size=8)}),
    "EmbeddingBag max 2-D": (lambda m: m.EmbeddingBag(10, 3, mode="max"),
                             [BAGS.reshape(2, 4)], {}),
}
FACTORY = ("InstanceNorm", "EmbeddingBag")


def _pair(name, make, backend):
    """Torch's module in float64 and ours holding its parameters and buffers."""
    theirs = make(tnn).double()
    ours = _made_with(make, _float(backend)) if name.startswith(FACTORY) else make(js.nn)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def _made_with(make, dtype):
    class Factory:
        def __getattr__(self, name):
            return lambda *a, **k: getattr(js.nn, name)(*a, **k, dtype=dtype)
    return make(Factory())


def _wrap(values, library, backend, requires_grad):
    """A float array as a leaf of `library` (float64 for torch), an integer one as is."""
    if values.dtype.kind in "iu":
        return torch.tensor(values) if library is torch else js.tensor(values, backend=backend)
    if library is torch:
        return torch.tensor(values, dtype=torch.float64, requires_grad=requires_grad)
    return tensor_of(values, backend, requires_grad)


def _forward_args(kwargs, library, backend):
    return {k: _wrap(v, library, backend, False) if isinstance(v, np.ndarray) else v
            for k, v in kwargs.items()}


@pytest.mark.parametrize("name", list(CASES))
def test_modules_match_torch(name):
    make, inputs, kwargs = CASES[name]
    ours, theirs = _pair(name, make, "numpy")
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    xs = [_wrap(x, js, "numpy", True) for x in inputs]
    txs = [_wrap(x, torch, "numpy", True) for x in inputs]
    y = ours(*xs, **_forward_args(kwargs, js, "numpy"))
    ty = theirs(*txs, **_forward_args(kwargs, torch, "numpy"))
    close(y, ty.detach().numpy(), "numpy", "output")
    w = RNG.standard_normal(tuple(ty.shape))
    floats = [i for i, x in enumerate(inputs) if x.dtype.kind == "f"]
    wrt = [xs[i] for i in floats] + list(ours.parameters())
    grads = js.grad((y * js.tensor(w)).sum(), wrt)
    tgrads = torch.autograd.grad((ty * torch.tensor(w)).sum(),
                                 [txs[i] for i in floats] + list(theirs.parameters()))
    for i, (g, tg) in enumerate(zip(grads, tgrads, strict=True)):
        close(g, tg.numpy(), "numpy", f"gradient {i}")


def _running_stats_steps(library, make, x):
    """Two training-mode calls, then one in eval: the outputs and the buffers after."""
    layer = make(tnn).double() if library is torch else _made_with(make, np.float64)
    wrap = torch.tensor if library is torch else js.tensor
    outs = [layer(wrap(x)), layer(wrap(x[::-1].copy()))]
    layer.eval()
    outs.append(layer(wrap(x)))
    return outs, {k: v.numpy() if library is torch else arr(v)
                  for k, v in layer.state_dict().items()}


@pytest.mark.parametrize("momentum", [0.3, None])
def test_instance_norm_running_statistics_match_torch(momentum):
    """Tracked statistics move in training (num_batches_tracked stays 0, as torch's; with
    momentum=None they stay) and normalize in eval."""
    def make(m):
        return m.InstanceNorm2d(3, momentum=momentum, affine=True, track_running_stats=True)
    outs, state = _running_stats_steps(js, make, X4)
    touts, tstate = _running_stats_steps(torch, make, X4)
    assert list(state) == list(tstate)
    for key, value in tstate.items():
        close(state[key], value, "numpy", key)
    for i, (y, ty) in enumerate(zip(outs, touts, strict=True)):
        close(y, ty.detach().numpy(), "numpy", f"output {i}")


def test_instance_norm_checks_as_torch():
    def messages(library, make, x):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            make(library)(js.tensor(x) if library is js.nn else torch.tensor(x))
        return [str(w.message) for w in caught]
    for make in (lambda m: m.InstanceNorm2d(4), lambda m: m.InstanceNorm1d(5)):
        assert messages(js.nn, make, X4[0]) == messages(tnn, make, X4[0]) != []
    for make, x in [(lambda m: m.InstanceNorm2d(4, affine=True), X4),
                    (lambda m: m.InstanceNorm2d(3), X3[0]), (lambda m: m.InstanceNorm3d(3), X3),
                    (lambda m: m.InstanceNorm1d(3), X3[:, :, :1])]:
        with pytest.raises(ValueError) as expected:
            make(tnn)(torch.tensor(x))
        with pytest.raises(ValueError) as got:
            make(js.nn)(js.tensor(x))
        assert str(expected.value).replace("torch.Size", "jaxstream.Size") in str(got.value)


def test_embedding_bag_initialisation_from_pretrained_and_refusals():
    a, b = js.nn.EmbeddingBag(6, 4, padding_idx=-2, key=3), js.nn.EmbeddingBag(6, 4, key=3)
    assert a.padding_idx == 4 and not arr(a.weight)[4].any()
    np.testing.assert_array_equal(arr(a.weight)[:4], arr(b.weight)[:4])
    table = js.tensor(RNG.standard_normal((5, 2)))
    for freeze in (True, False):
        bag = js.nn.EmbeddingBag.from_pretrained(table, freeze=freeze, mode="sum", padding_idx=1)
        theirs = tnn.EmbeddingBag.from_pretrained(torch.tensor(arr(table)), freeze=freeze,
                                                  mode="sum", padding_idx=1)
        assert bag.weight.requires_grad is theirs.weight.requires_grad is not freeze
        assert repr(bag) == repr(theirs) and arr(bag.weight)[1].any()
        close(bag(js.tensor([[0, 1, 2]])), theirs(torch.tensor([[0, 1, 2]])).detach().numpy(),
              "numpy", "bag")
    for make in (lambda m: m.EmbeddingBag(5, 2, padding_idx=5),
                 lambda m: m.EmbeddingBag(5, 2, _weight=js.ones((4, 2)) if m is js.nn
                                          else torch.ones(4, 2))):
        with pytest.raises(AssertionError):
            make(tnn)
        with pytest.raises(AssertionError):
            make(js.nn)
    with pytest.raises(NotImplementedError, match="max_norm"):
        js.nn.EmbeddingBag(5, 2, max_norm=1.0)(js.tensor([[0, 1]]))


def _torch_names(text):
    """Torch's repr with jaxstream's dtype names where torch names its own."""
    for theirs, ours in (("torch.float32", "float32"), ("torch.float64", "float64"),
                         ("torch.FloatTensor", "float32"), ("torch.DoubleTensor", "float64")):
        text = text.replace(theirs, ours)
    return text


def _list_edits(library, make_tensor):
    """The same ParameterList edits in either library, and what they give."""
    nn = library.nn
    values = nn.ParameterList([make_tensor((3, 4)), nn.Parameter(make_tensor((2,)),
                                                                 requires_grad=False)])
    values.append(make_tensor((1,))).extend([5, "text"])
    values += [nn.Linear(2, 3)]
    values[-3] = make_tensor((2, 2))
    sliced = values[1:4:2]
    seen = (len(values), [isinstance(v, nn.Parameter) for v in values],
            _torch_names(repr(values)),
            list(values.state_dict()), [n for n, _ in values.named_parameters()],
            len(sliced), type(sliced).__name__, _torch_names(repr(sliced)),
            [p.requires_grad for p in values.parameters()], "0" in dir(values))
    return seen, values


def test_parameter_list_matches_torch():
    ours, values = _list_edits(js, lambda s: js.ones(s))
    theirs, tvalues = _list_edits(torch, lambda s: torch.ones(s))
    assert ours == theirs
    assert values[1] is values[-5] and values[0] is list(values.parameters())[0]
    for edit in (lambda v: v[6], lambda v: v[-7], lambda v: v.extend(3), lambda v: v(1)):
        with pytest.raises((IndexError, TypeError, RuntimeError)) as expected:
            edit(tvalues)
        with pytest.raises(expected.type) as got:
            edit(values)
        assert str(expected.value) in str(got.value)
    with pytest.raises(TypeError, match="extend should be called with an iterable"):
        values.extend(values[0])


def _dict_edits(library, make_tensor):
    """The same ParameterDict edits in either library, and what they give."""
    nn = library.nn
    values = nn.ParameterDict({"b": make_tensor((3, 4)), "a": make_tensor((2,))})
    values.update(OrderedDict([("z", make_tensor((1,))), ("c", 3)]))
    values.update([("d", make_tensor((2, 2)))])
    values["a"] = make_tensor((5,))
    seen = [list(values), list(values.keys()), [k for k, _ in values.items()],
            _torch_names(repr(values)), list(values.state_dict()), "c" in values,
            list(reversed(values)), values.get("y", 7), len(values)]
    seen += [values.setdefault("e", 1), values.pop("c"), values.popitem()[0],
             list(values | nn.ParameterDict({"x": make_tensor((1,))})), len(values.copy())]
    del values["z"]
    values |= nn.ParameterDict({"f": make_tensor((1,))})
    seen += [list(values), list(values.fromkeys(["p", "q"]))]
    values.clear()
    return seen + [len(values)], values


def test_parameter_dict_matches_torch():
    ours, values = _dict_edits(js, lambda s: js.ones(s))
    theirs, tvalues = _dict_edits(torch, lambda s: torch.ones(s))
    assert ours == theirs
    for edit in (lambda lib, v: v[1], lambda lib, v: lib.nn.ParameterDict(5),
                 lambda lib, v: v.update([("a",)]), lambda lib, v: v.update([5]),
                 lambda lib, v: v.__setitem__("a.b", lib.ones(1)), lambda lib, v: v(1)):
        with pytest.raises((KeyError, TypeError, ValueError, RuntimeError)) as expected:
            edit(torch, tvalues)
        with pytest.raises(expected.type) as got:
            edit(js, values)
        told = str(expected.value).strip("'").split(" Open an issue")[0]
        assert told.replace("; isint", "; is int") in str(got.value)


class _Holder(js.nn.Module):
    """A parameter list and dict inside a model."""

    def __init__(self):
        super().__init__()
        self.scales = js.nn.ParameterList([js.ones(3) * 2, js.ones(3)])
        self.shifts = js.nn.ParameterDict({"b": js.zeros(3), "a": js.ones(3)})

    def forward(self, x):
        for scale in self.scales:
            x = x * scale
        return (x + self.shifts["a"] - self.shifts["b"]) ** 2


def test_parameter_containers_are_parameters_and_pytree_leaves():
    model = _Holder()
    assert list(model.state_dict()) == ["scales.0", "scales.1", "shifts.a", "shifts.b"]
    x = js.tensor(np.linspace(-1.0, 1.0, 3, dtype=np.float32))
    loss = model(x).sum()
    grads = js.grad(loss, list(model.parameters()))
    tree_grads = jax.jit(jax.grad(js.to_jax(lambda m, v: m(v).sum())))(
        jax.tree.map(js.Tensor.jax, model), jnp.asarray(arr(x)))
    assert type(tree_grads.scales) is js.nn.ParameterList
    for g, tg in zip(grads, jax.tree.leaves(tree_grads), strict=True):
        np.testing.assert_allclose(np.asarray(tg), arr(g), rtol=1e-6)


def test_a_few_modules_on_jax_in_one_program():
    """InstanceNorm2d, LPPool2d, LocalResponseNorm and Unfold on JAX, as one program."""
    def make(m):
        return [m.InstanceNorm2d(3, affine=True), m.LPPool2d(2, 2), m.LocalResponseNorm(2),
                m.Unfold(2, padding=1)]
    layers, theirs = [layer.to("jax") for layer in make(js.nn)], make(tnn)
    tx = torch.tensor(X4, requires_grad=True)
    ty = torch.cat([layer.double()(tx).reshape(-1) for layer in theirs])
    w = RNG.standard_normal(tuple(ty.shape))

    def step(x, w):
        y = js.cat([layer(x).reshape(-1) for layer in layers])
        return y, js.grad((y * w).sum(), [x, *layers[0].parameters()])

    y, grads = js.compile(step)(tensor_of(X4, "jax"), tensor_of(w, "jax", False))
    close(y, ty.detach().numpy(), "jax", "output")
    tgrads = torch.autograd.grad((ty * torch.tensor(w)).sum(), [tx, *theirs[0].parameters()])
    for g, tg in zip(grads, tgrads, strict=True):
        close(g, tg.numpy(), "jax", "gradient")
