"""The engine with its profiler checks compiled out, to measure what the checks cost.

The engine reaches the profiler only through ``if profiler.active:`` checks; the
same engine source, recompiled with every such check replaced by its ``else``
branch, is an engine that pays nothing for the profiler when no profile is open.
"""

from __future__ import annotations

import ast
import inspect
import types
from functools import cache
from pathlib import Path
from typing import Any


class _CompileOutProfilerChecks(ast.NodeTransformer):
    """Replaces ``if profiler.active: A else: B`` (statement or expression) by ``B``."""

    def __init__(self) -> None:
        self.removed = 0

    @staticmethod
    def _is_check(test: ast.expr) -> bool:
        return (
            isinstance(test, ast.Attribute)
            and test.attr == "active"
            and isinstance(test.value, ast.Name)
            and test.value.id == "profiler"
        )

    def visit_If(self, node: ast.If) -> Any:
        self.generic_visit(node)
        if not self._is_check(node.test):
            return node
        self.removed += 1
        return node.orelse or [ast.Pass()]

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        self.generic_visit(node)
        if not self._is_check(node.test):
            return node
        self.removed += 1
        return node.orelse

    def visit_ImportFrom(self, node: ast.ImportFrom) -> Any:
        kept = [alias for alias in node.names if alias.name != "profiler"]
        if not kept:
            return None
        node.names = kept
        return node


@cache
def compiled_out_engine() -> tuple[Any, int]:
    """An engine built from the engine's own source without its profiler checks.

    Returns the engine and how many checks were removed. Raises if the source
    still mentions the profiler afterwards (a call site outside a check).
    """
    from jaxstream.autograd import engine

    path = inspect.getsourcefile(engine)
    assert path is not None
    tree = ast.parse(Path(path).read_text(encoding="utf-8"), path)
    transformer = _CompileOutProfilerChecks()
    tree = ast.fix_missing_locations(transformer.visit(tree))
    left = sorted(
        node.lineno for node in ast.walk(tree)
        if isinstance(node, ast.Name) and node.id == "profiler"
    )
    if left:
        raise RuntimeError(
            f"the engine uses the profiler outside an `if profiler.active` check (lines {left})"
        )
    module = types.ModuleType(f"{engine.__package__}._engine_without_profiler_checks")
    module.__package__ = engine.__package__
    module.__file__ = path
    exec(compile(tree, path, "exec"), module.__dict__)  # noqa: S102  (the engine's own source)
    return module.get_default_engine(), transformer.removed


def backward_with(engine_instance: Any, loss: Any) -> None:
    """``loss.backward()`` run by `engine_instance` (both jaxstream peers pay this swap)."""
    from jaxstream.autograd import engine

    shipping = engine._default_engine
    engine._default_engine = engine_instance
    try:
        loss.backward()
    finally:
        engine._default_engine = shipping
