"""`zae-limiter deploy / render / status / delete`: a thin shell over `zae_limiter.infra`.

Progress and prompts go to stderr, results to stdout; with `--output json` stdout holds
nothing but one JSON document.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from zae_limiter import infra
from zae_limiter.cli import render
from zae_limiter.cli._errors import EXIT_CHANGES
from zae_limiter.cli.options import Target, target_options
from zae_limiter.flows.bucket_ttl import check_bucket_ttl
from zae_limiter.infra import policy
from zae_limiter.infra.options import StackOptions
from zae_limiter.infra.render import package_version, render_regional_template
from zae_limiter.infra.stack import ResourceChange, StackEvent
from zae_limiter.infra.table_only import delete_table, describe_table

F = TypeVar("F", bound=Callable[..., Any])

_STACK_OPTIONS: tuple[Callable[[F], F], ...] = (
    click.option("--aggregator/--no-aggregator", default=True, show_default=True,
                 help="Deploy the aggregator Lambda, its stream mapping, DLQ and alarms."),
    click.option("--alarms/--no-alarms", default=True, show_default=True,
                 help="Create CloudWatch alarms."),
    click.option("--alarm-sns-topic", metavar="ARN", help="SNS topic the alarms notify."),
    click.option("--permission-boundary", metavar="ARN",
                 help="Permissions boundary for the aggregator's role."),
    click.option("--role-name-format", metavar="FORMAT",
                 help="Name the aggregator role, e.g. '{}-aggregator-role' ({} = name)."),
    click.option("--log-retention-days", type=int, default=30, show_default=True,
                 help="Aggregator log retention (a CloudWatch Logs value: 1, 3, 5, 7, 14, "
                      "30, 60, 90, ... 3653)."),
    click.option("--lambda-memory", type=int, default=256, show_default=True,
                 help="Aggregator memory (MB)."),
    click.option("--lambda-timeout", type=int, default=60, show_default=True,
                 help="Aggregator timeout (seconds)."),
    click.option("--batch-size", type=int, default=100, show_default=True,
                 help="Stream records per aggregator invocation."),
    click.option("--batching-window", type=int, default=1, show_default=True,
                 help="Seconds to gather records before invoking the aggregator."),
    click.option("--max-retry-attempts", type=int, default=3, show_default=True,
                 help="Retries of a failed batch before it goes to the DLQ."),
    click.option("--deletion-protection/--no-deletion-protection", default=False,
                 show_default=True, help="Protect the table from deletion."),
    click.option("--pitr-recovery-days", type=int, metavar="DAYS",
                 help="Enable point-in-time recovery with this many days (1-35)."),
    click.option("--namespace-policies", multiple=True, metavar="NS",
                 help="Also create IAM policies scoped to namespace NS (repeatable)."),
    click.option("--usage-windows", default="hourly,daily,monthly", show_default=True,
                 metavar="LIST", help="Usage snapshot windows the aggregator keeps."),
    click.option("--usage-retention-days", type=int, default=90, show_default=True,
                 help="Days a usage snapshot is kept after its window ends."),
    click.option("--dashboard/--no-dashboard", default=True, show_default=True,
                 help="Add a CloudWatch dashboard: table and index units and throttles, "
                      "the aggregator, its dead-letter queue."),
    click.option("--contributor-insights/--no-contributor-insights", default=True,
                 show_default=True,
                 help="Contributor Insights on the table: its most accessed and most "
                      "throttled partition keys (billed per event)."),
    click.option("--audit-archive/--no-audit-archive", default=True, show_default=True,
                 help="Archive expired audit events to an S3 bucket of the stack (written "
                      "by the aggregator)."),
    click.option("--audit-archive-glacier-days", type=int, default=90, show_default=True,
                 help="Days before archived audit events move to Glacier Instant Retrieval."),
    click.option("--regions", metavar="LIST", default="",
                 help="A global table with one replica per region, e.g. "
                      "us-east-1,eu-west-1: the stack lives in the first, each other "
                      "region gets its own aggregator stack (docs/global.md)."),
)  # fmt: skip


def stack_options(func: F) -> F:
    """Adds every StackOptions option; the command receives `stack_kwargs`."""
    names = (
        "aggregator", "alarms", "alarm_sns_topic", "permission_boundary", "role_name_format",
        "log_retention_days", "lambda_memory", "lambda_timeout", "batch_size",
        "batching_window", "max_retry_attempts", "deletion_protection",
        "pitr_recovery_days", "namespace_policies", "usage_windows", "usage_retention_days",
        "dashboard", "contributor_insights", "audit_archive", "audit_archive_glacier_days",
        "regions",
    )  # fmt: skip

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        stack_kwargs = {name: kwargs.pop(name) for name in names}
        return func(*args, stack_kwargs=stack_kwargs, **kwargs)

    decorated: Any = wrapper
    for option in reversed(_STACK_OPTIONS):
        decorated = option(decorated)
    return decorated  # type: ignore[no-any-return]


def build_options(name: str, kw: dict[str, Any]) -> StackOptions:
    return StackOptions(
        name=name,
        aggregator=kw["aggregator"],
        alarms=kw["alarms"],
        alarm_sns_topic=kw["alarm_sns_topic"],
        permission_boundary=kw["permission_boundary"],
        role_name_format=kw["role_name_format"],
        log_retention_days=kw["log_retention_days"],
        lambda_memory_mb=kw["lambda_memory"],
        lambda_timeout_seconds=kw["lambda_timeout"],
        batch_size=kw["batch_size"],
        batching_window_seconds=kw["batching_window"],
        max_retry_attempts=kw["max_retry_attempts"],
        deletion_protection=kw["deletion_protection"],
        pitr_recovery_days=kw["pitr_recovery_days"],
        namespace_policies=tuple(kw["namespace_policies"]),
        usage_windows=tuple(w.strip() for w in kw["usage_windows"].split(",") if w.strip()),
        usage_retention_days=kw["usage_retention_days"],
        dashboard=kw["dashboard"],
        contributor_insights=kw["contributor_insights"],
        audit_archive=kw["audit_archive"],
        audit_archive_glacier_days=kw["audit_archive_glacier_days"],
        regions=tuple(r.strip() for r in kw["regions"].split(",") if r.strip()),
    )


class Progress:
    """Prints each stack event as it arrives, with the time since the command began."""

    _STYLES = (("FAILED", "red"), ("ROLLBACK", "yellow"), ("COMPLETE", "green"))

    def __init__(self, console: Console) -> None:
        self.console = console
        self.started = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def __call__(self, event: StackEvent) -> None:
        style = next((s for word, s in self._STYLES if word in event.status), "cyan")
        line = (
            f"[dim]{self.elapsed():7.1f}s[/] [{style}]{event.status:<24}[/] "
            f"{escape(event.resource_type):<34} {escape(event.logical_id)}"
        )
        if event.reason:
            line += f" [dim]{escape(event.reason)}[/]"
        # A log line: off a terminal it runs on rather than wrap at 80 columns.
        self.console.print(line, highlight=False, soft_wrap=not self.console.is_terminal)


def _emit_json(payload: dict[str, Any]) -> None:
    click.echo(json.dumps(payload, indent=2, sort_keys=True, default=str))


def _changes_table(changes: Sequence[ResourceChange], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("Action", "Resource", "Type", "Replacement"):
        table.add_column(column)
    for change in changes:
        table.add_row(
            change.action, change.logical_id, change.resource_type, change.replacement or ""
        )
    return table


def _kv_table(rows: dict[str, Any], title: str | None = None) -> Table:
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for key, value in rows.items():
        table.add_row(key, "" if value is None else str(value))
    return table


def _approver(yes: bool, err: Console) -> infra.deploy.Approve:
    def approve(changes: Sequence[ResourceChange]) -> bool:
        render.print_fitted(err, _changes_table(changes, "Changes"))
        return yes or click.confirm("Apply these changes?", default=False, err=True)

    return approve


@click.command("deploy")
@target_options
@stack_options
@click.option("--plan", is_flag=True, help="Show what would change, change nothing.")
@click.option("--detailed-exitcode", is_flag=True,
              help="With --plan: exit 0 when up to date, 2 when there are changes, 1 on "
                   "error (for CI).")  # fmt: skip
@click.option(
    "--table-only", is_flag=True, help="Create just the table with CreateTable, no CloudFormation."
)
@click.option("--artifact-bucket", metavar="BUCKET",
              help="S3 bucket for the aggregator zip (default: one created per account "
                   "and region).")  # fmt: skip
@click.option("--yes", "-y", is_flag=True, help="Do not ask before applying changes.")
@click.option(
    "--bucket-ttl", type=int, metavar="SECONDS", callback=lambda _c, _p, v: _bucket_ttl(v),
    help="Store the idle time after which a full bucket's item expires, for every bucket "
    "(the system level; 0: never). Without it the stored value, else 1 day, applies.",
)  # fmt: skip
def deploy_command(
    target: Target,
    stack_kwargs: dict[str, Any],
    plan: bool,
    detailed_exitcode: bool,
    table_only: bool,
    artifact_bucket: str | None,
    yes: bool,
    bucket_ttl: int | None,
) -> None:
    """Deploy (create or update) the table, its aggregator and IAM policies."""
    if detailed_exitcode and not plan:
        raise click.UsageError("--detailed-exitcode goes with --plan")
    applied = _deploy(
        target, stack_kwargs, plan, detailed_exitcode, table_only, artifact_bucket, yes
    )
    if bucket_ttl is not None and applied:
        with render.open_limiter(target) as limiter:  # stored config, like limits: audited
            limiter.set_bucket_ttl(bucket_ttl)
        if not target.json:
            Console().print(f"Stored the bucket TTL: {bucket_ttl} s (system level).")


def _bucket_ttl(value: int | None) -> int | None:
    if value is None:
        return None
    try:
        return check_bucket_ttl(value)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--bucket-ttl") from None


def _deploy(
    target: Target,
    stack_kwargs: dict[str, Any],
    plan: bool,
    detailed_exitcode: bool,
    table_only: bool,
    artifact_bucket: str | None,
    yes: bool,
) -> bool:
    """Deploy; True when the table is there as asked (not a plan, not declined)."""
    options = build_options(target.name, stack_kwargs)
    if options.is_global and table_only:
        raise click.UsageError("--table-only creates one region's table; drop --regions")
    # A global table's stack lives in the first of its regions.
    aws = infra.Aws(target.region or options.primary_region, target.endpoint_url)
    err = Console(stderr=True)
    if table_only:
        pending = _deploy_table_only(aws, target, plan, err)
        if detailed_exitcode and pending:
            click.get_current_context().exit(EXIT_CHANGES)
        return not plan
    progress = Progress(err)
    deployer = infra.Deployer(aws, on_event=progress)
    result = deployer.deploy(
        options, artifact_bucket=artifact_bucket, plan=plan, approve=_approver(yes, err)
    )
    if target.json:
        _emit_json(result.as_dict())
    else:
        _show_deploy_result(result, progress.elapsed(), options)
    if detailed_exitcode and result.pending:
        click.get_current_context().exit(EXIT_CHANGES)
    return result.action not in ("plan", "declined")


def _plan_notes(changes: Sequence[ResourceChange], options: StackOptions) -> list[str]:
    """What a resource in the plan does that its line cannot say."""
    touched = {change.logical_id for change in changes}
    notes = []
    if "AuditArchiveBucket" in touched:
        notes.append(
            "AuditArchiveBucket: expired audit events under audit/, lifecycle rule to "
            f"GLACIER_IR after {options.audit_archive_glacier_days} days"
        )
    if "Dashboard" in touched:
        notes.append(f"Dashboard: CloudWatch dashboard {options.name!r}")
    return notes


def _show_deploy_result(result: infra.DeployResult, elapsed: float, options: StackOptions) -> None:
    out = Console()
    if result.action == "plan":
        verb = "create" if result.status is None else "update"
        title = f"Plan to {verb} stack {result.stack_name}"
        render.print_fitted(out, _changes_table(result.changes, title))
        for note in _plan_notes(result.changes, options):
            out.print(note, markup=False, highlight=False, soft_wrap=True)
        _show_regions(out, result)
        out.print("Nothing was changed (--plan).")
        return
    if result.action == "declined":
        out.print("Nothing was changed.")
        return
    messages = {
        "create": "created",
        "update": "updated",
        "unchanged": "already up to date (no changes)",
    }
    out.print(f"Stack {result.stack_name} {messages[result.action]} in {elapsed:.1f}s.")
    if result.version_written:
        out.print("Wrote the schema version record.")
    if result.outputs:
        render.print_fitted(out, _kv_table(result.outputs, "Outputs"))
    _show_regions(out, result)


def _show_regions(out: Console, result: infra.DeployResult) -> None:
    """A global table: replicas added and removed, and each other region's stack."""
    if result.regions is None:
        return
    verb = "would be" if result.action == "plan" else "were"
    for title, regions in (("added", result.regions.added), ("removed", result.regions.removed)):
        if regions:
            out.print(f"Replicas {verb} {title}: {', '.join(regions)}", highlight=False)
    for regional in result.regional:
        where = f"stack {regional.stack_name} in {regional.region}"
        if regional.action == "plan":
            verb = "create" if regional.status is None else "update"
            if regional.status is None or regional.changes:
                title = f"Plan to {verb} {where}"
                render.print_fitted(out, _changes_table(regional.changes, title))
            else:
                out.print(f"{where}: no changes", highlight=False)
        elif regional.action == "skipped":
            out.print(f"{where}: nothing to deploy (no aggregator, no alarms)", highlight=False)
        else:
            out.print(f"{where}: {regional.action} ({regional.status})", highlight=False)


