"""The engine with its instrumentation compiled out, to measure what the indirection costs.

The engine, its hook callers and its final callbacks run each step through the
installed instrumentation (Note [Instrumentation] in jaxstream/instrumentation.py):
``instrumentation.current().evaluate_node(F, *args)``, or ``observer.call_hook(kind,
graph_task, fn, hook, *args)`` after ``observer = instrumentation.current()``. With
no profile open that object is the default ``Instrumentation``, which only makes the
call. Here every function that makes such calls is recompiled from its own source
with each of them replaced by the call it makes (``F(*args)``, ``hook(*args)``,
``callback()``, ``run(*args)``) and against its own module's globals, and the
engine is a subclass using those functions: it pays nothing for the instrumentation.
The worker loop's test of whether anyone observes (``instrumentation.installed is
quiet``, which sends a plain node the short way, Note [A plain node in one frame]) is
made ``True``, and the assignment of ``instrumentation.QUIET`` is dropped.

Which functions: the module-level functions and the methods of the classes of every
``jaxstream.autograd`` module that calls the instrumentation, then the engine's
methods that use those functions or classes by name. Every instrumented call site of
those modules must be compiled out, and every rewritten function or class must be
one the engine module uses, or this raises (a call the engine would still make
through the instrumentation), except the methods of ``UNREACHED``, which the timed
chains never reach. The streams' calls (``stream_op``) are left alone: on the cpu no
stream operation runs (on a sim device, the profiled-off engine and the compiled-out
one make the same ones).
"""

from __future__ import annotations
import __future__

import ast
import atexit
import importlib
import importlib.util
import inspect
import pkgutil
import textwrap
import types
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

DIRECT_CALLS = {
    "evaluate_node": 0,  # evaluate_node(evaluate, *args) -> evaluate(*args)
    "call_hook": 3,  # call_hook(kind, graph_task, fn, hook, *args) -> hook(*args)
    "run_callback": 1,  # run_callback(graph_task, callback) -> callback()
    "stream_op": 3,  # stream_op(name, stream, details, run, *args) -> run(*args)
}
"""Per method of ``Instrumentation``: the argument it calls with the arguments after it."""

UNREACHED = {
    "AccumulateGrad._call_post_accumulate_hooks": "runs a leaf's post-accumulate-grad hooks, "
    "which no chain of this experiment registers",
}
"""Instrumented methods left as they are, by qualified name: the engine does not make their
objects, so it cannot use a subclass, and the chains timed here never reach them (a call
through the instrumentation would show in ``bypasses_instrumentation``'s count)."""

QUIET_TEST = "quiet test"
"""What `DirectCalls.removed` counts the engine's tests of whether anyone observes under."""


def _is_current(node: ast.AST) -> bool:
    """Whether `node` is ``instrumentation.current()``."""
    return (
        isinstance(node, ast.Call)
        and not node.args
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "current"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "instrumentation"
    )


def _is_attribute(node: ast.AST, attr: str) -> bool:
    """Whether `node` is ``instrumentation.<attr>``."""
    return (
        isinstance(node, ast.Attribute)
        and node.attr == attr
        and isinstance(node.value, ast.Name)
        and node.value.id == "instrumentation"
    )


