"""tools/docnames.py: a docstring or comment that names a module, file or function that
does not exist fails the lint; names that exist pass."""

from __future__ import annotations

from pathlib import Path

from tools import docnames

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "zae_limiter"
HERE = PACKAGE / "flows" / "acquire.py"


def _names(text: str) -> list[str]:
    return [f.name for f in docnames.check_text(text, 1, HERE, PACKAGE, ROOT)]


def test_a_made_up_function_of_a_real_module_is_caught() -> None:
    assert _names("`flows.reserve_return` writes them back") == ["flows.reserve_return"]
    assert _names("see `keys.no_such_key()`") == ["keys.no_such_key"]


def test_a_made_up_file_is_caught() -> None:
    assert _names("# see flows/nowhere.py and keys.py") == ["flows/nowhere.py", "keys.py"]


def test_names_that_exist_pass() -> None:
    text = (
        "`flows.reserves.ops` and `keys.version_key()`, `errors.map_client_error`, "
        "`drivers.SyncRunner.run`, flows/write/take.py, reserves/book.py (from flows/), "
        "benchmarks/paths.py, `limiter.acquire` (a RateLimiter), `random.Random`"
    )
    assert _names(text) == []


def test_the_package_names_nothing_that_does_not_exist() -> None:
    assert [str(f) for f in docnames.check(ROOT)] == []


def test_docstrings_and_comments_are_read(tmp_path: Path) -> None:
    source = (
        '"""Module: `flows.gone`."""\n\n\n'
        'def f() -> None:\n    """`flows.gone2`."""\n    # `flows.gone3`\n'
    )
    assert [text for _line, text in docnames.texts(source)] == [
        "Module: `flows.gone`.",
        "`flows.gone2`.",
        "# `flows.gone3`",
    ]


def test_dead_code_is_caught_and_the_package_has_none(tmp_path: Path) -> None:
    from tools import deadcode

    package = tmp_path / "src" / "zae_limiter"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "m.py").write_text(
        "def used() -> int:\n    return 1\n\n\ndef forgotten() -> int:\n    return used()\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_m.py").write_text("from zae_limiter.m import used\n\nused()\n")
    found = deadcode.findings(tmp_path)
    assert len(found) == 1 and "unused function 'forgotten'" in found[0]
    assert deadcode.findings() == []
