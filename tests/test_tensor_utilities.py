"""PyTorch's everyday Tensor utilities (`t`, `mm`, `narrow`, `diagonal`, `take`, `new_zeros`,
`type`, `cpu`, ...) with PyTorch's meaning, diff-tested against torch on both backends:
values, dtypes, first and second gradients, node names, which results are views (an
in-place op on one changes its base as in PyTorch), and the errors PyTorch raises.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import BACKENDS, arr, error_text
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from ops_oracle import check_against_torch, pair, same_structure, tensor_of, uniform_values

import jaxstream as js

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.oracle

HYPOTHESIS = settings(max_examples=15, deadline=None, derandomize=True)
SHAPES = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)


def lib(x):
    """The library of tensor `x`: the same call reads `js.f(x)` or `torch.f(x)`."""
    return js if isinstance(x, js.Tensor) else torch


def index(x, values, dtype=None):
    """An integer (or `dtype`) tensor of `values` beside tensor `x`, in x's library."""
    if isinstance(x, js.Tensor):
        return js.tensor(np.asarray(values, dtype=dtype), backend=x.backend)
    return torch.tensor(np.asarray(values, dtype=dtype))


def node(t):
    return None if t.grad_fn is None else t.grad_fn.name()


def is_view(t):
    return t._view is not None if isinstance(t, js.Tensor) else t._is_view()


# ------------------------------------------------------------------ values, gradients, nodes
# name -> (the call, on a js or a torch tensor alike; the shapes of its float inputs)
CASES = {
    "t": (lambda x: x.t(), [(3, 4)]),
    "t-vector": (lambda x: lib(x).t(x), [(4,)]),
    "mm": (lambda a, b: a.mm(b), [(3, 4), (4, 2)]),
    "mv": (lambda a, b: lib(a).mv(a, b), [(3, 4), (4,)]),
    "dot": (lambda a, b: lib(a).dot(a, b), [(4,), (4,)]),
    "vdot": (lambda a, b: a.vdot(b), [(4,), (4,)]),
    "inner": (lambda a, b: lib(a).inner(a, b), [(2, 3, 4), (2, 4)]),
    "inner-vectors": (lambda a, b: a.inner(b), [(4,), (4,)]),
    "inner-scalar": (lambda a, b: lib(a).inner(a, b), [(3, 4), ()]),
    "view_as": (lambda x: x.view_as(lib(x).zeros(2, 6)), [(3, 4)]),
    "reshape_as": (lambda x: x.reshape_as(lib(x).zeros(12)), [(3, 4)]),
    "ravel": (lambda x: lib(x).ravel(x.transpose(0, 1)), [(3, 4)]),
    "narrow": (lambda x: x.narrow(1, -3, 2), [(3, 4)]),
    "select": (lambda x: lib(x).select(x, -1, 1), [(2, 3, 4)]),
    "movedim": (lambda x: lib(x).movedim(x, (0, 2), (2, 0)), [(2, 3, 4)]),
    "moveaxis": (lambda x: x.moveaxis(-1, 0), [(2, 3, 4)]),
    "diagonal": (lambda x: x.diagonal(), [(3, 4)]),
    "diagonal-dims": (lambda x: lib(x).diagonal(x, -1, 2, 0), [(3, 2, 4)]),
    "diag_embed": (lambda x: x.diag_embed(), [(2, 3)]),
    "diag_embed-dims": (lambda x: lib(x).diag_embed(x, 1, 0, 2), [(2, 3)]),
    "fliplr": (lambda x: lib(x).fliplr(x), [(3, 4)]),
    "flipud": (lambda x: x.flipud(), [(3, 4)]),
    "rot90": (lambda x: x.rot90(), [(3, 4)]),
    "rot90-k3": (lambda x: lib(x).rot90(x, -1, (2, 0)), [(2, 3, 4)]),
    "rot90-k2": (lambda x: x.rot90(2, (1, 0)), [(3, 4)]),
    "rot90-k0": (lambda x: x.rot90(4), [(3, 4)]),
    "unflatten": (lambda x: x.unflatten(1, (2, -1)), [(3, 4)]),
    "take": (lambda x: lib(x).take(x, index(x, [[0, 11], [-1, 11]])), [(3, 4)]),
    "take_along_dim": (lambda x: x.take_along_dim(index(x, [[[2], [0], [3]]]), 2), [(2, 3, 4)]),
    "take_along_dim-flat": (lambda x: lib(x).take_along_dim(x, index(x, [5, 0, 5])), [(3, 4)]),
    "masked_select": (lambda x: x.masked_select(x > 0), [(3, 4)]),
    "masked_select-broadcast": (lambda x: lib(x).masked_select(x, index(x, [[True], [False]])),
                                [(4,)]),
    "repeat_interleave": (lambda x: x.repeat_interleave(2, dim=1), [(3, 4)]),
    "repeat_interleave-flat": (lambda x: lib(x).repeat_interleave(x, 3), [(2, 2)]),
    "repeat_interleave-counts": (lambda x: x.repeat_interleave(index(x, [2, 0, 1]), dim=0),
                                 [(3, 4)]),
    "bfloat16-and-back": (lambda x: x.bfloat16().double() * 1.0, [(3,)]),
    "type": (lambda x: x.type(x.dtype) * 1.0, [(3,)]),
}


