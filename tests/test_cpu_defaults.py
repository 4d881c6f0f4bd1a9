"""The cpu_defaults experiment's peers: each sets the BLAS threads it names before its
sample, and a peer's step runs in a worker of its own."""

from __future__ import annotations

import pytest

from experiments.cpu_defaults import peers
from experiments.harness import alone
from experiments.harness.timing import Missing, Timing
from jaxstream.backends import blas


@pytest.fixture
def restore_blas():
    yield
    blas.set_blas_threads(blas.DEFAULT_THREADS)


@pytest.mark.parametrize(("peer", "cap"), [(peers.BLAS_OWN, None), (peers.BLAS_CAPPED, 1),
                                           ("jaxstream-jax", 1)])
def test_each_jaxstream_peer_sets_its_blas_threads_before_its_sample(peer, cap, restore_blas):
    blas.set_blas_threads(None if cap == 1 else 1)
    step = peers.timed_step(peer, "mlp", 8, "cpu")()
    assert blas.blas_threads() == cap
    step()


def test_the_mlp_step_trains_as_pytorch_does():
    pytest.importorskip("torch")
    losses = {}
    for peer in ("torch", peers.BLAS_CAPPED, "jaxstream-jax"):
        step = peers.timed_step(peer, "mlp", 16, "cpu")
        losses[peer] = [step()().item() for _ in range(3)]
    for peer in (peers.BLAS_CAPPED, "jaxstream-jax"):
        assert losses[peer] == pytest.approx(losses["torch"], rel=1e-5)
    assert losses["torch"][2] < losses["torch"][0]


def test_a_peer_is_timed_alone_and_an_unknown_one_is_told():
    requests = {
        peer: {"peer": peer, "workload": "mlp", "batch": 8, "device": "cpu"}
        for peer in (peers.BLAS_CAPPED, "jaxstream-nosuchbackend")
    }
    found = alone.time_each_alone(
        requests, "experiments.cpu_defaults.peers:prepare_alone", warmup=1, repeat=2
    )
    assert isinstance(found[peers.BLAS_CAPPED], Timing)
    assert len(found[peers.BLAS_CAPPED].samples_s) == 2
    missing = found["jaxstream-nosuchbackend"]
    assert isinstance(missing, Missing) and missing.failed
    assert "nosuchbackend" in missing.reason
