"""StackOptions: every invalid value is refused before rendering or AWS."""

from __future__ import annotations

from typing import Any

import pytest

from zae_limiter.errors import ValidationError
from zae_limiter.infra.options import (
    ACQUIRE_ACTIONS,
    FULL_ACCESS_ACTIONS,
    READ_ONLY_ACTIONS,
    StackOptions,
    scoped,
)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"name": "9lives"}, "invalid name"),
        ({"name": "has_underscore"}, "invalid name"),
        ({"name": "x" * 49}, "invalid name"),
        ({"log_retention_days": 2}, "--log-retention-days"),
        ({"lambda_memory_mb": 64}, "--lambda-memory"),
        ({"lambda_timeout_seconds": 901}, "--lambda-timeout"),
        ({"batch_size": 0}, "--batch-size"),
        ({"batching_window_seconds": 301}, "--batching-window"),
        ({"pitr_recovery_days": 36}, "--pitr-recovery-days"),
        ({"permission_boundary": "arn:aws:iam::1:role/x"}, "--permission-boundary"),
        ({"alarm_sns_topic": "my-topic"}, "--alarm-sns-topic"),
        ({"role_name_format": "fixed-name"}, "--role-name-format"),
        ({"role_name_format": "{}-{}"}, "--role-name-format"),
        ({"role_name_format": "{}" + "x" * 70}, "--role-name-format"),
        ({"namespace_policies": ("bad/ns",)}, "invalid namespace"),
        ({"namespace_policies": ("a", "a")}, "twice"),
    ],
)
def test_invalid_options_are_refused(changes: dict[str, object], message: str) -> None:
    kwargs: dict[str, object] = {"name": "demo", **changes}
    with pytest.raises(ValidationError, match=message):
        StackOptions(**kwargs)  # type: ignore[arg-type]


def test_derived_names() -> None:
    options = StackOptions("demo", role_name_format="{}-aggregator-role", lambda_timeout_seconds=10)
    assert options.function_name == "demo-aggregator"
    assert options.log_group_name == "/aws/lambda/demo-aggregator"
    assert options.role_name == "demo-aggregator-role"
    assert options.duration_alarm_ms == 8000
    assert StackOptions("demo").role_name is None


def test_namespace_logical_ids_are_distinct_and_alphanumeric() -> None:
    policies = StackOptions("demo", namespace_policies=("a-b", "a.b", "ab")).scoped_policies
    ids = [p.logical_id for p in policies]
    assert len(set(ids)) == 3
    assert all(i.isalnum() for i in ids)


def test_action_lists() -> None:
    assert set(ACQUIRE_ACTIONS) == {
        "dynamodb:UpdateItem", "dynamodb:GetItem", "dynamodb:PutItem",
        "dynamodb:BatchGetItem", "dynamodb:DescribeTable",
    }  # fmt: skip
    assert set(ACQUIRE_ACTIONS) <= set(FULL_ACCESS_ACTIONS)
    assert set(READ_ONLY_ACTIONS) <= set(FULL_ACCESS_ACTIONS)
    assert not any("*" in action for action in FULL_ACCESS_ACTIONS)
    assert "dynamodb:Scan" in READ_ONLY_ACTIONS
    assert "dynamodb:Scan" not in scoped(READ_ONLY_ACTIONS)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"usage_windows": ("weekly",)}, "unknown: weekly"),
        ({"usage_windows": ()}, "one or more of hourly, daily, monthly"),
        ({"usage_retention_days": 0}, "--usage-retention-days"),
    ],
)
def test_usage_settings_are_checked(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        StackOptions("demo", **options)
