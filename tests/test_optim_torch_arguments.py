"""js.optim's optimizers take PyTorch's remaining arguments: `maximize`, SGD's `dampening`
and default lr, Adam's `amsgrad` and `decoupled_weight_decay`, and the implementation
switches (`foreach`, `fused`, `capturable`, `differentiable`) at their defaults;
diff-tested against torch.optim, eagerly and under js.compile."""

from __future__ import annotations

import pickle

import jax
import numpy as np
import pytest
from helpers import arr, assert_tensors_close, jax_tensor
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxstream as js

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.oracle

SHAPES = [(3, 4), (4,), (2, 2), (3,)]
STEPS = 5
# Gradient sizes that rise and fall, so that amsgrad's running maximum matters.
GRAD_SCALES = [3.0, 1.0, 0.2, 2.0, 0.1]
NP64, NP32, JAX32 = ("numpy", np.float64), ("numpy", np.float32), ("jax", np.float32)

# PyTorch's state entries (but its step count), by the names of ours.
ADAM_STATE = {"exp_avg": "mu", "exp_avg_sq": "nu", "max_exp_avg_sq": "max_exp_avg_sq"}
STATE_NAMES = {
    "SGD": {"momentum_buffer": "momentum_buffer"},
    "Adam": ADAM_STATE,
    "AdamW": ADAM_STATE,
    "RMSprop": {"square_avg": "nu", "grad_avg": "mu", "momentum_buffer": "trace"},
    "Adagrad": {"sum": "sum_of_squares"},
}

# (optimizer, constructor arguments, the groups' own entries): the parameters split
# evenly over the groups, so that one optimizer tries several combinations.
CASES = [
    ("SGD", {}, [{}, {"maximize": True}]),  # PyTorch's default lr, 1e-3
    ("SGD", {"lr": 0.1, "momentum": 0.9},
     [{"dampening": 0.3}, {"dampening": 0.5, "weight_decay": 0.1, "maximize": True},
      {"nesterov": True, "maximize": True}, {"momentum": 0.0, "dampening": 0.5}]),
    ("Adam", {"lr": 0.01, "foreach": False, "fused": False, "capturable": False,
              "differentiable": False},
     [{"amsgrad": True}, {"amsgrad": True, "weight_decay": 0.1, "maximize": True},
      {"decoupled_weight_decay": True, "weight_decay": 0.1},
      {"decoupled_weight_decay": True, "weight_decay": 0.2, "amsgrad": True, "maximize": True}]),
    ("AdamW", {"lr": 0.01, "amsgrad": True, "foreach": None},
     [{}, {"amsgrad": False, "maximize": True, "weight_decay": 0.5}]),
    ("RMSprop", {"maximize": True, "foreach": False},
     [{"weight_decay": 0.1, "momentum": 0.5}, {"centered": True}]),
    ("Adagrad", {"maximize": True, "lr_decay": 0.01}, [{"weight_decay": 0.1}, {}]),
]

SWITCHES = {
    "SGD": ("foreach", "differentiable", "fused"),
    "Adam": ("foreach", "capturable", "differentiable", "fused"),
    "AdamW": ("foreach", "capturable", "differentiable", "fused"),
    "RMSprop": ("capturable", "foreach", "differentiable"),
    "Adagrad": ("foreach", "differentiable", "fused"),
}


def _grouped(params, entries):
    bounds = np.linspace(0, len(params), len(entries) + 1).astype(int)
    return [{"params": params[start:stop], **own}
            for start, stop, own in zip(bounds[:-1], bounds[1:], entries, strict=True)]


def _values(seed, dtype, scale=1.0):
    rng = np.random.default_rng(seed)
    return [(scale * rng.standard_normal(shape)).astype(dtype) for shape in SHAPES]


def _twins(place):
    backend, dtype = place
    values = _values(0, dtype)
    mine = [js.tensor(v, requires_grad=True, backend=backend) for v in values]
    return mine, [torch.tensor(v, requires_grad=True) for v in values]


def _step_both(opt, torch_opt, mine, theirs, step):
    dtype = theirs[0].detach().numpy().dtype
    for p, tp, g in zip(mine, theirs, _values(step + 1, dtype, GRAD_SCALES[step]), strict=True):
        p.grad = js.tensor(g, backend=p.backend)
        tp.grad = torch.tensor(g)
    opt.step()
    torch_opt.step()