def _observer_names(tree: ast.AST) -> set[str]:
    """The names assigned ``instrumentation.current()`` (``observer = ...``)."""
    return {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and _is_current(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def _instrumented_method(node: ast.AST, observers: set[str]) -> str | None:
    """The ``Instrumentation`` method `node` calls on the installed one, if it is such a call."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    receiver = node.func.value
    on_current = _is_current(receiver) or (
        isinstance(receiver, ast.Name) and receiver.id in observers
    )
    return node.func.attr if on_current and node.func.attr in DIRECT_CALLS else None


def instrumented_lines(tree: ast.AST) -> set[int]:
    """The lines of `tree` that call a method of the installed instrumentation."""
    observers = _observer_names(tree)
    return {
        node.lineno for node in ast.walk(tree)
        if _instrumented_method(node, observers) is not None
    }


class _DirectCalls(ast.NodeTransformer):
    """Replaces each call through the installed instrumentation by the call it makes."""

    def __init__(self, observers: set[str]) -> None:
        self.observers = observers
        self.removed: Counter[str] = Counter()
        self.lines: set[int] = set()

    def visit_Assign(self, node: ast.Assign) -> Any:
        if _is_current(node.value) or _is_attribute(node.value, "QUIET"):
            return ast.copy_location(ast.Pass(), node)
        return self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> Any:
        """``instrumentation.installed is quiet`` (does nobody observe?) is made True."""
        self.generic_visit(node)
        if _is_attribute(node.left, "installed") and [type(op) for op in node.ops] == [ast.Is]:
            self.removed[QUIET_TEST] += 1
            return ast.copy_location(ast.Constant(True), node)
        return node

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        method = _instrumented_method(node, self.observers)
        if method is None:
            return node
        called = DIRECT_CALLS[method]
        if node.keywords or any(isinstance(arg, ast.Starred) for arg in node.args[: called + 1]):
            raise RuntimeError(f"line {node.lineno}: cannot tell what {method}(...) calls")
        self.removed[method] += 1
        self.lines.add(node.lineno)
        return ast.copy_location(
            ast.Call(func=node.args[called], args=node.args[called + 1:], keywords=[]), node
        )


@dataclass
class DirectCalls:
    """The engine without its instrumentation, and what was compiled out to build it."""

    engine: Any = None
    removed: Counter[str] = field(default_factory=Counter)
    lines: set[tuple[str, int]] = field(default_factory=set)
    replaced: dict[str, Any] = field(default_factory=dict)
    unreached: set[tuple[str, int]] = field(default_factory=set)
    """The instrumented lines of the methods of ``UNREACHED``, left as they are."""

    @property
    def calls_removed(self) -> int:
        return sum(count for what, count in self.removed.items() if what != QUIET_TEST)

    def recompile(self, fn: Callable) -> Callable:
        """`fn` from its own source, its instrumented calls direct and the replaced names bound."""
        path = inspect.getsourcefile(fn)
        assert path is not None
        definition = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
        assert isinstance(definition, ast.FunctionDef) and not definition.decorator_list
        ast.increment_lineno(definition, fn.__code__.co_firstlineno - 1)
        transformer = _DirectCalls(_observer_names(definition))
        definition = transformer.visit(definition)
        names = sorted(set(self.replaced) & _global_names(fn.__code__))
        left = sorted(
            node.lineno for node in ast.walk(definition)
            if isinstance(node, ast.Name)
            and node.id in {"instrumentation", "super", *transformer.observers}
        )
        if left:
            raise RuntimeError(f"{path}: {fn.__qualname__} still uses the instrumentation "
                               f"(or super) at lines {left}")
        # Replaced names are parameters of an enclosing function: closures over the
        # replacements, while every other name stays the module's own global.
        outer = ast.parse(f"def _bind({', '.join(names)}): pass").body[0]
        assert isinstance(outer, ast.FunctionDef)
        outer.body = [definition, ast.Return(ast.Name(definition.name, ast.Load()))]
        module = ast.fix_missing_locations(ast.Module([outer], type_ignores=[]))
        code = compile(module, path, "exec", flags=__future__.annotations.compiler_flag,
                       dont_inherit=True)
        namespace: dict[str, Any] = {}
        exec(code, fn.__globals__, namespace)  # noqa: S102  (jaxstream's own source)
        direct = namespace["_bind"](*(self.replaced[name] for name in names))
        direct.__qualname__ = fn.__qualname__
        self.removed.update(transformer.removed)
        self.lines.update((path, line) for line in transformer.lines)
        return direct

    def subclass(self, cls: type, which: Callable[[Callable], bool]) -> type | None:
        """A subclass of `cls` with its methods for which `which` holds recompiled."""
        methods = {
            name: self.recompile(value) for name, value in vars(cls).items()
            if isinstance(value, types.FunctionType) and which(value)
        }
        if not methods:
            return None
        return type(cls.__name__, (cls,), {"__module__": __name__, **methods})


def _instrumented_modules() -> Iterator[types.ModuleType]:
    """The modules of ``jaxstream.autograd`` whose source calls the instrumentation."""
    import jaxstream.autograd as package

    for info in pkgutil.iter_modules(package.__path__, f"{package.__name__}."):
        spec = importlib.util.find_spec(info.name)
        path = None if spec is None else spec.origin
        if path and path.endswith(".py") and (
            "instrumentation.current()" in Path(path).read_text("utf-8")
        ):
            yield importlib.import_module(info.name)


def _global_names(code: types.CodeType) -> set[str]:
    """The names `code` and the functions nested in it look up (globals among them)."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _makes_calls(fn: Callable) -> bool:
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    return bool(instrumented_lines(tree))


def _compiled_out_here(fn: Callable) -> bool:
    """Whether `fn` calls the instrumentation and is not one of ``UNREACHED``."""
    return fn.__qualname__ not in UNREACHED and _makes_calls(fn)


def _leave_unreached(direct: DirectCalls, cls: type) -> None:
    """Record the instrumented lines of `cls`'s methods of ``UNREACHED`` as left alone."""
    for value in vars(cls).values():
        if isinstance(value, types.FunctionType) and value.__qualname__ in UNREACHED:
            path = inspect.getsourcefile(value)
            tree = ast.parse(textwrap.dedent(inspect.getsource(value)))
            ast.increment_lineno(tree, value.__code__.co_firstlineno - 1)
            direct.unreached.update((path, line) for line in instrumented_lines(tree))


def _replace_in(direct: DirectCalls, module: types.ModuleType, engine_module: Any) -> None:
    """Recompile `module`'s instrumented functions and classes; record the engine's names."""
    for name, value in vars(module).items():
        if getattr(value, "__module__", None) != module.__name__:
            continue
        if isinstance(value, types.FunctionType) and _makes_calls(value):
            replacement: Any = direct.recompile(value)
        elif isinstance(value, type):
            _leave_unreached(direct, value)
            replacement = direct.subclass(value, _compiled_out_here)
            if replacement is None:
                continue
        else:
            continue
        used_as = [key for key, bound in vars(engine_module).items() if bound is value]
        if not used_as:
            raise RuntimeError(f"{module.__name__}.{name} calls the instrumentation but the "
                               "engine module does not use it by name")
        direct.replaced.update(dict.fromkeys(used_as, replacement))


@cache
def compiled_out_engine() -> DirectCalls:
    """An engine built from jaxstream's own source without its instrumentation.

    Raises if an instrumented call site of the modules involved was not compiled out.
    """
    from jaxstream.autograd import engine

    direct = DirectCalls()
    modules = list(_instrumented_modules())
    for module in modules:
        if module is not engine:
            _replace_in(direct, module, engine)
    check_direct_forms()
    names = set(direct.replaced)
    engine_class = direct.subclass(
        engine.Engine, lambda fn: _makes_calls(fn) or bool(names & _global_names(fn.__code__))
    )
    assert engine_class is not None
    sites = {
        (path, line)
        for module in modules
        if (path := inspect.getsourcefile(module)) is not None
        for line in instrumented_lines(ast.parse(Path(path).read_text("utf-8")))
    }
    left = sites - direct.lines - direct.unreached
    if left:
        raise RuntimeError(f"instrumented calls not compiled out: {sorted(left)}")
    direct.engine = engine_class()
    atexit.register(direct.engine.threads.shutdown, 1.0)
    return direct


def check_direct_forms() -> None:
    """Raises unless the default ``Instrumentation`` makes exactly the calls of DIRECT_CALLS."""
    from jaxstream.instrumentation import Instrumentation

    default = Instrumentation()
    for method, called in DIRECT_CALLS.items():
        bound = getattr(default, method)
        parameters = inspect.signature(bound).parameters.values()
        variadic = any(parameter.kind is parameter.VAR_POSITIONAL for parameter in parameters)
        count = called + 3 if variadic else len(parameters)
        arguments: list[Any] = [object() for _ in range(count)]
        received: list[tuple] = []

        def run(*args: Any, received: list[tuple] = received) -> str:
            received.append(args)
            return "returned"

        arguments[called] = run
        try:
            returned = bound(*arguments)
        except TypeError:  # it called another argument
            returned = None
            received.append(())
        if received != [tuple(arguments[called + 1:])] or returned not in (None, "returned"):
            raise RuntimeError(f"Instrumentation.{method} no longer makes the call "
                               f"compiled_out assumes ({method} -> argument {called})")


@contextmanager
def default_engine(engine_instance: Any) -> Iterator[None]:
    """Make `engine_instance` the one ``backward`` runs on (both jaxstream peers pay this)."""
    from jaxstream.autograd import engine

    shipping = engine.set_default_engine(engine_instance)
    try:
        yield
    finally:
        engine.set_default_engine(shipping)


def backward_with(engine_instance: Any, loss: Any) -> None:
    """``loss.backward()`` run by `engine_instance`."""
    with default_engine(engine_instance):
        loss.backward()
