"""`Module`: parameters and submodules registered by assignment, as in PyTorch.

Note [A Module is a pytree of its parameters]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Every Module subclass is registered with `jax.tree_util` when it is defined.
Its children are its registered parameters, then its submodules, each in
assignment order, so the leaves of a model are its parameter Tensors in the
order of `parameters()`, with paths such as `.layer.weight`. Everything else in the
instance (`training`, `in_features`, `eps`, ...) is static data of the tree
structure: it should be hashable configuration, not arrays. Unflattening
builds a new Module of the same class and configuration that holds whatever
leaves it is given: Tensors, JAX arrays or tracers. That is what lets
`js.to_jax(loss)(model, x)` work: `to_jax` maps the Tensor leaves to JAX
arrays and back to Tensors inside, and `jax.grad` of it returns a Module
whose leaves are the gradients. To feed `jax.grad` directly, map the model to
arrays first: `jax.tree.map(js.Tensor.jax, model)`.

Note [A frozen parameter stays frozen as a pytree]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A parameter that does not require grad (`Parameter(t, requires_grad=False)`, the
way to hold a constant in a Module) is still a leaf, as it is in `parameters()`,
but its name is in the tree structure's data as frozen, and stays there when the
leaves become JAX arrays. Rebuilding the Module from leaves gives a frozen slot a
leaf that does not require grad: a Tensor that does is detached (which inside a
trace also stops JAX's gradient). So under `jax.grad(js.to_jax(loss))` a frozen
parameter gets a zero gradient in both modes, as PyTorch's autograd gives it none,
and an optax step leaves it alone (weight decay aside: mask it with `optax.masked`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import jax

from ..autograd.grad_mode import no_grad
from ..backends import BACKEND_NAMES
from ..devices import Device
from ..tensor import Tensor, tensor
from .parameter import Parameter

_PARAMETER = "parameter"
_MODULE = "module"


class IncompatibleKeys(NamedTuple):
    """What `load_state_dict(..., strict=False)` could not match."""

    missing_keys: list[str]
    unexpected_keys: list[str]


def _is_parameter(value: Any) -> bool:
    """A Parameter, or a leaf Tensor that requires grad: what assignment registers."""
    return isinstance(value, Parameter) or (
        isinstance(value, Tensor) and value.requires_grad and value.is_leaf
    )


class Module:
    """Base class of layers and models: subclasses set attributes in `__init__` and define
    `forward`; calling the module calls `forward`.
    """

    training: bool

    def __init__(self) -> None:
        # name -> "parameter" | "module", in assignment order (see __setattr__).
        object.__setattr__(self, "_registered", {})
        object.__setattr__(self, "training", True)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _register_pytree(cls)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"Module [{type(self).__name__}] is missing the required \"forward\" function"
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    # --------------------------------------------------------------- registration
    def __setattr__(self, name: str, value: Any) -> None:
        registered = self.__dict__.get("_registered")
        if registered is None:
            raise AttributeError(
                f"cannot assign {name!r} before Module.__init__() call: call "
                f"super().__init__() first in {type(self).__name__}.__init__"
            )
        kind = registered.get(name)
        if isinstance(value, Module):
            registered[name] = _MODULE
        elif _is_parameter(value):
            registered[name] = _PARAMETER
        elif kind is not None and value is not None:
            expected = "js.nn.Parameter" if kind == _PARAMETER else "js.nn.Module"
            raise TypeError(
                f"cannot assign {type(value).__name__} as {kind} {name!r} of "
                f"{type(self).__name__} ({expected} or None expected)"
            )
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        self.__dict__["_registered"].pop(name, None)
        object.__delattr__(self, name)

    def _members(self, kind: str) -> Iterator[tuple[str, Any]]:
        """(name, value) of the registered members of `kind` that are not None."""
        for name, registered_kind in self.__dict__["_registered"].items():
            value = self.__dict__[name]
            if registered_kind == kind and value is not None:
                yield name, value

    def named_children(self) -> Iterator[tuple[str, Module]]:
        return self._members(_MODULE)

    def children(self) -> Iterator[Module]:
        return (module for _, module in self.named_children())

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """This module and every submodule, depth first, with dotted names."""
        yield prefix, self
        for name, child in self.named_children():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self) -> Iterator[Module]:
        return (module for _, module in self.named_modules())

    def named_parameters(self) -> Iterator[tuple[str, Tensor]]:
        """Each parameter with its dotted name, own parameters before those of submodules."""
        for prefix, module in self.named_modules():
            for name, param in module._members(_PARAMETER):
                yield (f"{prefix}.{name}" if prefix else name), param

    def parameters(self) -> Iterator[Tensor]:
        return (param for _, param in self.named_parameters())

    # ----------------------------------------------------------------- state dict
    def state_dict(self) -> dict[str, Tensor]:
        """Name -> parameter value, detached (sharing memory and version with the parameter)."""
        return {name: param.detach() for name, param in self.named_parameters()}

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> IncompatibleKeys:
        """Copy values into the existing parameters, with PyTorch's `strict` rules.

        Nothing is loaded when an error is raised. The parameters keep their identity,
        so optimizers and other holders see the loaded values.
        """
        own = dict(self.named_parameters())
        missing = [name for name in own if name not in state_dict]
        unexpected = [name for name in state_dict if name not in own]
        values = {name: _as_tensor(value) for name, value in state_dict.items() if name in own}
        errors = [
            f"size mismatch for {name}: copying a param with shape {value.shape} from "
            f"checkpoint, the shape in current model is {own[name].shape}."
            for name, value in values.items()
            if value.shape != own[name].shape
        ]
        if strict:
            errors[:0] = [
                f"{label} key(s) in state_dict: {', '.join(map(repr, keys))}."
                for label, keys in (("Missing", missing), ("Unexpected", unexpected))
                if keys
            ]
        if errors:
            raise RuntimeError(
                f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                + "\n\t".join(errors)
            )
        with no_grad():
            for name, value in values.items():
                param = own[name]
                param.copy_(value.to(param.device, backend=param.backend))
        return IncompatibleKeys(missing, unexpected)

    # ---------------------------------------------------------------------- modes
    def train(self, mode: bool = True) -> Module:
        """Set training mode (Dropout is active) on this module and every submodule."""
        for module in self.modules():
            module.training = mode
        return self

    def eval(self) -> Module:
        return self.train(False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for param in self.parameters():
            if set_to_none:
                param.grad = None
            elif param.grad is not None:
                with no_grad():
                    param.grad.zero_()

    def to(self, device: str | Device | None = None, *, backend: str | None = None) -> Module:
        """Move every parameter (and its grad) to a device and/or backend, in place.

        `to("jax")` names a backend. The parameters stay the same objects (their
        `data` is replaced), so an optimizer built before keeps holding them; its
        state stays where it was made, so build the optimizer after moving.
        """
        if isinstance(device, str) and device in BACKEND_NAMES:
            device, backend = None, device
        with no_grad():
            for param in self.parameters():
                grad = param.grad
                param.data = param.to(device, backend=backend)
                if grad is not None:
                    param.grad = grad.to(device, backend=backend)
        return self

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [
            f"({name}): {child!r}".replace("\n", "\n  ") for name, child in self.named_children()
        ]
        if not lines:
            return f"{type(self).__name__}({self.extra_repr()})"
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"


def _as_tensor(value: Any) -> Tensor:
    return value if isinstance(value, Tensor) else tensor(value)


# ----------------------------------------------------------------------- pytree
# The names of a Module's frozen parameters, kept where its leaves are not Tensors.
_FROZEN = "_frozen"
_NOT_STATIC = ("_registered", _FROZEN)


def _static(module: Module) -> tuple:
    """The instance data that is not a child: the pytree's auxiliary data (Note above)."""
    registered = module.__dict__["_registered"]
    return tuple(
        (name, value) for name, value in module.__dict__.items()
        if name not in registered and name not in _NOT_STATIC
    )


