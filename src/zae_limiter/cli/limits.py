"""`zae-limiter limits` commands: set, get and delete one level; apply a limits file.

zae-limiter limits set (--entity E [--resource R] | --resource R | --system) -l SPEC ...
zae-limiter limits get (--entity E [--resource R] | --resource R | --system)
zae-limiter limits delete (--entity E [--resource R] | --resource R | --system) [--yes]
zae-limiter limits apply -f limits.yaml [--dry-run] [--prune] [--yes]
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from zae_limiter.cli import render
from zae_limiter.cli.entity import require_entity
from zae_limiter.cli.options import Target, target_options
from zae_limiter.cli.spec import (
    ApplyPlan,
    Desired,
    EntitySpec,
    Level,
    LevelChange,
    entity_conflicts,
    format_limit,
    parse_limits,
    parse_limits_file,
    plan,
)
from zae_limiter.errors import ValidationError
from zae_limiter.limiter import SyncRateLimiter
from zae_limiter.limits import Limit

F = TypeVar("F", bound=Callable[..., Any])


def _level_options(func: F) -> F:
    """--entity/-e, --resource/-r and --system, turned into one `level` argument."""

    @click.option(
        "--entity",
        "-e",
        "entity_id",
        default=None,
        metavar="E",
        help="An entity's limits (with --resource: for that resource only).",
    )
    @click.option(
        "--resource",
        "-r",
        default=None,
        metavar="R",
        help="A resource: alone, the resource's defaults.",
    )
    @click.option("--system", is_flag=True, help="The system defaults.")
    @functools.wraps(func)
    def wrapper(
        *args: Any, entity_id: str | None, resource: str | None, system: bool, **kwargs: Any
    ) -> Any:
        return func(*args, level=choose_level(entity_id, resource, system), **kwargs)

    return wrapper  # type: ignore[return-value]


def choose_level(entity_id: str | None, resource: str | None, system: bool) -> Level:
    """Exactly one level: --entity E [--resource R], --resource R, or --system."""
    if system and (entity_id is not None or resource is not None):
        raise click.UsageError("--system cannot be combined with --entity or --resource")
    if not system and entity_id is None and resource is None:
        raise click.UsageError(
            "choose a level: --entity E [--resource R], --resource R or --system"
        )
    return Level.of(entity_id, resource)


def _parse_limit_options(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> tuple[Limit, ...]:
    try:
        return parse_limits(value)
    except ValidationError as error:
        raise click.BadParameter(str(error), ctx=ctx, param=param) from None


def read_level(limiter: SyncRateLimiter, level: Level) -> tuple[Limit, ...]:
    if level.kind == "system":
        return limiter.get_system_defaults()
    if level.kind == "resource":
        return limiter.get_resource_defaults(level.resource or "")
    return limiter.get_limits(level.entity_id or "", level.resource)


def write_level(limiter: SyncRateLimiter, level: Level, limits: tuple[Limit, ...]) -> None:
    if level.kind == "system":
        limiter.set_system_defaults(list(limits))
    elif level.kind == "resource":
        limiter.set_resource_defaults(level.resource or "", list(limits))
    else:
        limiter.set_limits(level.entity_id or "", list(limits), resource=level.resource)


def delete_level(limiter: SyncRateLimiter, level: Level) -> None:
    if level.kind == "system":
        limiter.delete_system_defaults()
    elif level.kind == "resource":
        limiter.delete_resource_defaults(level.resource or "")
    else:
        limiter.delete_limits(level.entity_id or "", level.resource)


def _check_level(limiter: SyncRateLimiter, level: Level) -> None:
    if level.entity_id is not None:
        require_entity(limiter, level.entity_id)


def _show_level(level: Level, limits: tuple[Limit, ...], headline: str | None) -> None:
    if headline:
        render.echo(headline)
    if limits:
        render.print_table(render.limits_table(level.describe(), limits))
    elif headline is None:
        render.echo(f"no limits stored at {level.describe()}")


@click.group("limits")
def limits_group() -> None:
    """Set, read and delete stored limits, one level at a time or from a YAML file.

    A limit is NAME:RATE[/sec|min|hour|day][:BURST]; without a unit the rate is per
    second, and without a burst the capacity equals the rate.
    """


@limits_group.command("set")
@_level_options
@click.option(
    "--limit",
    "-l",
    "limits",
    multiple=True,
    required=True,
    metavar="SPEC",
    callback=_parse_limit_options,
    help="NAME:RATE[/sec|min|hour|day][:BURST][:soft], e.g. rpm:100/min (repeatable); "
    "':soft' counts and never rejects; ':global=R1,R2,...' makes one limit shared by "
    "those regions (docs/global.md).",
)
@target_options
def set_command(level: Level, limits: tuple[Limit, ...], target: Target) -> None:
    """Store the limits of one level, replacing what was stored there."""
    with render.open_limiter(target) as limiter:
        _check_level(limiter, level)
        write_level(limiter, level, limits)
    if target.json:
        render.echo_json(
            {"level": render.level_json(level), "limits": [render.limit_json(x) for x in limits]}
        )
        return
    _show_level(level, limits, f"set {len(limits)} limit(s) at {level.describe()}")


@limits_group.command("get")
@_level_options
@target_options
def get_command(level: Level, target: Target) -> None:
    """Show the limits stored at one level (not resolved: see `entity show`), with
    the next change of each scheduled limit (when, and to what)."""
    with render.open_limiter(target) as limiter:
        _check_level(limiter, level)
        limits = read_level(limiter, level)
    if target.json:
        render.echo_json(
            {"level": render.level_json(level), "limits": [render.limit_json(x) for x in limits]}
        )
        return
    _show_level(level, limits, None)


@limits_group.command("delete")
@_level_options
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@target_options
def delete_command(level: Level, yes: bool, target: Target) -> None:
    """Delete the limits stored at one level."""
    with render.open_limiter(target) as limiter:
        _check_level(limiter, level)
        limits = read_level(limiter, level)
        if limits:
            specs = ", ".join(format_limit(x) for x in limits)
            render.confirm(f"Delete the limits at {level.describe()} ({specs})?", yes)
            delete_level(limiter, level)
    if target.json:
        render.echo_json(
            {
                "level": render.level_json(level),
                "deleted": bool(limits),
                "limits": [render.limit_json(x) for x in limits],
            }
        )
    elif limits:
        render.echo(f"deleted {len(limits)} limit(s) at {level.describe()}")
    else:
        render.echo(f"no limits stored at {level.describe()}; nothing deleted")


def _current(limiter: SyncRateLimiter, desired: Desired, prune: bool = False) -> ApplyPlan:
    """Read what the file's entities and levels look like now, and plan the difference;
    with `prune`, also remove every stored level the file does not name."""
    existing: set[str] = set()
    problems: list[str] = []
    for wanted in desired.entities:
        stored = limiter.get_entity(wanted.entity_id)
        if stored is not None:
            existing.add(wanted.entity_id)
            problems += entity_conflicts(wanted, stored)
    declared = {e.entity_id for e in desired.entities}
    for wanted in desired.entities:
        parent = wanted.parent_id
        if parent and parent not in declared and limiter.get_entity(parent) is None:
            problems.append(f"entity {wanted.entity_id!r}: parent {parent!r} does not exist")
    if problems:
        raise click.ClickException(
            "the limits file cannot be applied:\n  " + "\n  ".join(dict.fromkeys(problems))
        )
    stored_levels = {level: read_level(limiter, level) for level in desired.levels}
    the_plan = plan(desired, existing, stored_levels)
    if not prune:
        return the_plan
    unnamed = [Level.of(e, r) for e, r in limiter.list_limit_levels()]
    removals = []
    for level in sorted(set(unnamed) - set(desired.levels)):
        before = read_level(limiter, level)
        if before:
            removals.append(LevelChange("remove", level, before, ()))
    return ApplyPlan(the_plan.create, (*the_plan.changes, *removals))


def _entity_spec_json(spec: EntitySpec) -> dict[str, Any]:
    return {
        "entity_id": spec.entity_id,
        "name": spec.name,
        "parent_id": spec.parent_id,
        "cascade": bool(spec.cascade),
    }


def _change_json(change: LevelChange) -> dict[str, Any]:
    return {
        "action": change.action,
        "level": render.level_json(change.level),
        "before": [render.limit_json(x) for x in change.before],
        "after": [render.limit_json(x) for x in change.after],
    }


def _shown(limit: Limit) -> str:
    # A schedule-only change must show in the plan: the spec alone is the base numbers.
    return limit.describe() if limit.schedule else format_limit(limit)


def _plan_table(the_plan: ApplyPlan) -> Any:
    table = render.new_table("plan", ["action", "what", "before", "after"])
    for spec in the_plan.create:
        extra = [f"name {spec.name!r}"] if spec.name else []
        extra += [f"parent {spec.parent_id}"] if spec.parent_id else []
        extra += ["cascade"] if spec.cascade else []
        what = f"entity {spec.entity_id}" + (f" ({', '.join(extra)})" if extra else "")
        table.add_row("create", what, "-", "-")
    for change in the_plan.changes:
        table.add_row(
            change.action,
            change.level.describe(),
            ", ".join(_shown(x) for x in change.before) or "-",
            ", ".join(_shown(x) for x in change.after) or "-",
        )
    return table


def _apply(limiter: SyncRateLimiter, the_plan: ApplyPlan) -> None:
    for spec in the_plan.create:
        limiter.create_entity(
            spec.entity_id, spec.name, parent_id=spec.parent_id, cascade=bool(spec.cascade)
        )
    for change in the_plan.changes:
        if change.after:
            write_level(limiter, change.level, change.after)
        else:
            delete_level(limiter, change.level)


@limits_group.command("apply")
@click.option(
    "--file",
    "-f",
    "file",
    type=click.File("r", encoding="utf-8"),
    required=True,
    help="The limits file (YAML); '-' reads stdin.",
)
@click.option("--dry-run", is_flag=True, help="Print the plan and change nothing.")
@click.option("--prune", is_flag=True,
              help="Also delete stored limits at levels the file does not name.")  # fmt: skip
@click.option("--yes", "-y", is_flag=True, help="Apply without asking.")
@target_options
def apply_command(file: Any, dry_run: bool, prune: bool, yes: bool, target: Target) -> None:
    """Make the stored limits match a YAML file: print the plan, then apply it.

    Only the levels and entities the file names are managed; an empty list removes
    the limits of its level. With --prune the file is the whole truth: limits stored at
    any other level of the namespace are deleted too (entities are kept). Applying the
    same file twice changes nothing.
    """
    desired = parse_limits_file(file.read())
    with render.open_limiter(target) as limiter:
        the_plan = _current(limiter, desired, prune)
        count = len(the_plan.create) + len(the_plan.changes)
        if not target.json and not the_plan.empty:
            render.print_table(_plan_table(the_plan))
        apply = not the_plan.empty and not dry_run
        if apply:
            render.confirm(f"Apply {count} change(s)?", yes)
            _apply(limiter, the_plan)
    if target.json:
        render.echo_json(
            {
                "dry_run": dry_run,
                "applied": apply,
                "create_entities": [_entity_spec_json(s) for s in the_plan.create],
                "changes": [_change_json(c) for c in the_plan.changes],
            }
        )
    elif the_plan.empty:
        render.echo("no changes")
    else:
        render.echo(
            f"applied {count} change(s)" if apply else f"dry run: {count} change(s) not applied"
        )


# `limits show` is `limits get`: the stored limits, with each schedule's next change.
limits_group.add_command(get_command, "show")


@limits_group.command("bucket-ttl")
@_level_options
@click.argument("seconds", required=False, type=int)
@click.option("--clear", is_flag=True, help="Remove the level's value (the next level's applies).")
@target_options
def bucket_ttl_command(level: Level, seconds: int | None, clear: bool, target: Target) -> None:
    """Show, or set to SECONDS, how long a full, idle bucket item of this level is kept
    before it expires (0: never; default 1 day). See docs/quotas.md."""
    if clear and seconds is not None:
        raise click.UsageError("give SECONDS or --clear, not both")
    where = {"entity_id": level.entity_id, "resource": level.resource}
    with render.open_limiter(target) as limiter:
        _check_level(limiter, level)
        if seconds is not None or clear:
            limiter.set_bucket_ttl(seconds, **where)
        stored = limiter.get_bucket_ttl(**where)
    if target.json:
        render.echo_json({"level": render.level_json(level), "bucket_ttl": stored})
        return
    shown = "none stored (the next level's, else 1 day)" if stored is None else f"{stored} s"
    render.echo(f"bucket TTL at {level.describe()}: {shown}")


def register(root: click.Group) -> None:
    """Adds the `limits` group to the root command."""
    root.add_command(limits_group)
