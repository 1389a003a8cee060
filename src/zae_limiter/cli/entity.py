"""`zae-limiter entity` commands: create, show, list, delete, and `shards show`.

zae-limiter entity create ID [--display-name TEXT] [--parent P] [--cascade]
zae-limiter entity show ID [--resource R ...]
zae-limiter entity list [--parent P]
zae-limiter entity delete ID [--yes]
zae-limiter entity update ID [--display-name TEXT] [--parent P | --no-parent] [--[no-]cascade]
zae-limiter entity shards show ID [--resource R]
zae-limiter entity shares show ID --resource R --limit NAME  (cli/shares.py)
zae-limiter entity reset | top-up ID --resource R ... ; entity set-parent ID P  (cli/controls.py)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import click

from zae_limiter.cli import controls, render, shares
from zae_limiter.cli.options import Target, target_options
from zae_limiter.limiter import SyncRateLimiter
from zae_limiter.limits import Limit
from zae_limiter.models import Entity, ShardInfo

ALL_RESOURCES = "*"


def require_entity(limiter: SyncRateLimiter, entity_id: str) -> Entity:
    """The entity, or a one-line failure (exit code 1) saying how to create it."""
    entity = limiter.get_entity(entity_id)
    if entity is None:
        raise click.ClickException(
            f"entity {entity_id!r} does not exist; create it with "
            f"`zae-limiter entity create {entity_id}`"
        )
    return entity


def cascade_resource_options(command: Any) -> Any:
    """--cascade-resource R and --no-cascade-resource R, each repeatable."""
    command = click.option("--no-cascade-resource", "no_cascade_resources", multiple=True,
                           metavar="R", help="Acquires of R do not take from the parent, "
                           "whatever --cascade says (repeatable).")(command)  # fmt: skip
    return click.option("--cascade-resource", "cascade_resources", multiple=True, metavar="R",
                        help="Acquires of R also take from the parent, whatever --cascade "
                        "says (repeatable).")(command)  # fmt: skip


def cascade_choices(
    kept: dict[str, bool], on: tuple[str, ...], off: tuple[str, ...]
) -> dict[str, bool]:
    both = set(on) & set(off)
    if both:
        raise click.UsageError(f"{sorted(both)}: both --cascade-resource and --no-cascade-resource")
    return {**kept, **dict.fromkeys(on, True), **dict.fromkeys(off, False)}


@click.group("entity")
def entity_group() -> None:
    """Create, inspect, list and delete entities (API keys, tenants, projects)."""


@entity_group.command("create")
@click.argument("entity_id", metavar="ID")
@click.option("--display-name", default=None, help="A human name for the entity.")
@click.option("--parent", "parent_id", default=None, metavar="P", help="Parent entity id.")
@click.option("--cascade", is_flag=True, help="Every acquire also takes from the parent.")
@cascade_resource_options
@click.option("--bypass", is_flag=True,
              help="Its acquires take nothing and never reject (an internal key).")  # fmt: skip
@target_options
def create_command(
    entity_id: str,
    display_name: str | None,
    parent_id: str | None,
    cascade: bool,
    cascade_resources: tuple[str, ...],
    no_cascade_resources: tuple[str, ...],
    bypass: bool,
    target: Target,
) -> None:
    """Create entity ID (fails if it exists)."""
    per_resource = cascade_choices({}, cascade_resources, no_cascade_resources)
    with render.open_limiter(target) as limiter:
        entity = limiter.create_entity(
            entity_id,
            display_name,
            parent_id=parent_id,
            cascade=cascade,
            cascade_for=per_resource,
            bypass=bypass,
        )
    if target.json:
        render.echo_json(render.entity_json(entity))
        return
    render.echo(f"created entity {entity.entity_id}")
    render.print_table(_entity_table(entity))


def _entity_table(entity: Entity, children: list[str] | None = None) -> Any:
    table = render.new_table(None, ["field", "value"])
    table.add_row("id", entity.entity_id)
    table.add_row("name", render.text(entity.name))
    table.add_row("parent", render.text(entity.parent_id))
    table.add_row("cascade", "yes" if entity.cascade else "no")
    if entity.cascade_for:
        choices = ", ".join(f"{r}: {'yes' if on else 'no'}" for r, on in entity.cascade_for)
        table.add_row("cascade per resource", choices)
    if entity.bypass:
        table.add_row("bypass", "yes: acquires take nothing")
    table.add_row("created", render.when(entity.created_at_ms))
    if children is not None:
        table.add_row("children", ", ".join(children) if children else "-")
    return table


@dataclass(frozen=True, slots=True)
class ResourceView:
    """The limits that apply to one resource (or, for `*`, the entity default)."""

    resource: str
    source: str | None
    limits: tuple[Limit, ...]
    available: dict[str, int] | None

    def to_json(self) -> dict[str, Any]:
        tokens = self.available or {}
        return {
            "resource": self.resource,
            "source": self.source,
            "limits": [
                {**render.limit_json(lim), "available": tokens.get(lim.name)} for lim in self.limits
            ],
        }


def resource_view(limiter: SyncRateLimiter, entity_id: str, resource: str) -> ResourceView:
    if resource == ALL_RESOURCES:
        stored = limiter.get_limits(entity_id)
        return ResourceView(resource, "entity_default" if stored else None, stored, None)
    resolved = limiter.resolve_limits(entity_id, resource)
    if resolved is None:
        return ResourceView(resource, None, (), None)
    tokens = limiter.available(entity_id, resource, limits=resolved.limits)
    return ResourceView(resource, resolved.source, resolved.limits, tokens)


def _limits_view_table(views: list[ResourceView]) -> Any:
    columns = ["resource", "limit", "rate", "capacity", "source", "available"]
    table = render.new_table("limits", columns, numeric=["capacity", "available"])
    for view in views:
        source = render.SOURCE_LABELS.get(view.source or "", "none")
        if not view.limits:
            table.add_row(view.resource, "-", "-", "-", source, "-")
        tokens = view.available or {}
        for lim in view.limits:
            table.add_row(
                view.resource,
                lim.name,
                lim.describe(),
                str(lim.capacity),
                source,
                render.text(tokens.get(lim.name)),
            )
    return table


@entity_group.command("show")
@click.argument("entity_id", metavar="ID")
@click.option(
    "--resource",
    "-r",
    "resources",
    multiple=True,
    metavar="R",
    help="Show the limits and tokens for this resource (repeatable).",
)
@target_options
def show_command(entity_id: str, resources: tuple[str, ...], target: Target) -> None:
    """Show entity ID, its children, and its limits per resource with their source."""
    with render.open_limiter(target) as limiter:
        entity = require_entity(limiter, entity_id)
        children = [c.entity_id for c in limiter.get_children(entity_id)]
        wanted = list(dict.fromkeys(resources))
        if not wanted:
            wanted = [ALL_RESOURCES, *limiter.list_resources(entity_id)]
        views = [resource_view(limiter, entity_id, resource) for resource in wanted]
    if target.json:
        render.echo_json(
            {
                "entity": render.entity_json(entity),
                "children": children,
                "resources": [v.to_json() for v in views],
            }
        )
        return
    render.print_table(_entity_table(entity, children))
    render.print_table(_limits_view_table(views))


@entity_group.command("list")
@click.option(
    "--parent", "parent_id", default=None, metavar="P", help="Only the children of entity P."
)
@target_options
def list_command(parent_id: str | None, target: Target) -> None:
    """List the entities of the namespace (or the children of P)."""
    with render.open_limiter(target) as limiter:
        if parent_id is not None:
            require_entity(limiter, parent_id)
            entities = limiter.get_children(parent_id)
        else:
            entities = limiter.get_entities(limiter.list_entities())
    if target.json:
        render.echo_json({"entities": [render.entity_json(e) for e in entities]})
        return
    title = f"children of {parent_id}" if parent_id else "entities"
    table = render.new_table(f"{title} ({len(entities)})", ["id", "name", "parent", "cascade"])
    for e in entities:
        table.add_row(
            e.entity_id, render.text(e.name), render.text(e.parent_id), "yes" if e.cascade else "no"
        )
    render.print_table(table)


@entity_group.command("delete")
@click.argument("entity_id", metavar="ID")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@target_options
def delete_command(entity_id: str, yes: bool, target: Target) -> None:
    """Delete entity ID with its limits, usage and bucket shards (refuses with children)."""
    with render.open_limiter(target) as limiter:
        if _stopped_deletion(limiter, entity_id):
            render.confirm(f"Entity {entity_id!r} has no record, but a deletion left its "
                           "buckets; delete them?", yes)  # fmt: skip
            limiter.delete_entity(entity_id)
            _deleted(entity_id, target)
            return
        require_entity(limiter, entity_id)
        children = [c.entity_id for c in limiter.get_children(entity_id)]
        if children:
            raise click.ClickException(
                f"entity {entity_id!r} has {len(children)} children "
                f"({', '.join(children[:5])}); delete them first"
            )
        render.confirm(f"Delete entity {entity_id!r} with all its limits, usage and buckets?", yes)
        limiter.delete_entity(entity_id)
    _deleted(entity_id, target)


def _stopped_deletion(limiter: SyncRateLimiter, entity_id: str) -> bool:
    """Whether the entity's record is gone but buckets remain: a deletion that stopped
    part way (its process died after the record went), whose mark on shard 0 keeps the
    entity from making shards until a deletion finishes (docs/resilience.md)."""
    return limiter.get_entity(entity_id) is None and bool(limiter.list_resources(entity_id))


def _deleted(entity_id: str, target: Target) -> None:
    if target.json:
        render.echo_json({"entity_id": entity_id, "deleted": True})
        return
    render.echo(f"deleted entity {entity_id}")


@entity_group.command("update")
@click.argument("entity_id", metavar="ID")
@click.option("--display-name", default=None, help="A new human name.")
@click.option("--parent", "parent_id", default=None, metavar="P", help="A new parent entity id.")
@click.option("--no-parent", is_flag=True, help="Detach from the parent (turns cascade off).")
@click.option("--cascade/--no-cascade", default=None,
              help="Whether acquires also take from the parent.")  # fmt: skip
@cascade_resource_options
@click.option("--clear-cascade-resources", is_flag=True,
              help="Forget every per-resource choice (--cascade decides for all).")  # fmt: skip
@click.option("--bypass/--no-bypass", default=None,
              help="Whether its acquires take nothing and never reject.")  # fmt: skip
@target_options
def update_command(
    entity_id: str,
    display_name: str | None,
    parent_id: str | None,
    no_parent: bool,
    cascade: bool | None,
    cascade_resources: tuple[str, ...],
    no_cascade_resources: tuple[str, ...],
    clear_cascade_resources: bool,
    bypass: bool | None,
    target: Target,
) -> None:
    """Change entity ID's name, parent or cascade; what is not given stays as it is."""
    if no_parent and parent_id is not None:
        raise click.UsageError("--parent and --no-parent do not go together")
    changes: dict[str, Any] = {}
    if display_name is not None:
        changes["name"] = display_name
    if parent_id is not None or no_parent:
        changes["parent_id"] = parent_id
    if cascade is not None:
        changes["cascade"] = cascade
    if bypass is not None:
        changes["bypass"] = bypass
    per_resource = bool(cascade_resources or no_cascade_resources or clear_cascade_resources)
    if not changes and not per_resource:
        raise click.UsageError("nothing to change: give --display-name, --parent, --no-parent, "
                               "--cascade/--no-cascade, a cascade resource option "
                               "or --bypass/--no-bypass")  # fmt: skip
    with render.open_limiter(target) as limiter:
        before = require_entity(limiter, entity_id)
        if per_resource:
            # The options change the named resources and keep the others' choices.
            kept = {} if clear_cascade_resources else dict(before.cascade_for)
            changes["cascade_for"] = cascade_choices(kept, cascade_resources, no_cascade_resources)
        entity = limiter.update_entity(entity_id, **changes)
    if target.json:
        render.echo_json(render.entity_json(entity))
        return
    render.echo(f"updated entity {entity.entity_id}")
    render.print_table(_entity_table(entity))


