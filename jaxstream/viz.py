"""Pictures of the autograd graph: `draw_graph(tensor, path)` writes DOT, SVG or PNG.

The graph is walked from the tensor's `grad_fn` along `next_functions`
without recursion (graphs can be 100k nodes deep) and drawing stops at
`max_nodes`, saying so in the picture. DOT is written by this module itself;
SVG and PNG need Graphviz's `dot` program, or the port of its command line that
the `viz` extra installs (`graphviz-pure`). Without either, the DOT file is
written next to the requested path and one line says so, so that a run of the
experiments never needs anything installed beyond Python packages.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from collections import deque
from pathlib import Path

from .autograd.node import ACCUMULATE_GRAD_SEQUENCE_NR, AccumulateGrad, Node
from .tensor import Tensor

__all__ = ["draw_graph", "to_dot"]

RENDERED_FORMATS = ("svg", "png")
DOT_PROGRAMS = ("dot", "graphviz-pure")
"""Graphviz's own, then the port of its command line from PyPI (the `viz` extra)."""
DOT_TIMEOUT_S = 120.0

_OUTPUT_ID = "output"
_TRUNCATED_ID = "truncated"


class _Walk:
    """A breadth-first walk of the backward graph that draws at most `max_nodes` nodes."""

    def __init__(self, start: Node, max_nodes: int) -> None:
        self.max_nodes = max_nodes
        self.node_ids: dict[Node, str] = {start: "n0"}
        self.order: list[Node] = [start]
        self.edges: list[tuple[str, str, str]] = []
        self.truncated_sources: set[str] = set()
        self.undrawn: set[Node] = set()
        queue: deque[Node] = deque([start])
        while queue:
            fn = queue.popleft()
            for next_fn, input_nr in fn.next_edges:
                if next_fn is not None:
                    self._visit(fn, next_fn, input_nr, queue)

    def _visit(self, fn: Node, next_fn: Node, input_nr: int, queue: deque[Node]) -> None:
        node_ids = self.node_ids
        if next_fn not in node_ids and next_fn not in self.undrawn:
            if len(self.order) < self.max_nodes:
                node_ids[next_fn] = f"n{len(self.order)}"
                self.order.append(next_fn)
            else:
                self.undrawn.add(next_fn)
            queue.append(next_fn)
        if fn not in node_ids:
            return  # walked only to count what was left out
        target = node_ids.get(next_fn)
        if target is None:
            self.truncated_sources.add(node_ids[fn])
            return
        label = str(input_nr) if len(next_fn.input_metadata) > 1 else ""
        self.edges.append((node_ids[fn], target, label))

    def truncation_lines(self) -> tuple[str, list[str]]:
        """The note on what was left out, and the DOT lines that show it."""
        total = len(self.order) + len(self.undrawn)
        note = (f"graph truncated: {len(self.order)} of {total} nodes drawn "
                f"(max_nodes={self.max_nodes}); {len(self.undrawn)} not drawn")
        lines = [f'  {_TRUNCATED_ID} [label="{_escape(note)}", shape=note, '
                 'style=dashed, fillcolor=white];']
        lines.extend(
            f"  {source} -> {_TRUNCATED_ID} [style=dashed];"
            for source in sorted(self.truncated_sources, key=lambda node_id: int(node_id[1:]))
        )
        return note, lines


