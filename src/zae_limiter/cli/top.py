"""`zae-limiter top`: the busiest buckets, live, from the table's stream.

zae-limiter top [--sort rate|pct|shards] [--resource R] [--entity-prefix P] [-N NS]
                [--interval S] [--rows N] [--once [--for S] [-o json]]

Reads every shard of the stream from LATEST (no scan, nothing written). `q` or Ctrl-C
leaves. Off a terminal, or with --once, it prints instead of redrawing.
"""

from __future__ import annotations

import contextlib
import select
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import click
from rich.console import Console
from rich.live import Live
from rich.table import Table

from zae_limiter.cli import render
from zae_limiter.cli.options import Target, target_options
from zae_limiter.top.rates import SORTS, BucketRow, Filters, Tally
from zae_limiter.top.reader import StreamReader, open_reader


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _pct(value: float) -> str:
    return f"{value:.0f}%"


def _rate(value: float) -> str:
    return f"{value:,.2f}"


def top_table(rows: list[BucketRow], reader: StreamReader, tally: Tally, at_ms: int) -> Table:
    seen = (at_ms - tally.started_ms) / 1000
    title = (
        f"zae-limiter top: {reader.table}, {reader.shard_count} stream shard(s), "
        f"{reader.calls} stream calls, {seen:.0f}s seen"
        + (f", throttled {reader.throttles}x" if reader.throttles else "")
    )
    table = render.new_table(
        title,
        ["entity", "resource", "limit", "rate/s 10s", "rate/s 60s", "% 10s", "% 60s",
         "left", "capacity", "reserved", "over 60s", "shards"],
        numeric=["rate/s 10s", "rate/s 60s", "% 10s", "% 60s", "left", "capacity",
                 "reserved", "over 60s", "shards"],
    )  # fmt: skip
    for row in rows:
        for i, limit in enumerate(row.limits):
            first = i == 0
            table.add_row(
                row.entity_id if first else "",
                row.resource if first else "",
                limit.name, _rate(limit.rate_10s), _rate(limit.rate_60s),
                _pct(limit.pct_10s), _pct(limit.pct_60s), str(limit.tokens_left),
                str(limit.capacity), str(limit.reserved) if limit.reserved else "-",
                str(limit.over_60s) if limit.over_60s else "-",
                f"{row.shard_count} ({row.shards_seen} seen)" if first else "",
            )  # fmt: skip
            for share in limit.shares:  # a global limit: each region's share under it
                table.add_row(
                    "", "", f"  {share.region} {share.percent:.0f}%", "", "", "", "",
                    str(share.tokens_left), str(share.capacity), "", "", "",
                )  # fmt: skip
    if not rows:
        table.add_row("(no bucket written yet)", *[""] * 11)
    return table


def sample_json(rows: list[BucketRow], reader: StreamReader, tally: Tally, at_ms: int) -> Any:
    return {
        "table": reader.table,
        "sampled_at_ms": at_ms,
        "observed_seconds": round((at_ms - tally.started_ms) / 1000, 3),
        "stream_shards": reader.shard_count,
        "stream_calls": reader.calls,
        "throttled": reader.throttles,
        "buckets": [r.to_dict() for r in rows],
    }


@contextlib.contextmanager
def _keys_pressed(on_quit: Callable[[], None]) -> Iterator[None]:
    """Watch stdin for `q` (a terminal in cbreak mode); nothing off a terminal."""
    if not sys.stdin.isatty():
        yield
        return
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready and sys.stdin.read(1).lower() == "q":
                on_quit()
                return

    tty.setcbreak(fd)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


class Session:
    """One run of top: the reader, the tally, and how to sample."""

    def __init__(self, reader: StreamReader, filters: Filters, sort: str, rows: int) -> None:
        self.reader, self.filters, self.sort, self.rows = reader, filters, sort, rows
        started = now_ms()
        reader.open(started)
        self.tally = Tally(started)
        self.stop = threading.Event()

    def step(self) -> list[BucketRow]:
        at = now_ms()
        self.tally.add(self.reader.poll(at), now_ms())
        return self.tally.snapshot(now_ms(), self.filters, self.sort, self.rows)

    def view(self) -> Table:
        rows = self.step()
        return top_table(rows, self.reader, self.tally, now_ms())

    def run_for(self, seconds: float, interval: float) -> list[BucketRow]:
        deadline = time.monotonic() + seconds
        rows = self.step()
        while not self.stop.wait(max(0.0, min(interval, deadline - time.monotonic()))):
            rows = self.step()
            if time.monotonic() >= deadline:
                break
        return rows


@click.command("top")
@click.option(
    "--sort",
    type=click.Choice(SORTS),
    default="rate",
    show_default=True,
    help="Busiest first by consumption rate (10 s), by % of the refill rate, or by shard count.",
)
@click.option("--resource", "-r", default=None, help="Only buckets of this resource.")
@click.option("--entity-prefix", default=None, metavar="P", help="Only entities starting with P.")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.2),
    default=1.0,
    show_default=True,
    help="Seconds between stream reads and redraws.",
)
@click.option(
    "--rows", type=click.IntRange(min=1), default=20, show_default=True, help="Buckets shown."
)
@click.option("--once", is_flag=True, help="Watch --for seconds, print one sample, leave.")
@click.option(
    "--for",
    "watch_for",
    type=click.FloatRange(min=0.0),
    default=10.0,
    show_default=True,
    metavar="S",
    help="With --once: seconds to watch.",
)
@target_options
def top_command(sort: str, resource: str | None, entity_prefix: str | None, interval: float,
                rows: int, once: bool, watch_for: float, target: Target) -> None:  # fmt: skip
    """Live view of the busiest buckets, read from the table's stream (q or Ctrl-C leaves).

    "over 60s" counts takes that left a limit below zero in the last minute: what a
    soft limit would have rejected.

    Stream reads are billed per GetRecords call (one per stream shard per --interval),
    and a stream shard serves about two readers at once, one of them the aggregator:
    top backs off when the stream throttles it.
    """
    if target.json and not once:
        raise click.UsageError("--output json prints one sample: add --once")
    filters = Filters(target.namespace, resource, entity_prefix)
    session = Session(open_reader(target.name, target.region, target.endpoint_url),
                      filters, sort, rows)  # fmt: skip
    if once:
        found = session.run_for(watch_for, interval)
        at = now_ms()
        if target.json:
            render.echo_json(sample_json(found, session.reader, session.tally, at))
        else:
            render.print_table(top_table(found, session.reader, session.tally, at))
        return
    console = render.console()
    try:
        if console.is_terminal:
            _live(session, console, interval)
        else:
            while not session.stop.wait(interval):
                render.print_fitted(console, session.view())
    except KeyboardInterrupt:
        pass  # Ctrl-C is how one leaves: a clean exit, not an error


def _live(session: Session, console: Console, interval: float) -> None:
    with (
        _keys_pressed(session.stop.set),
        Live(session.view(), console=console, auto_refresh=False, screen=False) as live,
    ):
        while not session.stop.wait(interval):
            live.update(session.view(), refresh=True)


def register(root: click.Group) -> None:
    root.add_command(top_command)
