"""`zae-limiter audit list`: who changed which configuration, and when.

zae-limiter audit list [--entity E] [--since T] [--limit N] [--table-level] [-o json]
zae-limiter audit list --archived [--archive-bucket B] ...   (expired events, from S3)
"""

from __future__ import annotations

import re
import time
from typing import Any

import click

from zae_limiter import infra
from zae_limiter.cli import render
from zae_limiter.cli.options import Target, target_options
from zae_limiter.errors import ValidationError
from zae_limiter.flows.records.usage import parse_time
from zae_limiter.infra.archive import archive_bucket, archived_events
from zae_limiter.keys import TABLE_NAMESPACE, validate_namespace
from zae_limiter.models import AuditEvent

_AGO = re.compile(r"^(\d+)([smhd])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def since_ms(text: str | None, now_ms: int) -> int:
    """`--since`: a duration back from now (30m, 12h, 7d) or a date/time (2026-11-25T14:00Z)."""
    if text is None:
        return 0
    ago = _AGO.match(text.strip())
    if ago:
        return now_ms - int(ago[1]) * _UNIT_SECONDS[ago[2]] * 1000
    try:
        moment = parse_time(text, "--since")
    except ValidationError:
        raise ValidationError(
            f"--since {text!r} is neither a duration (30m, 12h, 7d) nor a date or time "
            "(2026-11-25 or 2026-11-25T14:00Z)"
        ) from None
    assert moment is not None
    return int(moment.timestamp() * 1000)


def _summary(value: dict[str, Any] | None) -> str:
    if value is None:
        return "-"
    if "limits" in value and isinstance(value["limits"], list):
        specs = [f"{x['name']}:{x['refill_amount']}/{x['refill_period_seconds']}s"
                 f"(cap {x['capacity']})" for x in value["limits"]]  # fmt: skip
        extra = [f"on_unavailable={value['on_unavailable']}"] if "on_unavailable" in value else []
        return ", ".join(specs + extra) or "(none)"
    parts = [f"{k}={v}" for k, v in sorted(value.items()) if not isinstance(v, dict)]
    nested = [f"{k}: {len(v)}" for k, v in sorted(value.items()) if isinstance(v, dict)]
    return ", ".join(parts + nested)


def _what(event: AuditEvent) -> str:
    if event.action == "delete_namespace" and event.before:
        return f"namespace {event.before.get('namespace')}"
    if event.entity_id is not None:
        return f"entity {event.entity_id}" + (f" / {event.resource}" if event.resource else "")
    if event.resource is not None:
        return f"resource {event.resource}"
    if event.action.endswith("_limits"):
        return "system defaults"
    return "-"


def _archived(
    target: Target, bucket: str | None, entity_id: str | None, start: int, table_level: bool
) -> list[AuditEvent]:
    namespace = TABLE_NAMESPACE if table_level else validate_namespace(target.namespace)
    aws = infra.Aws(target.region, target.endpoint_url)
    return archived_events(
        aws,
        bucket or archive_bucket(aws, target.name),
        namespace,
        since_ms=start,
        entity_id=entity_id,
    )


@click.group("audit")
def audit_group() -> None:
    """Read the audit trail: every change of entities and limits, who made it, and when."""


@audit_group.command("list")
@click.option("--entity", "-e", "entity_id", default=None, metavar="E",
              help="Only the changes of entity E.")  # fmt: skip
@click.option("--since", default=None, metavar="T",
              help="From T: a duration back from now (30m, 12h, 7d) or a date/time.")  # fmt: skip
@click.option("--limit", type=click.IntRange(min=1), default=None, metavar="N",
              help="Only the last N events.")  # fmt: skip
@click.option("--table-level", is_flag=True,
              help="Table-level events instead (migrations, namespace deletions).")  # fmt: skip
@click.option(
    "--archived",
    is_flag=True,
    help="Events the table's TTL expired, read back from the stack's S3 archive.",
)
@click.option("--archive-bucket", default=None, metavar="B",
              help="With --archived: the archive bucket (default: the stack's output "
                   "AuditArchiveBucketName).")  # fmt: skip
@target_options
def list_command(
    entity_id: str | None,
    since: str | None,
    limit: int | None,
    table_level: bool,
    archived: bool,
    archive_bucket: str | None,
    target: Target,
) -> None:
    """List recorded configuration changes, oldest first."""
    if table_level and entity_id is not None:
        raise click.UsageError("--table-level lists table events; it does not take --entity")
    if archive_bucket is not None and not archived:
        raise click.UsageError("--archive-bucket goes with --archived")
    start = since_ms(since, time.time_ns() // 1_000_000)
    if archived:
        events = _archived(target, archive_bucket, entity_id, start, table_level)
        events = events[-limit:] if limit else events
    else:
        with render.open_limiter(target) as limiter:
            events = limiter.get_audit_events(
                entity_id, since_ms=start, limit=limit, table_level=table_level
            )
    if target.json:
        render.echo_json({"events": [e.to_dict() for e in events]})
        return
    if not events:
        render.echo("no audit events")
        return
    table = render.new_table(
        f"audit events ({len(events)})", ["when", "who", "action", "what", "before", "after"]
    )
    for e in events:
        table.add_row(
            render.when(e.at_ms), e.principal, e.action, _what(e),
            _summary(e.before), _summary(e.after),
        )  # fmt: skip
    render.print_table(table)


def register(root: click.Group) -> None:
    """Adds the `audit` group to the root command."""
    root.add_command(audit_group)
