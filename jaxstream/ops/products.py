"""What PyTorch checks before a matrix product (matmul, linear, einsum), with its messages.

Note [Matrix products do not promote]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
PyTorch promotes no matrix product: `int64 @ float32`, `float64 @ float32` and
`linear(int_batch, float_weight)` raise, where NumPy would promote and our kernel (which keeps
the first operand's dtype) truncated `[[1, 2]] @ [[0.5], [0.25]]` to `[[1]]`. So each product
checks, in PyTorch's order, what the kernel PyTorch picks for the operands' ranks checks
(`dot` for two vectors; `mv` for a matrix, or a batch folded into one, with a vector; `mm`
for a vector, a matrix or a folded batch with a matrix; `bmm` otherwise; `addmm` for linear
with a bias): shapes, one dtype, a kernel for that dtype (none for bool). A failure raises
PyTorch's error with its message, then the operands' shapes and dtypes and the fix. The
checks work on (shape, dtype) pairs, so that they record nothing; when all is well they
cost a few comparisons (the first line of `check_matmul` and of `check_linear`).
"""

from __future__ import annotations

import math
from typing import Any

from ..tensor import Tensor
from .dtype_names import cpp_type, scalar_type
from .shapes import expanded_shape

# (shape, dtype) of an operand, and what to call it in a message.
Operand = tuple[tuple, Any]
_BOOL_KERNELS = {"dot": "dot", "mv": "addmv_impl_cpu", "mm": "addmm_impl_cpu_", "bmm": "bmm"}


def _kernel(a_ndim: int, b_ndim: int) -> str:
    """The kernel PyTorch's matmul runs for operands of these ranks (contiguous ones)."""
    if b_ndim == 1:
        return "dot" if a_ndim == 1 else "mv"
    return "mm" if b_ndim == 2 else "bmm"


def _rows(shape: tuple) -> int:
    """The rows of `shape` folded into a matrix: a vector is one row."""
    return math.prod(shape[:-1])


class _Checks:
    """The checks of one product: its name, its operands as the user gave them (for the
    message) and as the kernel sees them (`a`, `b`: (shape, dtype))."""

    def __init__(self, op: str, given: tuple, a: Operand, b: Operand) -> None:
        self.op, self.given, self.a, self.b = op, given, a, b

    def fail(self, torch_says: str, fix: str, error: type = RuntimeError) -> None:
        described = ", ".join(f"{name} {t.dtype} of shape {t.shape}" for name, t in self.given)
        raise error(f"{torch_says} ({self.op}: {described}); {fix}")

    def dtypes_fix(self, names: tuple = (), pair: tuple | None = None) -> str:
        (na, a), (nb, b) = self.given[:2] if not names else zip(names, pair, strict=True)
        return (f"matrix products do not promote dtypes: cast one operand to the other's dtype "
                f"first, e.g. {na}.to('{b.dtype}') or {nb}.to('{a.dtype}')")

    def matmul(self) -> None:
        kernel = _kernel(len(self.a[0]), len(self.b[0]))
        if kernel == "dot":
            self.dtypes(kernel)
        self.shapes(kernel)
        self.dtypes(kernel)

    def shapes(self, kernel: str) -> None:
        sa, sb = self.a[0], self.b[0]
        k = sb[-2] if kernel == "bmm" else sb[0]
        fix = f"the first operand's last dimension ({sa[-1]}) must equal the second's ({k})"
        if kernel == "dot" and sa[0] != k:
            self.fail(f"inconsistent tensor size, expected tensor [{sa[0]}] and src [{k}] to "
                      f"have the same number of elements, but got {sa[0]} and {k} elements "
                      f"respectively", fix)
        if kernel == "mv" and sa[-1] != k:
            rows = _rows(sa)
            self.fail(f"size mismatch, got input ({rows}), mat ({rows}x{sa[-1]}), vec ({k})", fix)
        if kernel == "mm" and sa[-1] != k:
            self.fail(f"mat1 and mat2 shapes cannot be multiplied ({_rows(sa)}x{sa[-1]} and "
                      f"{sb[0]}x{sb[1]})", fix)
        if kernel == "bmm":
            batch = self.batch()
            if sa[-1] != k:
                self.fail(f"Expected size for first two dimensions of batch2 tensor to be: "
                          f"[{batch}, {sa[-1]}] but got: [{batch}, {k}].", fix)

    def batch(self) -> int:
        """The number of matrices in the broadcast batch, or PyTorch's error."""
        ba, bb = self.a[0][:-2], self.b[0][:-2]
        n = max(len(ba), len(bb))
        ba, bb = (1,) * (n - len(ba)) + ba, (1,) * (n - len(bb)) + bb
        for i, (x, y) in enumerate(zip(ba, bb, strict=True)):
            if x != y and 1 not in (x, y):
                self.fail(f"The size of tensor a ({x}) must match the size of tensor b ({y}) at "
                          f"non-singleton dimension {i}",
                          "the batch dimensions (all but the last two) must broadcast")
        return math.prod(max(x, y) for x, y in zip(ba, bb, strict=True))

    def dtypes(self, kernel: str) -> None:
        da, db = self.a[1], self.b[1]
        if kernel == "bmm" and da.kind == "b":
            self.no_bool_kernel(kernel)
        if da != db:
            a, b = scalar_type(da), scalar_type(db)
            self.fail({
                "dot": f"dot : expected both vectors to have same dtype, but found {a} and {b}",
                "mv": f"addmv input tensors must have the same dtype, but got {b}, {a}, and {b}",
                "mm": f"expected m1 and m2 to have the same dtype, but got: {cpp_type(da)} != "
                      f"{cpp_type(db)}",
                "bmm": f"expected scalar type {a} but found {b}",
            }[kernel], self.dtypes_fix())
        if da.kind == "b":
            self.no_bool_kernel(kernel)

    def no_bool_kernel(self, kernel: str) -> None:
        self.fail(f"\"{_BOOL_KERNELS[kernel]}\" not implemented for 'Bool'",
                  "cast the operands to an integer or floating dtype first, e.g. t.float()",
                  NotImplementedError)


