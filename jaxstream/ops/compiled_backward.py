"""A built-in node's backward as one compiled call on JAX (Note [Compiled backward on JAX]).

Note [Compiled backward on JAX]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
When an `OpNode` runs its backward on the JAX backend without `create_graph`
(grad mode off, so its rules record nothing), the vjp rules of every input that
needs a gradient run as one cached `jax.jit`, instead of one compiled kernel
(and one dispatch, one tensor, one promotion) per jaxstream op the rules are
written in. The rules are traced as they are, on tensors holding tracers, so
there is one source for both paths and XLA fuses what they compute.

* The key is the forward's (`compile_key` in compiled_kernels.py: what its
  forward does not compile, the backward does not either), which inputs need a
  gradient (so `needs_input_grad` trimming still skips the others), the
  inputs' shapes, the device, and the autocast and default dtypes, which the
  rules read while traced. So a built-in node's backward runs under the
  autocast state around `backward()`, as in eager PyTorch, compiled or not
  (unlike a `jax_function`'s, fixed when its forward runs:
  `config.backward_pass_autocast`).
* What the rules read in Python (op, params, needs, shapes) is closed over in
  the key's `_Backward`, never passed: the call is `jitted(g, output, *inputs)`,
  positional arrays only, which JAX's C++ dispatch matches on their signature
  alone, with no static argument to hash and compare per call. The output
  gradient, the saved output and the saved inputs are those arguments (None
  where not saved: an empty pytree). A Python scalar among the saved inputs is
  an argument too, weakly typed as in the forward (Note [Compiled kernels on
  JAX]), so that a new value reuses the executable, and passed as the forward's
  cached array (Note [Numbers as cached arrays]); the rules see it as a 0-d
  tensor.
* With `create_graph` the rules run op by op and record their graph. So do
  nodes on a device the stream sanitizer checks, so that it sees every kernel
  on its stream.
* A key whose rules cannot be traced (they test a value in Python, as the
  scalar power's `exponent != 0` does) or whose compiled call fails runs op by
  op for good, and any error comes from that path. So does a key whose rules
  compute nothing (each gradient is `g` itself or None): it has no kernel to save.
* As for the forward, a key is compiled the first time it is seen, so that a
  node gives the same bits every time; the table is bounded by `CACHE_LIMIT`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import jax

from .. import amp
from ..dtypes import get_default_dtype
from ..tensor import Tensor
from .compiled_kernels import CACHE_LIMIT, as_arrays, compile_key

if TYPE_CHECKING:
    from .opdef import OpDef

Rules = Callable[[Any, Tensor, list, Any, dict, tuple, Sequence[bool]], list]
"""`rules(op, g, inputs, output, params, shapes, needs) -> one gradient or None per input`."""

_EAGER = "eager"


class _Backward:
    """The function compiled for one key, its statics closed over; `computes` is False
    while every gradient it returned was `g` itself or None."""

    __slots__ = ("rules", "op", "params", "needs", "shapes", "backend", "device", "computes",
                 "jitted")

    def __init__(
        self, rules: Rules, op: OpDef, params: dict, needs: tuple, shapes: tuple, g: Tensor
    ) -> None:
        self.rules, self.op, self.params, self.needs, self.shapes = rules, op, params, needs, shapes
        self.backend, self.device = g.array_backend, g.device
        self.computes = False
        self.jitted = jax.jit(self._traced)

    def _traced(self, g: Any, output: Any, *inputs: Any) -> tuple:
        wrap = partial(Tensor.wrap, backend=self.backend, device=self.device)
        g_in = wrap(g)
        grads = self.rules(
            self.op,
            g_in,
            [None if a is None else wrap(a) for a in inputs],
            None if output is None else wrap(output),
            self.params,
            self.shapes,
            self.needs,
        )
        self.computes = any(t is not None and t is not g_in for t in grads)
        return tuple(None if t is None else t.array for t in grads)


_backwards: dict[Hashable, _Backward | str] = {}
"""Key -> its compiled backward, or `_EAGER` for a key whose rules run op by op."""


def run(
    rules: Rules,
    op: OpDef,
    params: dict,
    needs: tuple,
    g: Tensor,
    inputs: list,
    output: Any,
    shapes: tuple,
) -> list | None:
    """The gradients `rules` give, from one compiled call; None where this key runs op by op.

    `inputs` are the saved inputs' arrays (Python scalars as they are, None where not
    saved), `output` the saved output's array or None.
    """
    forward = compile_key(op, params)
    if forward is None:
        return None
    device = g.device
    key = (forward, needs, shapes, device, amp.current_dtype(), get_default_dtype())
    backward = _backwards.get(key)
    if backward is None:
        backward = _new(key, rules, op, params, needs, shapes, g)
    if backward is _EAGER:
        return None
    try:
        for a in inputs:
            if type(a) is float or type(a) is int:
                arrays = backward.jitted(*as_arrays([g.array, output, *inputs]))
                break
        else:
            arrays = backward.jitted(g.array, output, *inputs)
    except Exception:
        _backwards[key] = _EAGER  # the rules, op by op, raise their own error if any
        return None
    if not backward.computes:
        _backwards[key] = _EAGER
    backend = g.array_backend
    grads = []
    for a in arrays:  # a loop, not a comprehension: this runs for every node
        grads.append(None if a is None else Tensor.wrap(a, backend, device))
    return grads


def _new(
    key: Hashable, rules: Rules, op: OpDef, params: dict, needs: tuple, shapes: tuple, g: Tensor
) -> _Backward:
    """A new entry of the table (the oldest dropped past `CACHE_LIMIT`)."""
    if len(_backwards) >= CACHE_LIMIT:
        del _backwards[next(iter(_backwards))]
    backward = _backwards[key] = _Backward(rules, op, params, needs, shapes, g)
    return backward


def cache_size() -> int:
    """How many backward keys the table holds (compiled or op by op)."""
    return len(_backwards)


def clear_cache() -> None:
    """Forget every compiled backward."""
    _backwards.clear()
