"""`zae-limiter migrate`: move a table's schema to the version this release needs.

    zae-limiter migrate --name T --check      # exit 2 when a migration is pending
    zae-limiter migrate --name T --dry-run    # the steps and the items they would touch
    zae-limiter migrate --name T [--yes]      # run them (asks first unless --yes)
    zae-limiter migrate --name T --to 2       # a given version

Exit codes: 0 done or nothing to do; 1 refused, declined or failed; 2 bad usage, or with
--check a pending migration (every failure then exits 1, as infrastructure tools do).
Results go to stdout (one JSON document with `--output json`); the prompt goes to stderr.
"""

from __future__ import annotations

import getpass
import json
import socket
from typing import Any

import click

from zae_limiter import migrations
from zae_limiter.cli._errors import EXIT_CHANGES
from zae_limiter.cli.options import Target, target_options
from zae_limiter.flows.records.version import VersionRecord, client_version
from zae_limiter.migrations import Migration, MigrationPlan, StepOutcome, StepPlan
from zae_limiter.operations import Operations
from zae_limiter.repository import SyncRepository

EXIT_PENDING = EXIT_CHANGES
EXIT_BLOCKED = 1


def updated_by() -> str:
    """Who ran the migration, for the version record."""
    try:
        who = f"{getpass.getuser()}@{socket.gethostname()}"
    except (KeyError, OSError):  # no user database in some containers
        who = socket.gethostname()
    return f"zae-limiter {client_version()} migrate ({who})"


def _step_line(step: Migration, direction: str) -> str:
    arrow = (
        f"{step.version - 1} -> {step.version}"
        if direction == "up"
        else f"{step.version} -> {step.version - 1}"
    )
    kind = "reversible" if step.reversible else "irreversible"
    return f"  step {arrow}: {step.description} ({kind})"


def _counts(plan: StepPlan) -> str:
    spread = ", ".join(f"{ns}: {n}" for ns, n in sorted(plan.by_namespace.items()))
    return f"{plan.items}" + (f" ({spread})" if spread else "")


def _record_json(record: VersionRecord | None) -> dict[str, Any] | None:
    if record is None:
        return None
    return {
        "schema_version": record.schema_version,
        "min_client_version": record.min_client_version,
        "updated_at_ms": record.updated_at_ms,
        "updated_by": record.updated_by,
        "migrating_to": record.migrating_to,
        "migration_step": record.migration_step,
        "migration_done": record.done,
    }


def _plan_json(plan: MigrationPlan) -> dict[str, Any]:
    return {
        "table": plan.table,
        "schema_version": plan.current,
        "target": plan.target,
        "latest": migrations.LATEST,
        "client_version": client_version(),
        "record": _record_json(plan.record),
        "direction": plan.direction,
        "pending": plan.pending,
        "steps": [
            {"version": s.version, "description": s.description, "reversible": s.reversible}
            for s in plan.steps
        ],
    }


def _describe(plan: MigrationPlan) -> None:
    record = plan.record
    stated = "no version record" if record is None else f"schema version {plan.current}"
    if not plan.pending:
        click.echo(f"table {plan.table}: {stated}, up to date (target {plan.target})")
        return
    click.echo(f"table {plan.table}: {stated}, target {plan.target}")
    if record is not None and record.migrating:
        click.echo(
            f"  an interrupted migration to {record.migrating_to} resumes "
            f"({record.done} items already done)"
        )
    for step in plan.steps:
        click.echo(_step_line(step, plan.direction))


def _open(target: Target) -> SyncRepository:
    # The table may be at an older schema: that is what we are here to fix.
    return SyncRepository.open(
        target.namespace,
        name=target.name,
        region=target.region,
        endpoint_url=target.endpoint_url,
        principal=target.principal,
        check_schema=False,  # the table may be at an older schema: that is the point
    )


