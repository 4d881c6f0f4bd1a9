"""Random autograd graphs as plain data: the op names and the op records.

A graph is a list of op records (``Rec``). Each record names an op, the ids of
the earlier records it reads and the op's keyword attributes, all plain Python
and NumPy values. The same graph can then be evaluated by any adapter of
``graph_evaluators.py``; ``graph_strategies.py`` draws random graphs.

These modules are a library for the differential tests, not test files.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

# --------------------------------------------------------------------------
# Op names
# --------------------------------------------------------------------------

BINARY = ("add", "sub", "mul", "div")
SCALAR = ("add_s", "sub_s", "mul_s", "div_s")
RSCALAR = ("rsub_s", "rdiv_s")
UNARY = ("neg", "exp", "log", "sin", "cos", "tanh", "sigmoid", "relu", "softplus", "sqrt", "abs")
ACTIVATIONS = ("square", "log1p", "expm1", "gelu", "silu", "leaky_relu")
PAIRWISE = ("maximum", "minimum")
REDUCTIONS = ("sum", "mean", "max", "min", "prod")
STATISTICS = ("var", "std", "vector_norm")
SHAPE_OPS = ("reshape", "transpose", "swapaxes", "T", "broadcast_to", "squeeze", "expand_dims",
             "flatten", "flip")
OTHER = ("pow", "matmul", "getitem", "where", "concatenate", "stack", "clip", "cumsum",
         "take_along_axis", "einsum")

ALL_OPS = (BINARY + SCALAR + RSCALAR + UNARY + ACTIVATIONS + PAIRWISE + REDUCTIONS + STATISTICS
           + SHAPE_OPS + OTHER)

# Ops whose autograd node structure is one-to-one with torch's: each record
# makes exactly one node, named as in torch, with the same input edges.
ONE_TO_ONE_OPS = BINARY + SCALAR + UNARY + ("pow", "sum", "mean", "matmul")

# --------------------------------------------------------------------------
# Plain-data graph
# --------------------------------------------------------------------------


@dataclasses.dataclass
class Rec:
    """One op record: ``op(*[value of r] for r in args, **attrs)``."""

    op: str
    args: tuple[int, ...] = ()
    attrs: dict[str, Any] = dataclasses.field(default_factory=dict)
    shape: tuple[int, ...] = ()
    requires_grad: bool = False


@dataclasses.dataclass
class Graph:
    recs: list[Rec]
    inputs: list[int]  # leaf record ids passed as ``inputs=``, in that order
    hooks: list[tuple[int, float]]  # (record id, c): a tensor hook ``g -> g * c``
    output: int  # record id of the scalar loss
    seed: int = 0

    @property
    def grad_leaves(self) -> list[int]:
        return [i for i, r in enumerate(self.recs) if r.op == "leaf" and r.requires_grad]

    @property
    def grad_nodes(self) -> list[int]:
        """Non-leaf records that require grad (they have a ``grad_fn``)."""
        return [
            i for i, r in enumerate(self.recs) if r.op not in ("leaf", "const") and r.requires_grad
        ]

    def _repr_pretty_(self, p, cycle) -> None:  # used by hypothesis' reports
        p.text(repr(self))

    def __repr__(self) -> str:
        lines = [f"Graph(seed={self.seed}):"]
        for i, r in enumerate(self.recs):
            if r.op in ("leaf", "const"):
                kind = "leaf" if r.op == "leaf" and r.requires_grad else "const"
                v = np.asarray(r.attrs["value"])
                lines.append(f"  t{i} = {kind}(shape={v.shape}, value={np.round(v, 3).tolist()})")
                continue
            args = ", ".join(f"t{a}" for a in r.args)
            attrs = ", ".join(f"{k}={_short(v)}" for k, v in r.attrs.items() if k != "fn" or v)
            sep = ", " if args and attrs else ""
            lines.append(f"  t{i} = {r.op}({args}{sep}{attrs})  # shape {r.shape}")
        lines.append(f"  output=t{self.output}")
        lines.append(f"  inputs={[f't{i}' for i in self.inputs]}")
        lines.append(f"  hooks={[(f't{i}', c) for i, c in self.hooks]}")
        return "\n".join(lines)


def _short(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return repr(v.tolist())
    return repr(v)