def _tolerance(dtype):
    return {"rtol": 1e-10, "atol": 1e-12} if dtype == np.float64 else {"rtol": 1e-5, "atol": 1e-6}


def _assert_params_match(mine, theirs, dtype, what=""):
    for p, tp in zip(mine, theirs, strict=True):
        assert p.dtype == dtype
        np.testing.assert_allclose(arr(p), tp.detach().numpy(), err_msg=what, **_tolerance(dtype))


def _state_entries(state, name):
    """Ours, by group: the per-parameter arrays of the state field `name`, wherever the
    group's chain holds it (a group's state sits under its index in the partition)."""
    found = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(state)[0]:
        if any(getattr(key, "name", None) == name for key in path):
            group = next((key.key for key in path if isinstance(key, jax.tree_util.DictKey)), 0)
            found.setdefault(group, []).append(leaf)
    return found


def _assert_state_matches(opt, torch_opt, dtype):
    """Each state tensor PyTorch keeps per parameter equals ours of that name (where
    PyTorch keeps none, as SGD without momentum, ours may keep zeros)."""
    ours = opt.state_dict()["state"]
    names = STATE_NAMES[type(opt).__name__]
    theirs = torch_opt.state_dict()
    compared = 0
    for g, group in enumerate(theirs["param_groups"]):
        held = [theirs["state"].get(i, {}) for i in group["params"]]
        for name in {n for entries in held for n, v in entries.items() if v is not None}:
            if name == "step":
                continue
            mine = _state_entries(ours, names[name])[g]
            assert len(mine) == len(held), name
            for arrays, entries in zip(mine, held, strict=True):
                np.testing.assert_allclose(np.asarray(arrays), entries[name].numpy(),
                                           err_msg=f"group {g}: {name}", **_tolerance(dtype))
                compared += 1
    assert compared or not theirs["state"]


@pytest.mark.parametrize("place", [NP64, JAX32], ids=["numpy64", "jax32"])
@pytest.mark.parametrize(("name", "kwargs", "entries"), CASES,
                         ids=[f"{case[0]}{i}" for i, case in enumerate(CASES)])
def test_five_steps_match_torch_in_parameters_and_state(name, kwargs, entries, place):
    mine, theirs = _twins(place)
    opt = getattr(js.optim, name)(_grouped(mine, entries), **kwargs)
    torch_opt = getattr(torch.optim, name)(_grouped(theirs, entries), **kwargs)
    for step in range(STEPS):
        _step_both(opt, torch_opt, mine, theirs, step)
    _assert_params_match(mine, theirs, place[1])
    _assert_state_matches(opt, torch_opt, place[1])


@pytest.mark.parametrize("name", list(SWITCHES))
def test_groups_have_torchs_entries_in_torchs_order(name):
    mine, theirs = _twins(NP64)
    group = getattr(js.optim, name)(mine).state_dict()["param_groups"][0]
    torch_group = getattr(torch.optim, name)(theirs).state_dict()["param_groups"][0]
    assert list(group) == list(torch_group)
    assert group == torch_group


@settings(max_examples=10, deadline=None, derandomize=True)
@given(momentum=st.sampled_from([0.0, 0.5, 0.9]), dampening=st.floats(0.0, 1.0),
       weight_decay=st.sampled_from([0.0, 0.05]), nesterov=st.booleans(),
       maximize=st.booleans())
