"""js.compile: a step traced once per signature gives what the eager step gives, values,
.grads, versions, hooks (at trace time) and engine semantics included; its cache and errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_tensors_close, host_values, jax_tensor

import jaxstream as js
from jaxstream.conversions import HostReadWhileTracing

pytestmark = pytest.mark.usefixtures("no_leaked_threads")


def _twins(*shapes, seed=0):
    """Two sets of equal leaves that require grad: one for the eager run, one compiled."""
    rng = np.random.default_rng(seed)
    values = [rng.normal(size=shape) for shape in shapes]
    return [jax_tensor(v, True) for v in values], [jax_tensor(v, True) for v in values]


def _sgd_step(params):
    def step(x):
        w, b = params
        loss = ((x @ w + b).tanh() ** 2).sum()
        loss.backward()
        with js.no_grad():
            for p in params:
                p -= 0.1 * p.grad
        return loss

    return step


def test_training_step_matches_eager_values_grads_and_versions():
    eager_params, compiled_params = _twins((3, 4), (4,))
    eager, compiled = _sgd_step(eager_params), js.compile(_sgd_step(compiled_params))
    x = jax_tensor(np.linspace(-1, 1, 6).reshape(2, 3))
    for _ in range(3):
        assert_tensors_close(compiled(x), eager(x), "loss")
        for e, c in zip(eager_params, compiled_params, strict=True):
            assert_tensors_close(c, e, "parameter")
            assert_tensors_close(c.grad, e.grad, ".grad (accumulated across steps)")
            assert c._version == e._version
            assert c.is_leaf and c.requires_grad
    # The first call saw no .grad, later ones do: two signatures, then no more traces.
    assert compiled.cache_size() == 2


@pytest.mark.parametrize("device", ["sim:0", pytest.param("cuda:0", marks=pytest.mark.cuda)])
def test_a_step_on_an_accelerator_matches_eager_with_no_stream_work_traced(device):
    """On an accelerator the eager step orders XLA's stream with events; inside the trace
    there is one program and nothing to order (Note [XLA's stream]). Under the GPU twin,
    sim:0's XLA stream is native, as a GPU's is, so a stream round trip made while tracing
    would fail here as it does on a GPU."""
    rng = np.random.default_rng(3)
    values = [rng.normal(size=(3, 4)), rng.normal(size=(4,))]

    def leaves():
        return [js.tensor(v.astype(np.float32), backend="jax", device=device,
                          requires_grad=True) for v in values]

    eager_params, compiled_params = leaves(), leaves()
    eager, compiled = _sgd_step(eager_params), js.compile(_sgd_step(compiled_params))
    x = js.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), backend="jax",
                  device=device)
    for _ in range(2):
        loss = compiled(x)
        assert loss.device == device
        assert_tensors_close(loss, eager(x), "loss")
    js.synchronize(device)
    home = js.device(device).kind.jax_device(js.device(device).index)
    for e, c in zip(eager_params, compiled_params, strict=True):
        assert c.device == device and c.array.devices() == {home}
        assert_tensors_close(c, e, "parameter")
        assert_tensors_close(c.grad, e.grad, ".grad")


def test_a_second_order_step_on_sim_compiles_after_memory_was_reused_there():
    """Inside the trace the sanitizer sees tracers, no buffers: it neither checks them against
    the freed memory of earlier eager work on the device nor records them."""
    x0, w0 = np.linspace(-1, 1, 48, dtype=np.float32).reshape(3, 16), np.eye(16, dtype=np.float32)

    def second_order(x, w):
        (g,) = js.grad(js.tanh(js.linear(x, w)).sum(), x, create_graph=True)
        return js.grad(g.sum(), x)

    def leaves(backend):
        return [js.tensor(v.copy(), backend=backend, device="sim:0", requires_grad=True)
                for v in (x0, w0)]

    eager = second_order(*leaves("numpy"))  # frees buffers used on two streams of sim:0
    (compiled,) = js.compile(second_order)(*leaves("jax"))
    assert compiled.device == "sim:0"
    js.synchronize("sim:0")
    np.testing.assert_allclose(host_values(compiled), host_values(eager[0]), rtol=1e-5,
                               atol=1e-6)


def test_grad_accumulates_into_the_same_grad_tensor_as_eager():
    (w,), _ = _twins((3,))
    step = js.compile(lambda: (w * w).sum().backward())
    step()
    first = w.grad
    step()
    assert w.grad is first, "accumulation updates the existing .grad in place, as eagerly"
    assert_tensors_close(w.grad, jax_tensor(4 * np.asarray(w.array)))


def test_outputs_are_leaves_without_a_graph_and_fn_stays_usable_eagerly():
    (w,), _ = _twins((3,))

    def f(x):
        return (w * x).sum()

    compiled = js.compile(f)
    out = compiled(jax_tensor([1.0, 2.0, 3.0]))
    assert out.grad_fn is None and not out.requires_grad and out.backend == "jax"
    eager = f(jax_tensor([1.0, 2.0, 3.0]))
    assert eager.grad_fn is not None
    assert_tensors_close(out, eager)


def test_input_hessian_with_create_graph_matches_jax():
    x = jax_tensor([0.3, -0.2, 0.5], requires_grad=True)

    def hessian_diag():
        (g,) = js.grad((x.tanh() ** 3).sum(), x, create_graph=True)
        (h,) = js.grad(g.sum(), x)
        return h

    expected = jax.grad(lambda v: jax.grad(lambda u: (jnp.tanh(u) ** 3).sum())(v).sum())(x.array)
    np.testing.assert_allclose(host_values(js.compile(hessian_diag)()), expected, rtol=1e-5)


class _Needs(js.autograd.Function):
    seen: list = []

    @staticmethod
    def forward(ctx, a, b):
        return a * b

    @staticmethod
    def backward(ctx, g):
        _Needs.seen.append(tuple(ctx.needs_input_grad))
        return g * 2.0, g * 3.0


def test_exec_info_trimming_reaches_needs_input_grad_at_trace_time():
    a, b = jax_tensor([1.0, 2.0], True), jax_tensor([3.0, 4.0], True)

    def only_a():
        return js.grad(_Needs.apply(a, b).sum(), a)[0]

    _Needs.seen.clear()
    eager = only_a()
    compiled = js.compile(only_a)
    out = compiled()
    compiled()
    assert _Needs.seen == [(True, False), (True, False)], "eager once, traced once"
    assert_tensors_close(out, eager)


class _Nested(js.autograd.Function):
    """Its backward runs a backward of its own (reentrant, as checkpointing does), `depth`
    levels deep."""

    @staticmethod
    def forward(ctx, x, depth):
        ctx.save_for_backward(x)
        ctx.depth = depth
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with js.enable_grad():
            inner = x.detach().requires_grad_()
            y = _Nested.apply(inner, ctx.depth - 1) if ctx.depth else inner.sin()
            (y * g).sum().backward()
        return inner.grad, None


def test_reentrant_function_runs_inside_the_trace():
    x_eager, x_compiled = jax_tensor([0.1, 0.7], True), jax_tensor([0.1, 0.7], True)

    def step(x):
        _Nested.apply(x, 0).sum().backward()  # one level of reentrant backward

    step(x_eager)
    js.compile(step)(x_compiled)
    assert_tensors_close(x_compiled.grad, x_eager.grad)


def test_reentrant_backward_past_the_depth_limit_names_the_limit():
    x = jax_tensor([0.1, 0.2], True)
    compiled = js.compile(lambda: _Nested.apply(x, 4).sum().backward())
    previous = js.autograd.get_max_reentrant_depth()
    js.autograd.set_max_reentrant_depth(2)
    try:
        with pytest.raises(RuntimeError, match=r"deeper than .*get_max_reentrant_depth\(\) \(2\)"):
            compiled()
    finally:
        js.autograd.set_max_reentrant_depth(previous)
    assert x.grad is None
    compiled()
    assert_tensors_close(
        x.grad, jax_tensor(np.cos([0.1, 0.2])), "within the limit the nested backwards compile"
    )


def _hooked_step(w, log):
    def step(x):
        y = x * w
        y.register_hook(lambda g: log.append("tensor") or g * 2.0)
        y.grad_fn.register_prehook(lambda grads: log.append("pre"))
        y.grad_fn.register_hook(lambda grads_in, grads_out: log.append("post"))
        y.retain_grad()
        y.sum().backward()
        return y.grad

    return step


def test_hooks_run_in_eager_order_at_trace_time_and_their_gradients_are_compiled():
    (w_eager,), (w_compiled,) = _twins((2,))
    eager_log, compiled_log = [], []
    x = jax_tensor([1.0, 5.0])
    retained_eager = _hooked_step(w_eager, eager_log)(x)
    compiled = js.compile(_hooked_step(w_compiled, compiled_log))
    retained = compiled(x)
    assert compiled_log == eager_log == ["tensor", "pre", "post"]
    assert_tensors_close(retained, retained_eager, "retained grad sees the hook's doubling")
    assert_tensors_close(w_compiled.grad, w_eager.grad)
    # The log is Python state that fn reads and the trace changed: the key sees it, so
    # the next call traces again and its hooks run again, as the eager run's would.
    w_compiled.grad = None
    compiled(x)
    assert compiled_log == eager_log * 2 and compiled.cache_size() == 2
    assert_tensors_close(w_compiled.grad, w_eager.grad)


def test_leaf_hook_registered_outside_is_part_of_the_key():
    (w,), _ = _twins((2,))
    compiled = js.compile(lambda: (w * 3.0).sum().backward())
    compiled()
    w.grad = None
    handle = w.register_hook(lambda g: g * 10.0)
    compiled()
    assert compiled.cache_size() == 2
    assert_tensors_close(w.grad, jax_tensor([30.0, 30.0]))
    handle.remove()


def test_signature_and_structure_changes_retrace():
    w = jax_tensor([1.0, 2.0], True)
    compiled = js.compile(lambda x: (x * w).sum())
    compiled(jax_tensor([1.0, 1.0]))
    compiled(jax_tensor([3.0, 4.0]))
    assert compiled.cache_size() == 1, "a new tensor of the same signature reuses the program"
    compiled(jax_tensor([1.0]))
    assert compiled.cache_size() == 2, "a new shape traces again"
    compiled(jax_tensor([1.0, 1.0], requires_grad=True))
    assert compiled.cache_size() == 3, "requires_grad is part of the signature"
    compiled(js.tensor(np.ones(2, np.int32), backend="jax"))
    assert compiled.cache_size() == 4, "so is the dtype"


def test_module_mode_is_part_of_the_key():
    model = js.nn.Sequential(js.nn.Linear(3, 3, key=0), js.nn.Dropout(0.5)).to("jax")
    compiled = js.compile(lambda x: model(x).sum())
    x = jax_tensor(np.ones((2, 3)))
    model.eval()
    evaluated = compiled(x)
    model.train()
    compiled(x)
    model.eval()
    again = compiled(x)
    assert compiled.cache_size() == 2
    assert_tensors_close(again, evaluated)


def test_python_scalar_changed_by_fn_retraces_like_the_eager_run():
    class Counter:
        def __init__(self):
            self.steps = 0
            self.total = jax_tensor(0.0)

    c = Counter()

    def count(x):
        c.steps += 1
        c.total = c.total + x.sum()

    compiled = js.compile(count)
    for _ in range(3):
        compiled(jax_tensor([1.0, 2.0]))
    assert c.steps == 3 and compiled.cache_size() == 3
    assert_tensors_close(
        c.total, jax_tensor(9.0), "an attribute rebound to a new tensor is an effect"
    )


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda t: t.sum().item(), r"item\(\)"),
        (lambda t: bool(t.sum() > 0), r"bool\(\)"),
        (lambda t: t.numpy(), r"numpy\(\)"),
        (lambda t: float(t.sum()), r"float\(\)"),
    ],
)
def test_host_read_while_tracing_names_the_call_and_leaks_nothing(call, name):
    w = jax_tensor([1.0, -2.0], True)

    def needs_host(x):
        (x * w).sum().backward()
        return call(x)

    compiled = js.compile(needs_host)
    with pytest.raises(HostReadWhileTracing, match=rf"js.compile '.*needs_host'.*{name}.*tracer"):
        compiled(jax_tensor([0.5, 0.5]))
    assert compiled.cache_size() == 0, "a failed trace compiles nothing"
    assert w.grad is None and not isinstance(w.array, jax.core.Tracer)
    needs_host(jax_tensor([0.5, 0.5]))
    assert_tensors_close(w.grad, jax_tensor([0.5, 0.5]))


def test_numpy_tensor_read_by_fn_is_refused_with_where_it_was_found():
    weight = js.tensor(np.ones(2, np.float32), requires_grad=True)
    with pytest.raises(TypeError, match=r"weight.*numpy tensor.*backend='jax'"):
        js.compile(lambda x: (x * weight).sum())(jax_tensor([1.0, 2.0]))


def test_graph_made_outside_is_refused():
    w = jax_tensor([1.0, 2.0], True)
    y = w * 2.0
    with pytest.raises(TypeError, match=r"MulBackward0 outside the compiled function.*detach"):
        js.compile(lambda: y.sum().backward())()


def test_traced_value_stored_in_an_outside_list_is_refused():
    kept = []

    def keep(x):
        kept.append(x * 2.0)

    with pytest.raises(RuntimeError, match=r"kept.*outside lists or dicts"):
        js.compile(keep)(jax_tensor([1.0]))


def test_graph_given_to_an_outside_tensor_is_refused():
    w = jax_tensor([1.0, 2.0], True)
    buffer = jax_tensor([0.0, 0.0])

    def write(x):
        buffer.add_(w * x)

    with pytest.raises(RuntimeError, match=r"buffer.*graph inside the compiled function"):
        js.compile(write)(jax_tensor([1.0, 1.0]))
    assert buffer.grad_fn is None or not isinstance(buffer.array, jax.core.Tracer)


def test_compile_needs_a_callable():
    with pytest.raises(TypeError, match="needs a callable"):
        js.compile(3)


def _model_and_optimizer(optimizer):
    model = js.nn.Sequential(
        js.nn.Linear(4, 8, key=0), js.nn.Tanh(), js.nn.Linear(8, 2, key=1)
    ).to("jax")
    return model, optimizer(model.parameters())


def _module_step(model, opt):
    def step(x, target):
        opt.zero_grad()
        loss = js.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        return loss

    return step


@pytest.mark.parametrize(
    "optimizer",
    [
        lambda params: js.optim.Adam(params, lr=0.05),
        lambda params: js.optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True),
    ],
    ids=["adam", "sgd-nesterov"],
)
def test_module_and_optimizer_step_matches_eager(optimizer):
    eager_model, eager_opt = _model_and_optimizer(optimizer)
    model, opt = _model_and_optimizer(optimizer)
    eager, compiled = _module_step(eager_model, eager_opt), js.compile(_module_step(model, opt))
    rng = np.random.default_rng(1)
    for _ in range(3):
        x, target = jax_tensor(rng.normal(size=(5, 4))), jax_tensor(rng.normal(size=(5, 2)))
        assert_tensors_close(compiled(x, target), eager(x, target), "loss")
    for (name, e), c in zip(eager_model.named_parameters(), model.parameters(), strict=True):
        assert_tensors_close(c, e, name)
        assert_tensors_close(c.grad, e.grad, f"{name}.grad")
        assert c._version == e._version
    for e, c in zip(jax.tree.leaves(eager_opt.state), jax.tree.leaves(opt.state), strict=True):
        assert not isinstance(c, jax.core.Tracer)
        np.testing.assert_allclose(np.asarray(c), np.asarray(e), rtol=1e-5, atol=1e-6)
    assert compiled.cache_size() == 2, "no .grad on the first call, then one program"


def test_learning_rate_set_between_calls_is_used_without_a_new_trace():
    model, opt = _model_and_optimizer(lambda params: js.optim.SGD(params, lr=0.1))
    compiled = js.compile(_module_step(model, opt))
    x, target = jax_tensor(np.ones((2, 4))), jax_tensor(np.zeros((2, 2)))
    compiled(x, target)
    compiled(x, target)
    opt.param_groups[0]["lr"] = 0.0
    before = [np.asarray(p.array).copy() for p in model.parameters()]
    compiled(x, target)
    assert compiled.cache_size() == 2, "the lr is an input of the program, not its key"
    for b, p in zip(before, model.parameters(), strict=True):
        np.testing.assert_array_equal(np.asarray(p.array), b)


def test_in_place_writes_through_views_reach_base_and_views_as_eagerly():
    def make():
        base = jax_tensor(np.arange(4.0))
        return base, base[1:]

    def writes(base, view):
        def step():
            view.mul_(2.0)
            base[0] = base[0] + 1.0

        return step

    (eager_base, eager_view), (base, view) = make(), make()
    eager, compiled = writes(eager_base, eager_view), js.compile(writes(base, view))
    for _ in range(2):
        eager()
        compiled()
        assert_tensors_close(base, eager_base, "base")
        assert_tensors_close(view, eager_view, "view")
        assert base._version == eager_base._version == view._version
    unread_base = jax_tensor(np.arange(4.0))
    only_view = unread_base[1:]
    js.compile(lambda: only_view.mul_(3.0))()
    assert_tensors_close(
        unread_base, jax_tensor([0.0, 3.0, 6.0, 9.0]), "a view's base is lifted with the view"
    )


def test_a_module_compiles_and_raw_arrays_in_the_arguments_are_traced_inputs():
    model = js.nn.Sequential(js.nn.Linear(3, 2, key=0), js.nn.Tanh()).to("jax")
    compiled_model = js.compile(model)
    x = jax_tensor(np.ones((4, 3)))
    assert_tensors_close(compiled_model(x), model(x))
    scale = js.compile(lambda a, factor: js.tensor(a) * factor)
    assert_tensors_close(scale(jnp.ones(2), factor=2.0), jax_tensor([2.0, 2.0]))
    assert_tensors_close(scale(jnp.full(2, 3.0), factor=2.0), jax_tensor([6.0, 6.0]))
    assert scale.cache_size() == 1, "an array argument is an input, not a constant"
    scale(jnp.ones(2), factor=3.0)
    assert scale.cache_size() == 2, "a Python scalar argument is part of the key"


def test_outside_tensors_may_be_put_in_outside_lists():
    w = jax_tensor([1.0, 2.0], True)
    seen = []

    def remember():
        seen.append(w)
        (w * 2.0).sum().backward()

    js.compile(remember)()
    assert seen == [w] and not isinstance(w.array, jax.core.Tracer)
    assert_tensors_close(w.grad, jax_tensor([2.0, 2.0]))


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_and_final_callbacks_run_inside_the_trace(use_reentrant):
    (w_eager,), (w_compiled,) = _twins((3,))

    def checkpointed(w):
        def step():
            calls = []
            y = js.checkpoint(lambda a: (a.tanh() * 2.0).sin(), w, use_reentrant=use_reentrant)
            total = y.sum()
            total.grad_fn.register_prehook(
                lambda grads: js.autograd.queue_callback(lambda: calls.append("done"))
            )
            total.backward()
            return calls

        return step

    assert checkpointed(w_eager)() == js.compile(checkpointed(w_compiled))() == ["done"]
    assert_tensors_close(w_compiled.grad, w_eager.grad)


def test_a_compiled_function_may_call_another():
    w = jax_tensor([1.0, 2.0], True)
    inner = js.compile(lambda x: (x * w).sum())

    def outer(x):
        loss = inner(x)
        with js.no_grad():
            w.add_(loss * 0.0 + 1.0)
        return loss

    compiled = js.compile(outer)
    assert_tensors_close(compiled(jax_tensor([1.0, 1.0])), jax_tensor(3.0))
    assert_tensors_close(w, jax_tensor([2.0, 3.0]))
    assert_tensors_close(compiled(jax_tensor([1.0, 1.0])), jax_tensor(5.0))
    assert compiled.cache_size() == 1 and inner.cache_size() == 1
