"""What a recorded node leaves for Python's cyclic collector to track (Note [Objects the
collector tracks per node]): the nodes of host outputs alike share their input metadata,
an accelerator's nodes keep their own streams, and a chain of products by a number tracks
no more than the node and its edges per op."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from helpers import BACKENDS

import jaxstream as js
from jaxstream.ops import opdef


@pytest.mark.parametrize("backend", BACKENDS)
def test_host_outputs_alike_share_their_metadata(backend):
    x = js.tensor(np.ones(3, np.float32), backend=backend, requires_grad=True)
    a, b = x * 2.0, x.tanh()
    assert a.grad_fn.input_metadata is b.grad_fn.input_metadata
    meta = a.grad_fn.input_metadata[0]
    assert (meta.shape, meta.dtype, meta.device) == ((3,), np.float32, js.device("cpu"))
    wider = js.tensor(np.ones(4, np.float32), backend=backend, requires_grad=True) * 2.0
    doubled = x.astype(np.float64) * 2.0 if backend == "numpy" else None
    assert wider.grad_fn.input_metadata[0].shape == (4,)
    assert wider.grad_fn.input_metadata is not a.grad_fn.input_metadata
    if doubled is not None:
        assert doubled.grad_fn.input_metadata[0].dtype == np.float64


def test_accelerator_nodes_keep_the_stream_they_ran_on():
    x = js.tensor(np.ones(3, np.float32), device="sim:0", requires_grad=True)
    side = js.Stream("sim:0")
    a = x * 2.0
    side.wait_stream(js.current_stream("sim:0"))
    with js.stream(side):
        b = x * 2.0
    assert a.grad_fn.input_metadata is not b.grad_fn.input_metadata
    assert b.grad_fn.stream == side
    assert b.grad_fn.input_metadata[0].stream == side
    assert a.grad_fn.input_metadata[0].stream != side


def test_the_shared_table_starts_over_past_its_limit(monkeypatch):
    monkeypatch.setattr(opdef, "SHARED_METADATA_LIMIT", 3)
    monkeypatch.setattr(opdef, "_shared_metadata", {})
    x = js.tensor(np.ones(8), requires_grad=True)
    outputs = [x[:n] * 2.0 for n in range(1, 6)]
    assert len(opdef._shared_metadata) <= 3
    assert [o.grad_fn.input_metadata[0].shape for o in outputs] == [(n,) for n in range(1, 6)]
    sum(o.sum() for o in outputs).backward()
    np.testing.assert_allclose(x.grad.numpy(), [10.0, 8.0, 6.0, 4.0, 2.0, 0.0, 0.0, 0.0])


def test_a_chain_by_a_number_tracks_the_node_and_its_edges_per_op():
    x = js.tensor(np.ones(4), requires_grad=True)
    length = 400
    gc.collect()
    before = {id(o) for o in gc.get_objects()}
    y = x
    for _ in range(length):
        y = y * 2.0
    gc.collect()  # also untracks the tuples that hold no tracked object
    kept = [o for o in gc.get_objects() if id(o) not in before]
    per_op = len(kept) / length
    assert per_op < 3.5, (per_op, sorted({type(o).__name__ for o in kept}))
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(4, 2.0**length))
