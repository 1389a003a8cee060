"""The stack's CloudWatch alarms and dashboard: there, and (alarms) not firing.

What the stack declares is read from its resources, then looked up in CloudWatch, so an
alarm or dashboard deleted by hand shows as missing. Local engines have no CloudWatch to
ask (moto accepts alarms in a template but does not create them): skipped there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zae_limiter.doctor.context import AwsCallError, Context, call
from zae_limiter.doctor.report import Check, fail, ok, skip, warn

ALARMS, DASHBOARD = "alarms", "dashboard"
_LOCAL = "a local engine has no CloudWatch (moto accepts alarms in a template but creates none)"


@dataclass(frozen=True, slots=True)
class AlarmFacts:
    declared: tuple[str, ...] = ()
    #: alarm name -> state (OK, ALARM, INSUFFICIENT_DATA) for those CloudWatch has.
    found: dict[str, str] = field(default_factory=dict)
    error: str | None = None


def _declared(ctx: Context, resource_type: str) -> list[str]:
    return [
        str(r.get("PhysicalResourceId"))
        for r in ctx.stack_resources
        if r.get("ResourceType") == resource_type and r.get("PhysicalResourceId")
    ]


def gather_alarms(ctx: Context) -> AlarmFacts:
    declared = tuple(sorted(_declared(ctx, "AWS::CloudWatch::Alarm")))
    if not declared:
        return AlarmFacts()
    try:
        found: dict[str, str] = {}
        for start in range(0, len(declared), 100):  # DescribeAlarms takes 100 names
            answer = call(
                ctx.client("cloudwatch"), "describe_alarms",
                AlarmNames=list(declared[start : start + 100]),
            )  # fmt: skip
            found |= {a["AlarmName"]: a["StateValue"] for a in answer.get("MetricAlarms", [])}
    except AwsCallError as error:
        return AlarmFacts(declared, error=str(error))
    return AlarmFacts(declared, found)


def judge_alarms(name: str, facts: AlarmFacts) -> Check:
    deploy = f"`zae-limiter deploy --name {name}`"
    details = {"declared": list(facts.declared), "states": dict(facts.found)}
    if not facts.declared:
        return warn(
            ALARMS, "the stack declares no alarms (deployed with --no-alarms)",
            f"{deploy} --alarms [--alarm-sns-topic ARN]", **details,
        )  # fmt: skip
    if facts.error is not None:
        return warn(
            ALARMS, f"the alarms could not be read: {facts.error}",
            "grant cloudwatch:DescribeAlarms", **details,
        )  # fmt: skip
    missing = [a for a in facts.declared if a not in facts.found]
    if missing:
        return fail(
            ALARMS, f"declared but missing: {', '.join(missing)}",
            f"{deploy} puts them back (they were deleted outside the stack)", **details,
        )  # fmt: skip
    firing = [a for a, state in facts.found.items() if state == "ALARM"]
    if firing:
        return warn(
            ALARMS, f"firing: {', '.join(firing)}",
            "see each alarm's description; throttles: see docs/operations.md", **details,
        )  # fmt: skip
    return ok(ALARMS, f"{len(facts.declared)} alarms present, none firing", **details)


def check_alarms(ctx: Context) -> Check:
    if ctx.target.local:
        return skip(ALARMS, _LOCAL)
    if ctx.stack is None:
        return skip(ALARMS, "no stack, so no alarms (see aggregator)")
    return judge_alarms(ctx.name, gather_alarms(ctx))


def check_dashboard(ctx: Context) -> Check:
    if ctx.target.local:
        return skip(DASHBOARD, _LOCAL)
    if ctx.stack is None:
        return skip(DASHBOARD, "no stack, so no dashboard (see aggregator)")
    deploy = f"`zae-limiter deploy --name {ctx.name}`"
    declared = _declared(ctx, "AWS::CloudWatch::Dashboard")
    if not declared:
        return warn(
            DASHBOARD, "the stack has no dashboard (deployed with --no-dashboard)",
            f"{deploy} --dashboard",
        )  # fmt: skip
    try:
        call(ctx.client("cloudwatch"), "get_dashboard", DashboardName=declared[0])
    except AwsCallError as error:
        if error.code == "ResourceNotFound":
            return fail(
                DASHBOARD, f"dashboard {declared[0]} is declared but missing",
                f"{deploy} puts it back", dashboard=declared[0],
            )  # fmt: skip
        return warn(
            DASHBOARD, f"the dashboard could not be read: {error}",
            "grant cloudwatch:GetDashboard", dashboard=declared[0],
        )  # fmt: skip
    return ok(DASHBOARD, f"dashboard {declared[0]} present", dashboard=declared[0])