@entity_group.group("shards")
def shards_group() -> None:
    """Inspect the pre-sharded buckets of an entity."""


def shard_report(resource: str, shards: list[ShardInfo]) -> dict[str, Any]:
    """One resource's shards, the totals per limit, and whether the shard counts agree."""
    totals: dict[str, dict[str, int]] = {}
    for shard in shards:
        for name, capacity in shard.capacity.items():
            total = totals.setdefault(name, {"capacity": 0, "tokens": 0, "reserved": 0})
            total["capacity"] += capacity
            total["tokens"] += shard.tokens.get(name, 0)
            total["reserved"] += shard.reserved.get(name, 0)
    return {
        "resource": resource,
        "shards": [
            {
                "shard_id": s.shard_id,
                "shard_count": s.shard_count,
                "capacity": dict(s.capacity),
                "tokens": dict(s.tokens),
                "reserved": dict(s.reserved),
                "write_pressure_pct": s.write_pressure_pct,
                "full_in_ms": s.full_in_ms,
                "resets_at_ms": dict(s.resets_at_ms),
            }
            for s in shards
        ],
        "totals": totals,
        "shard_counts_agree": len({s.shard_count for s in shards}) <= 1,
    }


def _shards_table(entity_id: str, report: dict[str, Any]) -> Any:
    names = sorted(report["totals"])
    columns = [
        "shard",
        "count",
        *[f"{n} tokens/cap" for n in names],
        *[f"{n} reserved" for n in names],
        "wcu %",
        "full in (s)",
    ]
    quotas = sorted({n for s in report["shards"] for n in s["resets_at_ms"]})
    columns.extend(f"{n} window ends (UTC)" for n in quotas)
    table = render.new_table(
        f"{entity_id} / {report['resource']}: {len(report['shards'])} shard(s)",
        columns,
        numeric=columns,
    )
    for s in report["shards"]:
        cells = [f"{s['tokens'].get(n, 0)}/{s['capacity'].get(n, 0)}" for n in names]
        held = [str(s["reserved"].get(n, 0)) for n in names]
        table.add_row(
            str(s["shard_id"]),
            str(s["shard_count"]),
            *cells,
            *held,
            f"{s['write_pressure_pct']:.1f}",
            f"{s['full_in_ms'] / 1000:.1f}",
            *[_utc(s["resets_at_ms"].get(n)) for n in quotas],
        )
    totals = [f"{report['totals'][n]['tokens']}/{report['totals'][n]['capacity']}" for n in names]
    held_total = [str(report["totals"][n]["reserved"]) for n in names]
    table.add_section()
    table.add_row("total", "", *totals, *held_total, "", "", *["" for _ in quotas])
    return table