def _deploy_table_only(aws: infra.Aws, target: Target, plan: bool, err: Console) -> bool:
    """Create the table (or, with `plan`, say whether it would be); True when one is due."""
    if plan:
        exists = describe_table(aws, target.name) is not None
        payload = {"table": target.name, "action": "plan", "exists": exists}
        if target.json:
            _emit_json(payload)
        else:
            what = "exists; nothing to create" if exists else "would be created"
            Console().print(f"Table {target.name} {what}. Nothing was changed (--plan).")
        return not exists
    err.print(f"Creating table {escape(target.name)} ...")
    result = infra.deploy_table_only(aws, target.name, f"zae-limiter deploy {package_version()}")
    if target.json:
        _emit_json(result.as_dict())
    else:
        render.print_fitted(Console(), _kv_table(result.as_dict(), f"Table {target.name}"))
    return False


@click.command("render")
@click.option("--name", "-n", envvar="ZAEL_NAME", default="zae-limiter", show_default=True,
              help="Table and stack name (env ZAEL_NAME).")  # fmt: skip
@click.option("--output-file", "-o", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the template (or policy) to FILE instead of stdout.")  # fmt: skip
@click.option("--lint", "run_lint", is_flag=True, help="Also run cfn-lint and our checks.")
@click.option("--policy", "role", type=click.Choice(policy.ROLES),
              help="Print the least-privilege IAM policy of this role instead of the "
                   "template (see docs/deploy.md).")  # fmt: skip
@click.option("--region", help="With --policy: the table's region (default: REGION).")
@click.option("--account", help="With --policy: the table's account id (default: ACCOUNT).")
@click.option("--archive-bucket", metavar="BUCKET",
              help="With --policy: the audit archive bucket (default: the pattern of the "
                   "stack's bucket name).")  # fmt: skip
@click.option("--aggregator-only", "regional", metavar="REGION",
              help="With --regions: the stack of REGION (one of the regions after the "
                   "first): its aggregator and alarms.")  # fmt: skip
@stack_options
def render_command(
    name: str,
    output_file: Path | None,
    run_lint: bool,
    role: str | None,
    region: str | None,
    account: str | None,
    archive_bucket: str | None,
    regional: str | None,
    stack_kwargs: dict[str, Any],
) -> None:
    """Print the CloudFormation template, or with --policy an IAM policy (no AWS calls)."""
    if role is not None and regional is not None:
        raise click.UsageError("--aggregator-only renders a template; not with --policy")
    if role is None and (region or account or archive_bucket):
        raise click.UsageError("--region, --account and --archive-bucket go with --policy")
    if role is not None and run_lint:
        raise click.UsageError("--lint checks the template; it does not go with --policy")
    if role is not None:
        target = policy.PolicyTarget(name, region, account, archive_bucket)
        text = policy.policy_json(role, target)
    elif regional is not None:
        text = render_regional_template(build_options(name, stack_kwargs), regional)
    else:
        text = infra.render_template(build_options(name, stack_kwargs))
    if output_file is None:
        click.echo(text, nl=False)
    else:
        output_file.write_text(text)
    if run_lint:
        _lint(text, regional)


def _lint(template: str, region: str | None = None) -> None:
    try:
        from zae_limiter.infra.lint import lint_template
    except ImportError as missing:  # cfn-lint comes with the dev extra only
        raise click.ClickException(
            f"--lint needs cfn-lint: pip install cfn-lint ({missing})"
        ) from missing
    findings = lint_template(template, regions=None if region is None else [region])
    for finding in findings:
        click.echo(str(finding), err=True)
    if findings:
        raise click.exceptions.Exit(1)


@click.command("status")
@target_options
def status_command(target: Target) -> None:
    """Show the stack, table, indexes, schema version and aggregator."""
    report = infra.status(infra.Aws(target.region, target.endpoint_url), target.name)
    if target.json:
        _emit_json(report.as_dict())
        return
    rows: dict[str, Any] = {
        "stack": report.stack_status or "(none: table deployed without CloudFormation)",
        "table": report.table_status or "(missing)",
    }
    rows.update({f"index {name}": state for name, state in sorted(report.indexes.items())})
    rows["schema version"] = report.schema_version or "(no version record)"
    if report.stack_schema_version is not None:
        rows["stack schema version"] = report.stack_schema_version
    rows["min client version"] = report.min_client_version
    rows["aggregator"] = report.aggregator_function or "(not deployed)"
    rows["stream mapping"] = report.aggregator_mapping_state or "(none)"
    for replica in report.replicas:
        detail = f" ({replica.detail})" if replica.detail else ""
        rows[f"replica {replica.region}"] = f"{replica.status}{detail}"
    if report.stack_reason:
        rows["stack reason"] = report.stack_reason
    out = Console()
    render.print_fitted(out, _kv_table(rows, f"zae-limiter {target.name}"))
    if report.outputs:
        render.print_fitted(out, _kv_table(report.outputs, "Outputs"))
    if report.schema_mismatch:
        Console(stderr=True).print(f"[yellow]warning:[/] {report.schema_mismatch}")


@click.command("delete")
@target_options
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def delete_command(target: Target, yes: bool) -> None:
    """Delete the stack and its table, with all data in it."""
    aws = infra.Aws(target.region, target.endpoint_url)
    err = Console(stderr=True)
    deployer = infra.Deployer(aws, on_event=Progress(err))
    has_stack = deployer.stacks.describe(target.name) is not None
    if not has_stack and describe_table(aws, target.name) is None:
        raise infra.StackNotFoundError(target.name)
    what = "stack and table" if has_stack else "table (deployed without a stack)"
    if not yes:
        click.confirm(f"Delete the {what} {target.name!r} and all its data?", abort=True, err=True)
    if has_stack:
        status = deployer.delete(target.name)
    else:
        delete_table(aws, target.name)
        status = "DELETED"
    if target.json:
        _emit_json({"name": target.name, "deleted": what, "status": status})
    else:
        Console().print(f"Deleted the {what} {target.name}.")


def register(root: click.Group) -> None:
    """Adds deploy, render, status and delete to the root group."""
    for command in (deploy_command, render_command, status_command, delete_command):
        root.add_command(command)
