"""The package's shape: one folder per method, no import cycle, small modules.

The import graph is read from the source (``ast``), local imports inside
functions included: a cycle that only a deferred import hides is still a
cycle for the reader, and the next refactor can turn it into an import error.
"""

import ast
import importlib
from pathlib import Path

import pytest

import skprior

PACKAGE = Path(skprior.__file__).resolve().parent
MAX_LINES = 600


def _module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imported(module, node):
    """skprior modules that an import statement in ``module`` loads."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:  # relative: resolve against the importing module's package
        package = module if MODULES[module].name == "__init__.py" else module
        base = package.rsplit(".", node.level)[0] if node.level else package
        source = f"{base}.{node.module}" if node.module else base
    else:
        source = node.module or ""
    targets = []
    for alias in node.names:
        if f"{source}.{alias.name}" in MODULES:
            targets.append(f"{source}.{alias.name}")
        elif source == "skprior" and alias.name in skprior._PUBLIC:
            # ``from skprior import X`` loads X's module (PEP 562 lazy import).
            targets.append(skprior._PUBLIC[alias.name])
        else:
            targets.append(source)
    return targets


def _graph():
    graph = {}
    for module, path in MODULES.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges.update(
                    target
                    for target in _imported(module, node)
                    if target in MODULES and target != module
                )
        graph[module] = edges
    return graph


def _cycles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph[node]:
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle():
    """No module imports itself through others, deferred imports included."""
    assert _cycles(_graph()) == []


def test_cycle_finder_finds_a_cycle():
    """The check above can fail: a two-module loop is reported."""
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_size(module):
    """No module over ~600 lines: past that it is usually two ideas."""
    n_lines = len(MODULES[module].read_text().splitlines())
    assert n_lines <= MAX_LINES, f"{module} has {n_lines} lines"


@pytest.mark.parametrize("method", ["can", "label_shift", "calibration", "metrics"])
def test_method_folders_reexport_only(method):
    """Each method's folder ``__init__`` re-exports; the code is in its modules."""
    tree = ast.parse((PACKAGE / method / "__init__.py").read_text())
    kinds = {type(node) for node in tree.body}
    assert kinds <= {ast.Expr, ast.ImportFrom, ast.Assign}
    exported = next(n for n in tree.body if isinstance(n, ast.Assign)).value
    folder = importlib.import_module(f"skprior.{method}")
    names = sorted(ast.literal_eval(exported))
    assert names
    for name in names:
        assert getattr(folder, name).__module__.startswith(f"skprior.{method}.")
