"""PyTorch's everyday Tensor utilities: `t()` and the products `mm`, `mv`, `dot`, `vdot`,
`inner`; dtype and layout queries; the `new_*` factories; `type_as`, `view_as`,
`reshape_as`; the casts `bfloat16()`, `short()`, `byte()`, `char()`, `type()`; `cpu()` and
`cuda()`. The shape and selection utilities (`narrow`, `diagonal`, `take`, ...) are in
tensor_utility_shapes.py.

Each composes ops that exist (`matmul`, `reshape`, `to`, the factories) and keeps
PyTorch's meaning, errors and node names. Two PyTorch notions have no counterpart here:

* memory layout. A tensor here has values, not strides: every kernel reads arrays by
  value, so every tensor is as good as contiguous. `is_contiguous()` is always True and
  `contiguous()` returns the tensor itself (PyTorch copies a transposed tensor; here
  nothing would differ but the copy).
* tensor types. PyTorch's `t.type()` names a legacy class, `'torch.FloatTensor'` or
  `'torch.cuda.FloatTensor'`; ours names the same dtype and device type under jaxstream's
  name, `'jaxstream.FloatTensor'`, `'jaxstream.sim.FloatTensor'` (the backend is not part
  of it: `t.backend` says it). `t.type(name)` takes both spellings, and a dtype.
"""

from __future__ import annotations

from typing import Any

from .. import transfer
from ..devices import DEVICE_TYPES, GPU_STACK, Device, cuda_device_count, sim
from ..devices import device as parse_device
from ..devices.current import current_device
from ..tensor import Tensor, is_floating, tensor
from . import linalg as L
from . import shape_ops as S
from . import tensor_utility_rules as U
from .casting import to
from .creation import full, shape_of
from .dispatch import apply
from .dtype_names import scalar_type
from .functional import mul
from .operands import as_tensor, astype, autocast
from .products import check_matmul


# ------------------------------------------------------------------ t and the products
def t(x: Tensor) -> Tensor:
    """The transpose of a matrix (a view); a vector or a scalar comes back as it is."""
    if x.ndim > 2:
        raise RuntimeError(
            f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D (shape "
            f"{x.shape}); swap two dims with x.transpose(dim0, dim1), e.g. x.transpose(-2, -1)"
        )
    return apply(U.T, x)


def _ranked(op: str, a: Any, b: Any, ranks: tuple) -> tuple:
    """The operands of a product as tensors beside each other, autocast, of the ranks the
    product takes, else PyTorch's error."""
    like = a if isinstance(a, Tensor) else b
    a, b = autocast(as_tensor(a, like), as_tensor(b, like))
    if (a.ndim, b.ndim) == ranks:
        return a, b
    shapes = f"({op} of shapes {a.shape} and {b.shape})"
    if ranks == (1, 1):
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors "
                           f"{shapes}; for matrices use mm or matmul")
    if ranks == (2, 1):
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {a.ndim}, {b.ndim} "
                           f"{shapes}; for other ranks use matmul")
    name = "self" if a.ndim != 2 else "mat2"
    raise RuntimeError(f"{name} must be a matrix {shapes}; for other ranks use matmul")


def mm(a: Any, b: Any) -> Tensor:
    """The product of two matrices (no broadcasting, no promotion), node MmBackward0."""
    return L.matmul(*_ranked("mm", a, b, (2, 2)))


def mv(a: Any, b: Any) -> Tensor:
    """The product of a matrix and a vector, node MvBackward0."""
    return L.matmul(*_ranked("mv", a, b, (2, 1)))


def dot(a: Any, b: Any) -> Tensor:
    """The dot product of two vectors of one length and dtype, node DotBackward0."""
    return L.matmul(*_ranked("dot", a, b, (1, 1)))


def vdot(a: Any, b: Any) -> Tensor:
    """The dot product with `a` conjugated (`dot` for real vectors), node VdotBackward0."""
    a, b = _ranked("vdot", a, b, (1, 1))
    check_matmul(a, b)
    for name, v in (("self", a), ("other", b)):
        if v.requires_grad and v.dtype.kind == "c":
            raise NotImplementedError(
                f"vdot: gradients of complex tensors are not implemented ({name} {v.dtype} "
                f"of shape {v.shape} requires grad); detach it, or take real and imaginary "
                "parts as separate real tensors"
            )
    return apply(U.VDOT, a, b)


