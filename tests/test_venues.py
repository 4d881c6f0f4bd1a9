"""One venue per (backend, device) decides how ops run there (Note [Deciding once where an
op runs] in jaxstream/ops/venues.py): the kernel call, the launch, the backward without a
graph and the gradient sum, with the watchers (the sanitizer's switch, an open virtual clock)
read at each node."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import jax_kernels_uncompiled

import jaxstream as js
from jaxstream import sanitizer
from jaxstream.backends import get_backend
from jaxstream.backends.jax import JaxBackend
from jaxstream.devices import device
from jaxstream.ops import compiled_kernels
from jaxstream.ops.venues import ARRAY_TWINS, COMPILED, RULES, venue, venue_of

CPU, SIM0 = device("cpu"), device("sim:0")
NUMPY, JAX = get_backend("numpy"), get_backend("jax")


def test_each_backend_and_device_has_one_venue_which_every_tensor_there_shares():
    a = js.tensor([1.0, 2.0], device="sim:0")
    b = a * 2.0
    assert venue_of(a) is venue_of(b) is venue(NUMPY, SIM0)
    assert venue(NUMPY, SIM0) is not venue(NUMPY, CPU)
    assert venue(JAX, CPU) is not venue(NUMPY, CPU)
    assert repr(venue(JAX, SIM0)) == "<Venue jax on sim:0>"


@pytest.mark.parametrize("backend, dev, checks, expected", [
    (NUMPY, CPU, "1", ARRAY_TWINS),
    (JAX, CPU, "1", COMPILED),
    (NUMPY, SIM0, "1", RULES),  # the sanitizer sees each kernel
    (NUMPY, SIM0, "0", ARRAY_TWINS),
    (JAX, SIM0, "1", RULES),
    (JAX, SIM0, "0", COMPILED),
])
def test_a_backward_without_a_graph_runs_as_the_venue_and_its_watchers_say(
    monkeypatch, backend, dev, checks, expected
):
    monkeypatch.setenv(sanitizer.CHECK_ENV, checks)
    assert venue(backend, dev).backward_without_graph() == expected


def test_an_open_virtual_clock_makes_a_sim_backward_run_its_rules_op_by_op(monkeypatch):
    monkeypatch.setenv(sanitizer.CHECK_ENV, "0")
    place = venue(NUMPY, SIM0)
    with js.sim.virtual_time():
        assert place.backward_without_graph() == RULES
    assert place.backward_without_graph() == ARRAY_TWINS
    assert venue(NUMPY, CPU).backward_without_graph() == ARRAY_TWINS


def test_gradients_are_summed_as_arrays_only_on_the_host():
    assert venue(NUMPY, CPU).sums_on_host
    assert not venue(NUMPY, SIM0).sums_on_host  # an op, so that its stream sees it
    assert not venue(JAX, CPU).sums_on_host


def test_the_switch_flipped_between_two_backwards_takes_effect_at_the_next(monkeypatch):
    """The same graph twice, checks on then off: the sanitizer sees the kernels of the tanh
    and product nodes' rules in the first backward and none in the second (their array twins
    run), and both give the analytic gradient."""
    seen = []
    real_on_op = sanitizer.on_op
    monkeypatch.setattr(sanitizer, "on_op",
                        lambda *args: (seen.append(args[1]), real_on_op(*args)))
    x = js.tensor(np.linspace(-1.0, 1.0, 5), device="sim:0", requires_grad=True)
    runs = {}
    for checks in ("1", "0"):
        monkeypatch.setenv(sanitizer.CHECK_ENV, checks)
        loss = (x.tanh() * x).sum()
        del seen[:]
        (g,) = js.grad(loss, [x])
        runs[checks] = (set(seen), g.numpy())
    assert {"mul", "tanh_backward"} <= runs["1"][0]
    assert not {"mul", "tanh_backward"} & runs["0"][0], runs["0"][0]
    values = x.numpy()
    expected = np.tanh(values) + values * (1 - np.tanh(values) ** 2)
    for _, g in runs.values():
        np.testing.assert_allclose(g, expected, rtol=1e-12)


def test_ops_of_two_venues_are_refused_before_either_runs():
    with pytest.raises(RuntimeError, match=r"argument 1 is on cpu .* first tensor argument is "
                                            r"on sim:0 .*t\.to\('sim:0'\)"):
        js.tensor([1.0], device="sim:0") + js.tensor([1.0])
    with pytest.raises(RuntimeError, match="argument 1 is a jax tensor"):
        js.tensor([1.0]) + js.tensor([1.0], backend="jax")


def test_a_backend_flag_is_read_when_the_venue_is_made_and_again_after_it_is_forgotten(
    monkeypatch,
):
    """A venue keeps the backend's flags it read (Note [Deciding once where an op runs]):
    changed alone, the flag does nothing; `jax_kernels_uncompiled` forgets the venues on both
    sides, so that inside it JAX's kernels run uncompiled and after it compiled again."""
    x = js.tensor([1.0, 2.0], backend="jax")
    x * x  # the venue is made, compiling
    compiled_kernels.clear_cache()
    with monkeypatch.context() as patch:
        patch.setattr(JaxBackend, "compiles_kernels", False)
        x * x
    assert compiled_kernels.cache_size() == 1  # the venue made before still compiles
    compiled_kernels.clear_cache()
    with jax_kernels_uncompiled():
        np.testing.assert_array_equal(np.asarray((x * x).array), [1.0, 4.0])
        assert compiled_kernels.cache_size() == 0
        assert not venue_of(x).compiles
    np.testing.assert_array_equal(np.asarray((x * x).array), [1.0, 4.0])
    assert compiled_kernels.cache_size() == 1
    assert venue_of(x).compiles