def test_sgd_hyperparameters_match_torch(momentum, dampening, weight_decay, nesterov, maximize):
    if nesterov:  # PyTorch's rule: nesterov takes a momentum and no dampening
        momentum, dampening = momentum or 0.9, 0.0
    kwargs = {"lr": 0.1, "momentum": momentum, "dampening": dampening,
              "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize}
    mine, theirs = _twins(NP64)
    opt, torch_opt = js.optim.SGD(mine, **kwargs), torch.optim.SGD(theirs, **kwargs)
    for step in range(STEPS):
        _step_both(opt, torch_opt, mine, theirs, step)
    _assert_params_match(mine, theirs, np.float64)
    _assert_state_matches(opt, torch_opt, np.float64)


@settings(max_examples=10, deadline=None, derandomize=True)
@given(beta1=st.floats(0.0, 0.95), beta2=st.floats(0.5, 0.999),
       weight_decay=st.sampled_from([0.0, 0.1]), amsgrad=st.booleans(), maximize=st.booleans(),
       decoupled=st.booleans())
def test_adam_hyperparameters_match_torch(beta1, beta2, weight_decay, amsgrad, maximize,
                                          decoupled):
    kwargs = {"lr": 0.01, "betas": (beta1, beta2), "weight_decay": weight_decay,
              "amsgrad": amsgrad, "maximize": maximize, "decoupled_weight_decay": decoupled}
    mine, theirs = _twins(NP64)
    opt, torch_opt = js.optim.Adam(mine, **kwargs), torch.optim.Adam(theirs, **kwargs)
    for step in range(STEPS):
        _step_both(opt, torch_opt, mine, theirs, step)
    _assert_params_match(mine, theirs, np.float64)
    _assert_state_matches(opt, torch_opt, np.float64)


@pytest.mark.parametrize("place", [NP64, NP32, JAX32], ids=["numpy64", "numpy32", "jax32"])
def test_new_entries_edited_in_param_groups_between_steps_are_used(place):
    mine, theirs = _twins(place)
    groups = [{"params": mine[:1]}, {"params": mine[1:], "dampening": 0.2}]
    torch_groups = [{"params": theirs[:1]}, {"params": theirs[1:], "dampening": 0.2}]
    opt = js.optim.SGD(groups, lr=0.1, momentum=0.9)
    torch_opt = torch.optim.SGD(torch_groups, lr=0.1, momentum=0.9)
    edits = {1: ("dampening", 0.6, 0), 2: ("maximize", True, 1), 3: ("maximize", False, 1)}
    for step in range(STEPS):
        if step in edits:
            entry, value, index = edits[step]
            opt.param_groups[index][entry] = torch_opt.param_groups[index][entry] = value
        _step_both(opt, torch_opt, mine, theirs, step)
        _assert_params_match(mine, theirs, place[1], f"step {step}")


def test_adams_decoupled_weight_decay_edited_in_a_group_switches_the_rule():
    mine, theirs = _twins(NP64)
    opt = js.optim.AdamW(mine, lr=0.01, amsgrad=True, weight_decay=0.3)
    torch_opt = torch.optim.AdamW(theirs, lr=0.01, amsgrad=True, weight_decay=0.3)
    for step in range(STEPS):
        if step == 2:
            opt.param_groups[0]["decoupled_weight_decay"] = False
            torch_opt.param_groups[0]["decoupled_weight_decay"] = False
        _step_both(opt, torch_opt, mine, theirs, step)
    _assert_params_match(mine, theirs, np.float64)


@pytest.mark.parametrize(("name", "kwargs"), [
    ("Adam", {"lr": 0.01, "amsgrad": True, "maximize": True}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.4, "maximize": True}),
])
def test_state_dict_round_trip_restores_the_new_entries(name, kwargs):
    mine, theirs = _twins(NP64)
    opt = getattr(js.optim, name)(mine, **kwargs)
    torch_opt = getattr(torch.optim, name)(theirs, **kwargs)
    for step in range(2):
        _step_both(opt, torch_opt, mine, theirs, step)
    saved = pickle.loads(pickle.dumps(opt.state_dict()))
    assert saved["param_groups"] == torch_opt.state_dict()["param_groups"]
    twins = [js.tensor(arr(p), requires_grad=True) for p in mine]
    twin_opt = getattr(js.optim, name)(twins, lr=0.5)
    twin_opt.load_state_dict(saved)
    assert {k: twin_opt.param_groups[0][k] for k in kwargs} == kwargs
    for step in range(2, STEPS):
        for twin, g in zip(twins, _values(step + 1, np.float64, GRAD_SCALES[step]), strict=True):
            twin.grad = js.tensor(g)
        twin_opt.step()
        _step_both(opt, torch_opt, mine, theirs, step)
    _assert_params_match(twins, theirs, np.float64)
    _assert_state_matches(twin_opt, torch_opt, np.float64)


