"""Modules that hold modules: `Sequential`, `ModuleList`, `ModuleDict`, as in PyTorch.

Their members are registered submodules named "0", "1", ... (or by their keys),
so `parameters()`, `state_dict()`, `to()` and the pytree (Note [A Module is a
pytree of its parameters] in module_pytree.py) reach them as any submodule. A
module held twice is two members here, as in PyTorch, though `children()` gives
it once.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .module import Module
from .module_pytree import MODULE


def _members(container: Module) -> list[tuple[str, Module]]:
    return list(container._members(MODULE))


def _renumbered(container: Module, modules: list[Module]) -> None:
    """Hold `modules` as members "0", "1", ... and nothing else."""
    for name, _ in _members(container):
        delattr(container, name)
    for index, module in enumerate(modules):
        container.add_module(str(index), module)


def _absolute_index(container: Module, index: Any) -> int:
    """`index` (may be negative) as a position, or PyTorch's IndexError."""
    index = operator.index(index)
    size = len(_members(container))
    if not -size <= index < size:
        raise IndexError(
            f"index {index} is out of range for {type(container).__name__} of length {size}"
        )
    return index % size


class Sequential(Module):
    """Layers applied in order; indexing, `len` and iteration reach the layers."""

    def __init__(self, *layers: Module) -> None:
        super().__init__()
        for index, layer in enumerate(layers):
            self.add_module(str(index), layer)

    def forward(self, x: Any) -> Any:
        for layer in self:
            x = layer(x)
        return x

    def __getitem__(self, index: int | slice) -> Module:
        layers = [module for _, module in _members(self)]
        return Sequential(*layers[index]) if isinstance(index, slice) else layers[index]

    def __len__(self) -> int:
        return len(_members(self))

    def __iter__(self) -> Iterator[Module]:
        return (module for _, module in _members(self))

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self


class ModuleList(Module):
    """A list of modules, registered: index, slice, `append`, `extend`, `insert`, `pop`."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, index: int | slice) -> Any:
        modules = [module for _, module in _members(self)]
        if isinstance(index, slice):
            return ModuleList(modules[index])
        return modules[_absolute_index(self, index)]

    def __setitem__(self, index: int, module: Module) -> None:
        self.add_module(str(_absolute_index(self, index)), module)

    def __delitem__(self, index: int | slice) -> None:
        modules = [module for _, module in _members(self)]
        del modules[index if isinstance(index, slice) else _absolute_index(self, index)]
        _renumbered(self, modules)

    def __len__(self) -> int:
        return len(_members(self))

    def __iter__(self) -> Iterator[Module]:
        return (module for _, module in _members(self))

    def __repr__(self) -> str:
        """PyTorch's: a run of members with one repr is one entry, `(0-2): 3 x Linear(...)`."""
        runs: list[list] = []  # [first index, last index, repr]
        for index, text in enumerate(repr(module) for module in self):
            if runs and runs[-1][2] == text:
                runs[-1][1] = index
            else:
                runs.append([index, index, text])
        if not runs:
            return f"{type(self).__name__}()"
        lines = [(f"({first}): " if first == last else
                  f"({first}-{last}): {last - first + 1} x ") + text.replace("\n", "\n  ")
                 for first, last, text in runs]
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        return ModuleList([*self, *other])

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        if not isinstance(modules, Iterable):
            raise TypeError(
                f"ModuleList.extend should be called with an iterable, but got "
                f"{type(modules).__name__}"
            )
        for module in list(modules):
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        modules = list(self)
        modules.insert(index, module)
        _renumbered(self, modules)

    def pop(self, index: int = -1) -> Module:
        module = self[index]
        del self[index]
        return module


class ModuleDict(Module):
    """A dict of modules, registered under their keys, in insertion order (PyTorch's API)."""

    def __init__(self, modules: Mapping[str, Module] | Iterable | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        if self.__dict__["_registered"].get(key) != MODULE:
            raise KeyError(key)
        return self.__dict__[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        self.pop(key)

    def __len__(self) -> int:
        return len(_members(self))

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in _members(self))

    def __contains__(self, key: object) -> bool:
        return self.__dict__["_registered"].get(key) == MODULE

    def keys(self) -> list[str]:
        return [name for name, _ in _members(self)]

    def values(self) -> list[Module]:
        return [module for _, module in _members(self)]

    def items(self) -> list[tuple[str, Module]]:
        return _members(self)

    def clear(self) -> None:
        for key in self.keys():
            delattr(self, key)

    def pop(self, key: str) -> Module:
        module = self[key]
        delattr(self, key)
        return module

    def update(self, modules: Mapping[str, Module] | Iterable) -> None:
        """Add or replace members from a mapping or from (key, module) pairs."""
        if isinstance(modules, Mapping | ModuleDict):
            for key, module in modules.items():
                self[key] = module
            return
        if not isinstance(modules, Iterable):
            raise TypeError(
                f"ModuleDict.update should be called with an iterable of key/value pairs, "
                f"but got {type(modules).__name__}"
            )
        for j, pair in enumerate(modules):
            if not isinstance(pair, Iterable):
                raise TypeError(
                    f"ModuleDict update sequence element #{j} should be Iterable; is "
                    f"{type(pair).__name__}"
                )
            pair = tuple(pair)
            if len(pair) != 2:
                raise ValueError(
                    f"ModuleDict update sequence element #{j} has length {len(pair)}; 2 is "
                    f"required"
                )
            self[pair[0]] = pair[1]
