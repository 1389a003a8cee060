"""`zae-limiter aggregator run` and `zae-limiter usage list|summary`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from zae_limiter.aggregator.plan import DEFAULT_WINDOWS, AggregatorConfig
from zae_limiter.aggregator.records import WINDOWS
from zae_limiter.cli import render
from zae_limiter.cli.options import Target, target_options
from zae_limiter.flows.records import usage as usage_flows
from zae_limiter.models import UsageSnapshot


@click.group("aggregator")
def aggregator_group() -> None:
    """Run the aggregator locally (on AWS it runs as a Lambda on the table's stream)."""


@aggregator_group.command("run")
@click.option("--once", is_flag=True, help="Drain what is in the stream now, then exit.")
@click.option(
    "--checkpoint",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="JSON file keeping the stream position across runs.",
)
@click.option(
    "--interval",
    type=float,
    default=1.0,
    show_default=True,
    help="Seconds between polls when the stream is idle.",
)
@click.option(
    "--windows",
    default=",".join(DEFAULT_WINDOWS),
    show_default=True,
    help="Usage snapshot windows (comma-separated: hourly, daily, monthly).",
)
@click.option(
    "--retention-days",
    type=click.IntRange(1),
    default=90,
    show_default=True,
    help="Snapshots expire this long after their window ends.",
)
@click.option(
    "--merge-quiet-seconds",
    type=click.IntRange(0),
    default=600,
    show_default=True,
    help="Quiet period before shards are merged (0: never merge).",
)
@target_options
def run_command(once: bool, checkpoint: Path | None, interval: float, windows: str,
                retention_days: int, merge_quiet_seconds: int,
                target: Target) -> None:  # fmt: skip
    """Poll the table's stream and aggregate usage (all namespaces); Ctrl-C stops."""
    from zae_limiter.aggregator.poller import StreamPoller

    try:
        config = AggregatorConfig(
            table=target.name,
            windows=tuple(w.strip() for w in windows.split(",") if w.strip()),
            retention_days=retention_days,
            merge_quiet_ms=merge_quiet_seconds * 1000,
        )
    except ValueError as error:
        raise click.BadParameter(str(error)) from None
    poller = StreamPoller.open(
        config, endpoint_url=target.endpoint_url, region=target.region, checkpoint=checkpoint
    )
    if not once and not target.json:
        click.echo(f"aggregating the stream of {target.name} (Ctrl-C to stop)", err=True)
    stats = poller.run_forever(once=once, interval=interval)
    body = {"table": target.name, "batches": stats.batches, "records": stats.records,
            "failed": stats.failed}  # fmt: skip
    if target.json:
        render.echo_json(body)
    else:
        render.echo(f"{stats.records} records in {stats.batches} batches, {stats.failed} failed")


@click.group("usage")
def usage_group() -> None:
    """Usage snapshots written by the aggregator."""


def _filters(func: Any) -> Any:
    func = click.option("--end", default=None, help="Windows up to this time (ISO).")(func)
    func = click.option("--start", default=None, help="Windows from this time (ISO, UTC).")(func)
    func = click.option("--resource", "-r", default=None, help="Only this resource.")(func)
    return click.option("--entity", "-e", "entity_id", default=None, help="Only this entity.")(func)


def snapshot_json(snap: UsageSnapshot) -> dict[str, Any]:
    return {
        "entity_id": snap.entity_id,
        "resource": snap.resource,
        "window": snap.window,
        "window_start": snap.window_start,
        "counters": snap.counters,
        "total_events": snap.total_events,
    }


@usage_group.command("list")
@_filters
@click.option("--window", "-w", type=click.Choice(sorted(WINDOWS)), default=None,
              help="Only this window kind.")  # fmt: skip
@target_options
def list_command(entity_id: str | None, resource: str | None, window: str | None,
                 start: str | None, end: str | None, target: Target) -> None:  # fmt: skip
    """List usage snapshots (by entity, resource, window and time)."""
    with render.open_limiter(target) as limiter:
        repo = limiter.repository
        snaps = repo.run(
            usage_flows.get_usage_snapshots(repo.state, entity_id, resource, window, start, end)
        )
    if target.json:
        render.echo_json({"snapshots": [snapshot_json(s) for s in snaps]})
        return
    table = render.new_table(
        f"usage snapshots ({len(snaps)})",
        ["entity", "resource", "window", "start", "events", "consumed"],
        numeric=["events"],
    )
    for s in snaps:
        consumed = ", ".join(f"{k}={v}" for k, v in s.counters.items()) or "-"
        table.add_row(s.entity_id, s.resource, s.window, s.window_start, str(s.total_events),
                      consumed)  # fmt: skip
    render.print_table(table)


@usage_group.command("summary")
@_filters
@click.option("--window", "-w", type=click.Choice(sorted(WINDOWS)),
              default=usage_flows.DEFAULT_SUMMARY_WINDOW, show_default=True,
              help="Which snapshots to add up (one kind, or usage is counted twice).")  # fmt: skip
@target_options
def summary_command(entity_id: str | None, resource: str | None, window: str,
                    start: str | None, end: str | None, target: Target) -> None:  # fmt: skip
    """Total tokens consumed per limit over the selected snapshots."""
    with render.open_limiter(target) as limiter:
        repo = limiter.repository
        summary = repo.run(
            usage_flows.get_usage_summary(repo.state, entity_id, resource, window, start, end)
        )
    if target.json:
        render.echo_json({
            "window": summary.window, "entity_id": entity_id, "resource": resource,
            "start": start, "end": end, "snapshots": summary.snapshots,
            "total_events": summary.total_events, "counters": summary.counters,
        })  # fmt: skip
        return
    table = render.new_table(
        f"usage summary ({summary.snapshots} {window} snapshots, {summary.total_events} events)",
        ["limit", "consumed"],
        numeric=["consumed"],
    )
    for name, value in summary.counters.items():
        table.add_row(name, str(value))
    render.print_table(table)


def register(root: click.Group) -> None:
    """Adds the `aggregator` and `usage` groups to the root command."""
    root.add_command(aggregator_group)
    root.add_command(usage_group)
