"""The jaxpr interpreter that casts the operands of a JAX function's matmuls and convolutions."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.extend.core as jex
import jax.numpy as jnp
import numpy as np

from .. import amp


# Note [Autocast inside a jax_function]
# A jaxpr interpreter re-binds every primitive of the function; for the
# matmul-like ones (`amp.CAST_PRIMITIVES`) it casts floating operands to the
# autocast dtype, computes in it, and casts the result back to the dtype the
# jaxpr declares, so the rest of the program keeps its types. It descends into
# jit, scan, while, cond, remat and the primal of custom_jvp/custom_vjp
# functions; the differentiation rules of custom_jvp/custom_vjp functions and
# shard_map bodies run as written.
def autocast_function(fn: Callable, dtype: np.dtype) -> Callable:
    """`fn` with the operands of its matmuls and convolutions cast to `dtype`."""

    @functools.wraps(fn)
    def cast_fn(*args: Any) -> Any:
        flat_args, in_tree = jax.tree.flatten(args)

        def flat_fn(*flat: Any) -> Any:
            return fn(*jax.tree.unflatten(in_tree, flat))

        closed, out_shape = jax.make_jaxpr(flat_fn, return_shape=True)(*flat_args)
        outs = _eval_autocast(closed.jaxpr, closed.consts, flat_args, dtype)
        return jax.tree.unflatten(jax.tree.structure(out_shape), outs)

    return cast_fn


def _eval_autocast(jaxpr: jex.Jaxpr, consts: Sequence, args: Sequence, dtype: np.dtype) -> list:
    env: dict = {}

    def read(atom: Any) -> Any:
        return atom.val if isinstance(atom, jex.Literal) else env[atom]

    env.update(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))
    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        with eqn.ctx.manager:
            if eqn.primitive.name in amp.CAST_PRIMITIVES:
                outs = [_cast_matmul(eqn, invals, dtype)]
            else:
                params = {k: _autocast_param(v, dtype) for k, v in eqn.params.items()}
                outs = eqn.primitive.bind(*invals, **eqn.primitive.get_bind_params(params))
                if not eqn.primitive.multiple_results:
                    outs = [outs]
        env.update(zip(eqn.outvars, outs, strict=True))
    return [read(v) for v in jaxpr.outvars]


def _cast_matmul(eqn: jex.JaxprEqn, invals: list, dtype: np.dtype) -> Any:
    declared = eqn.outvars[0].aval.dtype
    if not all(jnp.issubdtype(jnp.result_type(x), jnp.floating) for x in invals):
        return eqn.primitive.bind(*invals, **eqn.params)
    cast = [jax.lax.convert_element_type(x, dtype) for x in invals]
    params = dict(eqn.params)
    if "preferred_element_type" in params:
        params["preferred_element_type"] = dtype
    out = eqn.primitive.bind(*cast, **params)
    return jax.lax.convert_element_type(out, declared)


def _autocast_param(value: Any, dtype: np.dtype) -> Any:
    if isinstance(value, jex.ClosedJaxpr):
        return _autocast_closed(value, dtype)
    if isinstance(value, jex.Jaxpr):
        return _autocast_open(value, dtype)
    if isinstance(value, tuple) and value and all(isinstance(v, jex.ClosedJaxpr) for v in value):
        return tuple(_autocast_closed(v, dtype) for v in value)
    return value


def _casts_something(jaxpr: jex.Jaxpr) -> bool:
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in amp.CAST_PRIMITIVES:
            return True
        for value in eqn.params.values():
            for sub in value if isinstance(value, tuple) else (value,):
                if isinstance(sub, jex.ClosedJaxpr) and _casts_something(sub.jaxpr):
                    return True
                if isinstance(sub, jex.Jaxpr) and _casts_something(sub):
                    return True
    return False


def _autocast_closed(closed: jex.ClosedJaxpr, dtype: np.dtype) -> jex.ClosedJaxpr:
    if not _casts_something(closed.jaxpr):
        return closed
    return jax.make_jaxpr(lambda *a: _eval_autocast(closed.jaxpr, closed.consts, a, dtype))(
        *_abstract(closed.in_avals)
    )


def _autocast_open(jaxpr: jex.Jaxpr, dtype: np.dtype) -> jex.Jaxpr:
    if jaxpr.constvars:
        return jaxpr
    closed = _autocast_closed(jex.ClosedJaxpr(jaxpr, ()), dtype)
    return jaxpr if closed.consts else closed.jaxpr


def _abstract(avals: Any) -> list:
    return [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in avals]


def under_autocast(fn: Callable, dtype: np.dtype | None) -> Callable:
    """`fn` as the autocast state `dtype` (None: off) runs it, for programs keyed on that state."""
    return fn if dtype is None else autocast_function(fn, dtype)
