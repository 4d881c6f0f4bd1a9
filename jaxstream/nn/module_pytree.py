"""A Module as a JAX pytree: its tensors are the leaves, everything else is structure.

Note [A Module is a pytree of its parameters]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Every Module subclass is registered with `jax.tree_util` when it is defined.
Its children are, in this order and each group in assignment order: its
registered parameters, its buffers (persistent or not), its plain Tensor
attributes, then its submodules. So the leaves of a model without buffers are
its parameter Tensors in the order of `parameters()`, with paths such as
`.layer.weight`, and a buffer's path is its name in `named_buffers()`
(`.norm.running_mean`). A plain Tensor attribute (neither a parameter nor a
registered buffer, as `self.mask = js.ones(3)`) is a leaf too, though, as in
PyTorch, it is in neither `buffers()` nor `state_dict()` and `to()` leaves it
where it is: were it structure, JAX would compare arrays to tell trees apart,
and `to_jax` could not give the traced function its value on JAX's device.
Everything else in the instance (`training`, `in_features`, `eps`, ...) is
static data of the tree structure: it should be hashable configuration, not
arrays. The module's hooks are structure too, as a snapshot (Note [Module
hooks] in module_hooks.py): a hook added later gives another structure.

Unflattening builds a new Module of the same class and configuration that
holds whatever leaves it is given: Tensors, JAX arrays or tracers, and hooks
of its own that are the hooks the original had when it was flattened. That is
what lets `js.to_jax(loss)(model, x)` work: `to_jax` maps the Tensor leaves to
JAX arrays and back to Tensors inside, and `jax.grad` of it returns a Module
whose leaves are the gradients. To feed `jax.grad` directly, map the model to
arrays first: `jax.tree.map(js.Tensor.jax, model)`.

Note [A frozen parameter stays frozen as a pytree]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A parameter that does not require grad (`Parameter(t, requires_grad=False)`)
is still a leaf, as it is in `parameters()`, but its name is in the tree
structure's data as frozen, and stays there when the leaves become JAX arrays.
The same holds for every tensor slot: a buffer or a plain Tensor attribute
that does not require grad (the usual case) is frozen. Rebuilding the Module
from leaves gives a frozen slot a leaf that does not require grad: a Tensor that
does is detached (which inside a trace also stops JAX's gradient). So under
`jax.grad(js.to_jax(loss))` a frozen parameter or a buffer gets a zero gradient
in both modes, as PyTorch's autograd gives it none, and an optax step leaves it
alone (weight decay aside: mask it with `optax.masked`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jax

from ..tensor import Tensor
from .module_hooks import HOOKS_ATTRIBUTE, ModuleHooks

if TYPE_CHECKING:
    from .module import Module

# What a name in a Module's `_registered` table is, in the order of the pytree's children.
PARAMETER = "parameter"
BUFFER = "buffer"
NON_PERSISTENT_BUFFER = "non-persistent buffer"
TENSOR = "tensor attribute"
MODULE = "module"
BUFFER_KINDS = (BUFFER, NON_PERSISTENT_BUFFER)
_CHILD_ORDER = {PARAMETER: 0, BUFFER: 1, NON_PERSISTENT_BUFFER: 1, TENSOR: 2, MODULE: 3}

# The names of a Module's frozen tensor slots, kept where its leaves are not Tensors.
_FROZEN = "_frozen"
_NOT_STATIC = ("_registered", _FROZEN, HOOKS_ATTRIBUTE)


def _static(module: Module) -> tuple:
    """The instance data that is not a child: the pytree's auxiliary data (Note above)."""
    registered = module.__dict__["_registered"]
    return tuple(
        (name, value) for name, value in module.__dict__.items()
        if name not in registered and name not in _NOT_STATIC
    )


def _frozen(module: Module, registered: list) -> tuple[str, ...]:
    """The tensor slots that do not require grad (Note [A frozen parameter stays frozen as a
    pytree]): a Tensor says so itself; an array leaf, the structure it was rebuilt from."""
    known = module.__dict__.get(_FROZEN, ())

    def frozen(name: str) -> bool:
        value = module.__dict__[name]
        return not value.requires_grad if isinstance(value, Tensor) else name in known

    return tuple(name for name, kind in registered if kind != MODULE and frozen(name))


def _flatten(module: Module) -> tuple[list, tuple]:
    registered = sorted(module.__dict__["_registered"].items(),
                        key=lambda item: _CHILD_ORDER[item[1]])
    children = [module.__dict__[name] for name, _ in registered]
    hooks = module.__dict__.get(HOOKS_ATTRIBUTE)
    snapshot = hooks.snapshot() if hooks is not None else None
    return children, (tuple(registered), _frozen(module, registered), _static(module), snapshot)


def _flatten_with_keys(module: Module) -> tuple[list, tuple]:
    children, aux = _flatten(module)
    keys = [jax.tree_util.GetAttrKey(name) for name, _ in aux[0]]
    return list(zip(keys, children, strict=True)), aux


def _unflattener(cls: type[Module]):
    def unflatten(aux: tuple, children: Any) -> Module:
        registered, frozen, static, hooks = aux
        module = object.__new__(cls)
        module.__dict__.update(static)
        module.__dict__["_registered"] = dict(registered)
        module.__dict__[_FROZEN] = frozen
        if hooks is not None:
            module.__dict__[HOOKS_ATTRIBUTE] = ModuleHooks.restored(hooks)
        for (name, _), child in zip(registered, children, strict=True):
            module.__dict__[name] = _detached(child) if name in frozen else child
        return module

    return unflatten


def _detached(child: Any) -> Any:
    """A frozen slot's leaf: never a Tensor that requires grad."""
    return child.detach() if isinstance(child, Tensor) and child.requires_grad else child


def register_pytree(cls: type[Module]) -> None:
    """Register `cls` with `jax.tree_util` (Note [A Module is a pytree of its parameters])."""
    jax.tree_util.register_pytree_with_keys(
        cls, _flatten_with_keys, _unflattener(cls), flatten_func=_flatten
    )
