"""Parameter groups: PyTorch's checks on them, and one optax transformation over all of them.

Note [One transformation over the parameter groups]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Each group has its own transformation (built from its hyperparameters, or the
one given to `Optimizer`). With one group, that transformation is the
optimizer's and its state is the optimizer's state, as it always was. With
several, `optax.partition` labels every parameter with its group's index and
runs each group's transformation on its own parameters (the others masked out),
so the update is still one optax call over all parameters: one jitted program,
and the packed exchange of small host parameters still applies. Its state holds
one state per group, at `state.inner_states[i].inner_state`.

A group's state has the same leaves, in the same order, whether it is the whole
state (one group) or masked within a partition (the masked-out parameters are
`MaskedNode`s, which hold no leaves). So `add_param_group` keeps the states of
the groups already there by moving their leaves into the new partition's
state; only the new group's state starts fresh.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import jax
import optax

from ..compiling.traced_entries import TracedEntries
from ..tensor import Tensor


def as_groups(params: Any) -> list[dict]:
    """The groups that `params` (tensors, or dicts with a "params" entry) describes."""
    if isinstance(params, Tensor) or not isinstance(params, Iterable) or isinstance(params, dict):
        raise TypeError(
            "params argument given to the optimizer should be an iterable of Tensors or dicts, "
            f"but got {type(params).__name__}; pass e.g. model.parameters(), [w, b] or "
            '[{"params": [w]}, {"params": [b], "lr": 1e-3}]'
        )
    items = list(params)
    if not items:
        raise ValueError("optimizer got an empty parameter list")
    if not isinstance(items[0], dict):
        return [{"params": items}]
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise TypeError(
                f"param_group must be a dict, but entry {i} of the parameter groups is a "
                f"{type(item).__name__}; give either tensors or dicts, not both"
            )
    return items


def checked_group(group: Any, defaults: dict[str, Any], others: list[dict],
                  traced: tuple[str, ...]) -> TracedEntries:
    """`group` with its parameters as a checked list and its missing options from
    `defaults` (in place, as PyTorch's `add_param_group` does), as the `TracedEntries`
    dict that the optimizer keeps, its hyperparameters `traced` (Note [Hyperparameters
    under js.compile] in hyperparams.py)."""
    if not isinstance(group, dict):
        raise TypeError(f"param_group must be a dict, but got {type(group).__name__}")
    if "params" not in group:
        raise ValueError(
            f"parameter group {len(others)} has no 'params' entry (it has {sorted(group)}); "
            'give the tensors as {"params": [...], ...}'
        )
    params = group["params"]
    if isinstance(params, set):
        raise TypeError(
            "optimizer parameters need to be organized in ordered collections, but the "
            "ordering of tensors in sets will change between runs. Please use a list instead."
        )
    group["params"] = params = [params] if isinstance(params, Tensor) else list(params)
    for i, p in enumerate(params):
        _check_param(p, len(others), i)
    if len({id(p) for p in params}) != len(params):
        raise ValueError(
            f"some parameters appear more than once in the parameter list of group {len(others)}"
        )
    taken = {id(p) for other in others for p in other["params"]}
    if any(id(p) in taken for p in params):
        raise ValueError(
            f"some parameters appear in more than one parameter group (group {len(others)} "
            "repeats parameters of an earlier group); give each parameter to one group"
        )
    for name, default in defaults.items():
        group.setdefault(name, default)
    return TracedEntries(group, traced)


def _check_param(p: Any, group: int, i: int) -> None:
    where = f"parameter {i}" if group == 0 else f"parameter {i} of group {group}"
    if not isinstance(p, Tensor):
        raise TypeError(
            f"optimizer can only optimize Tensors, but {where} is a {type(p).__name__}"
        )
    if not p.is_leaf:
        raise ValueError(
            f"can't optimize a non-leaf Tensor ({where}, shape {p.shape}, made by "
            f"{p.grad_fn.name()}); optimize the leaf it was computed from, or detach() it"
        )
    if not p.requires_grad:
        raise ValueError(
            f"{where} (shape {p.shape}, dtype {p.dtype}) does not require grad, so it "
            "never gets a gradient; call requires_grad_() on it or leave it out"
        )


def over_groups(transforms: list[optax.GradientTransformation],
                sizes: list[int]) -> optax.GradientTransformation:
    """One transformation applying `transforms[i]` to the `sizes[i]` parameters of group i
    (Note [One transformation over the parameter groups])."""
    if len(transforms) == 1:
        return transforms[0]
    labels = [i for i, size in enumerate(sizes) for _ in range(size)]
    return optax.partition(dict(enumerate(transforms)), labels)


def group_states(state: Any, count: int) -> list:
    """The state of each of `count` groups within the optimizer's `state`."""
    if count == 1:
        return [state]
    return [state.inner_states[i].inner_state for i in range(count)]


def with_group_leaves(fresh: Any, count: int, kept: list[list]) -> Any:
    """`fresh` (the state of `count` groups) with the state of group i made of `kept[i]`,
    the leaves it had before, for each group in `kept`."""
    states = group_states(fresh, count)
    for i, leaves in enumerate(kept):
        structure = jax.tree.structure(states[i])
        if structure.num_leaves != len(leaves):
            raise ValueError(
                f"parameter group {i}: its state has {len(leaves)} arrays, but its "
                f"transformation now needs {structure.num_leaves} ({structure}); an option "
                "that changes the state's layout cannot change after the group's first "
                "state: build a new optimizer"
            )
        states[i] = structure.unflatten(leaves)
    if count == 1:
        return states[0]
    inner = fresh.inner_states
    return fresh._replace(
        inner_states={i: inner[i]._replace(inner_state=s) for i, s in enumerate(states)}
    )


def numbered_groups(groups: list[dict]) -> list[dict]:
    """The groups as PyTorch's `state_dict` writes them: each parameter by its position."""
    numbered, start = [], 0
    for group in groups:
        size = len(group["params"])
        numbered.append({**{k: v for k, v in group.items() if k != "params"},
                         "params": list(range(start, start + size))})
        start += size
    return numbered


def check_group_count(saved: list[dict], groups: list[dict]) -> None:
    """PyTorch's check that a saved state dict has as many groups as the optimizer."""
    if len(saved) != len(groups):
        raise ValueError(
            f"loaded state dict has {len(saved)} parameter groups, but this optimizer has "
            f"{len(groups)}; load the state of an optimizer over the same groups"
        )
