"""Our own template checks: what cfn-lint lets through and this project must not."""

from __future__ import annotations

import copy
from typing import Any

from tests.infra._helpers import parsed
from zae_limiter.infra.lint import check_template, lint_template
from zae_limiter.infra.options import StackOptions
from zae_limiter.infra.render import render_template


def _rules(template: dict[str, Any]) -> list[str]:
    return [finding.rule for finding in check_template(template)]


def _gsi(template: dict[str, Any], name: str) -> dict[str, Any]:
    indexes = template["Resources"]["Table"]["Properties"]["GlobalSecondaryIndexes"]
    found: dict[str, Any] = next(i for i in indexes if i["IndexName"] == name)
    return found


def test_rendered_template_has_no_findings_of_ours() -> None:
    assert _rules(parsed(StackOptions("demo", namespace_policies=("a",)))) == []


def test_keys_only_index_with_non_key_attributes_is_caught() -> None:
    template = parsed(StackOptions("demo"))
    _gsi(template, "GSI2")["Projection"]["NonKeyAttributes"] = ["rf"]
    findings = list(check_template(template))
    assert [(f.rule, f.level) for f in findings] == [("Z1001", "error")]
    assert "GSI2" in findings[0].location


def test_bad_key_type_in_an_index_is_caught() -> None:
    for key_types in (["HASH", "SORT"], ["RANGE", "HASH"], ["HASH", "HASH"]):
        template = parsed(StackOptions("demo"))
        for key, key_type in zip(_gsi(template, "GSI3")["KeySchema"], key_types, strict=True):
            key["KeyType"] = key_type
        assert _rules(template) == ["Z1002"], key_types


def test_wildcard_action_and_resource_are_caught_in_every_policy_kind() -> None:
    base = parsed(StackOptions("demo"))
    managed = copy.deepcopy(base)
    managed["Resources"]["AcquirePolicy"]["Properties"]["PolicyDocument"]["Statement"][0][
        "Action"
    ] = "dynamodb:*"
    assert _rules(managed) == ["Z2001"]

    inline = copy.deepcopy(base)
    role = inline["Resources"]["AggregatorRole"]["Properties"]
    role["Policies"][0]["PolicyDocument"]["Statement"][1]["Resource"] = "*"
    assert _rules(inline) == ["Z2002"]

    star = copy.deepcopy(base)
    star["Resources"]["ReadOnlyPolicy"]["Properties"]["PolicyDocument"]["Statement"][0][
        "Action"
    ] = ["*"]
    assert _rules(star) == ["Z2001"]


def test_lint_template_reports_cfn_lint_and_our_findings_together() -> None:
    text = render_template(StackOptions("demo", aggregator=False))
    broken = text.replace("ProjectionType: KEYS_ONLY", "ProjectionType: KEYS_ONLY\n            NonKeyAttributes: [rf]", 1)  # noqa: E501
    assert [f.rule for f in lint_template(broken)] == ["Z1001"]
    bad_type = text.replace("KeyType: RANGE", "KeyType: SORT")
    rules = {f.rule for f in lint_template(bad_type)}
    assert "Z1002" in rules and any(rule.startswith("E") for rule in rules)
