"""The import layers of jaxstream (DESIGN.md "Layers"): imports run one way, top to bottom.

Each module of the package belongs to one layer; a module-level import may
name its own layer or a lower one, never a higher one, and no jaxstream module
is imported inside a function (except the optional CuPy backend). Run this
file alone with `-s` to print the graph of layers.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "jaxstream"

# Lowest first. A module's layer is that of the longest prefix listed here.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("backends", ("backends", "instrumentation", "devices", "dtypes")),
    ("devices", ("sanitizer", "device_events", "streams", "device_sync", "amp", "config",
                 "randomness")),
    ("tensor", ("autograd.grad_mode", "autograd.anomaly", "autograd.exec_state",
                "autograd.node", "aliasing", "construction", "conversions", "copying",
                "tensor", "transfer")),
    ("ops", ("ops", "precision")),
    ("engine", ("autograd.ready_queue", "autograd.graph_task", "autograd.input_buffer",
                "autograd.threads", "autograd.hooks", "autograd.hook_results",
                "autograd.validate", "autograd.routing", "autograd.engine")),
    ("api", ("autograd.api", "autograd.function", "autograd.checkpoint", "autograd.graph",
             "autograd")),
    ("entry points", ("compiling", "jax_interop", "profiler", "viz", "nn", "optim", "linalg",
                      "")),
)
# Imports of optional heavy dependencies that may stay inside functions.
LAZY_ALLOWED = {"backends.cupy"}


def _modules() -> dict[str, Path]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def layer_of(module: str) -> int:
    """The index in LAYERS of `module` (dotted, relative to the package; "" is the package)."""
    best, best_len = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = module == prefix or (prefix and module.startswith(prefix + "."))
            if matches and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    if best is None:
        raise AssertionError(f"jaxstream.{module} is in no layer: add it to LAYERS")
    return best


def _target(module: str, is_package: bool, node: ast.ImportFrom | ast.Import,
            name: str, known: dict[str, Path]) -> str | None:
    """The jaxstream module an import names (dotted, relative to the package), or None."""
    if isinstance(node, ast.Import):
        full = name
        if not full.startswith("jaxstream"):
            return None
        target = full.removeprefix("jaxstream").lstrip(".")
    else:
        if node.level:
            base = module.split(".") if module else []
            if not is_package:
                base = base[:-1]
            base = base[: len(base) - (node.level - 1)]
            origin = ".".join([*base, *([node.module] if node.module else [])])
        elif node.module and node.module.startswith("jaxstream"):
            origin = node.module.removeprefix("jaxstream").lstrip(".")
        else:
            return None
        candidate = f"{origin}.{name}".lstrip(".")
        target = candidate if candidate in known else origin
    return target


def _imports(module: str, path: Path, known: dict[str, Path]) -> list[tuple[str, int, bool]]:
    """(target, line, inside a function) for each import of a jaxstream module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    found = []

    def visit(node: ast.AST, in_function: bool, type_checking: bool) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child, in_function, type_checking)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                target = _target(module, is_package, node, alias.name, known)
                if target is not None:
                    found.append((target, node.lineno, in_function))
        inner = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for child in ast.iter_child_nodes(node):
            visit(child, inner, type_checking)

    visit(tree, False, False)
    return found


def _graph() -> dict[str, list[tuple[str, int, bool]]]:
    known = _modules()
    return {module: _imports(module, path, known) for module, path in known.items()}


def test_every_module_has_a_layer() -> None:
    for module in _modules():
        layer_of(module)


def test_imports_run_one_way_from_higher_layers_to_lower_ones() -> None:
    upward = [
        f"jaxstream.{module} ({LAYERS[layer_of(module)][0]}) imports jaxstream.{target} "
        f"({LAYERS[layer_of(target)][0]}) at line {line}"
        for module, imports in _graph().items()
        for target, line, in_function in imports
        if not in_function and layer_of(target) > layer_of(module)
    ]
    assert not upward, "\n".join(upward)


def test_no_jaxstream_module_is_imported_inside_a_function() -> None:
    hidden = [
        f"jaxstream.{module} imports jaxstream.{target} inside a function at line {line}"
        for module, imports in _graph().items()
        for target, line, in_function in imports
        if in_function and target not in LAZY_ALLOWED
    ]
    assert not hidden, "\n".join(hidden)


def test_the_module_graph_has_no_cycle() -> None:
    graph = {m: {t for t, _, lazy in imports if not lazy and t != m}
             for m, imports in _graph().items()}
    state: dict[str, int] = {}

    def cycle_from(module: str, path: list[str]) -> list[str] | None:
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                return [*path, module, target]
            if target not in state and (found := cycle_from(target, [*path, module])):
                return found
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := cycle_from(module, [])):
            pytest.fail("import cycle: " + " -> ".join(f"jaxstream.{m}" for m in found))


def test_the_checker_catches_an_upward_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from .ops import functional\n\ndef f():\n    from .autograd import api\n")
    imports = _imports("tensor", bad, {"ops.functional": bad, "autograd.api": bad})
    assert ("ops.functional", 1, False) in imports
    assert ("autograd.api", 4, True) in imports
    assert layer_of("ops.functional") > layer_of("tensor")
    with pytest.raises(AssertionError, match="in no layer"):
        layer_of("nowhere_module")


def test_print_the_layer_graph() -> None:
    edges: dict[tuple[str, str], int] = defaultdict(int)
    for module, imports in _graph().items():
        for target, _, lazy in imports:
            if not lazy and layer_of(target) != layer_of(module):
                edges[(LAYERS[layer_of(module)][0], LAYERS[layer_of(target)][0])] += 1
    print("\nimports between layers (count of module-level import statements):")
    for (source, target), count in sorted(edges.items()):
        print(f"  {source:>12} -> {target:<12} {count}")
    rank = {name: index for index, (name, _) in enumerate(LAYERS)}
    assert all(rank[source] > rank[target] for source, target in edges)