def inner(a: Any, b: Any) -> Tensor:
    """The sums of products over the last dims: shape `a.shape[:-1] + b.shape[:-1]`; a
    scalar operand multiplies instead, as PyTorch's."""
    like = a if isinstance(a, Tensor) else b
    a, b = as_tensor(a, like), as_tensor(b, like)
    if not a.ndim or not b.ndim:
        return mul(a, b)
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(
            f"inner() the last dimension must match on both input tensors but got shapes "
            f"{list(a.shape)} and {list(b.shape)}; transpose one so that they share the last"
        )
    k = a.shape[-1]
    rows = L.matmul(S.reshape(a, (-1, k)), apply(U.T, S.reshape(b, (-1, k))))
    return S.reshape(rows, a.shape[:-1] + b.shape[:-1])


# ------------------------------------------------------------------ queries
def is_floating_point(x: Tensor) -> bool:
    """Whether the dtype is a real floating one (bfloat16 included, complex not)."""
    return is_floating(x.dtype) and not is_complex(x)


def is_complex(x: Tensor) -> bool:
    return x.dtype.kind == "c"


def check_memory_format(op: str, memory_format: Any) -> None:
    """Every tensor here is laid out row-major (see the module's docstring); another
    layout asked for is an error, not silently the same tensor."""
    if memory_format is not None and not str(memory_format).endswith(
            ("contiguous_format", "preserve_format")):
        raise NotImplementedError(
            f"{op}(memory_format={memory_format}): tensors here have one layout, row-major "
            "(PyTorch's contiguous_format); leave memory_format out"
        )


def is_contiguous(x: Tensor, memory_format: Any = None) -> bool:
    """Always True: tensors here have values, not strides (see the module's docstring)."""
    check_memory_format("is_contiguous", memory_format)
    return True


def contiguous(x: Tensor, memory_format: Any = None) -> Tensor:
    """`x` itself: every tensor here is contiguous (see the module's docstring)."""
    check_memory_format("contiguous", memory_format)
    return x


def element_size(x: Tensor) -> int:
    """The bytes of one element."""
    return x.dtype.itemsize


# ------------------------------------------------------------------ new_* factories
def _new(x: Tensor, shape: tuple, fill: Any, dtype: Any, device: Any, backend: str | None,
         requires_grad: bool) -> Tensor:
    """`full(shape, fill)` in `x`'s dtype, where `x.to(device, backend=backend)` would go."""
    target, where = transfer.target_of(x.array_backend, x.device, device, backend)
    return full(shape, fill, dtype=x.dtype if dtype is None else dtype, backend=target.name,
                device=where, requires_grad=requires_grad)


def new_full(x: Tensor, size: Any, fill_value: Any, *, dtype: Any = None, device: Any = None,
             backend: str | None = None, requires_grad: bool = False) -> Tensor:
    """A tensor of `size` filled with `fill_value`, of `x`'s dtype, backend and device unless
    told."""
    return _new(x, shape_of((size,), "new_full"), fill_value, dtype, device, backend,
                requires_grad)


def new_zeros(x: Tensor, *size: Any, dtype: Any = None, device: Any = None,
              backend: str | None = None, requires_grad: bool = False) -> Tensor:
    """Zeros of `size` (`new_zeros(2, 3)` or `new_zeros((2, 3))`), as `new_full`."""
    return _new(x, shape_of(size, "new_zeros"), 0, dtype, device, backend, requires_grad)


def new_ones(x: Tensor, *size: Any, dtype: Any = None, device: Any = None,
             backend: str | None = None, requires_grad: bool = False) -> Tensor:
    """Ones of `size`, as `new_zeros`."""
    return _new(x, shape_of(size, "new_ones"), 1, dtype, device, backend, requires_grad)


def new_empty(x: Tensor, *size: Any, dtype: Any = None, device: Any = None,
              backend: str | None = None, requires_grad: bool = False) -> Tensor:
    """A tensor of `size` whose values are not to be read, as `new_zeros`: zeros here (the
    backends have no uninitialized arrays to hand out)."""
    return _new(x, shape_of(size, "new_empty"), 0, dtype, device, backend, requires_grad)


def new_tensor(x: Tensor, data: Any, *, dtype: Any = None, device: Any = None,
               backend: str | None = None, requires_grad: bool = False) -> Tensor:
    """`data` as a new leaf of `x`'s dtype, backend and device unless told (a tensor as data
    is copied and detached, with PyTorch's warning)."""
    target, where = transfer.target_of(x.array_backend, x.device, device, backend)
    return tensor(data, dtype=x.dtype if dtype is None else dtype, backend=target.name,
                  device=where, requires_grad=requires_grad)


