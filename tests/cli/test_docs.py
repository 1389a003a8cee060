"""docs/cli.md stays true: its `entity` and `limits` examples run, in order, on one table.

Every line of a ```bash block that starts with `zae-limiter entity` or
`zae-limiter limits` is run through the console entry point and must exit 0. A ```yaml
block whose first line is `# file: NAME` is written to NAME in the working directory
first, so the commands can read it.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.cli.conftest import Zae

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
GROUPS = ("entity", "limits")
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def doc_steps(text: str) -> list[tuple[str, str, str]]:
    """("run", line, "") for each example command, ("file", name, body) for each file."""
    steps: list[tuple[str, str, str]] = []
    for lang, body in _BLOCK.findall(text):
        if lang == "yaml" and body.startswith("# file: "):
            first, _, rest = body.partition("\n")
            steps.append(("file", first.removeprefix("# file: ").strip(), rest))
        if lang != "bash":
            continue
        for line in body.splitlines():
            words = shlex.split(line, comments=True)
            if len(words) > 1 and words[0] == "zae-limiter" and words[1] in GROUPS:
                steps.append(("run", line, ""))
    return steps


def test_the_docs_have_examples_for_every_command() -> None:
    lines = [line for kind, line, _ in doc_steps(DOC.read_text()) if kind == "run"]
    for command in (
        "entity create",
        "entity show",
        "entity list",
        "entity delete",
        "entity shards show",
        "entity update",
        "limits set",
        "limits get",
        "limits delete",
        "limits apply",
    ):
        assert any(line.startswith(f"zae-limiter {command} ") for line in lines), command


def test_every_example_runs(zae: Zae, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for kind, line, body in doc_steps(DOC.read_text()):
        if kind == "file":
            (tmp_path / line).write_text(body)
            continue
        done = zae(*shlex.split(line, comments=True)[1:])
        assert done.code == 0, f"{line}\n{done.stderr}"