def _utc(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


@shards_group.command("show")
@click.argument("entity_id", metavar="ID")
@click.option(
    "--resource",
    "-r",
    default=None,
    metavar="R",
    help="Only this resource (default: every resource of the entity).",
)
@target_options
def shards_show_command(entity_id: str, resource: str | None, target: Target) -> None:
    """Show each shard's count, tokens, capacity, tokens held in reserves, write pressure
    and last refill."""
    with render.open_limiter(target) as limiter:
        reports = [
            shard_report(r, sorted(limiter.get_shards(entity_id, r), key=lambda s: s.shard_id))
            for r in ([resource] if resource else sorted(limiter.list_resources(entity_id)))
        ]
        if not any(r["shards"] for r in reports):
            require_entity(limiter, entity_id)
    for report in reports:
        counts = sorted({s["shard_count"] for s in report["shards"]})
        if len(counts) > 1:
            render.warn(
                f"the shards of {entity_id} / {report['resource']} disagree about the shard "
                f"count ({', '.join(map(str, counts))}): a doubling is in progress or was cut short"
            )
    if target.json:
        render.echo_json({"entity_id": entity_id, "resources": reports})
        return
    for report in reports:
        if report["shards"]:
            render.print_table(_shards_table(entity_id, report))
        else:
            render.echo(f"{entity_id} / {report['resource']}: no bucket yet")
    if not reports:
        render.echo(f"{entity_id}: no buckets yet")


def register(root: click.Group) -> None:
    """Adds the `entity` group, with the operator's controls, to the root command."""
    controls.register(entity_group)
    shares.register(entity_group)
    root.add_command(entity_group)
