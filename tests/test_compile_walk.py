"""js.compile reuses the walk of what fn reaches while nothing it read has changed
(Note [Reusing a walk]): every change the walk would see between calls is seen, checked
against the eager run of the same calls; unchanged calls do not walk again."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_tensors_close, jax_tensor

import jaxstream as js
from jaxstream.compiling import compiled as compiled_module
from jaxstream.compiling import discovery

pytestmark = pytest.mark.usefixtures("no_leaked_threads")


@pytest.fixture
def walks(monkeypatch):
    """How many times the function was walked from scratch."""
    count = [0]

    def counted(fn):
        count[0] += 1
        return discovery.walk_function(fn)

    monkeypatch.setattr(compiled_module, "walk_function", counted)
    return count


def _twin_calls(make, change, calls_before=2, calls_after=2):
    """Run the eager and the compiled twin of `make()`, apply `change` to each between the
    calls, and compare every result; returns the compiled function and both states."""
    eager_fn, eager_state = make()
    compiled_fn, state = make()
    compiled = js.compile(compiled_fn)
    rng = np.random.default_rng(0)
    for i in range(calls_before + calls_after):
        if i == calls_before:
            change(eager_state)
            change(state)
        x = rng.normal(size=(3, 4))
        assert_tensors_close(compiled(jax_tensor(x)), eager_fn(jax_tensor(x)), f"call {i}")
    return compiled, eager_state, state


def _sgd_on(holder):
    """A step over the tensors `holder` reaches (a dict, so that tests can change it)."""

    def step(x):
        loss = (x @ holder["w"] + holder["extra"]).tanh().sum() * holder["scale"]
        loss.backward()
        with js.no_grad():
            holder["w"] -= 0.1 * holder["w"].grad
            holder["w"].grad = None
        return loss

    return step


def _holder():
    holder = {
        "w": jax_tensor(np.ones((4, 2)), True),
        "extra": jax_tensor(np.zeros(2)),
        "scale": 1.0,
    }
    return _sgd_on(holder), holder


def test_unchanged_calls_reuse_the_walk_and_a_change_walks_again(walks):
    fn, holder = _holder()
    compiled = js.compile(fn)
    for _ in range(3):
        compiled(jax_tensor(np.ones((3, 4))))
    assert walks[0] == 1, "the effects (a rebound array, .grad cleared) keep the walk valid"
    holder["scale"] = 2.0
    compiled(jax_tensor(np.ones((3, 4))))
    assert walks[0] == 2
    assert compiled.cache_size() == 2, "a Python scalar is keyed by value"


def test_a_parameter_replaced_between_calls_is_the_one_read_and_updated():
    replaced = []

    def replace(holder):
        replaced.append(holder["w"])
        holder["w"] = jax_tensor(np.full((4, 2), 0.5), True)

    compiled, eager, state = _twin_calls(_holder, replace)
    assert_tensors_close(state["w"], eager["w"], "the new parameter is updated")
    assert_tensors_close(replaced[1], replaced[0], "the old one keeps its last value")
    assert compiled.cache_size() == 1, "same signature, same program"


def test_a_tensor_newly_reachable_after_the_first_call_is_lifted():
    def make():
        params = [jax_tensor(np.ones((4, 2)), True)]

        def step(x):
            loss = sum((x @ p).sum() for p in params)
            loss.backward()
            return loss

        return step, params

    def append(params):
        params.append(jax_tensor(np.eye(4, 2), True))

    compiled, eager, state = _twin_calls(make, append)
    for e, c in zip(eager, state, strict=True):
        assert_tensors_close(c.grad, e.grad, "grads accumulate into the new tensor too")
    assert compiled.cache_size() == 4, "no .grad, .grad, the new tensor without, then with"


def test_a_list_item_replaced_in_place_is_read():
    def make():
        tensors = [jax_tensor(np.ones(2)), jax_tensor(np.ones(2))]
        return (lambda x: x.sum(1, keepdims=True) * tensors[0] + tensors[1]), tensors

    def replace(tensors):
        tensors[1] = jax_tensor([5.0, -1.0])

    compiled, _, _ = _twin_calls(make, replace)
    assert compiled.cache_size() == 1


class _Block(js.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = js.nn.Linear(4, 3, key=0).to("jax")
        self.act = js.nn.Tanh()

    def forward(self, x):
        return self.act(self.fc(x))


@pytest.mark.parametrize(
    ("change", "programs"),
    [
        (lambda block: setattr(block, "act", js.nn.ReLU()), 2),
        (lambda block: setattr(block.fc, "weight", js.nn.Parameter(jax_tensor(np.eye(3, 4)))), 1),
        (lambda block: block.eval(), 2),
    ],
    ids=["submodule", "parameter", "mode"],
)
def test_a_module_attribute_reassigned_is_read(change, programs):
    def make():
        block = _Block()
        return block, block

    compiled, _, _ = _twin_calls(make, change)
    assert compiled.cache_size() == programs


def test_closure_and_global_rebinding_are_read():
    def make():
        scale = jax_tensor([1.0, 2.0, 3.0, 4.0])

        def step(x):
            return x * scale + _OFFSET[0]

        def rebind(_):
            nonlocal scale
            scale = jax_tensor([-1.0, 0.5, 0.0, 2.0])

        return step, rebind

    eager, rebind_eager = make()
    compiled_fn, rebind = make()
    compiled = js.compile(compiled_fn)
    x = jax_tensor(np.ones((3, 4)))
    assert_tensors_close(compiled(x), eager(x))
    rebind(None)
    rebind_eager(None)
    assert_tensors_close(compiled(x), eager(x), "a rebound closure variable")
    global _OFFSET
    _OFFSET = (jax_tensor(np.full(4, 7.0)),)
    assert_tensors_close(compiled(x), eager(x), "a rebound global")
    assert compiled.cache_size() == 1


_OFFSET = (jax_tensor(np.zeros(4)),)


def test_grad_hook_and_requires_grad_set_outside_are_seen(walks):
    def make():
        w = jax_tensor(np.ones((4, 2)), True)

        def step(x):
            (x @ w).sum().backward()
            return w.grad

        return step, w

    def change(w):
        w.grad = jax_tensor(np.full((4, 2), 3.0))
        w.register_hook(lambda g: g * 2)

    compiled, eager, state = _twin_calls(make, change)
    assert_tensors_close(state.grad, eager.grad)
    before = compiled.cache_size()
    state.requires_grad = False
    with pytest.raises(RuntimeError, match="does not require grad|no grad_fn|requires_grad"):
        compiled(jax_tensor(np.ones((3, 4))))
    assert compiled.cache_size() == before, "the failed trace is not cached"


def _adam_step():
    model = js.nn.Linear(4, 2, key=3).to("jax")
    opt = js.optim.Adam(model.parameters(), lr=0.05)

    def step(x):
        opt.zero_grad()
        loss = (model(x) ** 2).sum()
        loss.backward()
        opt.step()
        return loss

    return step, (model, opt)


def test_grads_that_each_call_leaves_anew_keep_the_walk_and_match_eager(walks):
    eager, (eager_model, _) = _adam_step()
    fn, (model, _) = _adam_step()
    compiled = js.compile(fn)
    for i in range(4):
        x = jax_tensor(np.full((3, 4), i + 1.0))
        assert_tensors_close(compiled(x), eager(x), f"call {i}")
        for e, c in zip(eager_model.parameters(), model.parameters(), strict=True):
            assert_tensors_close(c, e)
            assert_tensors_close(c.grad, e.grad)
    assert walks[0] == 2, "walked with no .grad, then with the .grads every call replaces"
    grad = model.weight.grad
    model.weight.grad = None
    eager_model.weight.grad = None
    x = jax_tensor(np.ones((3, 4)))
    assert_tensors_close(compiled(x), eager(x))
    assert walks[0] == 3 and grad is not model.weight.grad
    assert_tensors_close(model.weight.grad, eager_model.weight.grad)


def test_an_old_grad_still_read_elsewhere_stays_the_one_read():
    def make():
        w, kept = jax_tensor(np.ones(3), True), []

        def step(x):
            w.grad = None
            loss = (x * w).sum() + sum(t.sum() for t in kept)
            loss.backward()
            return loss

        return step, (w, kept)

    eager, (eager_w, eager_kept) = make()
    fn, (w, kept) = make()
    compiled = js.compile(fn)
    for i in range(4):
        if i == 1:
            eager_kept.append(eager_w.grad)
            kept.append(w.grad)
        x = jax_tensor(np.arange(3.0) + i)
        assert_tensors_close(compiled(x), eager(x), f"call {i}: the list keeps the first grad")
        assert_tensors_close(w.grad, eager_w.grad)


def test_optimizer_state_replaced_or_its_learning_rate_changed_is_read():
    def reset(pair):
        model, opt = pair
        opt.load_state_dict(js.optim.Adam(model.parameters(), lr=0.01).state_dict())

    compiled, (eager_model, eager_opt), (model, opt) = _twin_calls(_adam_step, reset, 3, 3)
    for e, c in zip(eager_model.parameters(), model.parameters(), strict=True):
        assert_tensors_close(c, e)
    assert opt.param_groups[0]["lr"] == eager_opt.param_groups[0]["lr"] == 0.01


def test_a_numpy_tensor_reachable_after_the_first_call_is_refused_where_it_is():
    tensors = [jax_tensor(np.ones(2))]
    compiled = js.compile(lambda x: x * tensors[0])
    compiled(jax_tensor(np.ones(2)))
    tensors[0] = js.tensor(np.ones(2, np.float32))
    with pytest.raises(TypeError, match=r"variable 'tensors'\[0\] is a numpy tensor"):
        compiled(jax_tensor(np.ones(2)))
    tensors[0] = jax_tensor([2.0, 3.0])
    recovered = compiled(jax_tensor(np.ones(2)))
    assert_tensors_close(recovered, jax_tensor([2.0, 3.0]), "the walk recovers after the error")


def test_a_graph_made_outside_after_the_first_call_is_refused():
    w = jax_tensor(np.ones(2), True)
    held = {"t": jax_tensor(np.ones(2))}
    compiled = js.compile(lambda x: x * held["t"])
    compiled(jax_tensor(np.ones(2)))
    held["t"] = w * 2
    with pytest.raises(TypeError, match="outside the compiled function"):
        compiled(jax_tensor(np.ones(2)))
