"""`run_doctor`: every check, in an order where each may use what the earlier ones found,
and a check that cannot run without an earlier one's result is skipped, saying why."""

from __future__ import annotations

from collections.abc import Callable

from zae_limiter import keys
from zae_limiter.doctor import access, aggregator, clock, monitoring, permissions, schema_version
from zae_limiter.doctor import table as table_checks
from zae_limiter.doctor.context import Context, DoctorTarget
from zae_limiter.doctor.report import Check, DoctorReport, fail, skip
from zae_limiter.errors import ValidationError
from zae_limiter.infra.aws import Aws

#: Every check's name, in the order they run and are reported.
CHECKS: tuple[str, ...] = (
    access.NAME,
    table_checks.TABLE,
    table_checks.INDEXES,
    table_checks.STREAM,
    schema_version.NAME,
    aggregator.NAME,
    monitoring.ALARMS,
    monitoring.DASHBOARD,
    permissions.NAME,
    clock.NAME,
)

_AFTER_TABLE: tuple[tuple[str, Callable[[Context], Check]], ...] = (
    (table_checks.INDEXES, table_checks.check_indexes),
    (table_checks.STREAM, table_checks.check_stream),
    (schema_version.NAME, schema_version.check),
)
_DEPLOYMENT: tuple[Callable[[Context], Check], ...] = (
    aggregator.check,
    monitoring.check_alarms,
    monitoring.check_dashboard,
)


def run_doctor(target: DoctorTarget) -> DoctorReport:
    """Check the deployment `target` names; never raises for what it finds."""
    namespace = keys.validate_namespace(target.namespace)

    def report(checks: list[Check], region: str | None) -> DoctorReport:
        return DoctorReport(
            target.name, namespace, region, target.endpoint_url, target.local, tuple(checks)
        )

    try:
        aws = Aws(target.region, target.endpoint_url)
    except ValidationError as error:
        found = fail(access.NAME, str(error), "pass --region or set AWS_REGION")
        return report([found, *_skipped(CHECKS[1:], "no region")], None)
    ctx = Context(target, aws)
    checks = [access.check(ctx)]
    if checks[0].status == "fail":
        return report([*checks, *_skipped(CHECKS[1:], "no usable credentials")], aws.region)
    checks.append(table_checks.check_table(ctx))
    if ctx.described is None:
        checks += _skipped([n for n, _ in _AFTER_TABLE], "no table to check")
    else:
        checks += [run(ctx) for _, run in _AFTER_TABLE]
    if not target.local:
        ctx.load_stack()
    checks += [run(ctx) for run in _DEPLOYMENT]
    if ctx.described is None:
        checks += _skipped([permissions.NAME, clock.NAME], "no table to check")
    else:
        checks += [permissions.check(ctx), clock.check(ctx)]
    return report(checks, aws.region)


def _skipped(names: tuple[str, ...] | list[str], why: str) -> list[Check]:
    return [skip(name, f"not checked: {why}") for name in names]