def check_matmul(a: Tensor, b: Tensor) -> None:
    """Raise PyTorch's error where `a @ b` fails there (Note [Matrix products do not promote])."""
    sa, sb = a.array.shape, b.array.shape
    if (a.array.dtype is b.array.dtype and a.array.dtype.kind != "b" and 0 < len(sa) < 3
            and 0 < len(sb) < 3 and sa[-1] == sb[0]):
        return
    if not sa or not sb:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{len(sa)}D and {len(sb)}D (shapes {a.shape} and {b.shape})")
    given = (("a", a), ("b", b))
    _Checks("matmul", given, (a.shape, a.dtype), (b.shape, b.dtype)).matmul()


def check_linear(x: Tensor, w: Tensor, b: Tensor | None) -> None:
    """Raise PyTorch's error where `linear(x, w, b)` fails there: `x @ w.T` is an `mm` of `x`
    folded into a matrix, `addmm` with a bias, which checks the dtypes before the shapes."""
    dx, dw = x.array.dtype, w.array.dtype
    if (dx is dw and dx.kind != "b" and x.ndim and w.ndim == 2 and x.shape[-1] == w.shape[1]
            and (b is None or b.array.dtype is dw and b.shape in ((w.shape[0],), (1,)))):
        return
    if not x.ndim:
        raise RuntimeError(f"both arguments to linear need to be at least 1D, but they are 0D "
                           f"and {w.ndim}D (shapes {x.shape} and {w.shape})")
    if w.ndim != 2:
        raise ValueError(f"linear: weight must be 2-d (out_features, in_features), got {w.shape}")
    given = (("input", x), ("weight", w)) + ((("bias", b),) if b is not None else ())
    folded = ((_rows(x.shape), x.shape[-1]), dx)
    checks = _Checks("linear", given, folded, (w.shape[::-1], dw))
    if b is not None:
        _check_addmm_dtypes(checks, b.dtype)
    checks.matmul()
    if b is not None and b.ndim == 1 and b.shape[0] not in (1, w.shape[0]):
        checks.fail(f"The expanded size of the tensor ({w.shape[0]}) must match the existing "
                    f"size ({b.shape[0]}) at non-singleton dimension 1.  Target sizes: "
                    f"[{_rows(x.shape)}, {w.shape[0]}].  Tensor sizes: [{b.shape[0]}]",
                    f"the bias must have out_features ({w.shape[0]}) elements")


