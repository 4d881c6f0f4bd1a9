"""The name rule for the shape ops: `transpose(dim0, dim1)`, `split` by piece size, `chunk`,
`unbind`, `expand`, `repeat`, `view(dtype)`, `squeeze(dim)`, `flatten(start_dim, end_dim)`,
`permute(*dims)`, `flip(*dims)` have PyTorch's meaning, diff-tested against torch on both
backends (values, returned types, gradients); the array API's `permute_dims`,
`expand_dims` and `squeeze(axis=)` keep theirs.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import BACKENDS, arr, error_text
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from ops_oracle import check_against_torch, pair, same_structure, uniform_values

import jaxstream as js

pytestmark = pytest.mark.oracle

HYPOTHESIS = settings(max_examples=12, deadline=None)
SHAPES = hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4)


def weighted(pieces, dim):
    """The pieces of a split back in one tensor, each scaled apart (so gradients differ)."""
    return lambda cat: cat([p * (i + 1.0) for i, p in enumerate(pieces)], dim)


# ------------------------------------------------------------------ transpose
@settings(HYPOTHESIS)
@given(shape=SHAPES, data=st.data())
def test_transpose_swaps_two_dims(torch, shape, data):
    dims = st.integers(-len(shape), len(shape) - 1)
    d0, d1 = data.draw(dims), data.draw(dims)
    check_against_torch(torch, lambda x: x.transpose(d0, d1) ** 2,
                        lambda x: x.transpose(d0, d1) ** 2, uniform_values(1, shape), "numpy")
    check_against_torch(torch, lambda x: js.transpose(x, d0, d1), lambda x: x.transpose(d0, d1),
                        uniform_values(2, shape), "numpy")


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_attention_line_runs_as_in_torch(torch, backend):
    check_against_torch(torch, lambda q, k: js.softmax(q @ k.transpose(-2, -1), -1),
                        lambda q, k: torch.softmax(q @ k.transpose(-2, -1), -1),
                        uniform_values(3, (2, 3, 4), (2, 5, 4)), backend)
    x, tx = pair(torch, np.ones((2, 3)), backend)
    assert x.transpose(0, 1).shape == (3, 2) and x.T.shape == (3, 2)
    assert x.transpose(0, 1).grad_fn.name() == tx.transpose(0, 1).grad_fn.name()


def test_transpose_with_numpys_arguments_says_what_to_write(torch):
    x = js.tensor(np.ones((2, 3)))
    with pytest.raises(TypeError, match="permute"):
        x.transpose((1, 0))
    with pytest.raises(TypeError):
        x.transpose()
    with pytest.raises(IndexError) as ours:
        x.transpose(0, 2)
    assert "Dimension out of range (expected to be in range of [-2, 1], but got 2)" in str(
        ours.value)


# ------------------------------------------------------------------ split, chunk, unbind
@settings(HYPOTHESIS)
@given(shape=SHAPES, data=st.data(), how=st.sampled_from(["split", "chunk", "unbind"]))
def test_pieces_match_torch(torch, shape, data, how):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    size = data.draw(st.integers(1, shape[dim] + 1))
    pieces = {"split": lambda x: x.split(size, dim), "chunk": lambda x: x.chunk(size, dim),
              "unbind": lambda x: x.unbind(dim)}[how]
    x, tx = pair(torch, uniform_values(4, shape)[0], "numpy")
    same_structure(pieces(x), pieces(tx), "numpy")
    stacked = "stack" if how == "unbind" else "cat"
    check_against_torch(torch, lambda x: weighted(pieces(x), dim)(getattr(js, stacked)),
                        lambda x: weighted(pieces(x), dim)(getattr(torch, stacked)),
                        uniform_values(5, shape), "numpy")


@pytest.mark.parametrize("backend", BACKENDS)
def test_split_takes_a_piece_size_or_the_sizes(torch, backend):
    x, tx = pair(torch, np.arange(10.0).reshape(5, 2), backend)
    for call in (lambda t, m: t.split(2), lambda t, m: m.split(t, [1, 4]),
                 lambda t, m: t.split(1, 1), lambda t, m: m.chunk(t, 2, dim=1),
                 lambda t, m: m.unbind(t, 1)):
        same_structure(call(x, js), call(tx, torch), backend)
    assert [p.shape for p in x.split(2)] == [(2, 2), (2, 2), (1, 2)]
    assert all(p.grad_fn.op.view for p in x.split(2) + x.chunk(3) + x.unbind())


@pytest.mark.parametrize("call,phrase", [
    (lambda x: x.split(0), "split_size can only be 0 if dimension size is 0"),
    (lambda x: x.split(-1), "split expects split_size be non-negative"),
    (lambda x: x.chunk(0), "chunk expects `chunks` to be greater than 0"),
    (lambda x: x.unbind(2), "Dimension out of range"),
])
def test_bad_pieces_raise_torchs_errors(call, phrase):
    with pytest.raises((ValueError, IndexError), match=phrase):
        call(js.tensor(np.ones((5, 2))))


def test_split_spelled_as_numpys_says_it_is_torchs():
    with pytest.raises(TypeError, match="piece size") as excinfo:
        js.split(js.tensor(np.ones((2, 4))), 2, axis=1)
    assert "chunk" in error_text(excinfo)


# ------------------------------------------------------------------ expand, repeat
@settings(HYPOTHESIS)
@given(shape=SHAPES, data=st.data())
def test_expand_matches_torch(torch, shape, data):
    lead = data.draw(st.lists(st.integers(1, 3), max_size=2))
    sizes = [data.draw(st.sampled_from([1, 3, -1] if n == 1 else [n, -1])) for n in shape]
    check_against_torch(torch, lambda x: x.expand(*lead, *sizes) ** 2,
                        lambda x: x.expand(*lead, *sizes) ** 2, uniform_values(6, shape), "numpy")
    check_against_torch(torch, lambda x: x.expand((*lead, *sizes)).sum(-1),
                        lambda x: x.expand((*lead, *sizes)).sum(-1), uniform_values(7, shape),
                        "numpy")


@settings(HYPOTHESIS)
@given(shape=SHAPES, data=st.data())
def test_repeat_tiles_as_torch(torch, shape, data):
    reps = data.draw(st.lists(st.integers(0, 3), min_size=len(shape), max_size=len(shape) + 2))
    check_against_torch(torch, lambda x: x.repeat(*reps) ** 2, lambda x: x.repeat(*reps) ** 2,
                        uniform_values(8, shape), "numpy")


@pytest.mark.parametrize("backend", BACKENDS)
def test_expand_and_repeat_on_both_backends(torch, backend):
    values = uniform_values(9, (2, 1, 3))
    for call in (lambda x: x.expand(4, -1, 5, 3), lambda x: x.repeat(2, 1, 2, 1),
                 lambda x: x.expand_as(x.repeat(1, 4, 1)), lambda x: x.repeat((1, 2, 1))):
        check_against_torch(torch, lambda x, f=call: f(x) ** 2, lambda x, f=call: f(x) ** 2, values,
                            backend)
    x, tx = pair(torch, values[0], backend)
    assert x.expand(2, 4, 3).grad_fn.name() == tx.expand(2, 4, 3).grad_fn.name()
    assert x.repeat(2, 1, 1).grad_fn.name() == tx.repeat(2, 1, 1).grad_fn.name()


def test_expand_is_a_view_of_its_base(torch):
    base = js.tensor(np.zeros((2, 1)))
    wide = base.expand(2, 3)
    base += 1.0
    assert arr(wide).tolist() == [[1.0] * 3] * 2 and wide._version == base._version
    phrase = "more than one element of the written-to tensor refers to a single memory location"
    with pytest.raises(RuntimeError, match=phrase):
        torch.zeros(2, 1).expand(2, 3).add_(1.0)
    for write in (lambda t: t.add_(1.0), lambda t: t.__setitem__(0, 5.0)):
        with pytest.raises(RuntimeError, match=phrase):
            write(wide)
    wide[0, 0] = 5.0  # one element: no overlap, as in torch
    assert arr(base).tolist() == [[5.0], [1.0]] and arr(wide)[0].tolist() == [5.0] * 3


@pytest.mark.parametrize("call,error,phrase", [
    (lambda x: x.expand(2, 3), RuntimeError, "the number of sizes provided (2) must be greater"),
    (lambda x: x.expand(-1, 2, 1, 3), RuntimeError, "isn't allowed in a leading, non-existing"),
    (lambda x: x.expand(2, 4, 4), RuntimeError,
     "The expanded size of the tensor (4) must match the existing size (3) at non-singleton"),
    (lambda x: x.repeat(2, 1), RuntimeError, "Number of dimensions of repeat dims can not be"),
    (lambda x: x.repeat(-1, 1, 1), RuntimeError, "negative dimension -2"),
])
def test_bad_sizes_raise_torchs_errors(torch, call, error, phrase):
    with pytest.raises(error) as theirs:
        call(torch.ones(2, 1, 3))
    with pytest.raises(error) as ours:
        call(js.tensor(np.ones((2, 1, 3))))
    assert phrase in str(theirs.value) and phrase in str(ours.value)


# ------------------------------------------------------------------ view, reshape, flatten
@pytest.mark.parametrize("backend", BACKENDS)
def test_view_of_a_dtype_reinterprets_the_bits(torch, backend):
    values = np.linspace(-2.0, 2.0, 6, dtype=np.float32).reshape(2, 3)
    x = js.tensor(values, backend=backend, requires_grad=True)
    for ours, theirs in ((x.view(np.int32), torch.int32), (x.view("float16"), torch.float16)):
        expected = torch.tensor(values).view(theirs)
        assert ours.shape == tuple(expected.shape) and not ours.requires_grad
        np.testing.assert_array_equal(arr(ours), expected.numpy())
    assert x.view(np.float32).grad_fn is not None and x.view(3, 2).shape == (3, 2)


def test_a_shape_that_does_not_fit_is_torchs_error(torch):
    for shape in ((4, 2), (4, -1), (-1, -1)):
        with pytest.raises(RuntimeError) as theirs:
            torch.ones(2, 3).reshape(shape)
        with pytest.raises(RuntimeError) as ours:
            js.tensor(np.ones((2, 3))).view(*shape)
        assert str(theirs.value) in str(ours.value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_flatten_squeeze_unsqueeze_take_torchs_keywords(torch, backend):
    values = uniform_values(11, (2, 1, 3, 1))
    cases = [lambda x, m: x.flatten(start_dim=1), lambda x, m: m.flatten(x, 1, end_dim=2),
             lambda x, m: x.squeeze(0), lambda x, m: x.squeeze(1),
             lambda x, m: x.squeeze((0, 1, 3)), lambda x, m: m.squeeze(x, dim=2),
             lambda x, m: x.unsqueeze(dim=-1), lambda x, m: m.unsqueeze(x, dim=4),
             lambda x, m: x.permute(3, 0, 2, 1), lambda x, m: x.permute((3, 0, 2, 1)),
             lambda x, m: x.flip(0, 2), lambda x, m: x.flip([2]),
             lambda x, m: m.flip(x, dims=(0, 2))]
    for call in cases:
        check_against_torch(torch, lambda x, f=call: f(x, js) ** 2,
                            lambda x, f=call: f(x, torch) ** 2, values, backend)
    x, tx = pair(torch, values[0], backend)
    assert x.squeeze(0).grad_fn.name() == tx.squeeze(0).grad_fn.name()


def test_the_array_api_spellings_keep_their_meaning():
    x = js.tensor(np.ones((2, 1, 3)))
    with pytest.raises(ValueError, match=r"axis 0 of a tensor of shape \(2, 1, 3\) has length 2"):
        js.squeeze(x, axis=0)
    assert js.squeeze(x, axis=1).shape == (2, 3) and js.expand_dims(x, axis=0).shape == (1, 2, 1, 3)
    assert js.permute_dims(x, (2, 0, 1)).shape == (3, 2, 1) and x.T.shape == (3, 1, 2)


def test_bad_dims_raise_torchs_errors(torch):
    x, tx = js.tensor(np.ones((2, 3))), torch.ones(2, 3)
    for call in (lambda t: t.flatten(1, 0), lambda t: t.permute(0, 0), lambda t: t.permute(0)):
        with pytest.raises(RuntimeError) as theirs:
            call(tx)
        with pytest.raises((RuntimeError, ValueError)) as ours:
            call(x)
        torch_words = str(theirs.value).split(": ", 1)[-1].split(" i.e.")[0]
        assert torch_words in str(ours.value) and "(2, 3)" in str(ours.value)
