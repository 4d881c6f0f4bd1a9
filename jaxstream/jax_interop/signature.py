"""The static description of a `jax_function` call and of its outputs, which key its programs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .statics import with_statics


@dataclass(frozen=True)
class CallSignature:
    """The static part of one `jax_function` call, which keys the compiled forward.

    `kinds[i]` says whether leaf `i` is differentiated ("diff") or closed over
    ("const"); `statics` are the static arguments by position.
    """

    in_tree: Any
    statics: tuple[tuple[int, Any], ...]
    kinds: tuple[str, ...]
    autocast: np.dtype | None

    def call(self, fn: Callable, diff: Sequence, consts: Sequence) -> Any:
        """`fn` on the arguments this signature describes, rebuilt from its array leaves."""
        diff_it, const_it = iter(diff), iter(consts)
        leaves = [next(diff_it) if k == "diff" else next(const_it) for k in self.kinds]
        args, kwargs = jax.tree.unflatten(self.in_tree, leaves)
        return fn(*with_statics(args, self.statics), **kwargs)


@dataclass(frozen=True)
class OutputSignature:
    """The outputs' tree and each leaf's shape and dtype, which key the compiled backward."""

    tree: Any
    avals: tuple[tuple[tuple[int, ...], np.dtype], ...]
    differentiable: tuple[bool, ...]

    @classmethod
    def of(cls, leaves: Sequence, tree: Any) -> OutputSignature:
        """The signature of the outputs a forward returned, flattened to `leaves` and `tree`."""
        avals = tuple((tuple(a.shape), np.dtype(a.dtype)) for a in leaves)
        return cls(tree, avals, tuple(jnp.issubdtype(d, jnp.inexact) for _, d in avals))

    def cotangent(self, cts: Sequence) -> Any:
        """The VJP's cotangent: `cts` for the float outputs, float0 zeros for the others."""
        it = iter(cts)
        leaves = [
            jnp.asarray(next(it), dtype) if diff else np.zeros(shape, jax.dtypes.float0)
            for (shape, dtype), diff in zip(self.avals, self.differentiable, strict=True)
        ]
        return jax.tree.unflatten(self.tree, leaves)
