"""`Optimizer`: any optax transformation applied to jaxstream parameters, in place.

Note [One jitted update for all parameters]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
`step()` hands every parameter and gradient to one jitted function that runs
the optax update and `optax.apply_updates`, then makes each new value its
parameter's under `no_grad`, as `copy_` would without the copy (`views.assign`:
the parameter stays the same leaf object, so a Module holding it sees the
update, its `_version` moves, and its views see the new values).
Arrays cross into JAX through `as_jax_array` and back through
`tensor_from_jax`, so NumPy parameters are adopted and returned without a copy
where the memory allows. The optax state stays a pytree of JAX arrays between
steps, on the parameters' device (host memory for NumPy parameters). When some
parameter is 64-bit (NumPy float64), the update is traced with JAX's x64 mode
on, so its state and update keep float64 even while x64 is off globally.

Small host parameters (NumPy arrays on the cpu, one dtype, each under the size
where a jitted call copies rather than adopts) take the packed exchange instead
(Note [Packed exchange for small host parameters]).

A parameter whose `.grad` is None is left unchanged, as in PyTorch. optax keeps
one state for all parameters, so that parameter enters the update with a zero
gradient: its value is kept, but its part of the state (a momentum buffer, for
instance) moves as for a zero gradient. For a parameter that never gets a
gradient this matches PyTorch's skipping (Adam's moments stay zero).

Hyperparameters made with `optax.inject_hyperparams` (as `SGD`, `Adam` and
`AdamW` do) appear in `param_groups[0]` under their names; a value set there
(`opt.param_groups[0]["lr"] = 1e-4`) is written into the state before the next
step, so changing it needs no new trace.
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
from ..jax_interop.exchange import as_jax_array, jit_argument, tensor_from_jax
from ..ops import views
from ..tensor import Tensor
from .state_packing import pack_state, packed_state_jit, unpack_state


def _checked_params(params: Iterable[Tensor]) -> list[Tensor]:
    """The parameters as a list, with PyTorch's checks and what to do about a failure."""
    if isinstance(params, Tensor) or not isinstance(params, Iterable):
        raise TypeError(
            "params argument given to the optimizer should be an iterable of Tensors, but got "
            f"{type(params).__name__}; pass e.g. model.parameters() or [w, b]"
        )
    params = list(params)
    if not params:
        raise ValueError("optimizer got an empty parameter list")
    for i, p in enumerate(params):
        if not isinstance(p, Tensor):
            raise TypeError(
                f"optimizer can only optimize Tensors, but parameter {i} is a "
                f"{type(p).__name__}; one group of parameters is supported, not a list of dicts"
            )
        if not p.is_leaf:
            raise ValueError(
                f"can't optimize a non-leaf Tensor (parameter {i}, shape {p.shape}, made by "
                f"{p.grad_fn.name()}); optimize the leaf it was computed from, or detach() it"
            )
        if not p.requires_grad:
            raise ValueError(
                f"parameter {i} (shape {p.shape}, dtype {p.dtype}) does not require grad, so it "
                "never gets a gradient; call requires_grad_() on it or leave it out"
            )
    if len({id(p) for p in params}) != len(params):
        raise ValueError("some parameters appear more than once in the parameter list")
    return params


def _update(transform: optax.GradientTransformation, params: list, grads: list,
            state: Any) -> tuple[list, Any]:
    """One optax step over all parameters; None gradients count as zero and keep the value."""
    filled = [jnp.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)]
    updates, state = transform.update(filled, state, params)
    stepped = optax.apply_updates(params, updates)
    kept = [p if g is None else s for p, g, s in zip(params, grads, stepped, strict=True)]
    return kept, state


# Note [Packed exchange for small host parameters]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A jitted call pays per argument: each small NumPy array is copied in on its own,
# and each result costs a conversion back (a fresh JAX array's first `np.asarray`
# is several microseconds). For a small model on the NumPy backend that exchange
# outweighs Adam's arithmetic. So where every parameter is a small cpu NumPy array
# of one dtype, the parameters and the gradients (zeros where None) each enter as
# one concatenated vector, the program splits them into the parameters' shapes,
# runs the same optax update, and returns the new values as one vector; the host
# splits that into read-only views, one per parameter. optax still sees one array
# per parameter, so the state and the arithmetic are those of the unpacked call.
_PACK_BELOW_BYTES = 1 << 20  # where a jitted call copies a NumPy argument anyway


