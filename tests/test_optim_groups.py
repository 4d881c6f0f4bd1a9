"""js.optim parameter groups, RMSprop and Adagrad, diff-tested against torch.optim."""

from __future__ import annotations

import pickle

import jax
import numpy as np
import optax
import pytest
from helpers import arr, assert_tensors_close, jax_tensor

import jaxstream as js

SHAPES = [(3, 4), (4,), (2,)]

NP64, NP32, JAX32 = ("numpy", np.float64), ("numpy", np.float32), ("jax", np.float32)
# (rule, constructor arguments, the two groups' own entries, where): each rule on a
# float64 and a float32 place, the float32 NumPy ones taking the packed exchange.
GROUPED_RULES = [
    ("SGD", {"lr": 0.1, "momentum": 0.9},
     [{}, {"lr": 0.01, "nesterov": True, "weight_decay": 0.1}], NP64),
    ("Adam", {"lr": 0.05}, [{"betas": (0.8, 0.9)}, {"lr": 0.01, "weight_decay": 0.1}], JAX32),
    ("AdamW", {"lr": 0.05}, [{}, {"lr": 0.01, "weight_decay": 0.5}], NP32),
    ("RMSprop", {}, [{}, {"centered": True, "momentum": 0.5, "weight_decay": 0.1}], NP64),
    ("RMSprop", {"lr": 0.01, "alpha": 0.9, "momentum": 0.9, "centered": True},
     [{}, {"eps": 1e-3}], JAX32),
    ("Adagrad", {"lr_decay": 0.1, "initial_accumulator_value": 0.5},
     [{"weight_decay": 0.2}, {"initial_accumulator_value": 2.0}], NP64),
    ("Adagrad", {"lr_decay": 0.01}, [{}, {"lr": 0.05, "eps": 1e-3}], NP32),
]


def _values(seed, dtype, shapes=SHAPES):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) for shape in shapes]


def _twins(torch, dtype, backend="numpy", shapes=SHAPES):
    values = _values(0, dtype, shapes)
    mine = [js.tensor(v, requires_grad=True, backend=backend) for v in values]
    return mine, [torch.tensor(v, requires_grad=True) for v in values]


def _grouped(params, entries, split=2):
    return [{"params": params[:split], **entries[0]}, {"params": params[split:], **entries[1]}]


def _step_both(opt, torch_opt, mine, theirs, seed, torch):
    for p, tp, g in zip(mine, theirs, _values(seed, mine[0].dtype, [p.shape for p in mine]),
                        strict=True):
        p.grad = js.tensor(g, backend=p.backend)
        tp.grad = torch.tensor(g)
    opt.step()
    torch_opt.step()


def _assert_match(mine, theirs, rtol):
    for p, tp in zip(mine, theirs, strict=True):
        np.testing.assert_allclose(arr(p), tp.detach().numpy(), rtol=rtol,
                                   atol=rtol if rtol > 1e-9 else 0)


@pytest.mark.oracle
@pytest.mark.parametrize(("name", "kwargs", "entries", "place"), GROUPED_RULES)
def test_groups_and_rules_match_torch_and_an_edited_lr_is_used(torch, name, kwargs, entries,
                                                                place):
    backend, dtype = place
    mine, theirs = _twins(torch, dtype, backend)
    opt = getattr(js.optim, name)(_grouped(mine, entries), **kwargs)
    torch_opt = getattr(torch.optim, name)(_grouped(theirs, entries), **kwargs)
    for step in range(4):
        if step == 2:
            opt.param_groups[1]["lr"] = torch_opt.param_groups[1]["lr"] = 0.003
        _step_both(opt, torch_opt, mine, theirs, step + 1, torch)
    assert all(p.dtype == dtype and p.backend == backend for p in mine)
    _assert_match(mine, theirs, 1e-12 if dtype == np.float64 else 1e-6)
    assert opt.param_groups[1]["params"] == mine[2:]


