"""`Optimizer`: optax transformations applied to jaxstream parameters, in place, by groups.

Note [One jitted update for all parameters]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
`step()` hands every parameter and gradient, of every group, to one jitted
function that runs the optax update (Note [One transformation over the parameter
groups] in param_groups.py) and `optax.apply_updates`, then makes each new value
its parameter's under `no_grad`, as `copy_` would without the copy
(`views.assign`: the parameter stays the same leaf object, so a Module holding
it sees the update, its `_version` moves, and its views see the new values).
Arrays cross into JAX through `as_jax_array` and back through
`array_from_jax`, so NumPy parameters are adopted and returned without a copy
where the memory allows. The optax state stays a pytree of JAX arrays between
steps, on the parameters' device (host memory for NumPy parameters). When some
parameter is 64-bit (NumPy float64), the update is traced with JAX's x64 mode
on, so its state and update keep float64 even while x64 is off globally.

Small host parameters (NumPy arrays on the cpu, one dtype, each under the size
where a jitted call copies rather than adopts) take the packed exchange instead
(Note [Packed exchange for small host parameters] in packed_exchange.py).

A parameter whose `.grad` is None is left unchanged, as in PyTorch. optax keeps
one state for all parameters, so that parameter enters the update with a zero
gradient: its value is kept, but its part of the state (a momentum buffer, for
instance) moves as for a zero gradient. For a parameter that never gets a
gradient this matches PyTorch's skipping (Adam's moments stay zero).

Note [Hyperparameters live in the state]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Hyperparameters made with `optax.inject_hyperparams` (as every rule in
algorithms.py does) are arrays in each group's state, so a value set in a group
(`opt.param_groups[1]["lr"] = 1e-4`, a scheduler's step) is written there before
the next step, and changing it needs no new trace (Note [Hyperparameters under
js.compile] in hyperparams.py). A group's options that the transformation is
built with instead (`nesterov`, `centered`) rebuild it when they change, keeping
the state. `HeldHyperparams` records each group's values as its state holds them
(in the state's dtype), so an eager step compares and writes only changes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..autograd.grad_mode import enable_grad, no_grad
from ..jax_interop.exchange import array_from_jax, as_jax_array, jit_argument, tensor_from_jax
from ..ops import views
from ..tensor import Tensor
from .hyperparams import (
    HeldHyperparams,
    check_hyperparam,
    held_hyperparams,
    holds_tracers,
    write_hyperparams,
)
from .packed_exchange import Packing, packed_update, update
from .param_groups import (
    as_groups,
    check_group_count,
    checked_group,
    group_states,
    numbered_groups,
    over_groups,
    with_group_leaves,
)
from .state_packing import pack_state, packed_state_jit, unpack_state


class Optimizer:
    """Applies `transform` (an `optax.GradientTransformation`) to `params` on each `step()`.

    `params` is an iterable of tensors, or of dicts (`{"params": [...], "lr": ...}`) for
    parameter groups: a group's entries named as `transform`'s injected hyperparameters
    set that group's values. See Note [One jitted update for all parameters].
    """

    _static_options: tuple[str, ...] = ()
    """Group options the transformation is built with (Note [Hyperparameters live in the
    state])."""

    def __init__(self, params: Iterable[Tensor] | Iterable[dict],
                 transform: optax.GradientTransformation) -> None:
        if not isinstance(transform, optax.GradientTransformation):
            raise TypeError(
                f"Optimizer: transform must be an optax.GradientTransformation, got "
                f"{type(transform).__name__}; e.g. optax.adam(1e-3)"
            )
        self._given = transform
        self._start(params, {})
        self.defaults = {name: float(v) for name, v in self._held.applied[0].items()}
        entries = self._hyperparam_entries()
        for group in self.param_groups:
            for name, value in self.defaults.items():
                group.setdefault(name, value)
            group.traced = entries

    def _start(self, params: Any, defaults: dict[str, Any]) -> None:
        """Check and fill the groups `params` describes, then build their state."""
        self.defaults = defaults
        self.param_groups: list[dict] = []
        self._held = HeldHyperparams([], None)
        self._state_layout = None
        for group in as_groups(params):
            self.param_groups.append(checked_group(group, defaults, self.param_groups,
                                                   self._hyperparam_entries()))
        self._install([])

    def _group_transform(self, group: dict) -> optax.GradientTransformation:
        """The transformation of one group (a rule builds it from the group's values)."""
        return self._given

    def _hyperparam_entries(self) -> tuple[str, ...]:
        """The group entries that set the state's injected hyperparameters: the traced
        entries of each group (Note [Hyperparameters under js.compile])."""
        return tuple(self.defaults)

    def _hyperparams_of(self, group: dict) -> dict[str, Any]:
        """The values `group` sets, by the names of its state's injected hyperparameters."""
        return {name: group[name] for name in self._hyperparam_entries()}

    def _options_of(self, group: dict) -> dict[str, Any]:
        return {name: group[name] for name in self._static_options}

    def _install(self, kept: list[list]) -> None:
        """Build the transformation over all groups and its state; the first `len(kept)`
        groups keep their state's leaves (Note [One transformation over the parameter
        groups]), the others start fresh."""
        groups = self.param_groups
        self.params = [p for group in groups for p in group["params"]]
        self.transform = over_groups(
            [self._group_transform(group) for group in groups],
            [len(group["params"]) for group in groups],
        )
        self._wide = any(p.dtype.itemsize == 8 for p in self.params)
        # Whether the kept leaves hold what `_held` records (Note [Hyperparameters under
        # js.compile] in hyperparams.py): a compiled call since the last step says not.
        in_sync = not kept or self._held.vectors is self._state_vectors
        with self._precision():
            fresh = self.transform.init(self._arrays(self.params))
            state = self._committed(with_group_leaves(fresh, len(groups), kept))
        self._state_def = jax.tree.structure(state)
        self.state = state
        self._jitted_update = packed_state_jit(partial(update, self.transform), self._state_def)
        self._packing = Packing([p.array for p in self.params])
        self._jitted_packed = packed_state_jit(
            partial(packed_update, self.transform, self._packing), self._state_def
        )
        self._built = [self._options_of(group) for group in groups]
        fresh_states = group_states(fresh, len(groups))[len(kept) :]
        applied = self._held.applied[: len(kept)] + list(map(held_hyperparams, fresh_states))
        self._held.reset(applied, self._state_vectors if in_sync else None)

    def add_param_group(self, param_group: dict) -> None:
        """Add a group (PyTorch's `add_param_group`): its options default to the
        constructor's, its state starts fresh, the other groups keep theirs."""
        group = checked_group(param_group, self.defaults, self.param_groups,
                              self._hyperparam_entries())
        kept = self._group_leaves()
        self.param_groups.append(group)
        self._install(kept)

    def _group_leaves(self) -> list[list]:
        return [jax.tree.leaves(s) for s in group_states(self.state, len(self.param_groups))]

    @property
    def state(self) -> Any:
        """The optax state (kept packed between steps: Note [The state as one vector per
        dtype] in state_packing.py; read it, or set a new one, as a whole)."""
        with self._precision():
            return unpack_state(self._state_def, self._state_layout, self._state_vectors)

    @state.setter
    def state(self, state: Any) -> None:
        with self._precision():
            layout, self._state_vectors = pack_state(self._state_def, state)
        if layout != self._state_layout:
            self._state_layout = layout  # an equal one is kept: js.compile's walk reads it

    def _precision(self) -> contextlib.AbstractContextManager:
        return jax.enable_x64(True) if self._wide else contextlib.nullcontext()

    def _committed(self, state: Any) -> Any:
        """`state` committed to the parameters' device, as every step returns it: the
        update's compiled program is keyed on that, so it is compiled once, not twice.
        In a trace (an option changed inside `js.compile`) the program places it."""
        array = self._arrays(self.params[:1])[0]
        if isinstance(array, jax.core.Tracer):
            return state
        return jax.device_put(state, next(iter(array.devices())))

    @staticmethod
    def _arrays(tensors: Iterable[Tensor | None]) -> list:
        return [None if t is None else as_jax_array(t.array) for t in tensors]

    def _rebuild_changed_options(self) -> None:
        """Rebuild the transformation where a group's build options changed, keeping the
        state (Note [Hyperparameters live in the state])."""
        if self._static_options and any(
            self._options_of(g) != built
            for g, built in zip(self.param_groups, self._built, strict=True)
        ):
            self._install(self._group_leaves())

    def _write_hyperparams(self) -> None:
        """Write the values set in the groups into the state: where they changed, or, in
        a trace, all of them (Note [Hyperparameters under js.compile])."""
        groups = self.param_groups
        if holds_tracers(self._state_vectors):
            values = dict(enumerate(map(self._hyperparams_of, groups)))
        else:
            names = self._hyperparam_entries()
            values = self._held.changes([tuple(g[n] for n in names) for g in groups],
                                        self._checked_hyperparams, self._state_vectors)
        if any(values.values()):
            state = self.state
            write_hyperparams(group_states(state, len(groups)), values)
            self.state = state

    def _checked_hyperparams(self, index: int) -> dict[str, Any]:
        """Group `index`'s hyperparameters, each checked to be of its default's form."""
        group = self.param_groups[index]
        for name in self._hyperparam_entries():
            check_hyperparam(group[name], self.defaults[name], f"param_groups[{index}]['{name}']")
        return self._hyperparams_of(group)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient; returns `closure()` if given."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        params = self.params
        grads = [p._grad for p in params]
        if all(g is None for g in grads):
            return loss
        self._rebuild_changed_options()
        with self._precision():
            self._write_hyperparams()
            arrays = [p.array for p in params]
            if self._packs(arrays, grads):
                values = self._packed_step(arrays, grads)
            else:
                values = self._call(
                    self._jitted_update,
                    [jit_argument(a) for a in arrays],
                    [None if g is None else jit_argument(g.array) for g in grads],
                )
                values = [
                    array_from_jax(v, p.array_backend) for p, v in zip(params, values, strict=True)
                ]
        self._held.synced(self._state_vectors)
        with no_grad():
            for p, g, value in zip(params, grads, values, strict=True):
                if g is not None:
                    _assign(p, value)
        return loss

    def _call(self, jitted: Callable, *args: Any) -> Any:
        """`jitted`'s result on `args`; the new state is kept (Note [The state as one vector
        per dtype] in state_packing.py)."""
        result, self._state_vectors = jitted(self._state_layout, *args, self._state_vectors)
        return result

    def _packs(self, arrays: list, grads: list) -> bool:
        """Whether this step, of the parameters' `arrays`, takes Note [Packed exchange for
        small host parameters]."""
        packing = self._packing
        for p in self.params:
            if p.device.is_accelerator:
                return False
        return packing.fits(arrays) and packing.fits(
            [a if g is None else g.array for a, g in zip(arrays, grads, strict=True)]
        )

    def _packed_step(self, arrays: list, grads: list) -> list:
        """The new values, as views of one host vector."""
        packing = self._packing
        filled = [
            np.zeros(a.shape, packing.dtype) if g is None else g.array
            for a, g in zip(arrays, grads, strict=True)
        ]
        flat = self._call(self._jitted_packed, packing.pack(arrays), packing.pack(filled))
        return packing.unpack(np.asarray(flat))

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                with no_grad():
                    p.grad.zero_()

    def state_dict(self) -> dict[str, Any]:
        """The optax state, and the groups in PyTorch's layout (parameters by position).

        The state's arrays are of the (first) parameter's backend, so that it pickles
        with its dtypes: a float64 JAX array would come back float32 with x64 off.
        """
        backend = self.params[0].array_backend
        return {
            "state": jax.tree.map(lambda a: tensor_from_jax(a, backend).array, self.state),
            "param_groups": numbered_groups(self.param_groups),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what `state_dict()` returned, for the same groups and transformations:
        the state, and each group's options."""
        state, saved = state_dict["state"], state_dict["param_groups"]
        check_group_count(saved, self.param_groups)
        groups = [{**mine, **{k: v for k, v in theirs.items() if k != "params"}}
                  for mine, theirs in zip(self.param_groups, saved, strict=True)]
        _check_loaded(state, self._expected_state(groups))
        for mine, group in zip(self.param_groups, groups, strict=True):
            mine.update(group)
        if [self._options_of(g) for g in groups] != self._built:
            self._install([])
        with self._precision():
            self.state = self._committed(jax.tree.map(jnp.asarray, state))
        states = group_states(self.state, len(self.param_groups))
        self._held.reset(list(map(held_hyperparams, states)), self._state_vectors)

    def _expected_state(self, groups: list[dict]) -> Any:
        """The shapes and dtypes of the state were the groups built with `groups`' options."""
        transform = over_groups([self._group_transform(g) for g in groups],
                                [len(g["params"]) for g in groups])
        with self._precision():
            return jax.eval_shape(transform.init, self._arrays(self.params))

    def __repr__(self) -> str:
        if len(self.param_groups) > 1:
            return (f"{type(self).__name__}({len(self.params)} parameters in "
                    f"{len(self.param_groups)} groups)")
        group = self.param_groups[0]
        shown = ", ".join(f"{k}={v}" for k, v in group.items() if k != "params")
        return f"{type(self).__name__}({len(self.params)} parameters{', ' if shown else ''}{shown})"


def _check_loaded(state: Any, expected: Any) -> None:
    """A loaded state must have the structure and shapes of the state it replaces."""
    problem = None
    if jax.tree.structure(state) != jax.tree.structure(expected):
        problem = (f"it has structure {jax.tree.structure(state)}, expected "
                   f"{jax.tree.structure(expected)}")
    else:
        shapes = [np.shape(a) for a in jax.tree.leaves(state)]
        wanted = [a.shape for a in jax.tree.leaves(expected)]
        if shapes != wanted:
            problem = f"its arrays have shapes {shapes}, expected {wanted}"
    if problem is not None:
        raise ValueError(
            f"loaded state dict does not match this optimizer's state: {problem}; load the "
            "state of an optimizer built with the same transformation over the same groups "
            "of parameters"
        )


def _assign(param: Tensor, array: Any) -> None:
    """Make `array` (of `param`'s backend; a sim device shares the host's) the new value of
    `param`, as `copy_` would without the copy: a tensor that is neither a view nor viewed
    has only its own array to rebind."""
    if param._view is None and not param._views:
        param.rebind(array)
    else:
        views.assign(param, Tensor.wrap(array, param.array_backend, param.device))