class _Packing:
    """The parameters' shapes, and where each lies in the packed vector."""

    def __init__(self, arrays: list) -> None:
        self.dtype = arrays[0].dtype
        self.shapes = tuple(a.shape for a in arrays)
        self.bounds = tuple(np.cumsum([0] + [a.size for a in arrays]).tolist())

    def fits(self, arrays: list) -> bool:
        """Whether `arrays` (the parameters' now) can take the packed exchange."""
        return all(
            type(a) is np.ndarray
            and a.dtype == self.dtype
            and a.shape == shape
            and a.nbytes < _PACK_BELOW_BYTES
            for a, shape in zip(arrays, self.shapes, strict=True)
        )

    def pack(self, arrays: list) -> np.ndarray:
        return np.concatenate([a.ravel() for a in arrays])

    def unpack(self, flat: Any) -> list:
        """`flat`'s parts in the parameters' shapes (views, for NumPy and in the program)."""
        b = self.bounds
        return [flat[b[i] : b[i + 1]].reshape(s) for i, s in enumerate(self.shapes)]


def _packed_update(transform: optax.GradientTransformation, packing: _Packing, params: Any,
                   grads: Any, state: Any) -> tuple[Any, Any]:
    """`_update` on packed vectors (Note [Packed exchange for small host parameters])."""
    stepped, state = _update(transform, packing.unpack(params), packing.unpack(grads), state)
    return jnp.concatenate([s.ravel() for s in stepped]), state


