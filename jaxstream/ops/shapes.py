"""Shape arithmetic for the op table's kernels and vjp rules.

Plain tuples in, tuples out: no tensors, no arrays, so the rules (and anyone
else) can use them without importing the op functions.
"""

from __future__ import annotations

import math
from typing import Any


def kept_shape(shape: tuple, axis: Any) -> tuple:
    """The shape a reduction of `shape` over `axis` (None: all axes) has with keepdims=True."""
    if axis is None:
        return (1,) * len(shape)
    axes = {a % len(shape) for a in (axis if isinstance(axis, tuple) else (axis,))}
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def reduced_count(shape: tuple, axis: Any) -> int:
    """How many elements a reduction of `shape` over `axis` folds into each result."""
    return math.prod(shape) // max(1, math.prod(kept_shape(shape, axis)))


def summed_axes(shape: tuple, target: tuple) -> tuple:
    """The axes to sum (keepdims) to reduce a broadcast `shape` back to `target`."""
    lead = len(shape) - len(target)
    return tuple(range(lead)) + tuple(
        lead + i for i, t in enumerate(target) if t == 1 and shape[lead + i] != 1
    )


def inverse_permutation(axes: tuple) -> tuple:
    """The axes that undo the permutation `axes` (what `transpose`'s backward applies)."""
    inverse = [0] * len(axes)
    for i, a in enumerate(axes):
        inverse[a] = i
    return tuple(inverse)


def swapped_axes(ndim: int, axis1: int, axis2: int) -> tuple:
    """The permutation of `ndim` axes that exchanges `axis1` and `axis2` (none for 0-d)."""
    axes = list(range(ndim))
    if ndim:
        axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
    return tuple(axes)


def split_bounds(shapes: tuple, axis: int) -> list[tuple[int, int]]:
    """The (start, stop) of each piece along `axis` when arrays of `shapes` are concatenated."""
    bounds, start = [], 0
    for shape in shapes:
        bounds.append((start, start + shape[axis]))
        start += shape[axis]
    return bounds


def normalize_axis(op: str, axis: int, shape: tuple, *, inserting: bool = False) -> int:
    """`axis` of a tensor of `shape` counted from 0, or PyTorch's IndexError naming `op`.

    `inserting` counts the positions a new axis may take (`expand_dims`), one more than
    the axes there are. A 0-d tensor accepts axis 0 and -1, as PyTorch's reductions do.
    """
    bound = max(len(shape) + inserting, 1)
    if isinstance(axis, bool) or not isinstance(axis, int) or not -bound <= axis < bound:
        raise IndexError(
            f"{op}: Dimension out of range (expected to be in range of [{-bound}, {bound - 1}], "
            f"but got {axis!r}) for a tensor of shape {tuple(shape)}"
        )
    return axis % bound


def normalize_axes(op: str, axis: Any, shape: tuple) -> int | tuple | None:
    """A reduction's `axis` (None, an int, or a sequence of ints) counted from 0, checked."""
    if axis is None:
        return None
    many = isinstance(axis, tuple | list)
    axes = tuple(normalize_axis(op, a, shape) for a in (axis if many else (axis,)))
    if len(set(axes)) != len(axes):
        raise ValueError(
            f"{op}: an axis appears multiple times in the list of dims {tuple(axis)} "
            f"(tensor of shape {tuple(shape)})"
        )
    if not shape:
        return None  # every axis of a 0-d tensor is the whole tensor
    return axes if many else axes[0]


def split_sizes(split_size_or_sections: Any, length: int) -> list[int]:
    """The piece lengths of PyTorch's split of an axis of `length`: an int is the size of
    every piece but the last (which may be smaller), a sequence the sizes themselves."""
    if isinstance(split_size_or_sections, int):
        size = split_size_or_sections
        if size < 0:
            raise ValueError(f"split expects split_size be non-negative, but got split_size={size}")
        if size == 0 and length:
            raise ValueError(
                "split_size can only be 0 if dimension size is 0, but got dimension size of "
                f"{length}; give a positive piece size, or a list of sizes"
            )
        return [min(size, length - start) for start in range(0, length, size)] or [0]
    sizes = [int(s) for s in split_size_or_sections]
    if any(s < 0 for s in sizes) or sum(sizes) != length:
        raise ValueError(
            f"split_with_sizes expects split_sizes to sum exactly to {length} (input tensor's "
            f"size at the split axis), but got split_sizes={sizes}"
        )
    return sizes


