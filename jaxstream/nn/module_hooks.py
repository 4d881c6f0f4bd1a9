"""A Module's forward and backward hooks: where they are kept, and the call that runs them.

Note [Module hooks]
~~~~~~~~~~~~~~~~~~~
A Module keeps its hooks in one `ModuleHooks` (none until the first is
registered, so a module without hooks is called straight through to
`forward`). Each kind is an ordered table of handle id -> `HookRecord`; a
handle's `remove()` drops its id, and `prepend=True` puts the new record first.
A call with hooks runs, as PyTorch's `Module.__call__`: the forward pre-hooks
(each may return new positional args, or with `with_kwargs=True` new
`(args, kwargs)`), the wrapping of the inputs for the backward hooks (Note
[Full backward hooks] in module_backward_hooks.py), `forward`, the forward hooks
(each may return a new output), then the wrapping of the output. When anything
before the forward hooks raises, the forward hooks registered with
`always_call=True` still run (with output None; an error of theirs becomes a
warning) and the first error propagates.

As pytree structure (Note [A Module is a pytree of its parameters] in
module_pytree.py) the hooks are an immutable snapshot of the tables: a module
rebuilt from leaves gets tables of its own with the same hooks, so it behaves as
the original did, and removing a handle later changes only the original.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

from ..autograd.node import RemovableHandle, hook_name
from .module_backward_hooks import BackwardHooks

HOOKS_ATTRIBUTE = "_module_hooks"
_KINDS = ("forward_pre", "forward", "backward_pre", "backward")


class HookRecord(NamedTuple):
    """A registered hook and how to call it."""

    fn: Callable
    with_kwargs: bool = False
    always_call: bool = False


class ModuleHooks:
    """The hook tables of one Module, by kind, in call order (Note [Module hooks])."""

    __slots__ = _KINDS

    def __init__(self) -> None:
        for kind in _KINDS:
            setattr(self, kind, {})

    def add(self, kind: str, record: HookRecord, prepend: bool) -> RemovableHandle:
        table = getattr(self, kind)
        handle = RemovableHandle(table)
        if prepend:
            rest = list(table.items())
            table.clear()
            table[handle.id] = record
            table.update(rest)
        else:
            table[handle.id] = record
        return handle

    @property
    def wraps_backward(self) -> bool:
        """Whether a call must wrap inputs and outputs for full backward (pre-)hooks."""
        return bool(self.backward_pre or self.backward)

    def snapshot(self) -> tuple:
        """The tables as hashable data: the module's pytree structure holds this."""
        return tuple(tuple(getattr(self, kind).items()) for kind in _KINDS)

    @classmethod
    def restored(cls, snapshot: tuple) -> ModuleHooks:
        hooks = cls()
        for kind, items in zip(_KINDS, snapshot, strict=True):
            getattr(hooks, kind).update(items)
        return hooks


def call_with_hooks(module: Any, hooks: ModuleHooks, args: tuple, kwargs: dict) -> Any:
    """`module(*args, **kwargs)` with its hooks, in the order of Note [Module hooks]."""
    called: set[int] = set()
    output = None
    try:
        args, kwargs = _run_forward_pre_hooks(module, hooks, args, kwargs)
        backward = BackwardHooks(module, hooks) if hooks.wraps_backward else None
        if backward is not None:
            args = backward.wrap_inputs(args)
        output = module.forward(*args, **kwargs)
        for hook_id, record in list(hooks.forward.items()):
            if record.always_call:
                called.add(hook_id)
            output = _forward_hook_result(module, record, args, kwargs, output)
        return output if backward is None else backward.wrap_output(output)
    except Exception:
        _run_always_called_hooks(module, hooks, called, args, kwargs, output)
        raise


def _run_forward_pre_hooks(module: Any, hooks: ModuleHooks, args: tuple,
                           kwargs: dict) -> tuple[tuple, dict]:
    for record in list(hooks.forward_pre.values()):
        if record.with_kwargs:
            result = record.fn(module, args, kwargs)
            if result is None:
                continue
            if not (isinstance(result, tuple) and len(result) == 2):
                raise RuntimeError(
                    f"forward pre-hook '{hook_name(record.fn)}' of {type(module).__name__} must "
                    f"return None or a tuple of (new_args, new_kwargs), but got {result!r}."
                )
            args, kwargs = result
        else:
            result = record.fn(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    return args, kwargs


def _forward_hook_result(module: Any, record: HookRecord, args: tuple, kwargs: dict,
                         output: Any) -> Any:
    if record.with_kwargs:
        result = record.fn(module, args, kwargs, output)
    else:
        result = record.fn(module, args, output)
    return output if result is None else result


def _run_always_called_hooks(module: Any, hooks: ModuleHooks, called: set[int], args: tuple,
                             kwargs: dict, output: Any) -> None:
    """The `always_call` forward hooks not run yet, after an error: theirs only warn."""
    for hook_id, record in list(hooks.forward.items()):
        if not record.always_call or hook_id in called:
            continue
        try:
            output = _forward_hook_result(module, record, args, kwargs, output)
        except Exception as exc:
            warnings.warn(
                f"forward hook '{hook_name(record.fn)}' of {type(module).__name__} with "
                f"always_call=True raised an error that was silenced, as another error was "
                f"raised in the call: {exc}",
                stacklevel=3,
            )