@pytest.mark.oracle
def test_add_param_group_keeps_the_earlier_state_and_matches_torch(torch):
    mine, theirs = _twins(torch, np.float64)
    opt = js.optim.Adam(mine[:2], lr=0.1, betas=(0.8, 0.9))
    torch_opt = torch.optim.Adam(theirs[:2], lr=0.1, betas=(0.8, 0.9))
    _step_both(opt, torch_opt, mine[:2], theirs[:2], 1, torch)
    opt.add_param_group({"params": mine[2], "lr": 0.01})
    torch_opt.add_param_group({"params": theirs[2], "lr": 0.01})
    assert opt.param_groups[1]["betas"] == (0.8, 0.9) and opt.param_groups[1]["params"] == [mine[2]]
    for seed in (2, 3):
        _step_both(opt, torch_opt, mine, theirs, seed, torch)
    _assert_match(mine, theirs, 1e-12)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [mine[0]]})


@pytest.mark.oracle
def test_a_build_option_changed_in_a_group_rebuilds_keeping_the_state(torch):
    mine, theirs = _twins(torch, np.float64)
    opt = js.optim.SGD(_grouped(mine, [{}, {}]), lr=0.1, momentum=0.9)
    torch_opt = torch.optim.SGD(_grouped(theirs, [{}, {}]), lr=0.1, momentum=0.9)
    _step_both(opt, torch_opt, mine, theirs, 1, torch)
    opt.param_groups[0]["nesterov"] = torch_opt.param_groups[0]["nesterov"] = True
    _step_both(opt, torch_opt, mine, theirs, 2, torch)
    _assert_match(mine, theirs, 1e-12)
    rms = js.optim.RMSprop(mine, lr=0.01)
    rms.step()
    rms.param_groups[0]["centered"] = True  # its state would need a mean: PyTorch fails too
    with pytest.raises(ValueError, match="parameter group 0: its state has 12 arrays"):
        rms.step()


@pytest.mark.oracle
def test_state_dict_has_torchs_group_layout_and_round_trips(torch):
    mine, theirs = _twins(torch, np.float64)
    entries = [{"weight_decay": 0.1}, {"lr": 0.01}]
    opt = js.optim.SGD(_grouped(mine, entries), lr=0.1, momentum=0.9)
    torch_opt = torch.optim.SGD(_grouped(theirs, entries), lr=0.1, momentum=0.9)
    _step_both(opt, torch_opt, mine, theirs, 1, torch)
    saved = pickle.loads(pickle.dumps(opt.state_dict()))
    for group, torch_group in zip(saved["param_groups"], torch_opt.state_dict()["param_groups"],
                                  strict=True):
        assert group["params"] == torch_group["params"]
        assert group == {k: torch_group[k] for k in group}
    twins = [js.tensor(arr(p), requires_grad=True) for p in mine]
    twin_opt = js.optim.SGD(_grouped(twins, [{}, {}]), lr=0.5)
    twin_opt.load_state_dict(saved)
    assert twin_opt.param_groups[1]["lr"] == 0.01 and twin_opt.param_groups[0]["momentum"] == 0.9
    for optimizer, params in ((opt, mine), (twin_opt, twins)):
        for p, g in zip(params, _values(2, np.float64), strict=True):
            p.grad = js.tensor(g)
        optimizer.step()
    for p, twin in zip(mine, twins, strict=True):
        np.testing.assert_array_equal(arr(p), arr(twin))


def test_load_state_dict_of_other_groups_raises():
    params = [js.tensor(v, requires_grad=True) for v in _values(0, np.float64)]
    opt = js.optim.SGD(_grouped(params, [{}, {}]), lr=0.1)
    saved = opt.state_dict()
    with pytest.raises(ValueError, match="has 1 parameter groups, but this optimizer has 2"):
        opt.load_state_dict({**saved, "param_groups": saved["param_groups"][:1]})
    with pytest.raises(ValueError, match="does not match this optimizer's state: it has structure"):
        opt.load_state_dict({**saved, "state": [np.zeros(3)]})
    leaves, structure = jax.tree.flatten(saved["state"])
    other_shapes = structure.unflatten([np.zeros((4, 3)) if np.shape(a) == (3, 4) else a
                                        for a in leaves])
    with pytest.raises(ValueError, match=r"arrays have shapes .*\(4, 3\)"):
        opt.load_state_dict({**saved, "state": other_shapes})
    assert opt.param_groups[1]["lr"] == 0.1


