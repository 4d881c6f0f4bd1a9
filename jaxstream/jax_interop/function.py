"""`jax_function`: a JAX function as a jaxstream op, its programs compiled once per signature.

How its node runs: Note [How a jax_function node runs] in `node.py`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax

from .autocast import under_autocast
from .backward import BackwardKey, run_backward, run_vjp
from .checks import check_outputs
from .node import JaxCall, node_class
from .signature import CallSignature
from .statics import static_positions


class JaxFunction:
    """A JAX function called on jaxstream tensors; see `jax_function`."""

    def __init__(
        self,
        fn: Callable,
        *,
        jit: bool = True,
        static_argnums: int | Sequence[int] = (),
        name: str | None = None,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"jax_function: expected a callable, got {type(fn).__name__}")
        self.fn = fn
        self.jit = bool(jit)
        self.name = name or getattr(fn, "__qualname__", None) or repr(fn)
        self.node = node_class(name or "JaxFunction")
        self.static_argnums = static_positions(static_argnums)
        self._primals: dict[CallSignature, Callable] = {}
        self._forwards: dict[CallSignature, Callable] = {}
        self._vjp_functions: dict[tuple, JaxFunction] = {}
        # A partial of its own gives this function a compilation cache of its own.
        backward = functools.partial(run_backward)
        self._backward = jax.jit(backward, static_argnums=0) if self.jit else backward

    def __repr__(self) -> str:
        return f"jax_function({self.name})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        call = JaxCall.prepare(self, args, kwargs)
        if not call.diff_positions:
            out = self.primal_program(call.signature)(call.consts)
            return jax.tree.map(call.wrap, out)
        return call.record()

    def primal_program(self, signature: CallSignature) -> Callable:
        """`consts -> outputs` when nothing needs a gradient, compiled once per signature."""
        return self._program(self._primals, signature, lambda p: functools.partial(p, ()))

    def forward_program(self, signature: CallSignature) -> Callable:
        """`(diff, consts) -> (outputs, vjp)`, compiled once per signature."""
        return self._program(self._forwards, signature, _with_vjp)

    def _program(self, cache: dict, signature: CallSignature, build: Callable) -> Callable:
        """`build(primal)` for `signature`, jitted unless `jit=False`, kept in `cache`."""
        program = cache.get(signature)
        if program is None:
            program = build(self._primal(signature))
            program = cache[signature] = jax.jit(program) if self.jit else program
        return program

    def backward_program(self) -> Callable:
        """`(key, vjp, cotangents) -> wanted gradients`, compiled once per key."""
        return self._backward

    def _primal(self, signature: CallSignature) -> Callable:
        def primal(diff: Sequence, consts: Sequence) -> Any:
            out = signature.call(self.fn, diff, consts)
            check_outputs(self.name, out)
            return out

        return under_autocast(primal, signature.autocast)

    def vjp_function(self, signature: CallSignature, key: BackwardKey) -> JaxFunction:
        """A node's backward as a `jax_function`, for `create_graph=True`.

        It recomputes the VJP from the inputs, so that its own node can
        differentiate the gradients with respect to them.
        """
        found = self._vjp_functions.get((signature, key))
        if found is None:
            forward = _with_vjp(self._primal(signature))

            def vjp(diff: Sequence, consts: Sequence, cts: Sequence) -> list:
                _, vjp_fn = forward(diff, consts)
                return run_vjp(key, vjp_fn, cts)

            found = JaxFunction(vjp, jit=self.jit, name=f"vjp({self.name})")
            # Its nodes differentiate this function's backward: `FooBackwardBackward`,
            # as PyTorch names a double backward.
            found.node = node_class(f"{self.node.__name__}Backward")
            self._vjp_functions[signature, key] = found
        return found


def jax_function(
    fn: Callable,
    *,
    jit: bool = True,
    static_argnums: int | Sequence[int] = (),
    name: str | None = None,
) -> JaxFunction:
    """Make a JAX function of arrays and pytrees a differentiable jaxstream op.

    Tensor leaves of the arguments that require grad are differentiated; other
    tensors, arrays and scalars are closed over. Tensors of the NumPy and CuPy
    backends enter JAX through DLPack, and outputs come back on the caller's
    backend (NumPy outputs are read-only views of JAX's buffers).
    `static_argnums` are hashed into the compilation cache. `name` names the
    function in errors and its nodes: `name="Foo"` records `FooBackward` nodes
    (`JaxFunctionBackward` without a name). See Note [How a
    jax_function node runs] and, for the autocast it honours, Note [Autocast
    inside a jax_function].
    """
    return JaxFunction(fn, jit=jit, static_argnums=static_argnums, name=name)


def _with_vjp(primal: Callable) -> Callable:
    """`(diff, consts) -> (outputs, vjp)` for `primal(diff, consts)`, differentiating `diff`."""

    def forward(diff: Sequence, consts: Sequence) -> tuple:
        return jax.vjp(lambda *d: primal(d, consts), *diff)

    return forward