def to_dot(root: Tensor | Node, *, max_nodes: int = 1000) -> str:
    """The backward graph of `root` (a tensor, or a node) in Graphviz's DOT language.

    Edges point the way gradients flow, from a node to the nodes of its inputs;
    an edge into a node with several inputs is labeled with the input's number.
    """
    if not isinstance(max_nodes, int) or max_nodes < 1:
        raise ValueError(f"max_nodes must be a positive int, got {max_nodes!r}")
    start, output = _start_node(root)
    walk = _Walk(start, max_nodes)
    lines = [
        "digraph autograd {",
        '  graph [rankdir=TB, fontname="Helvetica"];',
        '  node [shape=box, style="rounded,filled", fillcolor="#dde7f3", '
        'fontname="Helvetica", fontsize=10];',
    ]
    if output is not None:
        lines.append(f'  {_OUTPUT_ID} [label="{_escape(_tensor_label("output", output))}", '
                     'shape=ellipse, fillcolor="#c8e6c9"];')
        lines.append(f"  {_OUTPUT_ID} -> n0;")
    for fn in walk.order:
        fill = ', fillcolor="#fff3c4"' if isinstance(fn, AccumulateGrad) else ""
        lines.append(f'  {walk.node_ids[fn]} [label="{_escape(_node_label(fn))}"{fill}];')
    for source, target, label in walk.edges:
        attributes = f' [label="{label}"]' if label else ""
        lines.append(f"  {source} -> {target}{attributes};")
    if walk.undrawn:
        note, truncation = walk.truncation_lines()
        lines.extend(truncation)
        lines.insert(1, f"  // {note}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def draw_graph(root: Tensor | Node, path: str | os.PathLike[str], *,
               max_nodes: int = 1000) -> Path:
    """Draw the backward graph of `root` to `path` (.dot, .svg or .png); returns the path written.

    For .svg and .png without Graphviz installed, writes the DOT file beside
    `path` (same name, .dot) and prints one line saying so.
    """
    target = Path(path)
    fmt = target.suffix.lower().lstrip(".")
    if fmt not in ("dot", "gv", *RENDERED_FORMATS):
        raise ValueError(
            f"draw_graph writes .dot, .svg or .png files; got {target.name!r}"
        )
    source = to_dot(root, max_nodes=max_nodes)
    if fmt in ("dot", "gv"):
        target.write_text(source, encoding="utf-8")
        return target
    dot = _dot_program()
    if dot is None:
        fallback = target.with_suffix(".dot")
        fallback.write_text(source, encoding="utf-8")
        print(f"Graphviz is not installed (no `dot` program): wrote {fallback} instead of "
              f"{target.name}", file=sys.stderr)
        return fallback
    completed = subprocess.run(
        [dot, f"-T{fmt}", "-o", str(target)],
        input=source.encode("utf-8"),
        capture_output=True,
        timeout=DOT_TIMEOUT_S,
        check=False,
    )
    if completed.returncode != 0:
        message = completed.stderr.decode("utf-8", "replace").strip()
        raise RuntimeError(f"Graphviz `dot -T{fmt}` failed (exit {completed.returncode}): "
                           f"{message}")
    return target


def _dot_program() -> str | None:
    """The first of `DOT_PROGRAMS` on PATH or among this environment's scripts (a virtual
    environment's, which is not on PATH unless activated)."""
    search = os.pathsep.join([os.environ.get("PATH", ""), sysconfig.get_path("scripts")])
    for name in DOT_PROGRAMS:
        found = shutil.which(name, path=search)
        if found is not None:
            return found
    return None


def _start_node(root: Tensor | Node) -> tuple[Node, Tensor | None]:
    if isinstance(root, Node):
        return root, None
    if not isinstance(root, Tensor):
        raise TypeError(f"draw_graph expects a Tensor or an autograd Node, got "
                        f"{type(root).__name__}")
    if root.grad_fn is not None:
        return root.grad_fn, root
    if root.requires_grad:
        return root.grad_accumulator(), root
    raise ValueError(
        "the tensor does not require grad, so it has no autograd graph to draw "
        "(create it with requires_grad=True, or compute it from tensors that require grad)"
    )


def _node_label(fn: Node) -> str:
    sequence = "max" if fn.sequence_nr == ACCUMULATE_GRAD_SEQUENCE_NR else str(fn.sequence_nr)
    label = f"{fn.name()}\nseq {sequence}"
    if isinstance(fn, AccumulateGrad):
        label += "\n" + _shape_text(fn.variable)
    return label


def _tensor_label(title: str, tensor: Tensor) -> str:
    return f"{title}\n{_shape_text(tensor)}"


def _shape_text(tensor: Tensor) -> str:
    return f"{tuple(tensor.shape)} {tensor.dtype}"


def _escape(text: str) -> str:
    """A DOT double-quoted string body: quotes and backslashes escaped, newlines as \\n."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
