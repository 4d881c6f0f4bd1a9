"""Drawing the autograd graph: the DOT text, the Graphviz call and the fallback without it."""

from __future__ import annotations

import os
import re
import stat
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxstream as js
from jaxstream import viz

NODE_LINE = re.compile(r'^  (n\d+) \[label="([^"]*)"')
EDGE_LINE = re.compile(r"^  (n\d+) -> (n\d+)(?: \[label=\"(\d+)\"\])?;$")


def leaf(shape, requires_grad=True):
    return js.tensor(np.ones(shape, dtype=np.float32), requires_grad=requires_grad)


def parse(dot: str) -> tuple[dict[str, str], list[tuple[str, str, str | None]]]:
    """Node labels by id (with real newlines) and (source, target, label) edges."""
    labels, edges = {}, []
    for line in dot.splitlines():
        if match := NODE_LINE.match(line):
            labels[match[1]] = match[2].replace("\\n", "\n")
        elif match := EDGE_LINE.match(line):
            edges.append((match[1], match[2], match[3]))
    return labels, edges


def by_label_start(labels: dict[str, str], prefix: str) -> list[str]:
    return [node for node, label in labels.items() if label.startswith(prefix)]


def test_dot_has_a_node_per_backward_function_and_an_edge_per_gradient_path():
    x, w = leaf((3, 2)), leaf((2,))
    y = (x * w).tanh().sum()
    dot = viz.to_dot(y)
    labels, edges = parse(dot)

    assert dot.startswith("digraph autograd {") and dot.rstrip().endswith("}")
    assert sorted(label.split("\n")[0] for label in labels.values()) == [
        "AccumulateGrad", "AccumulateGrad", "MulBackward0", "SumBackward0", "TanhBackward0"
    ]
    assert labels["n0"] == f"SumBackward0\nseq {y.grad_fn.sequence_nr}"
    shapes = sorted(labels[n].split("\n")[2] for n in by_label_start(labels, "AccumulateGrad"))
    assert shapes == ["(2,) float32", "(3, 2) float32"]
    assert all(labels[n].split("\n")[1] == "seq max" for n in by_label_start(labels, "Accum"))
    (mul,) = by_label_start(labels, "MulBackward0")
    (tanh,) = by_label_start(labels, "TanhBackward0")
    assert ("n0", tanh, None) in edges and (tanh, mul, None) in edges
    assert sorted(target for source, target, _ in edges if source == mul) == sorted(
        by_label_start(labels, "AccumulateGrad")
    )
    assert len(edges) == 4
    assert 'output [label="output\\n() float32"' in dot and "output -> n0;" in dot


def test_a_node_reached_twice_is_drawn_once_with_both_edges():
    x = leaf((2,))
    y = x * 2.0
    loss = (y.sin() + y.cos()).sum()
    labels, edges = parse(viz.to_dot(loss))
    (mul,) = by_label_start(labels, "MulBackward0")
    assert sum(1 for _, target, _ in edges if target == mul) == 2
    assert len(by_label_start(labels, "AccumulateGrad")) == 1


