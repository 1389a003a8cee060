"""docs/cli.md names every command of the CLI, and every command's --help works."""

from __future__ import annotations

import re
from pathlib import Path

import click
from click.testing import CliRunner

from zae_limiter.cli import cli

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _commands(group: click.Group, prefix: str = "") -> list[str]:
    found = []
    for name, command in sorted(group.commands.items()):
        path = f"{prefix}{name}"
        found.append(path)
        if isinstance(command, click.Group):
            found += _commands(command, f"{path} ")
    return found


def test_every_command_is_in_the_index_and_has_help() -> None:
    index = DOC.read_text().split("## Conventions")[0]
    runner = CliRunner()
    for path in _commands(cli):
        leaf = path.split()[-1]
        assert re.search(rf"`[^`]*\b{leaf}\b[^`]*`", index), path
        result = runner.invoke(cli, [*path.split(), "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "Usage:" in result.output
