"""js.optim.lr_scheduler: PyTorch's schedulers as values of optax schedules, diff-tested."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import optax
import pytest
from helpers import arr

import jaxstream as js
from jaxstream.optim import lr_scheduler as sched

STEPS = 30


def _half(epoch):
    return 0.5 ** (epoch // 4)


def _decay(epoch):
    return 1.0 / (1.0 + epoch)


# (name, its arguments): the same for ours and torch's.
SCHEDULERS = [
    ("StepLR", {"step_size": 7, "gamma": 0.5}),
    ("MultiStepLR", {"milestones": [0, 3, 3, 10], "gamma": 0.5}),
    ("ExponentialLR", {"gamma": 0.9}),
    ("CosineAnnealingLR", {"T_max": 10, "eta_min": 1e-3}),
    ("CosineAnnealingLR", {"T_max": 7}),
    ("LambdaLR", {"lr_lambda": [_half, _decay]}),
    ("LinearLR", {}),
    ("LinearLR", {"start_factor": 1.0, "end_factor": 0.1, "total_iters": 12}),
    ("OneCycleLR", {"max_lr": [0.3, 0.2], "total_steps": STEPS + 1}),
    ("OneCycleLR", {"max_lr": 0.3, "epochs": 3, "steps_per_epoch": 11, "three_phase": True,
                    "anneal_strategy": "linear", "pct_start": 0.25}),
]


def _groups(params):
    return [{"params": params[:1]}, {"params": params[1:], "lr": 0.05}]


def _pair(torch, optimizer="SGD", **kwargs):
    kwargs = kwargs or {"lr": 0.1, "momentum": 0.9}
    mine = [js.tensor(np.ones(2), requires_grad=True), js.tensor(np.ones(3), requires_grad=True)]
    theirs = [torch.ones(2, requires_grad=True), torch.ones(3, requires_grad=True)]
    return (getattr(js.optim, optimizer)(_groups(mine), **kwargs),
            getattr(torch.optim, optimizer)(_groups(theirs), **kwargs))


def _momenta(opt):
    return [g["betas"][0] if "betas" in g else g["momentum"] for g in opt.param_groups]


def _run(schedulers, torch_schedulers, torch_opt, steps=STEPS):
    """Step both sides `steps` times; the lrs and momenta of every epoch."""
    opt = schedulers[0].optimizer
    seen = [[*schedulers[-1].get_last_lr(), *_momenta(opt)]]
    expected = [[*torch_schedulers[-1].get_last_lr(), *_momenta(torch_opt)]]
    for _ in range(steps):
        torch_opt.step()  # no gradients: only so that torch sees the documented order
        for mine, theirs in zip(schedulers, torch_schedulers, strict=True):
            mine.step()
            theirs.step()
        seen.append([*schedulers[-1].get_last_lr(), *_momenta(opt)])
        expected.append([*torch_schedulers[-1].get_last_lr(), *_momenta(torch_opt)])
    return np.array(seen), np.array(expected)


@pytest.mark.oracle
@pytest.mark.parametrize(("name", "kwargs"), SCHEDULERS)
def test_lr_sequence_matches_torch(torch, name, kwargs):
    opt, torch_opt = _pair(torch)
    mine = getattr(sched, name)(opt, **kwargs)
    theirs = getattr(torch.optim.lr_scheduler, name)(torch_opt, **kwargs)
    seen, expected = _run([mine], [theirs], torch_opt)
    np.testing.assert_allclose(seen, expected, rtol=1e-10, atol=1e-15)
    assert mine.last_epoch == theirs.last_epoch == STEPS
    assert mine.base_lrs == theirs.base_lrs
    assert [g["lr"] for g in opt.param_groups] == mine.get_last_lr()


@pytest.mark.oracle
def test_one_cycle_cycles_adams_beta1_and_chained_schedulers_compose(torch):
    opt, torch_opt = _pair(torch, "Adam", lr=0.01, betas=(0.9, 0.99))
    mine = sched.OneCycleLR(opt, 0.1, total_steps=20)
    theirs = torch.optim.lr_scheduler.OneCycleLR(torch_opt, 0.1, total_steps=20)
    seen, expected = _run([mine], [theirs], torch_opt, steps=19)
    np.testing.assert_allclose(seen, expected, rtol=1e-10)
    assert opt.param_groups[0]["betas"][1] == 0.99
    opt, torch_opt = _pair(torch)
    mine = [sched.ExponentialLR(opt, 0.9), sched.MultiStepLR(opt, [5, 8], 0.5)]
    theirs = [torch.optim.lr_scheduler.ExponentialLR(torch_opt, 0.9),
              torch.optim.lr_scheduler.MultiStepLR(torch_opt, [5, 8], 0.5)]
    seen, expected = _run(mine, theirs, torch_opt, steps=12)
    np.testing.assert_allclose(seen, expected, rtol=1e-10)


@pytest.mark.oracle
def test_an_lr_set_by_hand_is_where_a_chainable_scheduler_goes_on_from(torch):
    opt, torch_opt = _pair(torch)
    mine, theirs = sched.StepLR(opt, 3), torch.optim.lr_scheduler.StepLR(torch_opt, 3)
    for epoch in range(8):
        if epoch == 4:
            opt.param_groups[0]["lr"] = torch_opt.param_groups[0]["lr"] = 0.5
        torch_opt.step()
        mine.step()
        theirs.step()
        np.testing.assert_allclose(mine.get_last_lr(), theirs.get_last_lr(), rtol=1e-12)


@pytest.mark.oracle
def test_a_training_run_with_a_scheduler_matches_torch(torch):
    rng = np.random.default_rng(0)
    values = [rng.standard_normal((3, 2)), rng.standard_normal(2)]
    mine = [js.tensor(v, requires_grad=True) for v in values]
    theirs = [torch.tensor(v, requires_grad=True) for v in values]
    opt = js.optim.SGD(_groups(mine), lr=0.1, momentum=0.9)
    torch_opt = torch.optim.SGD(_groups(theirs), lr=0.1, momentum=0.9)
    scheduler = sched.CosineAnnealingLR(opt, T_max=4, eta_min=0.01)
    torch_scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(torch_opt, T_max=4, eta_min=0.01)
    for step in range(8):
        for p, tp in zip(mine, theirs, strict=True):
            g = np.sin(arr(p) * (step + 1))
            p.grad, tp.grad = js.tensor(g), torch.tensor(g)
        opt.step()
        torch_opt.step()
        scheduler.step()
        torch_scheduler.step()
    for p, tp in zip(mine, theirs, strict=True):
        np.testing.assert_allclose(arr(p), tp.detach().numpy(), rtol=1e-12)
    assert scheduler.get_last_lr() == pytest.approx(torch_scheduler.get_last_lr(), rel=1e-12)


def test_from_optax_drives_each_groups_lr_from_an_optax_schedule():
    params = [js.tensor(np.ones(2), requires_grad=True), js.tensor(np.ones(3), requires_grad=True)]
    opt = js.optim.SGD(_groups(params), lr=0.1)
    warmup = optax.warmup_cosine_decay_schedule(0.0, 0.1, 5, 20)
    scheduler = sched.from_optax(opt, [warmup, optax.constant_schedule(0.02)])
    for epoch in range(1, 25):
        scheduler.step()
        assert scheduler.last_epoch == epoch
        assert opt.param_groups[0]["lr"] == pytest.approx(0.05 * (1 + np.cos(
            np.pi * min(epoch - 5, 15) / 15)) if epoch >= 5 else 0.02 * epoch, rel=1e-12)
        assert opt.param_groups[1]["lr"] == 0.02
    shared = sched.from_optax(opt, optax.linear_schedule(1.0, 0.0, 4))
    assert shared.get_last_lr() == [1.0, 1.0]
    with pytest.raises(ValueError, match=r"one per parameter group \(2\)"):
        sched.from_optax(opt, [warmup])


class _Factor:
    """A callable object: PyTorch saves its attributes in LambdaLR's state dict."""

    def __init__(self, rate):
        self.rate = rate

    def __call__(self, epoch):
        return self.rate**epoch


