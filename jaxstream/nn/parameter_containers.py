"""`ParameterList` and `ParameterDict`: modules that hold parameters as a list or a dict,
with PyTorch's container behaviour.

A tensor put in either becomes a Parameter (one that is already a Parameter stays the
same object) registered under its index ("0", "1", ...) or its key, so that
`parameters()`, `state_dict()`, `to()` and the pytree reach it as any parameter; other
values (a module, a number) are kept as attributes of that name, as PyTorch keeps them.
Their reprs list the entries as PyTorch's do, naming jaxstream's dtype where PyTorch
names its own (`Parameter containing: [float32 of size 3x4]`; ParameterDict's too,
where PyTorch names the tensor type).

ParameterDict's keys are held as a tuple: everything a Module holds that is not a
tensor or a module is static data of its pytree (Note [A Module is a pytree of its
parameters] in module_pytree.py), which must be hashable.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Iterable, Iterator, KeysView, Mapping
from typing import Any

from ..tensor import Tensor
from .module import Module, check_member_name
from .parameter import Parameter


def _as_parameter(value: Any) -> Any:
    """A tensor as a Parameter (a Parameter as it is); anything else as it is."""
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


def _entry(name: Any, value: Any) -> str:
    """One line of a container's repr, as PyTorch's `extra_repr` writes it."""
    if not isinstance(value, Tensor):
        return f"  ({name}): Object of type: {type(value).__name__}"
    kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
    size = "x".join(str(n) for n in value.shape)
    device = f" ({value.device})" if value.device.is_accelerator else ""
    return f"  ({name}): {kind} containing: [{value.dtype} of size {size}{device}]"


class ParameterList(Module):
    """A list of parameters (and other values), registered as "0", "1", ...: index, slice,
    iterate, `append`, `extend`, `+=`."""

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def _name(self, index: Any) -> str:
        index = operator.index(index)
        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} is out of range")
        return str(index % len(self))

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            out = type(self)()
            for i in range(*index.indices(len(self))):
                out.append(self[i])
            return out
        return getattr(self, self._name(index))

    def __setitem__(self, index: int, value: Any) -> None:
        setattr(self, self._name(index), _as_parameter(value))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(len(self)))

    def __iadd__(self, values: Iterable[Any]) -> ParameterList:
        return self.extend(values)

    def __dir__(self) -> list[str]:
        return [name for name in super().__dir__() if not name.isdigit()]

    def append(self, value: Any) -> ParameterList:
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        if not isinstance(values, Iterable) or isinstance(values, Tensor):
            raise TypeError(f"ParameterList.extend should be called with an iterable, but got "
                            f"{type(values).__name__}")
        for value in values:
            self.append(value)
        return self

    def extra_repr(self) -> str:
        return "\n".join(_entry(i, value) for i, value in enumerate(self))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """A dict of parameters (and other values) registered under their string keys, in
    insertion order; a plain dict given to the constructor or `update` is taken in the
    order of its sorted keys, as PyTorch takes it (an OrderedDict in its own order)."""

    def __init__(self, parameters: Any = None) -> None:
        super().__init__()
        self._keys: tuple[str, ...] = ()
        if parameters is not None:
            self.update(parameters)

    @staticmethod
    def _attribute(key: Any) -> str:
        if not isinstance(key, str):
            raise TypeError(f"Index given to ParameterDict cannot be used as a key as it is not "
                            f"a string (type is '{type(key).__name__}'). Use a string key.")
        return key

    def __getitem__(self, key: str) -> Any:
        return getattr(self, self._attribute(key))

    def __setitem__(self, key: str, value: Any) -> None:
        value = _as_parameter(value)
        if isinstance(value, Tensor):
            check_member_name("parameter", key)
        attribute = self._attribute(key)
        if key not in self._keys:
            self._keys = (*self._keys, key)
        setattr(self, attribute, value)

    def __delitem__(self, key: str) -> None:
        if key not in self._keys:
            raise KeyError(key)
        self._keys = tuple(k for k in self._keys if k != key)
        delattr(self, self._attribute(key))

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __reversed__(self) -> Iterator[str]:
        return reversed(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def keys(self) -> KeysView[str]:
        return dict.fromkeys(self._keys).keys()

    def items(self) -> Iterator[tuple[str, Any]]:
        return ((key, self[key]) for key in self._keys)

    def values(self) -> Iterator[Any]:
        return (self[key] for key in self._keys)

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def pop(self, key: str) -> Any:
        value = self[key]
        del self[key]
        return value

    def popitem(self) -> tuple[str, Any]:
        if not self._keys:
            raise KeyError("popitem(): dictionary is empty")
        key = self._keys[-1]
        return key, self.pop(key)

    def clear(self) -> None:
        for key in self._keys:
            del self[key]

    def copy(self) -> ParameterDict:
        """A new ParameterDict holding the same parameters, in this order."""
        return ParameterDict(OrderedDict(self.items()))

    def fromkeys(self, keys: Iterable[str], default: Any = None) -> ParameterDict:
        return ParameterDict((key, default) for key in keys)

    def update(self, parameters: Mapping[str, Any] | Iterable) -> None:
        """Add or replace entries from a mapping (a plain dict in sorted key order) or from
        (key, value) pairs."""
        if not isinstance(parameters, Iterable):
            raise TypeError(f"ParametersDict.update should be called with an iterable of "
                            f"key/value pairs, but got {type(parameters).__name__}")
        if isinstance(parameters, OrderedDict | ParameterDict):
            pairs: Iterable = list(parameters.items())
        elif isinstance(parameters, Mapping):
            pairs = sorted(parameters.items())
        else:
            pairs = list(parameters)
        for j, pair in enumerate(pairs):
            if not isinstance(pair, Iterable):
                raise TypeError(f"ParameterDict update sequence element #{j} should be "
                                f"Iterable; is {type(pair).__name__}")
            pair = tuple(pair)
            if len(pair) != 2:
                raise ValueError(f"ParameterDict update sequence element #{j} has length "
                                 f"{len(pair)}; 2 is required")
            self[pair[0]] = pair[1]

    def extra_repr(self) -> str:
        return "\n".join(_entry(key, value) for key, value in self.items())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ParameterDict should not be called.")

    def __or__(self, other: ParameterDict) -> ParameterDict:
        merged = self.copy()
        merged.update(other)
        return merged

    def __ror__(self, other: ParameterDict) -> ParameterDict:
        merged = other.copy()
        merged.update(self)
        return merged

    def __ior__(self, other: ParameterDict) -> ParameterDict:
        self.update(other)
        return self
