"""The package's shape: modules a reader can hold, exports a reader can follow, the
version and error codes written once."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import zae_limiter
from zae_limiter import errors
from zae_limiter.flows.records.version import client_version
from zae_limiter.flows.reserves import ops as reserve_ops

PACKAGE = Path(zae_limiter.__file__).parent
MAX_LINES = 500
#: Modules allowed past MAX_LINES (none: the full-at rewrite brought the last ones under).
OVER_LIMIT_ALLOWED: frozenset[str] = frozenset()


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _name(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def test_no_module_is_longer_than_the_limit() -> None:
    long = {
        _name(p): n
        for p in _modules()
        if (n := len(p.read_text().splitlines())) > MAX_LINES and _name(p) not in OVER_LIMIT_ALLOWED
    }
    assert long == {}


def test_no_module_star_imports() -> None:
    starred = [
        _name(p)
        for p in _modules()
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names)
    ]
    assert starred == []


def test_version_comes_from_the_installed_metadata() -> None:
    assert zae_limiter.__version__ == client_version() != "0.0.0"
    assert "__version__" in zae_limiter.__all__


def test_the_reserve_keeper_treats_a_budget_refusal_as_not_sent() -> None:
    # reserve_ops matches the code drivers.py raises when the capacity budget refuses a call.
    assert errors.CAPACITY_EXHAUSTED in reserve_ops.NOT_SENT_CODES


def test_keys_names_the_module_each_name_comes_from() -> None:
    import importlib
    import pkgutil

    from zae_limiter import keys

    exported: dict[str, str] = {}
    for info in pkgutil.iter_modules(keys.__path__):
        module = importlib.import_module(f"zae_limiter.keys.{info.name}")
        names = getattr(module, "__all__", None)
        assert names is not None, f"keys/{info.name}.py has no __all__"
        public = _defined_names(Path(module.__file__ or ""))
        assert public <= set(names), f"keys/{info.name}.py: add {public - set(names)} to __all__"
        for name in names:
            assert name not in exported, f"{name} in both {exported.get(name)} and {info.name}"
            exported[name] = info.name
            assert getattr(keys, name) is getattr(module, name)
    assert set(keys.__all__) == set(exported)


def _defined_names(path: Path) -> set[str]:
    """Public names a module defines at its top level (what it imports is not its own)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                elts = target.elts if isinstance(target, ast.Tuple) else [target]
                names.update(e.id for e in elts if isinstance(e, ast.Name))
    return {n for n in names if not n.startswith("_")}


CIRCLES_ALLOWED: set[frozenset[str]] = set()


def _import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same tree it imports anywhere (in functions and under
    TYPE_CHECKING too: a reader follows those as well)."""
    names = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                wanted = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
                found.update(w for w in wanted[:-1] if w in names)
                if not any(w in names for w in wanted[:-1]) and node.module in names:
                    found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name in names)
        graph[name] = found - {name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Groups of modules that import each other, directly or around a loop."""

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        return seen

    reachable = {name: reach(name) for name in graph}
    groups = {
        frozenset({n} | {m for m in reachable[n] if n in reachable[m]})
        for n in graph
        if n in reachable[n]
    }
    return sorted(groups, key=sorted)


@pytest.mark.parametrize("tree", ["src/zae_limiter", "benchmarks"])
def test_no_import_circle(tree: str) -> None:
    root = Path(__file__).resolve().parents[2] / tree
    assert [sorted(c) for c in _circles(_import_graph(root)) if c not in CIRCLES_ALLOWED] == []
