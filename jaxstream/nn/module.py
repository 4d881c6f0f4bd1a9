"""`Module`: parameters, buffers and submodules registered by assignment, as in PyTorch.

How a Module is a JAX pytree: Note [A Module is a pytree of its parameters] in
module_pytree.py. Its hooks: Note [Module hooks] in module_hooks.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from ..autograd.grad_mode import no_grad
from ..autograd.node import RemovableHandle
from ..backends import BACKEND_NAMES
from ..devices import Device
from ..tensor import Tensor, tensor
from .module_hooks import HOOKS_ATTRIBUTE, HookRecord, ModuleHooks, call_with_hooks
from .module_pytree import (
    BUFFER,
    BUFFER_KINDS,
    MODULE,
    NON_PERSISTENT_BUFFER,
    PARAMETER,
    TENSOR,
    register_pytree,
)
from .parameter import Parameter, mark_parameter

_EXPECTED = {PARAMETER: "js.nn.Parameter", MODULE: "js.nn.Module"}


class IncompatibleKeys(NamedTuple):
    """What `load_state_dict(..., strict=False)` could not match."""

    missing_keys: list[str]
    unexpected_keys: list[str]


def _is_parameter(value: Any) -> bool:
    """A Parameter, or a leaf Tensor that requires grad: what assignment registers."""
    return isinstance(value, Parameter) or (
        isinstance(value, Tensor) and value.requires_grad and value.is_leaf
    )


def _assigned_kind(owner: str, name: str, kind: str | None, value: Any) -> str | None:
    """What `owner.name = value` registers `name` as, given what it was (None: nothing)."""
    if isinstance(value, Module):
        return MODULE
    if isinstance(value, Parameter) or (kind not in BUFFER_KINDS and _is_parameter(value)):
        return PARAMETER
    if kind in (PARAMETER, MODULE, *BUFFER_KINDS):
        if value is None or (kind in BUFFER_KINDS and isinstance(value, Tensor)):
            return kind
        raise TypeError(
            f"cannot assign {type(value).__name__} as {kind} {name!r} of {owner} "
            f"({_EXPECTED.get(kind, 'js.Tensor')} or None expected)"
        )
    return TENSOR if isinstance(value, Tensor) else None


def check_member_name(what: str, name: Any) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{what} name should be a string. Got {type(name).__name__}")
    if "." in name:
        raise KeyError(f"{what} name can't contain \".\", got: {name}")
    if name == "":
        raise KeyError(f"{what} name can't be empty string \"\"")


def _joined(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


class Module:
    """Base class of layers and models: subclasses set attributes in `__init__` and define
    `forward`; calling the module calls `forward`, with its hooks (Note [Module hooks]).
    """

    training: bool

    def __init__(self) -> None:
        # name -> kind (module_pytree.py), in assignment order (see __setattr__).
        object.__setattr__(self, "_registered", {})
        object.__setattr__(self, "training", True)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        register_pytree(cls)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"Module [{type(self).__name__}] is missing the required \"forward\" function"
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        hooks = self.__dict__.get(HOOKS_ATTRIBUTE)
        if hooks is None:
            return self.forward(*args, **kwargs)
        return call_with_hooks(self, hooks, args, kwargs)

    def __setstate__(self, state: dict) -> None:
        """A copy or an unpickling: its registered parameters are Parameters again (Note
        [Parameter is not a Tensor subclass] in parameter.py)."""
        self.__dict__.update(state)
        for name, kind in state.get("_registered", {}).items():
            if kind == PARAMETER and state.get(name) is not None:
                mark_parameter(state[name])

    # --------------------------------------------------------------- registration
    def _registered_table(self, what: str) -> dict[str, str]:
        registered = self.__dict__.get("_registered")
        if registered is None:
            raise AttributeError(
                f"cannot assign {what} before Module.__init__() call: call "
                f"super().__init__() first in {type(self).__name__}.__init__"
            )
        return registered

    def __setattr__(self, name: str, value: Any) -> None:
        registered = self._registered_table(repr(name))
        kind = _assigned_kind(type(self).__name__, name, registered.get(name), value)
        if kind is None:
            registered.pop(name, None)
        else:
            registered[name] = kind
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        self.__dict__["_registered"].pop(name, None)
        object.__delattr__(self, name)

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Register state that is not a parameter: moved by `to()`, a leaf of the pytree, and
        in `state_dict()` unless `persistent=False`. Later assignments keep it a buffer."""
        registered = self._registered_table("buffer")
        check_member_name("buffer", name)
        if hasattr(self, name) and registered.get(name) not in BUFFER_KINDS:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                f"(js.Tensor or None required)"
            )
        registered[name] = BUFFER if persistent else NON_PERSISTENT_BUFFER
        object.__setattr__(self, name, tensor)

    def add_module(self, name: str, module: Module | None) -> None:
        """Register `module` as submodule `name` (a name that is not a Python identifier too)."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        registered = self._registered_table("module")
        check_member_name("module", name)
        if hasattr(self, name) and registered.get(name) != MODULE:
            raise KeyError(f"attribute '{name}' already exists")
        registered[name] = MODULE
        object.__setattr__(self, name, module)

    register_module = add_module

    # ------------------------------------------------------------------ traversal
    def _members(self, *kinds: str) -> Iterator[tuple[str, Any]]:
        """(name, value) of the registered members of `kinds` that are not None."""
        for name, kind in self.__dict__["_registered"].items():
            value = self.__dict__[name]
            if kind in kinds and value is not None:
                yield name, value

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """Each distinct direct submodule with its name."""
        seen: set[int] = set()
        for name, module in self._members(MODULE):
            if id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self) -> Iterator[Module]:
        return (module for _, module in self.named_children())

    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """This module and every submodule, depth first, with dotted names; a module reached
        twice is given once unless `remove_duplicate=False`."""
        memo = set() if memo is None else memo
        if remove_duplicate:
            if self in memo:
                return
            memo.add(self)
        yield prefix, self
        for name, child in self._members(MODULE):
            yield from child.named_modules(memo, _joined(prefix, name), remove_duplicate)

    def modules(self) -> Iterator[Module]:
        return (module for _, module in self.named_modules())

    def _named_members(self, kinds: tuple[str, ...], prefix: str, recurse: bool,
                       remove_duplicate: bool) -> Iterator[tuple[str, Tensor]]:
        modules = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                   if recurse else [(prefix, self)])
        seen: set[int] = set()
        for module_prefix, module in modules:
            for name, value in module._members(*kinds):
                if remove_duplicate and id(value) in seen:
                    continue
                seen.add(id(value))
                yield _joined(module_prefix, name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """Each parameter with its dotted name, own parameters before those of submodules."""
        return self._named_members((PARAMETER,), prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Tensor]:
        return (param for _, param in self.named_parameters(recurse=recurse))

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """Each buffer (persistent or not) with its dotted name, in the order of parameters."""
        return self._named_members(BUFFER_KINDS, prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        return (buffer for _, buffer in self.named_buffers(recurse=recurse))

    def get_submodule(self, target: str) -> Module:
        """The submodule at dotted path `target` ("" is this module)."""
        module = self
        for item in target.split(".") if target else ():
            if not hasattr(module, item):
                raise AttributeError(f"{type(module).__name__} has no attribute `{item}`")
            module = getattr(module, item)
            if not isinstance(module, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return module

    # ----------------------------------------------------------------- state dict
    def _state_items(self) -> Iterator[tuple[str, Tensor]]:
        """The state_dict's entries in PyTorch's order: per module (shared ones under each
        name), its parameters then its persistent buffers."""
        for prefix, module in self.named_modules(remove_duplicate=False):
            for kind in (PARAMETER, BUFFER):
                for name, value in module._members(kind):
                    yield _joined(prefix, name), value

    def state_dict(self) -> dict[str, Tensor]:
        """Name -> parameter or persistent buffer, detached (sharing memory and version)."""
        return {name: value.detach() for name, value in self._state_items()}

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> IncompatibleKeys:
        """Copy values into the existing parameters and buffers, with PyTorch's `strict` rules.

        Nothing is loaded when an error is raised. The tensors keep their identity,
        so optimizers and other holders see the loaded values.
        """
        own = dict(self._state_items())
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
                target = own[name]
                target.copy_(value.to(target.device, backend=target.backend))
        return IncompatibleKeys(missing, unexpected)

    # ---------------------------------------------------------------------- modes
    def train(self, mode: bool = True) -> Module:
        """Set training mode (Dropout is active) on this module and every submodule."""
        for module in self.modules():
            module.training = mode
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Set `requires_grad` of every parameter (freeze or unfreeze the module)."""
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """Call `fn` on every submodule, children before their parent, then on this module."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for param in self.parameters():
            if set_to_none:
                param.grad = None
            elif param.grad is not None:
                with no_grad():
                    param.grad.zero_()

    def to(self, device: str | Device | None = None, *, backend: str | None = None) -> Module:
        """Move every parameter (and its grad) and every buffer to a device and/or backend.

        `to("jax")` names a backend. The parameters stay the same objects (their
        `data` is replaced), so an optimizer built before keeps holding them; its
        state stays where it was made, so build the optimizer after moving. A buffer
        is replaced by its moved copy, as in PyTorch; plain Tensor attributes stay.
        """
        if isinstance(device, str) and device in BACKEND_NAMES:
            device, backend = None, device
        with no_grad():
            for param in self.parameters():
                grad = param.grad
                param.data = param.to(device, backend=backend)
                if grad is not None:
                    param.grad = grad.to(device, backend=backend)
            for module in self.modules():
                for name, buffer in list(module._members(*BUFFER_KINDS)):
                    module.__dict__[name] = buffer.to(device, backend=backend)
        return self

    # ---------------------------------------------------------------------- hooks
    def _hook_tables(self) -> ModuleHooks:
        hooks = self.__dict__.get(HOOKS_ATTRIBUTE)
        if hooks is None:
            hooks = self.__dict__[HOOKS_ATTRIBUTE] = ModuleHooks()
        return hooks

    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """`hook(module, args)` (or `(module, args, kwargs)`) before forward; a non-None
        result replaces the args (or is `(args, kwargs)`)."""
        return self._hook_tables().add("forward_pre", HookRecord(hook, with_kwargs), prepend)

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False,
                              with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """`hook(module, args, output)` (or `(module, args, kwargs, output)`) after forward;
        a non-None result replaces the output. `always_call`: run even if forward raises."""
        record = HookRecord(hook, with_kwargs, always_call)
        return self._hook_tables().add("forward", record, prepend)

    def register_full_backward_pre_hook(self, hook: Callable,
                                        prepend: bool = False) -> RemovableHandle:
        """`hook(module, grad_output)` when the output's gradients are known; a non-None
        result replaces them (Note [Full backward hooks])."""
        return self._hook_tables().add("backward_pre", HookRecord(hook), prepend)

    def register_full_backward_hook(self, hook: Callable,
                                    prepend: bool = False) -> RemovableHandle:
        """`hook(module, grad_input, grad_output)` once the gradients of the positional
        inputs are known; a non-None result replaces grad_input (Note [Full backward hooks])."""
        return self._hook_tables().add("backward", HookRecord(hook), prepend)

    # ----------------------------------------------------------------------- repr
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        lines += [
            f"({name}): {child!r}".replace("\n", "\n  ") for name, child in self._members(MODULE)
        ]
        if not lines:
            return f"{type(self).__name__}()"
        if len(lines) == 1 and extra:
            return f"{type(self).__name__}({extra})"
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"


def _as_tensor(value: Any) -> Tensor:
    return value if isinstance(value, Tensor) else tensor(value)


register_pytree(Module)
