"""Shared helpers of the data commands: opening the limiter, asking, and printing.

Tables are drawn with rich at the terminal's width (env COLUMNS overrides it). Off a
terminal (a pipe, a file, a CI log) there is no width to respect, so a table is as wide
as its content: rich would otherwise cut it to 80 columns. With `--output json` a command
prints exactly one JSON document on stdout and nothing else.
The JSON field names built here are part of the CLI's contract (see docs/cli.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import click
from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.table import Table

from zae_limiter.cli import schedules
from zae_limiter.cli.options import Target
from zae_limiter.cli.spec import Level, format_limit
from zae_limiter.limiter import SyncRateLimiter
from zae_limiter.limits import Limit
from zae_limiter.models import Entity
from zae_limiter.repository import SyncRepository

#: How each limit source is called in tables; JSON uses the keys.
SOURCE_LABELS = {
    "entity": "entity",
    "entity_default": "entity default",
    "resource": "resource default",
    "system": "system",
    "call": "call",
}


@contextmanager
def open_limiter(target: Target) -> Iterator[SyncRateLimiter]:
    """A sync limiter on the target table; the table must exist."""
    repo = SyncRepository.open(
        target.namespace,
        name=target.name,
        region=target.region,
        endpoint_url=target.endpoint_url,
        principal=target.principal,
    )
    try:
        yield SyncRateLimiter(repo)
    finally:
        repo.close()


def confirm(question: str, yes: bool) -> None:
    """Ask on stderr (stdout stays clean for JSON); `--yes` skips it, "no" aborts."""
    if not yes:
        click.confirm(question, abort=True, err=True)


def console() -> Console:
    """A console on the current stdout; markup off, so ids with brackets print as is."""
    return Console(markup=False, highlight=False, emoji=False)


#: Widest line drawn off a terminal; beyond it a cell wraps rather than run on forever.
WIDEST = 1000


def natural_width(console: Console, renderable: RenderableType) -> int:
    """How wide `renderable` draws when nothing limits it (at most WIDEST)."""
    options = console.options.update_width(WIDEST)
    return min(WIDEST, Measurement.get(console, options, renderable).maximum)


def print_fitted(console: Console, renderable: RenderableType) -> None:
    """Print at the terminal's width, or off a terminal at the content's own width.

    COLUMNS set by the user wins either way, as it does for rich itself.
    """
    if console.is_terminal or os.environ.get("COLUMNS"):
        console.print(renderable)
        return
    if isinstance(renderable, Table) and isinstance(renderable.title, str):
        # rich wraps a title to its table's width; a short table would break its title.
        renderable.min_width = max(renderable.min_width or 0, len(renderable.title))
    saved = console.width
    console.width = max(saved, natural_width(console, renderable))
    try:
        console.print(renderable)
    finally:
        console.width = saved


def print_table(table: Table) -> None:
    print_fitted(console(), table)


def echo(text: str) -> None:
    click.echo(text)


def warn(text: str) -> None:
    click.echo(f"warning: {text}", err=True)


def echo_json(body: Any) -> None:
    click.echo(json.dumps(body, indent=2, sort_keys=True))


def new_table(title: str | None, columns: Sequence[str], numeric: Iterable[str] = ()) -> Table:
    right = set(numeric)
    table = Table(title=title, title_justify="left", header_style="bold")
    for column in columns:
        table.add_column(column, justify="right" if column in right else "left")
    return table


def when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def text(value: object) -> str:
    return "-" if value is None else str(value)


def limit_json(limit: Limit) -> dict[str, Any]:
    return {
        "name": limit.name,
        "capacity": limit.capacity,
        "refill_amount": limit.refill_amount,
        "refill_period_seconds": limit.refill_period_seconds,
        "spec": format_limit(limit),
        **({"soft": True} if limit.soft else {}),
        **({"regions": list(limit.regions)} if limit.regions else {}),
        **schedules.scheduled_json(limit, schedules.now_ms(), format_limit),
    }


def entity_json(entity: Entity) -> dict[str, Any]:
    body: dict[str, Any] = {
        "entity_id": entity.entity_id,
        "name": entity.name,
        "parent_id": entity.parent_id,
        "cascade": entity.cascade,
        "created_at_ms": entity.created_at_ms,
    }
    if entity.cascade_for:
        body["cascade_for"] = dict(entity.cascade_for)
    if entity.bypass:
        body["bypass"] = True
    return body


def level_json(level: Level) -> dict[str, Any]:
    return {"kind": level.kind, "entity_id": level.entity_id, "resource": level.resource}


def limits_table(title: str | None, limits: Sequence[Limit]) -> Table:
    scheduled = any(limit.schedule for limit in limits)
    columns = ["limit", "rate", "capacity", "spec"] + (["next change"] if scheduled else [])
    table = new_table(title, columns, numeric=["capacity"])
    now = schedules.now_ms()
    for limit in limits:
        row = [limit.name, limit.describe(), str(limit.capacity), format_limit(limit)]
        if scheduled:
            row.append(schedules.next_change_text(limit, now))
        table.add_row(*row)
    return table