ON_JAX = ["t", "vdot", "narrow", "select", "diagonal-dims", "diag_embed-dims", "rot90-k3",
          "take", "masked_select-broadcast", "repeat_interleave-counts", "bfloat16-and-back"]
"""The cases on JAX too: those with kernels of their own (the others compose ops that
test_ops_* check on JAX; each JAX case compiles its kernels, a tenth of a second)."""


@pytest.mark.parametrize(("name", "backend"),
                         [(name, "numpy") for name in CASES] + [(name, "jax") for name in ON_JAX])
def test_each_utility_matches_torch(name, backend):
    """Values, first and second gradients, the node's name and whether it is a view."""
    fn, shapes = CASES[name]
    values = uniform_values(7, *shapes)
    if name.startswith("bfloat16") and backend == "jax":
        fn = lambda x: x.bfloat16().float() * 1.0  # float64 is off on JAX
    check_against_torch(torch, fn, fn, values, backend)
    ours, theirs = zip(*(pair(torch, v, backend) for v in values), strict=True)
    y, ty = fn(*ours), fn(*theirs)
    assert (node(y), is_view(y)) == (node(ty), is_view(ty))
    same_structure(y, ty, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_split_pieces_are_slices_of_torchs_sizes(backend):
    for spec, dim in [(3, 1), ([1, 3], 1), ([-1], 0), ([5, 1], 0), ((2,), -1)]:
        x, tx = pair(torch, np.arange(12.0).reshape(3, 4), backend)
        ours, theirs = js.tensor_split(x, spec, dim), torch.tensor_split(tx, spec, dim)
        assert isinstance(ours, tuple) and len(ours) == len(theirs)
        for p, tp in zip(ours, theirs, strict=True):
            same_structure(p, tp, backend)
            assert (node(p), is_view(p)) == (node(tp), is_view(tp)) == ("SliceBackward0", True)
    x, tx = pair(torch, np.arange(12.0).reshape(3, 4), backend)
    same_structure(x.tensor_split(index(x, 2)), tx.tensor_split(torch.tensor(2)), backend)
    same_structure(x.tensor_split(index(x, [1, 2])), tx.tensor_split(torch.tensor([1, 2])),
                   backend)
    check_against_torch(torch, lambda x: x.tensor_split(3, 1)[1] * x.tensor_split(3, 1)[0],
                        lambda x: x.tensor_split(3, 1)[1] * x.tensor_split(3, 1)[0],
                        uniform_values(1, (3, 5)), backend)


# ------------------------------------------------------------------ views
VIEWS = {
    "t": lambda b: b.t(),
    "narrow": lambda b: b.narrow(1, 1, 2),
    "select": lambda b: b.select(0, 1),
    "diagonal": lambda b: b.diagonal(1),
    "diagonal-transposed": lambda b: b.diagonal(0, 1, 0),
    "tensor_split": lambda b: b.tensor_split(2, 1)[1],
    "unflatten": lambda b: b.unflatten(1, (2, 2)),
    "ravel": lambda b: b.ravel(),
    "movedim": lambda b: b.movedim(1, 0),
    "view_as": lambda b: b.view_as(b.ravel()),
}


@pytest.mark.parametrize(("name", "backend"), [(name, "numpy") for name in VIEWS] + [
    (name, "jax") for name in ("t", "narrow", "select", "diagonal-transposed")])
def test_an_inplace_op_on_a_view_changes_its_base_as_in_torch(name, backend):
    x, tx = pair(torch, np.arange(12.0).reshape(3, 4), backend)
    base, tbase = x * 1.0, tx * 1.0
    view, tview = VIEWS[name](base), VIEWS[name](tbase)
    view.mul_(3.0)
    tview.mul_(3.0)
    same_structure(base, tbase, backend)
    assert base._version == tbase._version == 1
    (base * base).sum().backward()
    (tbase * tbase).sum().backward()
    same_structure(x.grad, tx.grad, backend)


def test_copies_stay_apart_from_their_input():
    """`diag_embed`, `rot90`, `fliplr`, `take`, `masked_select` and `repeat_interleave` copy,
    as in PyTorch (repeat_interleave's result is a view of its own copy)."""
    x = js.tensor(np.arange(4.0).reshape(2, 2))
    for out in (x.diag_embed(), x.rot90(), x.fliplr(), x.take(index(x, [0])),
                x.masked_select(x > 0), x.repeat_interleave(2)):
        out.add_(1.0)
    np.testing.assert_array_equal(arr(x), np.arange(4.0).reshape(2, 2))
    assert x._version == 0


# ------------------------------------------------------------------ hypothesis: any shape
@HYPOTHESIS
@given(shape=SHAPES, data=st.data())
def test_narrow_select_and_tensor_split_of_any_shape(shape, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    size = shape[dim]
    start = data.draw(st.integers(-size, size))
    length = data.draw(st.integers(0, size - (start % size if start < 0 else start)))
    i = data.draw(st.integers(-size, size - 1))
    sections = data.draw(st.integers(1, 5))
    points = data.draw(st.lists(st.integers(-size - 1, size + 1), max_size=3))
    x, tx = pair(torch, uniform_values(3, shape)[0], "numpy")
    same_structure(x.narrow(dim, start, length), tx.narrow(dim, start, length), "numpy")
    same_structure(js.select(x, dim, i), torch.select(tx, dim, i), "numpy")
    same_structure(x.tensor_split(sections, dim), tx.tensor_split(sections, dim), "numpy")
    same_structure(x.tensor_split(points, dim), tx.tensor_split(points, dim), "numpy")


@HYPOTHESIS
@given(shape=hnp.array_shapes(min_dims=2, max_dims=4, max_side=4), data=st.data())
def test_diagonal_rot90_and_movedim_of_any_shape(shape, data):
    n = len(shape)
    dims = data.draw(st.lists(st.integers(-n, n - 1), min_size=2, max_size=2,
                              unique_by=lambda d: d % n))
    offset = data.draw(st.integers(-5, 5))
    k = data.draw(st.integers(-5, 5))
    source = data.draw(st.permutations(range(n)).map(lambda p: p[:2]))
    x, tx = pair(torch, uniform_values(4, shape)[0], "numpy")
    same_structure(x.diagonal(offset, *dims), tx.diagonal(offset, *dims), "numpy")
    same_structure(x.rot90(k, dims), tx.rot90(k, dims), "numpy")
    same_structure(x.movedim(source, dims), tx.movedim(source, dims), "numpy")
    v, tv = pair(torch, uniform_values(5, shape[:-1])[0], "numpy")
    same_structure(v.diag_embed(offset, *dims), tv.diag_embed(offset, *dims), "numpy")


# ------------------------------------------------------------------ errors
# name -> the call (on js and torch tensors alike) and its input's shape
ERRORS = {
    "mm-vector": (lambda x: x.mm(x[0]), (3, 4)),
    "mm-batch": (lambda x: lib(x).mm(x, x), (2, 3, 3)),
    "mm-inner": (lambda x: x.mm(x), (3, 4)),
    "mv-matrices": (lambda x: x.mv(x), (3, 4)),
    "mv-length": (lambda x: x.mv(x[:, 0]), (3, 4)),
    "dot-matrix": (lambda x: lib(x).dot(x, x[0]), (3, 4)),
    "dot-length": (lambda x: x[0].dot(x[0, :3]), (3, 4)),
    "vdot-matrix": (lambda x: x.vdot(x), (3, 4)),
    "inner-last": (lambda x: x.inner(x[0, :3]), (3, 4)),
    "t-3d": (lambda x: x.t(), (2, 3, 4)),
    "narrow-start": (lambda x: x.narrow(0, 4, 1), (3, 4)),
    "narrow-negative-start": (lambda x: x.narrow(0, -4, 1), (3, 4)),
    "narrow-length": (lambda x: lib(x).narrow(x, 0, 1, 3), (3, 4)),
    "narrow-negative-length": (lambda x: x.narrow(0, 0, -1), (3, 4)),
    "narrow-dim": (lambda x: x.narrow(2, 0, 1), (3, 4)),
    "select-index": (lambda x: x.select(1, 4), (3, 4)),
    "select-negative": (lambda x: lib(x).select(x, 1, -5), (3, 4)),
    "select-scalar": (lambda x: x.sum().select(0, 0), (3, 4)),
    "movedim-lengths": (lambda x: x.movedim((0, 1), (1,)), (3, 4)),
    "movedim-repeated": (lambda x: x.movedim((0, 0), (1, 0)), (3, 4)),
    "diagonal-same-dims": (lambda x: x.diagonal(0, 0, 0), (3, 4)),
    "diagonal-vector": (lambda x: x[0].diagonal(), (3, 4)),
    "diag_embed-same-dims": (lambda x: x.diag_embed(0, 0, 0), (3, 4)),
    "fliplr-vector": (lambda x: x[0].fliplr(), (3, 4)),
    "flipud-scalar": (lambda x: x.sum().flipud(), (3, 4)),
    "rot90-one-dim": (lambda x: x.rot90(1, (0,)), (3, 4)),
    "rot90-vector": (lambda x: x[0].rot90(), (3, 4)),
    "rot90-same-dims": (lambda x: x.rot90(1, (0, 0)), (3, 4)),
    "rot90-dim-range": (lambda x: lib(x).rot90(x, 1, (0, 2)), (3, 4)),
    "tensor_split-zero": (lambda x: x.tensor_split(0), (3, 4)),
    "tensor_split-scalar": (lambda x: x.sum().tensor_split(2), (3, 4)),
    "tensor_split-2d": (lambda x: x.tensor_split(index(x, [[1]])), (3, 4)),
    "tensor_split-float": (lambda x: x.tensor_split(index(x, 2.0)), (3, 4)),
    "unflatten-sizes": (lambda x: x.unflatten(1, (3, 2)), (3, 4)),
    "unflatten-empty": (lambda x: x.unflatten(1, ()), (3, 4)),
    "take-range": (lambda x: x.take(index(x, [12])), (3, 4)),
    "take-negative-range": (lambda x: lib(x).take(x, index(x, [-13])), (3, 4)),
    "take_along_dim-ndim": (lambda x: x.take_along_dim(index(x, [0]), 1), (3, 4)),
    "take_along_dim-broadcast": (lambda x: x.take_along_dim(index(x, [[0], [0]]), 1), (3, 4)),
    "masked_select-float": (lambda x: x.masked_select(index(x, [1.0] * 4)), (3, 4)),
    "masked_select-broadcast": (lambda x: x.masked_select(index(x, [True, False])), (3, 4)),
    "repeat_interleave-sizes": (lambda x: x.repeat_interleave(index(x, [1, 2]), dim=0), (3, 4)),
    "repeat_interleave-negative": (lambda x: x.repeat_interleave(-1), (3, 4)),
    "repeat_interleave-negative-counts": (
        lambda x: x.repeat_interleave(index(x, [1, -2, 1]), dim=0), (3, 4)),
    "repeat_interleave-float-counts": (
        lambda x: x.repeat_interleave(index(x, [1.0, 2.0, 3.0]), dim=0), (3, 4)),
    "repeat_interleave-2d-counts": (
        lambda x: x.repeat_interleave(index(x, [[1, 2, 1]]), dim=0), (3, 4)),
    "repeat_interleave-output_size": (
        lambda x: x.repeat_interleave(2, dim=0, output_size=5), (3, 4)),
    "type-name": (lambda x: x.type("float32"), (3, 4)),
}


@pytest.mark.parametrize("name", ERRORS)
def test_errors_are_torchs(name):
    """The same exception type as torch's, whose message ours starts with or contains."""
    fn, shape = ERRORS[name]
    x, tx = pair(torch, np.ones(shape), "numpy")
    with pytest.raises(Exception) as theirs:
        fn(tx)
    with pytest.raises(type(theirs.value)) as ours:
        fn(x)
    told = str(theirs.value).splitlines()[0].removeprefix("torch.")
    assert told in error_text(ours)


def test_vdot_conjugates_the_first_vector_and_refuses_complex_gradients():
    a, b = np.array([1 + 2j, 3 - 1j]), np.array([2 - 1j, 1j])
    ours = js.vdot(js.tensor(a), js.tensor(b))
    np.testing.assert_allclose(arr(ours), torch.vdot(torch.tensor(a), torch.tensor(b)).numpy())
    with pytest.raises(NotImplementedError, match="vdot: gradients of complex"):
        js.vdot(js.tensor(a, requires_grad=True), js.tensor(b))


def test_repeat_interleave_of_counts_alone_and_with_output_size():
    counts, tcounts = js.tensor(np.array([1, 2, 0, 3])), torch.tensor([1, 2, 0, 3])
    same_structure(js.repeat_interleave(counts), torch.repeat_interleave(tcounts), "numpy")
    x, tx = pair(torch, np.arange(6.0).reshape(3, 2), "numpy")
    same_structure(x.repeat_interleave(index(x, [2]), dim=0, output_size=6),
                   tx.repeat_interleave(torch.tensor([2]), dim=0, output_size=6), "numpy")
    same_structure(x.sum().repeat_interleave(3), tx.sum().repeat_interleave(3), "numpy")


# ------------------------------------------------------------------ queries, factories
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64", "complex64", "complex128"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtype_queries_and_type_names_match_torch(dtype):
    tdtype = getattr(torch, dtype)
    x, tx = js.zeros(2, 3, dtype=dtype), torch.zeros(2, 3, dtype=tdtype)
    assert x.is_floating_point() == js.is_floating_point(x) == tx.is_floating_point()
    assert x.is_complex() == js.is_complex(x) == tx.is_complex()
    assert x.element_size() == tx.element_size() and x.nelement() == tx.nelement() == 6
    assert x.type() == tx.type().replace("torch.", "jaxstream.")
    assert x.is_contiguous() and x.t().is_contiguous() and x.contiguous() is x
    if dtype != "bool":
        assert js.ones(2).type(tx.type()).dtype == x.dtype


@pytest.mark.parametrize("backend", BACKENDS)
def test_casts_have_torchs_dtypes_and_nodes(backend):
    x, tx = pair(torch, [[-1.5, 2.0, 130.0]], backend)
    for cast in ("bfloat16", "short", "byte", "char", "half"):
        ours, theirs = getattr(x, cast)(), getattr(tx, cast)()
        assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")
        assert node(ours) == node(theirs)
    assert x.type(x.dtype) is x and x.type_as(x) is x
    y = js.zeros(1, dtype="float16", backend=backend)
    assert x.type_as(y).dtype == y.dtype and node(x.type_as(y)) == "ToCopyBackward0"
    assert x.type("jaxstream.HalfTensor").dtype == x.type("torch.HalfTensor").dtype == y.dtype
    assert x.type("torch.sim.IntTensor").device == js.device("sim:0")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["new_zeros", "new_ones", "new_empty"])
def test_new_factories_take_the_tensors_dtype_backend_and_device(backend, name):
    x, tx = tensor_of([1.0, 2.0], backend), torch.ones(2, dtype=torch.float64)
    for args in [(2, 3), ((2, 3),), ([2, 3],)]:
        ours, theirs = getattr(x, name)(*args), getattr(tx, name)(*args)
        assert (ours.shape, ours.dtype, ours.backend, ours.device) == (
            tuple(theirs.shape), x.dtype, backend, x.device)
        if name != "new_empty":
            np.testing.assert_array_equal(arr(ours), theirs.numpy())
    made = getattr(x, name)(2, dtype="int32", requires_grad=False)
    assert made.dtype == np.int32 and not made.requires_grad and made.is_leaf
    assert getattr(x, name)(2, requires_grad=True).requires_grad
    assert getattr(x, name)(2, device="sim:1").device == js.device("sim:1")


@pytest.mark.parametrize("backend", BACKENDS)
def test_new_full_and_new_tensor_keep_the_tensors_dtype(backend):
    x = tensor_of([1.0, 2.0], backend)
    full = x.new_full((2,), 3)
    assert full.dtype == x.dtype and arr(full).tolist() == [3.0, 3.0]
    made = x.new_tensor([1, 2])
    assert made.dtype == x.dtype and made.backend == backend and made.is_leaf
    assert x.new_tensor([1, 2], dtype="int32").dtype == np.int32
    with pytest.warns(UserWarning, match="copy construct"):
        copied = x.new_tensor(x)
    assert copied.is_leaf and not copied.requires_grad


# ------------------------------------------------------------------ devices
@pytest.mark.parametrize("backend", BACKENDS)
def test_cpu_is_to_cpu(backend):
    x = tensor_of([1.0, 2.0], backend)
    assert x.cpu() is x
    on_sim = x.to("sim:1")
    back = on_sim.cpu()
    assert back.device == js.device("cpu") and back.backend == backend
    assert node(back) == "ToCopyBackward0"
    (back * 2.0).sum().backward()
    np.testing.assert_array_equal(arr(x.grad), [2.0, 2.0])


def test_cuda_without_a_gpu_names_the_devices_there_are():
    if js.devices.cuda_device_count():
        pytest.skip("this machine has a CUDA GPU")
    with pytest.raises(RuntimeError) as caught:
        js.ones(2).cuda()
    assert "no CUDA GPU" in error_text(caught) and "cpu, sim:0" in error_text(caught)


def test_contiguous_refuses_another_layout():
    with pytest.raises(NotImplementedError, match="row-major"):
        js.ones(2, 2).contiguous(memory_format=torch.channels_last)
    assert js.ones(2).contiguous(memory_format=torch.contiguous_format).shape == (2,)
    assert js.ones(2).is_contiguous(torch.contiguous_format)