def _frozen(module: Module, registered: list) -> tuple[str, ...]:
    """The parameters that do not require grad (Note [A frozen parameter stays frozen as a
    pytree]): a Tensor says so itself; an array leaf, the structure it was rebuilt from."""
    known = module.__dict__.get(_FROZEN, ())

    def frozen(name: str) -> bool:
        value = module.__dict__[name]
        return not value.requires_grad if isinstance(value, Tensor) else name in known

    return tuple(name for name, kind in registered if kind == _PARAMETER and frozen(name))


def _flatten(module: Module) -> tuple[list, tuple]:
    # Own parameters before submodules, as parameters() orders them.
    registered = sorted(
        module.__dict__["_registered"].items(), key=lambda item: item[1] != _PARAMETER
    )
    children = [module.__dict__[name] for name, _ in registered]
    return children, (tuple(registered), _frozen(module, registered), _static(module))


def _flatten_with_keys(module: Module) -> tuple[list, tuple]:
    children, aux = _flatten(module)
    keys = [jax.tree_util.GetAttrKey(name) for name, _ in aux[0]]
    return list(zip(keys, children, strict=True)), aux


def _unflattener(cls: type[Module]):
    def unflatten(aux: tuple, children: Any) -> Module:
        registered, frozen, static = aux
        module = object.__new__(cls)
        module.__dict__.update(static)
        module.__dict__["_registered"] = dict(registered)
        module.__dict__[_FROZEN] = frozen
        for (name, _), child in zip(registered, children, strict=True):
            module.__dict__[name] = _detached(child) if name in frozen else child
        return module

    return unflatten


def _detached(child: Any) -> Any:
    """A frozen slot's leaf: never a Tensor that requires grad."""
    return child.detach() if isinstance(child, Tensor) and child.requires_grad else child


def _register_pytree(cls: type[Module]) -> None:
    jax.tree_util.register_pytree_with_keys(
        cls, _flatten_with_keys, _unflattener(cls), flatten_func=_flatten
    )


_register_pytree(Module)