def _check_addmm_dtypes(checks: _Checks, bias: Any, names: tuple = ("bias", "weight")) -> None:
    """addmm's dtype checks: the added operand (`names[0]`) against the second factor, then
    the factors against each other."""
    dx, dw = checks.a[1], checks.b[1]
    given = dict(checks.given)
    if bias != dw:
        checks.fail(f"self and mat2 must have the same dtype, but got {scalar_type(bias)} and "
                    f"{scalar_type(dw)}", checks.dtypes_fix(names, tuple(map(given.get, names))))
    if dx != dw:
        checks.fail(f"mat1 and mat2 must have the same dtype, but got {scalar_type(dx)} and "
                    f"{scalar_type(dw)}", checks.dtypes_fix())


def check_bmm(op: str, a: Tensor, b: Tensor, added: Tensor | None = None) -> None:
    """Raise PyTorch's error where `bmm(a, b)` (or `baddbmm(added, a, b)`) fails there: two
    3-d tensors of one batch size, inner sizes and dtype, and no bools."""
    for name, t in (("batch1", a), ("batch2", b)):
        if t.ndim != 3:
            raise RuntimeError(f"{name} must be a 3D tensor ({op}: got shape {t.shape})")
    given = (("batch1", a), ("batch2", b)) + ((("input", added),) if added is not None else ())
    checks = _Checks(op, given, (a.shape, a.dtype), (b.shape, b.dtype))
    if added is not None and not added.dtype == a.dtype == b.dtype:
        names = ", ".join(f"{n}: {scalar_type(t.dtype).lower()}" for n, t in given[:2])
        checks.fail(f"Input dtypes must be the same, got: input "
                    f"{scalar_type(added.dtype).lower()}, {names}", checks.dtypes_fix(
                        ("input", "batch1"), (added, a)))
    if (a.shape[0], a.shape[2]) != (b.shape[0], b.shape[1]):
        checks.fail(f"Expected size for first two dimensions of batch2 tensor to be: "
                    f"[{a.shape[0]}, {a.shape[2]}] but got: [{b.shape[0]}, {b.shape[1]}].",
                    "the batch sizes must be equal and batch1's last size batch2's middle one")
    checks.dtypes("bmm")
    if added is not None:
        expanded_shape(added.shape, (a.shape[0], a.shape[1], b.shape[2]))


def check_addmm(added: Tensor, a: Tensor, b: Tensor) -> None:
    """Raise PyTorch's error where `addmm(added, a, b)` fails there: two matrices that
    multiply, all three of one dtype, `added` expandable to the product's shape."""
    for name, t in (("mat1", a), ("mat2", b)):
        if t.ndim != 2:
            raise RuntimeError(f"{name} must be a matrix, got {t.ndim}-D tensor (addmm: shape "
                               f"{t.shape})")
    given = (("input", added), ("mat1", a), ("mat2", b))
    checks = _Checks("addmm", given, (a.shape, a.dtype), (b.shape, b.dtype))
    _check_addmm_dtypes(checks, added.dtype, ("input", "mat2"))
    checks.shapes("mm")
    checks.dtypes("mm")
    expanded_shape(added.shape, (a.shape[0], b.shape[1]))


def check_einsum(operands: tuple) -> None:
    """Raise PyTorch's error where an einsum fails there: its products are `bmm`s, of one
    dtype and none of them bool."""
    first = operands[0]
    for i, other in enumerate(operands[1:], 1):
        if other.dtype != first.dtype or first.dtype.kind == "b":
            given = (("operands[0]", first), (f"operands[{i}]", other))
            _Checks("einsum", given, (first.shape, first.dtype),
                    (other.shape, other.dtype)).dtypes("bmm")
