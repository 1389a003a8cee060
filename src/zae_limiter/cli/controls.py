"""`zae-limiter entity reset` and `entity top-up`: an operator's controls on one bucket.

zae-limiter entity reset ID --resource R [--reason TEXT] [--yes]
zae-limiter entity top-up ID --resource R --amount LIMIT=N [--amount ...] [--reason TEXT]
zae-limiter entity set-parent ID P [--reason TEXT]

Who did it is the global `--principal` (default: the caller's AWS identity); why is
`--reason`. Both are in the audit event (`zae-limiter audit list ID`).
"""

from __future__ import annotations

import click

from zae_limiter.cli import render
from zae_limiter.cli.options import Target, target_options


def _amounts(values: tuple[str, ...]) -> dict[str, int]:
    amounts: dict[str, int] = {}
    for value in values:
        name, sep, number = value.partition("=")
        if not sep or not name or not number.isdigit() or int(number) <= 0:
            raise click.BadParameter(f"{value!r}: expected LIMIT=N, N a positive whole number")
        amounts[name] = int(number)
    return amounts


@click.command("reset")
@click.argument("entity_id", metavar="ID")
@click.option("--resource", "-r", required=True, metavar="R", help="The bucket's resource.")
@click.option("--reason", default=None, help="Why, for the audit trail.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@target_options
def reset_command(
    entity_id: str, resource: str, reason: str | None, yes: bool, target: Target
) -> None:
    """Fill ID's bucket for R to capacity, on every shard at once (audited)."""
    render.confirm(f"Reset {entity_id!r}'s bucket for {resource!r} to full?", yes)
    with render.open_limiter(target) as limiter:
        shards = limiter.reset_bucket(entity_id, resource, reason=reason)
    if target.json:
        render.echo_json({"entity_id": entity_id, "resource": resource, "shards": shards})
        return
    render.echo(f"reset {entity_id} / {resource} to full ({shards} shard(s))")


@click.command("top-up")
@click.argument("entity_id", metavar="ID")
@click.option("--resource", "-r", required=True, metavar="R", help="The bucket's resource.")
@click.option("--amount", "-a", "amounts", multiple=True, required=True, metavar="LIMIT=N",
              help="Tokens to grant to one limit (repeat for several).")  # fmt: skip
@click.option("--reason", default=None, help="Why, for the audit trail.")
@target_options
def top_up_command(
    entity_id: str, resource: str, amounts: tuple[str, ...], reason: str | None, target: Target
) -> None:
    """Grant ID's bucket for R tokens once (the limit does not change; audited)."""
    asked = _amounts(amounts)
    with render.open_limiter(target) as limiter:
        done = limiter.top_up(entity_id, resource, asked, reason=reason)
    if target.json:
        render.echo_json(
            {
                "entity_id": entity_id,
                "resource": resource,
                "granted": done.granted,
                "refused": done.refused,
                "shards": done.shards,
            }
        )
        return
    granted = ", ".join(f"{n} +{_num(v)}" for n, v in done.granted.items())
    render.echo(f"topped up {entity_id} / {resource}: {granted}")
    for name, left in done.refused.items():
        render.echo(f"{name}: {_num(left)} did not fit (a bucket holds no more than capacity)")


def _num(value: float) -> str:
    return f"{value:g}"


@click.command("set-parent")
@click.argument("entity_id", metavar="ID")
@click.argument("parent_id", metavar="P")
@click.option("--reason", default=None, help="Why, for the audit trail.")
@target_options
def set_parent_command(entity_id: str, parent_id: str, reason: str | None, target: Target) -> None:
    """Move ID under parent P: its cascading acquires take from P from now on (audited).

    Its cascade choices stay as they are; leases open across the move settle with the
    parent they took from. `entity update ID --no-parent` detaches an entity."""
    with render.open_limiter(target) as limiter:
        before = limiter.get_entity(entity_id)
        if before is None:
            raise click.ClickException(f"entity {entity_id!r} not found")
        entity = limiter.set_parent(entity_id, parent_id, reason=reason)
    if target.json:
        render.echo_json(render.entity_json(entity) | {"previous_parent_id": before.parent_id})
        return
    was = before.parent_id or "no parent"
    render.echo(f"moved {entity_id} from {was} to {parent_id}")


def register(group: click.Group) -> None:
    """Adds the controls to the `entity` group."""
    group.add_command(reset_command)
    group.add_command(top_up_command)
    group.add_command(set_parent_command)