def chunk_sizes(chunks: int, length: int) -> list[int]:
    """The piece lengths of PyTorch's `chunk`: pieces of ceil(length / chunks), so there
    may be fewer than `chunks`; an empty axis gives `chunks` empty pieces."""
    if chunks <= 0:
        raise ValueError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    return [0] * chunks if not length else split_sizes(-(-length // chunks), length)


def flat_sizes(args: tuple) -> tuple:
    """Sizes given as varargs or as one sequence (`t.reshape(2, 3)`, `t.reshape((2, 3))`),
    as PyTorch takes them, as one tuple."""
    return tuple(args[0]) if len(args) == 1 and isinstance(args[0], tuple | list) else args


def inferred_shape(shape: tuple, numel: int) -> tuple:
    """`shape` for `numel` elements with its -1 (at most one) worked out, or PyTorch's error."""
    known = math.prod(s for s in shape if s != -1)
    if -1 not in shape and known == numel and min(shape, default=0) >= 0:
        return shape
    if shape.count(-1) > 1:
        raise RuntimeError(f"only one dimension can be inferred (shape {list(shape)})")
    if min(shape, default=0) < -1 or not known or numel % known or -1 not in shape:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(numel // known if s == -1 else s for s in shape)


def expanded_shape(shape: tuple, sizes: tuple) -> tuple:
    """The shape of PyTorch's `expand(*sizes)` of a tensor of `shape` (-1 keeps a dim), or
    PyTorch's error."""
    lead = len(sizes) - len(shape)
    if lead < 0:
        raise RuntimeError(
            f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to "
            f"the number of dimensions in the tensor ({len(shape)}) (shape {shape})"
        )
    for i, size in enumerate(sizes[:lead]):
        if size < 0:
            raise RuntimeError(
                f"The expanded size of the tensor ({size}) isn't allowed in a leading, "
                f"non-existing dimension {i} (sizes {list(sizes)}, tensor of shape {shape})"
            )
    out = [*sizes[:lead]]
    for i, (own, size) in enumerate(zip(shape, sizes[lead:], strict=True), lead):
        if size != -1 and own not in (1, size):
            raise RuntimeError(
                f"The expanded size of the tensor ({size}) must match the existing size ({own}) "
                f"at non-singleton dimension {i}.  Target sizes: {list(sizes)}.  Tensor sizes: "
                f"{list(shape)}"
            )
        out.append(own if size == -1 else size)
    return tuple(out)


def parse_einsum(subscripts: str, shapes: list[tuple]) -> tuple[list[str], str]:
    """The labels of each operand and of the output of an einsum, checked against `shapes`.

    Without `->` the output is every label used once, in alphabetical order (NumPy's
    implicit mode). Ellipses are not supported.
    """
    spec = subscripts.replace(" ", "")
    inputs_spec, arrow, output = spec.partition("->")
    inputs = inputs_spec.split(",")
    used = "".join(inputs)
    if not arrow:
        output = "".join(sorted(c for c in set(used) if used.count(c) == 1))
    problem = _einsum_problem(inputs, output, shapes)
    if problem:
        raise ValueError(f"einsum(): {problem} (subscripts {subscripts!r}, shapes {shapes})")
    return inputs, output


def _einsum_problem(inputs: list[str], output: str, shapes: list[tuple]) -> str | None:
    """What is wrong with an einsum's parsed subscripts, or None."""
    if "." in "".join(inputs) + output:
        return "'...' is not supported; write every axis label out"
    if not all(c.isalpha() for c in "".join(inputs) + output):
        return "subscripts must be letters in [a-zA-Z]"
    if len(inputs) != len(shapes):
        return f"the equation names {len(inputs)} operands but {len(shapes)} were given"
    for label in output:
        if label not in "".join(inputs):
            return f"output subscript {label} does not appear in the equation for any input"
        if output.count(label) > 1:
            return f"output subscript {label} appears more than once in the output"
    return _einsum_size_problem(inputs, shapes)


def _einsum_size_problem(inputs: list[str], shapes: list[tuple]) -> str | None:
    """Whether each operand has one label per axis and each label one size, or None."""
    sizes: dict[str, int] = {}
    for i, (labels, shape) in enumerate(zip(inputs, shapes, strict=True)):
        if len(labels) != len(shape):
            return (
                f"the number of subscripts in the equation ({len(labels)}) does not match the "
                f"number of dimensions ({len(shape)}) for operand {i}"
            )
        for label, size in zip(labels, shape, strict=True):
            if sizes.setdefault(label, size) != size:
                return f"subscript {label} has size {size} for operand {i}, {sizes[label]} before"
    return None


def broadcast_shapes(op: str, a: tuple, b: tuple) -> tuple:
    """The shape `a` and `b` broadcast to, or PyTorch's error naming `op`."""
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    for i in reversed(range(n)):  # from the last dim, as PyTorch checks
        x, y = pa[i], pb[i]
        if x != y and 1 not in (x, y):
            raise RuntimeError(
                f"The size of tensor a ({x}) must match the size of tensor b ({y}) at "
                f"non-singleton dimension {i} ({op} of shapes {tuple(a)} and {tuple(b)}: they "
                "must broadcast)"
            )
    return tuple(max(x, y) if 0 not in (x, y) else 0 for x, y in zip(pa, pb, strict=True))
