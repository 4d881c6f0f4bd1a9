"""`Parameter`: a leaf Tensor that a Module registers and an optimizer updates.

Note [Parameter is not a Tensor subclass]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Tensor has `__slots__` and every op's dispatch tests `type(a) is Tensor` on
its hot path, so instances of a subclass would be taken for constants by every
op. `Parameter(data)` therefore returns a plain leaf Tensor and remembers it;
`isinstance(t, Parameter)` asks that memory (through the metaclass), so a
frozen parameter (`requires_grad=False`) is still one. The memory holds weak
references: a parameter that is dropped is forgotten. A copy of the tensor
alone (`deepcopy`, `pickle`) is a plain Tensor again; a copy of a Module marks
its registered parameters again (`Module.__setstate__`), so that they stay
Parameters, frozen or not.
"""

from __future__ import annotations

import weakref
from typing import Any

from ..tensor import Tensor

# id(tensor) -> weak reference to it, for every live tensor made by Parameter(...).
_made: dict[int, weakref.ref] = {}


def _forget(key: int) -> None:
    _made.pop(key, None)


def mark_parameter(t: Tensor) -> Tensor:
    """Remember `t` itself as a Parameter (a Module's copy marks its registered ones)."""
    key = id(t)
    _made[key] = weakref.ref(t, lambda _: _forget(key))
    return t


class _ParameterMeta(type):
    """Makes `Parameter(...)` return a Tensor and answers `isinstance(t, Parameter)`."""

    def __call__(cls, data: Any, requires_grad: bool = True) -> Tensor:
        # A Tensor argument gives a new leaf sharing its array, device and backend, as torch's
        # Parameter shares storage.
        t = Tensor(data)
        t.requires_grad = requires_grad
        return mark_parameter(t)

    def __instancecheck__(cls, value: Any) -> bool:
        ref = _made.get(id(value))
        return ref is not None and ref() is value


class Parameter(metaclass=_ParameterMeta):
    """`Parameter(data, requires_grad=True)`: a leaf Tensor marked as a module parameter.

    It returns a Tensor, not an instance of this class (Note above).
    """
