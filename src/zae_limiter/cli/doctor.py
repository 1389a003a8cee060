"""`zae-limiter doctor`: check a deployment, say what is wrong and how to fix it.

    zae-limiter doctor --name T [--namespace NS] [--region R] [--endpoint-url URL] [-o json]

Exit codes (for CI): 0 every check passed or was skipped; 1 at least one failed; 2 none
failed but at least one warned. The checks live in `zae_limiter.doctor`; this module only
parses, calls and prints (docs/doctor.md).
"""

from __future__ import annotations

import click

from zae_limiter.cli import render
from zae_limiter.cli.options import Target, target_options
from zae_limiter.clock_watch import wall_clock_ms
from zae_limiter.doctor import DoctorReport, DoctorTarget, run_doctor

_MARKS = {"ok": "ok", "warn": "WARN", "fail": "FAIL", "skip": "skip"}


def _shown(report: DoctorReport) -> None:
    where = report.endpoint_url or f"AWS {report.region}"
    table = render.new_table(
        f"doctor: table {report.table}, namespace {report.namespace}, {where}",
        ["check", "status", "finding"],
    )
    for check in report.checks:
        table.add_row(check.name, _MARKS[check.status], check.summary)
    render.print_table(table)
    fixes = [c for c in report.checks if c.fix]
    for check in fixes:
        render.echo(f"fix {check.name}: {check.fix}")
    counts = report.counts()
    render.echo(
        f"{counts['ok']} ok, {counts['warn']} warnings, {counts['fail']} failed, "
        f"{counts['skip']} skipped"
    )


@click.command("doctor")
@target_options
@click.option(
    "--clock-offset-ms",
    type=int,
    default=0,
    hidden=True,
    help="Tests only: act as if this host's clock were this many ms ahead.",
)
@click.pass_context
def doctor_command(ctx: click.Context, target: Target, clock_offset_ms: int) -> None:
    """Check a deployment: credentials, table, indexes, stream, schema version, aggregator,
    alarms, dashboard, permissions and this host's clock against DynamoDB's.

    Exit code 0 when healthy, 1 when something is wrong, 2 on warnings only.
    """

    def clock() -> int:
        return wall_clock_ms() + clock_offset_ms

    report = run_doctor(
        DoctorTarget(
            target.name,
            target.namespace,
            target.region,
            target.endpoint_url,
            clock=clock if clock_offset_ms else wall_clock_ms,
        )
    )
    if target.json:
        render.echo_json(report.as_dict())
    else:
        _shown(report)
    ctx.exit(report.exit_code)


def register(root: click.Group) -> None:
    """Adds the `doctor` command to the root group."""
    root.add_command(doctor_command)