@click.command("migrate")
@target_options
@click.option(
    "--to",
    "to_version",
    type=int,
    default=None,
    metavar="VERSION",
    help=f"Target schema version (default: {migrations.LATEST}, this release's).",
)
@click.option(
    "--check",
    is_flag=True,
    help="Only report: exit 0 when up to date, 2 when a migration is pending, 1 on error (CI).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the steps and the items each would touch; change nothing.",
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation (CI).")
@click.pass_context
def migrate_command(
    ctx: click.Context,
    target: Target,
    to_version: int | None,
    check: bool,
    dry_run: bool,
    yes: bool,
) -> None:
    """Migrate the table's schema to the version this release needs.

    The whole table is migrated, every namespace. Each step is idempotent and records its
    progress in the table, so an interrupted run resumes where it stopped when run again.
    """
    if check and dry_run:
        raise click.UsageError("--check and --dry-run do not go together")
    if to_version is not None and not (migrations.BASE_VERSION <= to_version <= migrations.LATEST):
        raise click.BadParameter(
            f"this release knows schema versions {migrations.BASE_VERSION} to {migrations.LATEST}",
            param_hint="--to",
        )
    with _open(target) as repo:
        plan = repo.run(migrations.status(repo.state, to_version))
        if check:
            _report(target, plan, {"pending": plan.pending})
            if plan.pending:
                if not target.json:
                    click.echo(f"migration pending: run `zae-limiter migrate --name {plan.table}`")
                ctx.exit(EXIT_PENDING)
            return
        if not plan.pending:
            _report(target, plan, {"dry_run": []} if dry_run else {"applied": []})
            return
        if dry_run:
            counted = repo.run(migrations.plan_migration(repo.state, plan, repo.now_ms()))
            _report_dry_run(target, plan, counted)
            if any(c.blocked for c in counted):
                ctx.exit(EXIT_BLOCKED)
            return
        if not target.json:
            _describe(plan)
        if not yes:
            click.confirm(
                f"Migrate table {plan.table} to schema version {plan.target}?",
                abort=True,
                err=True,
            )
        repo.ensure_principal()
        auditor = Operations(repo).auditor()
        outcomes = repo.run(
            migrations.migrate(repo.state, plan, repo.now_ms(), updated_by(), auditor=auditor)
        )
        _report_done(target, plan, outcomes)


def _report(target: Target, plan: MigrationPlan, extra: dict[str, Any]) -> None:
    if target.json:
        click.echo(json.dumps({**_plan_json(plan), **extra}, indent=2, sort_keys=True))
    else:
        _describe(plan)


def _report_dry_run(target: Target, plan: MigrationPlan, counted: list[StepPlan]) -> None:
    if target.json:
        steps = [
            {
                "version": c.version,
                "action": c.action,
                "items": c.items,
                "by_namespace": c.by_namespace,
                "blocked": c.blocked,
            }
            for c in counted
        ]
        click.echo(json.dumps({**_plan_json(plan), "dry_run": steps}, indent=2, sort_keys=True))
        return
    _describe(plan)
    for step in counted:
        click.echo(f"    step {step.version} would {step.action}: {_counts(step)}")
        if step.blocked:
            click.echo(f"    blocked: {step.blocked}")
    click.echo("    entities, limit configs and usage snapshots are kept as they are")
    click.echo("dry run: nothing was changed")


def _report_done(target: Target, plan: MigrationPlan, outcomes: list[StepOutcome]) -> None:
    if target.json:
        applied = [
            {"version": o.version, "direction": o.direction, "items": o.items,
             "skipped": o.skipped}
            for o in outcomes
        ]  # fmt: skip
        body = {**_plan_json(plan), "pending": False, "applied": applied}
        click.echo(json.dumps(body, indent=2, sort_keys=True))
        return
    for outcome in outcomes:
        done = "already applied" if outcome.skipped else f"{outcome.items} items changed"
        click.echo(f"step {outcome.version} done ({outcome.direction}): {done}")
    click.echo(f"table {plan.table}: schema version {plan.target}")


def register(root: click.Group) -> None:
    """Adds the `migrate` command to the root group."""
    root.add_command(migrate_command)
