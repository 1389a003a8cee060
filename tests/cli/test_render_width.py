"""Tables off a terminal (a pipe, a file): as wide as their content, never cut at 80."""

from __future__ import annotations

import io
import re
from typing import TYPE_CHECKING

from click.testing import CliRunner
from rich.console import Console
from rich.table import Table

from zae_limiter.cli.render import WIDEST, print_fitted

if TYPE_CHECKING:
    from tests.cli.conftest import Zae

LONG = "a-display-name-far-longer-than-any-terminal-would-leave-room-for-" * 2


def _run_piped(zae: Zae, *args: str) -> str:
    """The CLI with stdout to a pipe and no COLUMNS, as `make demo > file` runs it."""
    from zae_limiter.cli import main

    env = {"ZAEL_NAME": zae.table, "ZAEL_NAMESPACE": zae.namespace, "COLUMNS": None}
    with CliRunner().isolation(env=env) as (out, _err, _mixed):
        try:
            main(list(args))
        except SystemExit as done:
            assert not done.code
    return out.getvalue().decode()


def test_a_piped_table_keeps_every_cell_whole_on_one_line(zae: Zae) -> None:
    zae("entity", "create", "acme", "--display-name", LONG)
    text = _run_piped(zae, "entity", "show", "acme")
    assert "…" not in text
    assert any(LONG in line for line in text.splitlines()), text
    assert max(len(line) for line in text.splitlines()) > 80


def test_piped_dates_do_not_wrap(zae: Zae) -> None:
    zae("entity", "create", "acme", "--display-name", LONG)
    zae("limits", "set", "rpm:100/m", "--entity", "acme", "--resource", "gpt-4")
    events = zae("audit", "list", "--entity", "acme", "-o", "json").json()["events"]
    text = _run_piped(zae, "audit", "list", "--entity", "acme")
    whole_dates = re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", text)
    assert events
    assert len(whole_dates) == len(events), text


def test_json_output_is_unchanged_when_piped(zae: Zae) -> None:
    zae("entity", "create", "acme", "--display-name", LONG)
    assert f'"name": "{LONG}"' in _run_piped(zae, "entity", "show", "acme", "-o", "json")


def _table(cells: int) -> Table:
    table = Table()
    table.add_column("x")
    table.add_row("y" * cells)
    return table


def test_a_terminal_keeps_its_width() -> None:
    out = io.StringIO()
    print_fitted(Console(file=out, width=60, force_terminal=True, color_system=None), _table(200))
    assert max(len(line) for line in out.getvalue().splitlines()) == 60


def test_a_cell_past_the_widest_line_wraps_instead_of_running_on() -> None:
    out = io.StringIO()
    print_fitted(Console(file=out, width=80, force_terminal=False), _table(WIDEST * 2))
    assert max(len(line) for line in out.getvalue().splitlines()) == WIDEST
