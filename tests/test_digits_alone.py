"""The digits_training workers that time each peer alone (experiments/digits_training/alone.py):
samples from each worker, and a peer that cannot run or fails is told, not hung on."""

from __future__ import annotations

import pytest

from experiments.digits_training.alone import time_each_alone
from experiments.harness.timing import Missing, Timing
from jaxstream.devices import jax_gpus


def test_each_peer_is_sampled_in_its_own_worker():
    calls = []
    found = time_each_alone(
        {"jaxstream-numpy": "", "jax-jit": ""}, 8, warmup=1, repeat=3, device="cpu",
        on_sample=lambda: calls.append(1),
    )
    assert set(found) == {"jaxstream-numpy", "jax-jit"}
    for outcome in found.values():
        assert isinstance(outcome, Timing)
        assert len(outcome.samples_s) == len(outcome.cpu_samples_s) == 3
        assert all(s > 0 for s in outcome.samples_s)
    assert len(calls) == 2 * (1 + 3)


@pytest.mark.parametrize(
    ("peer", "device", "failed", "reason"),
    [
        ("jaxstream-numpy", "cuda", False, "NumPy arrays live on the host only"),  # anywhere
        pytest.param("jax-jit", "cuda", False, "jax has no device for cuda:0", marks=(
            pytest.mark.skipif(bool(jax_gpus()), reason="JAX has a GPU here: the peer runs"))),
        ("jaxstream-nosuchbackend", "cpu", True, "'nosuchbackend'"),
    ],
)
def test_a_peer_that_cannot_run_is_missing(peer, device, failed, reason):
    (outcome,) = time_each_alone({peer: ""}, 8, warmup=1, repeat=1, device=device).values()
    assert isinstance(outcome, Missing)
    assert outcome.failed is failed
    assert reason in outcome.reason
