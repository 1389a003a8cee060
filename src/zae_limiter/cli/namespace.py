"""`zae-limiter namespace` commands: list the namespaces of a table, count one, delete one.

zae-limiter namespace list
zae-limiter namespace show NS
zae-limiter namespace delete NS [--yes] [--wcu-per-second N]
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from zae_limiter.cli import render
from zae_limiter.cli.options import Target, target_options
from zae_limiter.flows.records.namespace import DEFAULT_DELETE_WCU, NamespaceInfo

_LABELS = (
    ("entities", "entities"),
    ("limit_configs", "limit configs"),
    ("buckets", "buckets"),
    ("bucket_shards", "bucket shards"),
    ("usage_snapshots", "usage snapshots"),
    ("audit_events", "audit events"),
    ("items", "items in all"),
)


@click.group("namespace")
def namespace_group() -> None:
    """List, inspect and delete the namespaces of a table (tenants, environments)."""


@namespace_group.command("list")
@target_options
def list_command(target: Target) -> None:
    """List the namespaces that hold items (from the namespace index)."""
    with render.open_limiter(target) as limiter:
        names = limiter.list_namespaces()
    if target.json:
        render.echo_json({"namespaces": names})
        return
    table = render.new_table(f"namespaces ({len(names)})", ["namespace"])
    for name in names:
        table.add_row(name)
    render.print_table(table)


def _info_table(info: NamespaceInfo) -> object:
    counts = info.to_dict()
    table = render.new_table(f"namespace {info.namespace}", ["what", "count"], numeric=["count"])
    for key, label in _LABELS:
        table.add_row(label, str(counts[key]))
    return table


@namespace_group.command("show")
@click.argument("ns", metavar="NS")
@target_options
def show_command(ns: str, target: Target) -> None:
    """Count what namespace NS holds: entities, limits, buckets and shards, usage, audit."""
    with render.open_limiter(target) as limiter:
        info = limiter.namespace_info(ns)
    if target.json:
        render.echo_json(info.to_dict())
        return
    render.print_table(_info_table(info))  # type: ignore[arg-type]


@contextmanager
def _progress(enabled: bool) -> Iterator[Progress | None]:
    if not enabled:
        yield None
        return
    bar = Progress(
        TextColumn("deleting"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=Console(stderr=True),
    )  # fmt: skip
    with bar:
        yield bar


@namespace_group.command("delete")
@click.argument("ns", metavar="NS")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--wcu-per-second", type=click.IntRange(min=1),
              default=DEFAULT_DELETE_WCU,
              show_default=True,
              help="Write capacity the deletion may use per second.")  # fmt: skip
@target_options
def delete_command(ns: str, yes: bool, wcu_per_second: int, target: Target) -> None:
    """Delete every item of namespace NS. Safe to run again after an interruption."""
    with render.open_limiter(target) as limiter:
        info = limiter.namespace_info(ns)
        if info.total == 0:
            deleted = 0
        else:
            counts = info.to_dict()
            summary = ", ".join(f"{counts[k]} {label}" for k, label in _LABELS[:-1] if counts[k])
            render.confirm(f"Delete namespace {ns!r} ({summary}; {info.total} items)?", yes)
            with _progress(not target.json) as bar:
                task = None if bar is None else bar.add_task("delete", total=info.total)

                def report(done: int, total: int) -> None:
                    if bar is not None and task is not None:
                        bar.update(task, completed=done, total=total)

                deleted = limiter.delete_namespace(
                    ns, wcu_per_second=wcu_per_second, on_progress=report
                )
    if target.json:
        render.echo_json({"namespace": ns, "deleted_items": deleted})
    elif deleted:
        render.echo(f"deleted namespace {ns} ({deleted} items)")
    else:
        render.echo(f"namespace {ns} holds no items; nothing deleted")


def register(root: click.Group) -> None:
    """Adds the `namespace` group to the root command."""
    root.add_command(namespace_group)
