"""streaming_backward's PyTorch peer: its verdict against jaxstream's streams, where it runs,
and the same branches as jaxstream's workload."""

from __future__ import annotations

import numpy as np
import pytest

from experiments.harness.timing import PeerUnavailable
from experiments.streaming_backward import table, torch_peer
from experiments.streaming_backward.peers import TORCH, peer_name, peers
from experiments.streaming_backward.workload import (
    SIZES,
    make_inputs,
    own_arrays,
    shared_arrays,
)


def _verdicts(cuda: float | None, torch: float | None) -> dict:
    found = {f"cuda-{phase}-k_over_one": cuda for phase in ("forward", "backward")}
    found.update({f"{TORCH}-{phase}-k_over_one": torch for phase in ("forward", "backward")})
    return table.against_torch(found)


def test_where_pytorch_gains_jaxstream_must_keep_four_fifths_of_its_gain() -> None:
    kept = _verdicts(cuda=0.7, torch=0.6)  # PyTorch gains 40%, jaxstream 30%: 75% kept
    assert kept["cuda-forward-torch_gain_kept"] == pytest.approx(0.75)
    assert kept["cuda-forward-streams_target"] == "missed"
    assert _verdicts(cuda=0.65, torch=0.6)["cuda-backward-streams_target"] == "met"


def test_where_pytorch_does_not_gain_jaxstream_must_not_lose() -> None:
    assert _verdicts(cuda=1.0, torch=1.05)["cuda-forward-streams_target"] == "met"
    losing = _verdicts(cuda=1.2, torch=1.05)
    assert losing["cuda-forward-streams_target"] == "missed"
    assert losing["cuda-forward-torch_gain_kept"] is None  # no gain to keep


def test_an_unmeasured_side_leaves_the_verdict_open() -> None:
    for cuda, torch in ((None, 0.6), (0.7, None)):
        verdicts = _verdicts(cuda=cuda, torch=torch)
        assert verdicts["cuda-forward-streams_target"] is None
        assert verdicts["cuda-forward-torch_gain_kept"] is None


def test_pytorch_streams_need_cuda_and_say_so() -> None:
    assert "--device cuda" in torch_peer.torch_unavailable("cpu")
    assert "--device cuda" in torch_peer.torch_unavailable("sim")


def test_without_a_gpu_every_pytorch_peer_reads_why() -> None:
    inputs = make_inputs(SIZES["smoke"])
    reason = "torch sees no CUDA device"
    found = peers(shared_arrays(inputs, 2), 2, {"sim": None, "cuda": "no GPU", TORCH: reason})
    torch_peers = [name for name in found if name.startswith(f"{TORCH}-")]
    assert sorted(torch_peers) == sorted(
        peer_name(TORCH, layout, phase) for layout in ("k", "one")
        for phase in ("forward", "backward")
    )
    for name in torch_peers:
        with pytest.raises(PeerUnavailable, match=reason):
            found[name]()


def test_the_branch_arrays_are_the_workloads_branches() -> None:
    inputs = make_inputs(SIZES["smoke"])
    shared = shared_arrays(inputs, 2)
    assert all(x is inputs.x for x, _ in shared)  # one input leaf, as jaxstream's
    assert [w for _, weights in shared for w in weights] == list(inputs.weights)
    own = own_arrays([make_inputs(SIZES["smoke"], seed=k) for k in range(2)])
    assert own[0][0] is not own[1][0] and not np.array_equal(own[0][0], own[1][0])


@pytest.mark.cuda
def test_pytorch_streams_give_the_cpus_gradients_on_a_gpu(torch) -> None:
    inputs = make_inputs(SIZES["smoke"])
    arrays = shared_arrays(inputs, 2)
    branches, x = torch_peer._leaves(torch, arrays)
    streams = [torch.cuda.Stream() for _ in range(2)]
    torch_peer._forward(torch, branches, streams).backward()
    reference = torch.tensor(inputs.x, requires_grad=True)
    sum(_branch(torch, reference, weights) for _, weights in arrays).backward()
    difference = (x.grad.cpu() - reference.grad).abs().max() / reference.grad.abs().max()
    assert float(difference) <= 1e-5


def _branch(torch, x, weights):
    h = x
    for weight in weights:
        h = torch.tanh(torch.nn.functional.linear(h, torch.tensor(weight)))
    return h.sum()


def test_the_workload_of_the_arrays_is_the_k_branch_forward() -> None:
    from experiments.streaming_backward.workload import branch_workload, forward, make_leaves

    inputs = make_inputs(SIZES["smoke"])
    graph = branch_workload(shared_arrays(inputs, 2))("cpu")(())
    reference = forward(make_leaves(inputs, "cpu"), (), 2)
    assert len(graph.leaves.weights) == len(inputs.weights)  # one leaf for the shared x
    np.testing.assert_array_equal(graph.loss.numpy(), reference.loss.numpy())
    graph.loss.backward()
    reference.loss.backward()
    np.testing.assert_array_equal(graph.leaves.x.grad.numpy(), reference.leaves.x.grad.numpy())