def test_edges_into_a_node_with_several_outputs_name_the_output():
    class Split(js.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1.0, a * 2.0

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 + g2 * 2.0

    first, second = Split.apply(leaf((2,)))
    labels, edges = parse(viz.to_dot((first.exp() + second.sin()).sum()))
    (split,) = by_label_start(labels, "SplitBackward")
    assert sorted(label for _, target, label in edges if target == split) == ["0", "1"]


def test_a_graph_deeper_than_the_recursion_limit_is_drawn_up_to_max_nodes():
    length = sys.getrecursionlimit() * 3
    x = leaf((1,))
    y = x
    for _ in range(length):
        y = y * 1.0
    dot = viz.to_dot(y, max_nodes=50)
    labels, edges = parse(dot)
    total = length + 1  # the multiplications and the leaf's AccumulateGrad
    assert len(labels) == 50 and len(edges) == 49
    note = f"graph truncated: 50 of {total} nodes drawn (max_nodes=50); {total - 50} not drawn"
    assert f"  // {note}" in dot.splitlines()
    assert "n49 -> truncated [style=dashed];" in dot
    assert f'truncated [label="{note}"' in dot


def test_a_leaf_is_drawn_as_its_gradient_accumulator():
    labels, edges = parse(viz.to_dot(leaf((4, 5))))
    assert labels == {"n0": "AccumulateGrad\nseq max\n(4, 5) float32"} and edges == []


def test_a_node_can_be_drawn_directly():
    y = leaf((2,)).exp()
    labels, _ = parse(viz.to_dot(y.grad_fn))
    assert labels["n0"].startswith("ExpBackward0")


def test_labels_are_escaped_for_dot():
    assert viz._escape('a "b" \\ c\nd') == 'a \\"b\\" \\\\ c\\nd'


@pytest.mark.parametrize(
    ("root", "error", "match"),
    [
        (lambda: leaf((2,), requires_grad=False), ValueError, "does not require grad"),
        (lambda: np.ones(2), TypeError, "expects a Tensor"),
    ],
)
def test_what_has_no_graph_is_refused(root, error, match):
    with pytest.raises(error, match=match):
        viz.to_dot(root())


def test_max_nodes_must_be_positive():
    with pytest.raises(ValueError, match="max_nodes"):
        viz.to_dot(leaf((2,)).exp(), max_nodes=0)


def test_draw_graph_writes_dot_and_returns_the_path(tmp_path: Path):
    y = (leaf((2,)) * 3.0).sum()
    path = js.viz.draw_graph(y, tmp_path / "graph.dot")
    assert path == tmp_path / "graph.dot"
    assert path.read_text(encoding="utf-8") == viz.to_dot(y)


def test_draw_graph_refuses_an_unknown_format(tmp_path: Path):
    with pytest.raises(ValueError, match=r"\.dot, \.svg or \.png"):
        viz.draw_graph(leaf((2,)).exp(), tmp_path / "graph.pdf")


@pytest.mark.parametrize("suffix", [".svg", ".png"])
def test_without_graphviz_draw_graph_writes_dot_beside_and_says_so(
    tmp_path: Path, monkeypatch, capsys, suffix
):
    monkeypatch.setattr(viz.shutil, "which", lambda name, path=None: None)
    y = leaf((2,)).exp()
    path = viz.draw_graph(y, tmp_path / f"graph{suffix}")
    assert path == tmp_path / "graph.dot"
    assert path.read_text(encoding="utf-8") == viz.to_dot(y)
    assert not (tmp_path / f"graph{suffix}").exists()
    message = capsys.readouterr().err.strip().splitlines()
    assert len(message) == 1 and "Graphviz is not installed" in message[0]
    assert str(path) in message[0]


def fake_dot(tmp_path: Path, monkeypatch, exit_code: int) -> Path:
    """Puts first on PATH a stand-in `dot` that copies its input to the -o file and records
    its arguments; returns the folder it is in."""
    directory = tmp_path / "bin"
    directory.mkdir()
    monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ.get('PATH', '')}")
    script = directory / "dot"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" > "{directory}/arguments"\n'
        'while [ "$1" != "-o" ]; do shift; done\n'
        'cat > "$2"\n'
        'echo "fake dot says no" >&2\n'
        f"exit {exit_code}\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return directory


@pytest.mark.skipif(sys.platform == "win32", reason="the stand-in `dot` is a shell script")
def test_with_graphviz_draw_graph_runs_dot_for_the_format(tmp_path: Path, monkeypatch):
    bin_dir = fake_dot(tmp_path, monkeypatch, exit_code=0)
    y = leaf((2,)).exp()
    path = viz.draw_graph(y, tmp_path / "graph.png")
    assert path == tmp_path / "graph.png"
    assert path.read_text(encoding="utf-8") == viz.to_dot(y)
    assert (bin_dir / "arguments").read_text().split() == ["-Tpng", "-o", str(path)]


@pytest.mark.skipif(sys.platform == "win32", reason="the stand-in `dot` is a shell script")
def test_a_failing_dot_is_reported_with_its_message(tmp_path: Path, monkeypatch):
    fake_dot(tmp_path, monkeypatch, exit_code=3)
    with pytest.raises(RuntimeError, match=r"(?s)exit 3\).*fake dot says no"):
        viz.draw_graph(leaf((2,)).exp(), tmp_path / "graph.svg")


@pytest.mark.parametrize("suffix", [".svg", ".png"])
def test_a_real_dot_renders_the_format(tmp_path: Path, suffix):
    """Graphviz, or the port of its command line that `make test` installs (the viz extra)."""
    path = viz.draw_graph((leaf((2,)) * 2.0).sum(), tmp_path / f"graph{suffix}")
    assert path.suffix == suffix
    written = path.read_bytes()
    assert b"<svg" in written if suffix == ".svg" else written.startswith(b"\x89PNG")