def _compiled_run(kwargs, edits):
    """Ours compiled, ours eager and torch's, stepping the same tanh regression, each
    group entry in `edits` (by call) set in all three before that call."""
    values = _values(0, np.float32)[:2]  # w and b
    batches = [np.random.default_rng(100 + i).normal(size=(2, 3)).astype(np.float32)
               for i in range(STEPS)]
    runs = []
    for make in (lambda v: jax_tensor(v, True), lambda v: jax_tensor(v, True),
                 lambda v: torch.tensor(v, requires_grad=True)):
        params = [make(v) for v in values]
        optim = torch.optim if isinstance(params[0], torch.Tensor) else js.optim
        runs.append((params, optim.SGD(params, **kwargs)))

    def step(params, opt, x):
        opt.zero_grad()
        w, b = params
        ((x @ w + b).tanh() ** 2).mean().backward()
        opt.step()

    compiled = js.compile(step)
    for i, x in enumerate(batches):
        for _, opt in runs:
            opt.param_groups[0].update(edits.get(i, {}))
        (step if i == 0 else compiled)(*runs[0], jax_tensor(x))  # the first finds no .grads
        step(*runs[1], jax_tensor(x))
        step(*runs[2], torch.tensor(x))
        for c, e, t in zip(*(params for params, _ in runs), strict=True):
            assert_tensors_close(c, e, f"call {i}: compiled against eager")
            np.testing.assert_allclose(arr(c), t.detach().numpy(), rtol=1e-5, atol=1e-6,
                                       err_msg=f"call {i}: compiled against torch")
    return compiled.cache_size()


def test_dampening_edited_between_compiled_calls_needs_no_new_trace():
    kwargs = {"lr": 0.1, "momentum": 0.9, "dampening": 0.1, "maximize": True}
    assert _compiled_run(kwargs, {2: {"dampening": 0.7}, 3: {"lr": 0.05}}) == 1


def test_maximize_edited_between_compiled_calls_traces_again():
    """A build option, as nesterov: the transformation is rebuilt, and traced again."""
    kwargs = {"lr": 0.1, "momentum": 0.5, "dampening": 0.3}
    assert _compiled_run(kwargs, {2: {"maximize": True}}) > 1


@pytest.mark.parametrize(("name", "switch"),
                         [(name, switch) for name, switches in SWITCHES.items()
                          for switch in switches])
def test_implementation_switches_are_refused_where_true(name, switch):
    mine, _ = _twins(NP64)
    hint = "step is not differentiable" if switch == "differentiable" else "gives the same"
    with pytest.raises(ValueError, match=f"^{name}: {switch}=True .*{hint}"):
        getattr(js.optim, name)(mine[:1], **{switch: True})
    opt = getattr(js.optim, name)(mine[:1], **{switch: False})
    with pytest.raises(ValueError, match=f"^{name}: {switch}=True"):
        opt.add_param_group({"params": mine[1:], switch: True})
    assert len(opt.param_groups) == 1
    opt.param_groups[0][switch] = True
    mine[0].grad = js.ones_like(mine[0])
    with pytest.raises(ValueError, match=f"^{name}: {switch}=True"):
        opt.step()
    opt.param_groups[0][switch] = False
    opt.step()


@pytest.mark.parametrize(
    ("name", "args", "kwargs"),
    [
        ("SGD", (-0.1,), {}),
        ("SGD", (0.1, -1.0), {}),
        ("SGD", (0.1, 0.9, 0.1), {"nesterov": True}),
        ("SGD", (0.1,), {"nesterov": True}),
        ("SGD", (0.1, 0.0, 0.0, -0.5), {"maximize": True}),
        ("Adam", (-1.0,), {"amsgrad": True}),
        ("Adam", (0.1, (0.9, 1.0)), {"decoupled_weight_decay": True}),
        ("AdamW", (0.1, (0.9, 0.99), -1.0), {}),
        ("RMSprop", (0.1, -0.5), {"maximize": True}),
        ("Adagrad", (0.1, -1.0), {}),
        ("AdamW", (), {"decoupled_weight_decay": False}),  # AdamW's is always True
        ("SGD", (0.1, 0.0, 0.0, 0.0, False, True), {}),  # maximize is keyword-only
        ("Adam", (), {"nesterov": True}),
    ],
)
def test_bad_arguments_raise_as_torch(name, args, kwargs):
    mine, theirs = _twins(NP64)
    with pytest.raises((ValueError, TypeError)) as expected:
        getattr(torch.optim, name)(theirs, *args, **kwargs)
    with pytest.raises(expected.type) as raised:
        getattr(js.optim, name)(mine, *args, **kwargs)
    if expected.type is ValueError:
        assert str(raised.value) == str(expected.value)