def test_state_dict_round_trips_and_the_schedule_continues():
    def fresh():
        params = [js.tensor(np.ones(2), requires_grad=True),
                  js.tensor(np.ones(3), requires_grad=True)]
        opt = js.optim.SGD(_groups(params), lr=0.1)
        return opt, sched.LambdaLR(opt, [_Factor(0.9), _half])

    opt, scheduler = fresh()
    for _ in range(5):
        scheduler.step()
    saved = pickle.loads(pickle.dumps((opt.state_dict(), scheduler.state_dict())))
    assert "optimizer" not in saved[1] and saved[1]["lr_lambdas"] == [{"rate": 0.9}, None]
    twin_opt, twin = fresh()
    twin.lr_lambdas[0].rate = 0.0
    twin_opt.load_state_dict(saved[0])
    twin.load_state_dict(saved[1])
    assert twin.lr_lambdas[0].rate == 0.9 and twin.last_epoch == 5
    for _ in range(3):
        scheduler.step()
        twin.step()
        assert twin.get_last_lr() == scheduler.get_last_lr()
    resumed = sched.ExponentialLR(twin_opt, 0.5, last_epoch=8)
    assert resumed.get_last_lr() == [g["lr"] for g in twin_opt.param_groups]
    with pytest.warns(UserWarning, match="epoch parameter"):
        resumed.step(2)
    assert resumed.get_last_lr() == [0.1 * 0.25, 0.05 * 0.25]


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda opt: sched.StepLR(object(), 3), TypeError, "object is not an Optimizer"),
        (lambda opt: sched.StepLR(opt, 3, last_epoch=4), KeyError, "'initial_lr' is not"),
        (lambda opt: sched.LinearLR(opt, start_factor=0.0), ValueError, "greater than 0"),
        (lambda opt: sched.LinearLR(opt, end_factor=2.0), ValueError, "between 0 and 1"),
        (lambda opt: sched.LambdaLR(opt, [_half]), ValueError, "Expected 2 lr_lambdas"),
        (lambda opt: sched.OneCycleLR(opt, 0.1), ValueError, "either total_steps OR"),
        (lambda opt: sched.OneCycleLR(opt, 0.1, total_steps=0), ValueError, "positive integer"),
        (lambda opt: sched.OneCycleLR(opt, 0.1, epochs=2, steps_per_epoch=-1), ValueError,
         "positive integer steps_per_epoch"),
        (lambda opt: sched.OneCycleLR(opt, 0.1, 9, pct_start=1.5), ValueError, "pct_start"),
        (lambda opt: sched.OneCycleLR(opt, 0.1, 9, anneal_strategy="exp"), ValueError, "'cos'"),
        (lambda opt: sched.OneCycleLR(opt, [0.1], 9), ValueError, "expected 2 values for max_lr"),
        (lambda opt: sched.OneCycleLR(js.optim.Adagrad(opt.params), 0.1, 9), ValueError,
         "must support momentum or beta1"),
        (lambda opt: sched.StepLR(js.optim.Optimizer(opt.params, optax.adam(0.1)), 3), KeyError,
         "has no 'lr'"),
    ],
)
def test_bad_scheduler_arguments_raise(make, error, match):
    params = [js.tensor(np.ones(2), requires_grad=True), js.tensor(np.ones(3), requires_grad=True)]
    with pytest.raises(error, match=match):
        make(js.optim.SGD(_groups(params), lr=0.1, momentum=0.9))


def test_one_cycle_ends_at_its_minimum_and_refuses_to_step_past_its_end():
    opt = js.optim.SGD([js.tensor(np.ones(2), requires_grad=True)], lr=0.1, momentum=0.9)
    scheduler = sched.OneCycleLR(opt, 0.1, total_steps=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            scheduler.step()
    assert scheduler.get_last_lr() == pytest.approx([0.1 / 25 / 1e4], rel=1e-12)
    assert opt.param_groups[0]["momentum"] == pytest.approx(0.95, rel=1e-12)
    scheduler.step()  # PyTorch allows one step more
    with pytest.raises(ValueError, match="Tried to step 4 times. The specified number of total"):
        scheduler.step()
