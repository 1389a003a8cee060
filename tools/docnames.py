"""Docstrings and comments that name code which does not exist.

`python -m tools.docnames [ROOT]` reads every module of the package (src/zae_limiter) and
checks two kinds of names in its docstrings and comments:

- a file path ending in `.py` (`flows/write/take.py`, `drivers.py`): it must exist under
  the package, or under the repository root (`benchmarks/paths.py`, `tools/unasync.py`);
- a backticked dotted name that starts with one of the package's own modules
  (`flows.acquire`, `keys.version_key()`, `errors.map_client_error`): each part must
  resolve, module by module and then attribute by attribute.

A name that starts elsewhere (`random.Random`, `Limit.per_second`) is not checked: the
tool would have to guess what it means. Exit status 1 when something is named that does
not exist, with one line per finding (file:line: name).
"""

from __future__ import annotations

import ast
import importlib
import io
import re
import sys
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "zae_limiter"
#: Files a user writes, named in the docs of what reads them.
USERS_FILES = frozenset({"locustfile.py"})
#: `flows/write/take.py`, `zae_limiter/keys/core.py` (not a URL's path, not `*.py`).
PATH = re.compile(r"(?<![\w/.:*-])((?:[A-Za-z_][\w-]*/)*[A-Za-z_]\w*\.py)\b")
#: `flows.reserves.ops`, `keys.version_key()`, `drivers.SyncRunner.run`.
DOTTED = re.compile(r"`((?:zae_limiter\.)?[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\(\))?`")


@dataclass(frozen=True, slots=True)
class Finding:
    file: str
    line: int
    name: str
    why: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.name} ({self.why})"


def texts(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every docstring and comment of a module."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                value = body[0].value.value
                if isinstance(value, str):
                    yield body[0].lineno, value
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def _path_exists(name: str, here: Path, package: Path, root: Path) -> bool:
    """Under the package, the repository root, or the naming module's own folder or one
    above it inside the package (`reserves/pacing.py`, said in flows/)."""
    name = name.removeprefix(f"{PACKAGE}/").removeprefix(f"src/{PACKAGE}/")
    folders = [package, root, *[d for d in here.parents if d.is_relative_to(package)]]
    return any((folder / name).exists() for folder in folders)


def _on_a_class(module: object, name: str) -> bool:
    """`limiter.acquire`: a variable named like its module, holding one of its classes."""
    own = getattr(module, "__name__", "")
    return any(
        isinstance(value, type) and value.__module__ == own and hasattr(value, name)
        for value in vars(module).values()
    )


def _resolves(dotted: str) -> bool:
    """Whether `dotted` (package-relative) names a module, or an attribute of one."""
    parts = dotted.split(".")
    module_name, at = PACKAGE, 0
    obj: object = importlib.import_module(PACKAGE)
    while at < len(parts):
        try:
            obj = importlib.import_module(f"{module_name}.{parts[at]}")
            module_name = f"{module_name}.{parts[at]}"
            at += 1
        except ModuleNotFoundError:
            break
    if at < len(parts) and at > 0 and not hasattr(obj, parts[at]):
        return _on_a_class(obj, parts[at])
    for part in parts[at:]:
        if not hasattr(obj, part):
            # A dataclass field or slot with no class-level default is still a name.
            fields = getattr(obj, "__dataclass_fields__", {})
            return part in fields or part in getattr(obj, "__slots__", ())
        obj = getattr(obj, part)
    return True


def check_text(text: str, line: int, here: Path, package: Path, root: Path) -> list[Finding]:
    file = here.relative_to(root).as_posix() if here.is_relative_to(root) else str(here)
    found: list[Finding] = []
    own = {p.stem for p in package.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    for match in PATH.finditer(text):
        name = match.group(1)
        if name not in USERS_FILES and not _path_exists(name, here, package, root):
            found.append(Finding(file, line, name, "no such file"))
    for match in DOTTED.finditer(text):
        dotted = match.group(1).removeprefix(f"{PACKAGE}.")
        if dotted.endswith(".py"):
            continue  # a file, checked above
        if dotted.split(".")[0] in own and not _resolves(dotted):
            found.append(Finding(file, line, dotted, "does not resolve"))
    return found


def check(root: Path) -> list[Finding]:
    package = root / "src" / PACKAGE
    found: list[Finding] = []
    for path in sorted(package.rglob("*.py")):
        for line, text in texts(path.read_text()):
            found.extend(check_text(text, line, path, package, root))
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]) if args else Path(__file__).resolve().parent.parent
    found = check(root)
    for finding in found:
        print(finding)
    if found:
        print(f"{len(found)} names in docstrings or comments name nothing that exists")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
