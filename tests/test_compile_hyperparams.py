"""js.compile over an optimizer whose hyperparameters change between calls: a group's lr,
betas, momentum, ... are inputs of the program, not its key (Note [What js.compile lifts],
Note [Hyperparameters under js.compile]); checked against the eager run and torch."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import arr, assert_tensors_close, jax_tensor

import jaxstream as js
from jaxstream.optim import lr_scheduler

pytestmark = pytest.mark.usefixtures("no_leaked_threads")

STEPS = 10
SHAPES = [(4, 3), (3,)]


def _values():
    rng = np.random.default_rng(0)
    return [rng.normal(size=shape).astype(np.float32) for shape in SHAPES]


def _batch(i):
    return np.random.default_rng(100 + i).normal(size=(5, 4)).astype(np.float32)


def _groups(params, split):
    if not split:
        return params
    return [{"params": params[:1]}, {"params": params[1:], "lr": 0.01}]


def _ours(optimizer, kwargs, split=False):
    """Parameters, their optimizer and a training step over them."""
    params = [jax_tensor(v, True) for v in _values()]
    opt = getattr(js.optim, optimizer)(_groups(params, split), **kwargs)

    def step(x):
        opt.zero_grad()
        w, b = params
        loss = ((x @ w + b).tanh() ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    return params, opt, step


def _torchs(torch, optimizer, kwargs, split=False):
    params = [torch.tensor(v, requires_grad=True) for v in _values()]
    opt = getattr(torch.optim, optimizer)(_groups(params, split), **kwargs)

    def step(x):
        opt.zero_grad()
        w, b = params
        loss = ((torch.tensor(x) @ w + b).tanh() ** 2).mean()
        loss.backward()
        opt.step()

    return params, opt, step


def _assert_params_match(mine, eager, theirs, what):
    for m, e, t in zip(mine, eager, theirs, strict=True):
        assert_tensors_close(m, e, f"{what}: compiled against eager")
        np.testing.assert_allclose(arr(m), t.detach().numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=f"{what}: compiled against torch")


@pytest.mark.oracle
@pytest.mark.parametrize(
    ("optimizer", "kwargs", "scheduler", "schedule"),
    [
        ("SGD", {"lr": 0.1, "momentum": 0.9}, "StepLR", {"step_size": 3, "gamma": 0.5}),
        ("Adam", {"lr": 0.05}, "OneCycleLR", {"max_lr": 0.1, "total_steps": STEPS + 1}),
    ],
    ids=["sgd-steplr", "adam-onecycle"],
)
def test_a_scheduler_stepped_every_call_traces_once(torch, optimizer, kwargs, scheduler,
                                                     schedule):
    params, opt, fn = _ours(optimizer, kwargs)
    eager_params, eager_opt, eager = _ours(optimizer, kwargs)
    torch_params, torch_opt, torch_step = _torchs(torch, optimizer, kwargs)
    scheds = [getattr(lr_scheduler, scheduler)(o, **schedule) for o in (opt, eager_opt)]
    torch_sched = getattr(torch.optim.lr_scheduler, scheduler)(torch_opt, **schedule)
    compiled = js.compile(fn)
    lrs = set()
    for i in range(STEPS):
        x = _batch(i)
        run = fn if i == 0 else compiled  # so that every compiled call finds the .grads
        assert_tensors_close(run(jax_tensor(x)), eager(jax_tensor(x)), f"loss {i}")
        torch_step(x)
        _assert_params_match(params, eager_params, torch_params, f"step {i}")
        for s in (*scheds, torch_sched):
            s.step()
        lrs.add(opt.param_groups[0]["lr"])
    assert len(lrs) > 2, "the schedule moved the lr"
    assert compiled.cache_size() == 1


@pytest.mark.oracle
def test_two_groups_with_their_own_lrs_and_a_hand_edit_trace_once(torch):
    params, opt, fn = _ours("SGD", {"lr": 0.1, "momentum": 0.5}, split=True)
    torch_params, torch_opt, torch_step = _torchs(torch, "SGD", {"lr": 0.1, "momentum": 0.5},
                                                  split=True)
    sched = lr_scheduler.ExponentialLR(opt, gamma=0.8)
    torch_sched = torch.optim.lr_scheduler.ExponentialLR(torch_opt, gamma=0.8)
    compiled = js.compile(fn)
    for i in range(6):
        if i == 3:
            for o in (opt, torch_opt):
                o.param_groups[1]["lr"] = 0.2
                o.param_groups[0]["weight_decay"] = 0.1
        (fn if i == 0 else compiled)(jax_tensor(_batch(i)))
        torch_step(_batch(i))
        for m, t in zip(params, torch_params, strict=True):
            np.testing.assert_allclose(arr(m), t.detach().numpy(), rtol=1e-5, atol=1e-6,
                                       err_msg=f"step {i}")
        sched.step()
        torch_sched.step()
    assert opt.param_groups[0]["lr"] != opt.param_groups[1]["lr"]
    assert compiled.cache_size() == 1


def test_eager_steps_between_compiled_calls_write_the_lr_again():
    """A compiled call leaves the state holding its lr; an eager step after it writes the
    group's lr even where that equals what the last eager step wrote, and what the eager
    steps record of the lrs is not part of the key."""
    params, opt, fn = _ours("SGD", {"lr": 0.1})
    eager_params, eager_opt, eager = _ours("SGD", {"lr": 0.1})
    compiled = js.compile(fn)
    calls = [(0.1, fn), (0.5, compiled), (0.1, fn), (0.3, compiled), (0.3, fn)]
    for i, (lr, run) in enumerate(calls):
        opt.param_groups[0]["lr"] = eager_opt.param_groups[0]["lr"] = lr
        x = _batch(i)
        assert_tensors_close(run(jax_tensor(x)), eager(jax_tensor(x)), f"call {i}")
        for c, e in zip(params, eager_params, strict=True):
            assert_tensors_close(c, e, f"call {i} (lr {lr})")
    assert compiled.cache_size() == 1


def test_a_structural_option_changed_between_calls_traces_again():
    params, opt, fn = _ours("SGD", {"lr": 0.1, "momentum": 0.9})
    eager_params, eager_opt, eager = _ours("SGD", {"lr": 0.1, "momentum": 0.9})
    compiled = js.compile(fn)
    for i in range(4):
        if i == 2:
            opt.param_groups[0]["nesterov"] = eager_opt.param_groups[0]["nesterov"] = True
        x = _batch(i)
        run = fn if i == 0 else compiled
        assert_tensors_close(run(jax_tensor(x)), eager(jax_tensor(x)), f"call {i}")
        for c, e in zip(params, eager_params, strict=True):
            assert_tensors_close(c, e, f"call {i}")
        if i == 1:
            before = compiled.cache_size()
    assert compiled.cache_size() > before == 1, "nesterov builds another transformation"


def test_a_non_numeric_lr_is_refused_where_it_is():
    _, opt, fn = _ours("Adam", {"lr": 0.05})
    compiled = js.compile(fn)
    fn(jax_tensor(_batch(0)))
    compiled(jax_tensor(_batch(1)))  # its walk is reused while what it read holds
    opt.param_groups[0]["lr"] = "0.1"
    with pytest.raises(TypeError, match=r"variable 'opt'.param_groups\[0\].lr is a str"):
        compiled(jax_tensor(_batch(1)))
    opt.param_groups[0]["lr"] = None
    with pytest.raises(TypeError, match=r"param_groups\[0\]\['lr'\] is a NoneType .*0.01"):
        fn(jax_tensor(_batch(1)))
    opt.param_groups[0]["betas"] = (0.9, 0.99, 0.5)
    opt.param_groups[0]["lr"] = 0.05
    with pytest.raises(ValueError, match=r"\['betas'\] is \(0.9, 0.99, 0.5\), .* 2 real"):
        fn(jax_tensor(_batch(1)))
    opt.param_groups[0]["betas"] = (0.9, 0.99)
    compiled(jax_tensor(_batch(1)))  # a valid value again: the step runs
    assert compiled.cache_size() == 1


def test_a_scheduler_stepped_inside_the_compiled_function_is_refused():
    params, opt, fn = _ours("SGD", {"lr": 0.1})
    sched = lr_scheduler.StepLR(opt, step_size=1)
    lr = opt.param_groups[0]["lr"]

    def step(x):
        fn(x)
        sched.step()

    with pytest.raises(RuntimeError, match="StepLR.step.. ran inside .*step the scheduler "
                                           "outside it"):
        js.compile(step)(jax_tensor(_batch(0)))
    assert opt.param_groups[0]["lr"] is lr and sched.last_epoch == 0


def test_a_traced_value_set_in_a_group_inside_is_refused_and_the_group_restored():
    _, opt, fn = _ours("SGD", {"lr": 0.1})

    def step(x):
        opt.param_groups[0]["lr"] = opt.param_groups[0]["lr"] * 0.5
        return fn(x)

    with pytest.raises(RuntimeError, match=r"set a traced value in .*param_groups\[0\], whose "
                                           r"entries lr, momentum, dampening, weight_decay "
                                           r"are inputs"):
        js.compile(step)(jax_tensor(_batch(0)))
    assert opt.param_groups[0]["lr"] == 0.1