def test_a_transformation_given_as_is_takes_each_groups_hyperparameters():
    params = [js.tensor(v, requires_grad=True) for v in _values(0, np.float64)]
    before = [arr(p).copy() for p in params]
    transform = optax.inject_hyperparams(optax.sgd)(learning_rate=0.5)
    opt = js.optim.Optimizer(_grouped(params, [{}, {"learning_rate": 0.25}]), transform)
    assert opt.param_groups[0]["learning_rate"] == 0.5 and opt.defaults == {"learning_rate": 0.5}
    grads = _values(1, np.float64)
    for p, g in zip(params, grads, strict=True):
        p.grad = js.tensor(g)
    opt.step()
    for p, b, g, lr in zip(params, before, grads, (0.5, 0.5, 0.25), strict=True):
        np.testing.assert_allclose(arr(p), b - lr * g, rtol=1e-12)
    assert float(opt.state.inner_states[1].inner_state.hyperparams["learning_rate"]) == 0.25


def _linear_step():
    model = js.nn.Linear(4, 3, key=2).to("jax")
    opt = js.optim.SGD([{"params": [model.weight], "momentum": 0.9},
                        {"params": [model.bias], "lr": 0.01}], lr=0.1)

    def step(x):
        opt.zero_grad()
        (model(x) ** 2).sum().backward()
        total = js.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return total

    return model, step


def test_a_grouped_step_with_clipping_compiles_as_it_runs_eagerly():
    eager_model, eager = _linear_step()
    model, step = _linear_step()
    compiled = js.compile(step)
    for i in range(3):
        x = jax_tensor(np.full((2, 4), i + 1.0))
        assert_tensors_close(compiled(x), eager(x), f"norm of call {i}")
    for c, e in zip(model.parameters(), eager_model.parameters(), strict=True):
        assert_tensors_close(c, e)
    assert compiled.cache_size() == 2, "no .grad on the first call, then one program"


@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        (lambda ps: [{"params": ps[:1]}, ps[1]], TypeError, "entry 1 .* is a Tensor"),
        (lambda ps: [{"params": ps[:2]}, {"params": ps[1:]}], ValueError,
         "more than one parameter group"),
        (lambda ps: [{"params": set(ps)}], TypeError, "ordered collections"),
        (lambda ps: [{"lr": 0.1}], ValueError, "no 'params' entry"),
        (lambda ps: {"params": ps}, TypeError, "iterable of Tensors or dicts"),
        (lambda ps: [{"params": [ps[0], ps[0]]}], ValueError, "more than once"),
        (lambda ps: [{"params": ps[:1]}, {"params": [np.ones(2)]}], TypeError,
         "parameter 0 of group 1 is a ndarray"),
    ],
    ids=["mixed", "shared", "set", "no-params", "one-dict", "repeated", "not-a-tensor"],
)
def test_bad_groups_raise(params, error, match):
    tensors = [js.tensor(v, requires_grad=True) for v in _values(0, np.float64)]
    with pytest.raises(error, match=match):
        js.optim.SGD(params(tensors), lr=0.1)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda ps: js.optim.RMSprop(ps, alpha=-0.1), "Invalid alpha value: -0.1"),
        (lambda ps: js.optim.RMSprop(ps, momentum=-1.0), "Invalid momentum value"),
        (lambda ps: js.optim.Adagrad(ps, lr_decay=-1.0), "Invalid lr_decay value"),
        (lambda ps: js.optim.Adagrad(ps, initial_accumulator_value=-1.0),
         "Invalid initial_accumulator_value value"),
        (lambda ps: js.optim.Adagrad(ps, eps=-1.0), "Invalid epsilon value"),
    ],
)
def test_bad_rule_arguments_raise_as_torch(make, match):
    with pytest.raises(ValueError, match=match):
        make([js.tensor(np.ones(2), requires_grad=True)])
