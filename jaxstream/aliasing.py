"""Tensors that share values: views of a base, `detach()`, and the shared version counter.

The mechanism is Note [Views and in-place ops] in ops/views.py; this module
holds the part a Tensor carries itself (a mixin of Tensor, below the ops).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import jax

if TYPE_CHECKING:
    from .tensor import Tensor


class ViewInfo:
    """How a view derives from its base (Note [Views and in-place ops] in ops/views.py).

    `steps` are the `(op, params)` pairs that take the base's value to the view's;
    `differentiable` is False for `detach()`, which shares values but not history.
    A differentiable view keeps its base alive (its history goes through it); a
    detached one holds it weakly, so that `loss.detach()` keeps no graph alive.
    `region` (where the view sits in the base) is filled in on the first write.
    """

    __slots__ = ("steps", "differentiable", "region", "_ref", "_keep")

    def __init__(self, base: Tensor, steps: tuple, differentiable: bool) -> None:
        self.steps = steps
        self.differentiable = differentiable
        self.region = None
        self._ref = weakref.ref(base)
        self._keep = base if differentiable else None

    @property
    def base(self) -> Tensor | None:
        return self._ref()


class Aliasing:
    """Tensor's views and version counter (a mixin; see the module docstring)."""

    __slots__ = ()

    def detach(self) -> Tensor:
        """A new leaf that shares this tensor's values and version counter, not its history.

        Under a JAX trace (`to_jax(..., mode="native")`) JAX differentiates the
        traced ops itself, so a tracer's value also passes `jax.lax.stop_gradient`:
        JAX's gradient stops where jaxstream's does.
        """
        array = self.array
        if isinstance(array, jax.core.Tracer):
            array = jax.lax.stop_gradient(array)
        t = type(self).wrap(array, self.array_backend, self.device)
        t.become_view_of(self, (), differentiable=False)
        return t

    def become_view_of(self, source: Tensor, steps: tuple, differentiable: bool = True) -> None:
        """Make this tensor a view of `source`'s base, `steps` (`(op, params)` pairs) past
        `source` (Note [Views and in-place ops] in ops/views.py)."""
        info = source._view
        base = None if info is None else info.base
        if base is None:
            base = source
        else:
            steps = info.steps + steps
            differentiable = differentiable and info.differentiable
        self._view = ViewInfo(base, steps, differentiable)
        self.version_counter = base.version_counter
        if base._views is None:
            base._views = weakref.WeakSet()
        base._views.add(self)

    @property
    def _base(self) -> Tensor | None:
        """The tensor this one is a (differentiable) view of, as PyTorch's `_base`."""
        info = self._view
        return info.base if info is not None and info.differentiable else None

    def rebind(self, array: Any) -> None:
        """Make `array` this tensor's buffer and bump its version (see ops/inplace.py)."""
        self.array = array
        self.version_counter[0] += 1
