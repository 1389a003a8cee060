"""Shared pieces of the infra tests: rendered variants and a parsed-template helper."""

from __future__ import annotations

from typing import Any

import yaml

from zae_limiter.infra.options import StackOptions
from zae_limiter.infra.render import render_template

TOPIC = "arn:aws:sns:us-east-1:123456789012:zael-alerts"
BOUNDARY = "arn:aws:iam::123456789012:policy/zael-boundary"

#: A global table's replica regions, the stack's first.
REGIONS = ("us-east-1", "eu-west-1", "ap-southeast-1")

VARIANTS: dict[str, StackOptions] = {
    "defaults": StackOptions("demo"),
    "no-aggregator": StackOptions("demo", aggregator=False),
    "no-alarms": StackOptions("demo", alarms=False),
    "alarms-with-topic": StackOptions("demo", alarm_sns_topic=TOPIC),
    "no-aggregator-with-topic": StackOptions("demo", aggregator=False, alarm_sns_topic=TOPIC),
    "pitr": StackOptions("demo", pitr_recovery_days=7),
    "permission-boundary": StackOptions(
        "demo", permission_boundary=BOUNDARY, role_name_format="{}-aggregator-role"
    ),
    "namespace-policies": StackOptions("demo", namespace_policies=("tenant-a", "b.c_d")),
    "deletion-protection": StackOptions("demo", deletion_protection=True),
    "no-dashboard-no-insights": StackOptions("demo", dashboard=False, contributor_insights=False),
    "no-audit-archive": StackOptions("demo", audit_archive=False),
    "archive-glacier-now": StackOptions("demo", audit_archive_glacier_days=0),
    "global": StackOptions("demo", regions=REGIONS, pitr_recovery_days=7),
    "global-no-aggregator": StackOptions("demo", regions=REGIONS, aggregator=False),
    "tuned": StackOptions(
        "demo",
        log_retention_days=90,
        lambda_memory_mb=512,
        lambda_timeout_seconds=120,
        batch_size=500,
        batching_window_seconds=5,
        max_retry_attempts=5,
    ),
}


def parsed(options: StackOptions) -> dict[str, Any]:
    """The rendered template as data (it uses long-form intrinsics: plain YAML)."""
    data: dict[str, Any] = yaml.safe_load(render_template(options))
    return data


def resources(options: StackOptions) -> dict[str, Any]:
    result: dict[str, Any] = parsed(options)["Resources"]
    return result