# ------------------------------------------------------------------ like another tensor
def type_as(x: Tensor, other: Tensor) -> Tensor:
    """`x` in `other`'s dtype (`x` itself if it has it already)."""
    return astype(x, other.dtype)


def view_as(x: Tensor, other: Tensor) -> Tensor:
    """`x` in `other`'s shape (a view, node ViewBackward0)."""
    return S.reshape(x, other.shape)


# ------------------------------------------------------------------ casts and types
_LEGACY_TYPES = {
    scalar_type(name): name
    for name in ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
                 "float32", "float64", "complex64", "complex128")
}
"""PyTorch's legacy type stems ('Float' of 'torch.FloatTensor') and the dtype each names."""


def _type_name(x: Tensor) -> str:
    place = "" if not x.device.is_accelerator else f"{x.device.type}."
    return f"jaxstream.{place}{scalar_type(x.dtype)}Tensor"


def tensor_type(x: Tensor, dtype: Any = None, non_blocking: bool = False) -> Any:
    """Without `dtype`, the tensor's type name, `'jaxstream.FloatTensor'` (PyTorch's
    `'torch.FloatTensor'`: see the module's docstring); with one, `x` cast to it: a dtype,
    or a type name of either spelling, whose device type (`'torch.cuda.FloatTensor'`) moves
    the tensor too."""
    if dtype is None:
        return _type_name(x)
    if not isinstance(dtype, str):
        return astype(x, dtype)
    parts = dtype.split(".")
    stem = parts[-1].removesuffix("Tensor")
    kind = parts[1] if len(parts) == 3 else "cpu"
    if (len(parts) not in (2, 3) or parts[0] not in ("torch", "jaxstream")
            or not parts[-1].endswith("Tensor") or stem not in _LEGACY_TYPES
            or kind not in DEVICE_TYPES):
        raise ValueError(
            f"invalid type: {dtype!r} (type() of a {x.dtype} tensor of shape {x.shape}); give "
            f"a type name such as {_type_name(x)!r} or 'torch.FloatTensor', or a dtype"
        )
    return to(x, x.device if kind == x.device.type else kind, _LEGACY_TYPES[stem])


def _cast(dtype: str, method: str) -> Any:
    def cast(x: Tensor) -> Tensor:
        return astype(x, dtype)

    cast.__name__ = cast.__qualname__ = method
    cast.__doc__ = f"`x.to({dtype!r})` (differentiable to a floating dtype only)."
    return cast


# ------------------------------------------------------------------ devices
def cpu(x: Tensor) -> Tensor:
    """`x.to('cpu')`: `x` itself where it is on the cpu already."""
    return to(x, "cpu")


def cuda(x: Tensor, device: Any = None, non_blocking: bool = False, memory_format: Any = None
         ) -> Tensor:
    """`x.to('cuda:N')`: the current device's index, or the one given (an int, 'cuda:1')."""
    check_memory_format("cuda", memory_format)
    if cuda_device_count() == 0:
        others = ", ".join(["cpu", *(f"sim:{i}" for i in range(sim.device_count()))])
        raise RuntimeError(
            f"cuda(): no CUDA GPU is available here, so a tensor of shape {x.shape} cannot "
            f"move to one; the devices here are {others} (sim devices simulate an accelerator: "
            f"x.to('sim:0')). For a GPU, {GPU_STACK} on a machine that has one"
        )
    index = current_device().index if device is None else device
    target = Device("cuda", index) if isinstance(index, int) else parse_device(index)
    if target is not Device("cuda", target.index or 0):
        raise RuntimeError(f"Invalid device, must be cuda device (cuda() of a tensor on "
                           f"{x.device} to {target}); use x.to({str(target)!r}) instead")
    return to(x, target)


METHODS: dict[str, Any] = {
    "t": t,
    "mm": mm,
    "mv": mv,
    "dot": dot,
    "vdot": vdot,
    "inner": inner,
    "is_floating_point": is_floating_point,
    "is_complex": is_complex,
    "is_contiguous": is_contiguous,
    "contiguous": contiguous,
    "nelement": Tensor.numel,
    "element_size": element_size,
    "new_full": new_full,
    "new_zeros": new_zeros,
    "new_ones": new_ones,
    "new_empty": new_empty,
    "new_tensor": new_tensor,
    "type_as": type_as,
    "view_as": view_as,
    "reshape_as": view_as,
    "type": tensor_type,
    "bfloat16": _cast("bfloat16", "bfloat16"),
    "short": _cast("int16", "short"),
    "byte": _cast("uint8", "byte"),
    "char": _cast("int8", "char"),
    "cpu": cpu,
    "cuda": cuda,
}