class Optimizer:
    """Applies `transform` (an `optax.GradientTransformation`) to `params` on each `step()`.

    See Note [One jitted update for all parameters].
    """

    def __init__(self, params: Iterable[Tensor], transform: optax.GradientTransformation) -> None:
        if not isinstance(transform, optax.GradientTransformation):
            raise TypeError(
                f"Optimizer: transform must be an optax.GradientTransformation, got "
                f"{type(transform).__name__}; e.g. optax.adam(1e-3)"
            )
        self.params = _checked_params(params)
        self.transform = transform
        self._wide = any(p.dtype.itemsize == 8 for p in self.params)
        with self._precision():
            state = self._committed(transform.init(self._arrays(self.params)))
        self._state_def = jax.tree.structure(state)
        self.state = state
        self._jitted_update = packed_state_jit(partial(_update, transform), self._state_def)
        self._packing = _Packing([p.array for p in self.params])
        self._jitted_packed = packed_state_jit(
            partial(_packed_update, transform, self._packing), self._state_def
        )
        self._applied = {name: float(v) for name, v in self._hyperparams().items()}
        self.param_groups = [{"params": self.params, **self._applied}]

    def _show_as_given(self, hyperparams: dict[str, float]) -> None:
        """Show hyperparameters as the caller wrote them (the state holds them in its dtype)."""
        self._applied.update(hyperparams)
        self.param_groups[0].update(hyperparams)

    @property
    def state(self) -> Any:
        """The optax state (kept packed between steps: Note [The state as one vector per
        dtype] in state_packing.py; read it, or set a new one, as a whole)."""
        with self._precision():
            return unpack_state(self._state_def, self._state_layout, self._state_vectors)

    @state.setter
    def state(self, state: Any) -> None:
        with self._precision():
            self._state_layout, self._state_vectors = pack_state(self._state_def, state)

    def _precision(self) -> contextlib.AbstractContextManager:
        return jax.enable_x64(True) if self._wide else contextlib.nullcontext()

    def _committed(self, state: Any) -> Any:
        """`state` committed to the parameters' device, as every step returns it: the
        update's compiled program is keyed on that, so it is compiled once, not twice."""
        device = next(iter(self._arrays(self.params[:1])[0].devices()))
        return jax.device_put(state, device)

    @staticmethod
    def _arrays(tensors: Iterable[Tensor | None]) -> list:
        return [None if t is None else as_jax_array(t.array) for t in tensors]

    def _hyperparams(self) -> dict[str, Any]:
        """The state's injected hyperparameters (empty without `optax.inject_hyperparams`)."""
        return getattr(self.state, "hyperparams", {})

    def _write_hyperparams(self) -> None:
        """Write the values set in `param_groups[0]` into the state, when they changed."""
        group = self.param_groups[0]
        wanted = {name: float(group[name]) for name in self._applied}
        if wanted != self._applied:
            state = self.state
            hyper = state.hyperparams
            for name, value in wanted.items():
                hyper[name] = jnp.full_like(hyper[name], value)  # its dtype and device
            self.state = state
            self._applied = wanted

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient; returns `closure()` if given."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        grads = [p._grad for p in self.params]
        if all(g is None for g in grads):
            return loss
        with self._precision():
            self._write_hyperparams()
            if self._packs(grads):
                values = self._packed_step(grads)
            else:
                values = self._call(
                    self._jitted_update,
                    [jit_argument(p.array) for p in self.params],
                    [None if g is None else jit_argument(g.array) for g in grads],
                )
                values = [
                    tensor_from_jax(v, p.array_backend)
                    for p, v in zip(self.params, values, strict=True)
                ]
        with no_grad():
            for p, g, value in zip(self.params, grads, values, strict=True):
                if g is not None:
                    views.assign(p, _like(value, p))
        return loss

    def _call(self, jitted: Callable, *args: Any) -> Any:
        """`jitted`'s result on `args`; the new state is kept (Note [The state as one vector
        per dtype] in state_packing.py)."""
        result, self._state_vectors = jitted(self._state_layout, *args, self._state_vectors)
        return result

    def _packs(self, grads: list) -> bool:
        """Whether this step takes Note [Packed exchange for small host parameters]."""
        packing = self._packing
        params = self.params
        if any(p.device.is_accelerator for p in params):
            return False
        return packing.fits([p.array for p in params]) and packing.fits(
            [p.array if g is None else g.array for p, g in zip(params, grads, strict=True)]
        )

    def _packed_step(self, grads: list) -> list[Tensor]:
        """The new values, as tensors over views of one host vector."""
        packing = self._packing
        filled = [
            np.zeros(p.array.shape, packing.dtype) if g is None else g.array
            for p, g in zip(self.params, grads, strict=True)
        ]
        flat = self._call(
            self._jitted_packed, packing.pack([p.array for p in self.params]), packing.pack(filled)
        )
        values = packing.unpack(np.asarray(flat))
        return [
            Tensor.wrap(v, p.array_backend, p.device)
            for p, v in zip(self.params, values, strict=True)
        ]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                with no_grad():
                    p.grad.zero_()

    def state_dict(self) -> dict[str, Any]:
        """The optax state and the hyperparameters; parameters are named by their position.

        The state's arrays are of the (first) parameter's backend, so that it pickles
        with its dtypes: a float64 JAX array would come back float32 with x64 off.
        """
        group = {name: value for name, value in self.param_groups[0].items() if name != "params"}
        backend = self.params[0].array_backend
        return {
            "state": jax.tree.map(lambda a: tensor_from_jax(a, backend).array, self.state),
            "param_groups": [{**group, "params": list(range(len(self.params)))}],
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what `state_dict()` returned, for the same parameters and transformation."""
        state = state_dict["state"]
        expected = self._state_def
        if jax.tree.structure(state) != expected:
            raise ValueError(
                "loaded state dict does not match this optimizer's state: it has structure "
                f"{jax.tree.structure(state)}, expected {expected}; load the state of an "
                "optimizer built with the same transformation over the same parameters"
            )
        (group,) = state_dict["param_groups"]
        if len(group["params"]) != len(self.params):
            raise ValueError(
                f"loaded state dict has a parameter group of size {len(group['params'])} that "
                f"doesn't match the size of the optimizer's group ({len(self.params)})"
            )
        with self._precision():
            self.state = self._committed(jax.tree.map(jnp.asarray, state))
        self.param_groups[0].update(
            {name: value for name, value in group.items() if name != "params"}
        )
        self._applied = {name: float(v) for name, v in self._hyperparams().items()}

    def __repr__(self) -> str:
        hyper = ", ".join(f"{name}={value}" for name, value in self._applied.items())
        return f"{type(self).__name__}({len(self.params)} parameters{', ' if hyper else ''}{hyper})"


def _like(value: Tensor, param: Tensor) -> Tensor:
    """`value` placed on `param`'s device (a sim device shares the host array)."""
    if value.device == param.device:
        return value
    return Tensor.wrap(value.array, value.array_backend, param.device)
