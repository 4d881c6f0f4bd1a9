"""How a tensor is pickled and copied: its value and `requires_grad` travel, its graph does not.

Note [Pickling and copying tensors]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
`pickle` and `copy.deepcopy` keep a tensor's data, dtype, device, backend,
class and `requires_grad`, and drop its graph: a non-leaf comes back as a
leaf that requires grad (PyTorch refuses to deepcopy a non-leaf; keeping the
value is more useful). As in PyTorch, deepcopy copies `.grad` and pickle does
not; `copy.copy` is a new leaf sharing the array and version counter.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from .construction import backend_array


class Copying:
    """Tensor's pickle and copy protocol (a mixin; see the module docstring)."""

    __slots__ = ()

    def __reduce__(self) -> tuple:
        host = np.array(self.numpy())
        state = getattr(self, "__dict__", None) or None
        return (_rebuild, (type(self), host, self.backend, str(self.device),
                           self._requires_grad), state)

    def __deepcopy__(self, memo: dict) -> Any:
        rebuild, args, state = self.__reduce__()
        new = rebuild(*args)
        memo[id(self)] = new
        if state:
            new.__dict__.update(copy.deepcopy(state, memo))
        if self._grad is not None:
            new._grad = copy.deepcopy(self._grad, memo)
        return new

    def __copy__(self) -> Any:
        new = self.detach()
        new._requires_grad = self._requires_grad
        return new


def _rebuild(cls: type, host: np.ndarray, backend: str, device: str, requires_grad: bool) -> Any:
    """The unpickled tensor (Note [Pickling and copying tensors])."""
    t = cls.wrap(*backend_array(host, backend=backend, device=device))
    t.requires_grad = requires_grad
    return t
