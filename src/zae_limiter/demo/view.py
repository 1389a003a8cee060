"""What the demo prints: headings, tables and the live view, drawn with rich.

`--quiet` keeps the one-line results and the summary, and drops tables and the live view.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console, Group, RenderableType
from rich.json import JSON
from rich.live import Live
from rich.table import Table
from rich.text import Text

from zae_limiter.cli.render import print_fitted
from zae_limiter.demo import scenario
from zae_limiter.demo.workload import Stats
from zae_limiter.models import ShardInfo


class View:
    def __init__(self, console: Console, quiet: bool) -> None:
        self.console = console
        self.quiet = quiet

    def step(self, number: int, title: str) -> None:
        if self.quiet:
            self.console.print(f"[bold]{number}. {title}[/]")
        else:
            self.console.rule(f"[bold cyan]{number}. {title}", align="left")

    def line(self, text: str, style: str | None = None) -> None:
        self.console.print(Text(text, style=style or ""))

    def detail(self, renderable: RenderableType) -> None:
        if not self.quiet:
            self.show(renderable)

    def show(self, renderable: RenderableType) -> None:
        """Print; off a terminal as wide as the content, so no table is cut at 80."""
        print_fitted(self.console, renderable)

    @contextmanager
    def live(self, render: Callable[[], RenderableType]) -> Iterator[Callable[[], None]]:
        """A region redrawn 4 times a second; yields the function that redraws it.

        Off a terminal (a pipe, a CI log) the region is printed once, at the end.
        """
        if self.quiet:
            yield lambda: None
        elif not self.console.is_terminal:
            yield lambda: None
            self.show(render())
        else:
            with Live(render(), console=self.console, refresh_per_second=4) as region:
                yield lambda: region.update(render())


def entities_table(rows: list[scenario.EntityRow]) -> Table:
    table = Table(title=f"entities and their limits on {scenario.RESOURCE}", title_justify="left")
    for column in ("entity", "name", "parent", "cascade", "limits", "from"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row.entity_id,
            row.name,
            row.parent,
            "yes" if row.cascade else "no",
            row.limits,
            row.source,
        )
    return table


def one_call_lines(call: scenario.OneCall) -> list[str]:
    return [
        f"{call.entity_id}: reserved rpm=1 tpm={call.estimate}, the model used "
        f"{call.actual} -> lease.adjust(tpm={call.actual - call.estimate})",
        f"  {call.entity_id} tpm available {call.before.get('tpm')} -> {call.after.get('tpm')}, "
        f"rpm {call.before.get('rpm')} -> {call.after.get('rpm')}",
        f"  {scenario.PROJECT} (cascade parent) tpm available "
        f"{call.parent_before.get('tpm')} -> {call.parent_after.get('tpm')}",
    ]


def burst_line(burst: scenario.Burst) -> str:
    if burst.rejected_at is None:
        return f"burst: all {burst.admitted} calls admitted (no rejection)"
    return (
        f"burst: {burst.admitted} calls admitted, call {burst.rejected_at} rejected: "
        f"RateLimitExceeded, retry after {burst.retry_after_seconds:.2f}s "
        f"(Retry-After: {burst.retry_after_header})"
    )


def burst_body(burst: scenario.Burst) -> RenderableType:
    import json

    return Group(Text("HTTP 429 body from as_dict():", style="dim"), JSON(json.dumps(burst.body)))


def live_view(stats: Stats, seconds: float) -> RenderableType:
    elapsed = stats.elapsed()
    title = f"workload: {min(elapsed, seconds):4.1f}s / {seconds:.0f}s"
    if elapsed > seconds and stats.shard_count < 2:
        title += f" (+{elapsed - seconds:.1f}s waiting for {scenario.HOT} to double)"
    table = Table(title=title, title_justify="left", expand=False)
    for column in ("entity", "admitted", "rejected", "errors", "max retry-after"):
        table.add_column(column, justify="left" if column == "entity" else "right")
    for entity_id, counts in sorted(stats.snapshot().items()):
        table.add_row(
            entity_id,
            str(counts.admitted),
            str(counts.rejected),
            str(counts.errors),
            f"{counts.max_retry_after:.2f}s" if counts.rejected else "-",
        )
    return Group(table, shard_line(stats))


def shard_line(stats: Stats) -> Text:
    pressure = (
        ", ".join(f"#{s.shard_id} {s.write_pressure_pct:.0f}%" for s in stats.shards)
        or "no bucket yet"
    )
    return Text.assemble(
        (f"{scenario.HOT} shard count: ", "bold"),
        (str(stats.shard_count), "bold magenta"),
        f"   write pressure of {scenario.HOT_PARTITION_WCU} WCU/s per shard: {pressure}",
    )


def doubling_lines(stats: Stats) -> list[str]:
    return [
        f"  at {at:4.1f}s the shard count of {scenario.HOT} became {count}"
        for at, count in stats.doublings
    ]


def shards_table(shards: list[ShardInfo]) -> Table:
    """Fallback for `entity shards show` when the CLI command is not there."""
    names = sorted({n for s in shards for n in s.capacity})
    table = Table(
        title=f"{scenario.HOT} / {scenario.RESOURCE}: {len(shards)} shard(s)",
        title_justify="left",
    )
    for column in ("shard", "count", *[f"{n} tokens/cap" for n in names], "wcu %"):
        table.add_column(column, justify="right")
    for s in shards:
        cells = [f"{s.tokens.get(n, 0)}/{s.capacity.get(n, 0)}" for n in names]
        table.add_row(str(s.shard_id), str(s.shard_count), *cells, f"{s.write_pressure_pct:.1f}")
    return table


def summary_table(stats: Stats, burst: scenario.Burst, started: float) -> Table:
    totals = stats.totals
    retry = max(totals.max_retry_after, burst.retry_after_seconds or 0.0)
    table = Table(title="summary", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("admitted", str(totals.admitted + burst.admitted))
    table.add_row("rejected", str(totals.rejected + (1 if burst.rejected_at else 0)))
    table.add_row("errors", str(totals.errors))
    table.add_row("longest retry-after seen", f"{retry:.2f}s")
    table.add_row(f"final shard count of {scenario.HOT}", str(stats.shard_count))
    table.add_row("time taken", f"{time.monotonic() - started:.1f}s")
    return table
