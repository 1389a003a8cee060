"""Check a rendered template: cfn-lint, plus the rules of this project cfn-lint lacks.

Our own rules guard what the data model depends on (KEYS_ONLY indexes stay keys-only,
every index key schema is HASH then optional RANGE, in a table or a global table; a
global table names each replica region once and streams new and old images) and least
privilege (no `*` action and no `*` resource in any IAM policy).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from cfnlint import api as cfnlint_api
from cfnlint.decode.decode import decode_str

_LEVELS = {"E": "error", "W": "warning", "I": "info"}
_POLICY_HOLDERS = ("AWS::IAM::ManagedPolicy", "AWS::IAM::Policy", "AWS::IAM::Role")


@dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    level: str  # "error", "warning" or "info"
    message: str
    location: str

    def __str__(self) -> str:
        return f"{self.level} {self.rule} at {self.location}: {self.message}"


def lint_template(text: str, regions: list[str] | None = None) -> list[Finding]:
    """Every finding of cfn-lint and of our own checks; an empty list means clean."""
    findings = [_from_match(match) for match in cfnlint_api.lint(text, regions=regions)]
    template, errors = decode_str(text)
    if errors or not isinstance(template, Mapping):
        return findings  # cfn-lint has already reported why it does not parse
    return findings + list(check_template(template))


def _from_match(match: Any) -> Finding:
    rule_id = str(match.rule.id)
    return Finding(
        rule=rule_id,
        level=_LEVELS.get(rule_id[:1], "error"),
        message=str(match.message),
        location=f"line {match.linenumber}",
    )


def check_template(template: Mapping[str, Any]) -> Iterator[Finding]:
    """Our own checks over a parsed template."""
    for logical_id, resource in (template.get("Resources") or {}).items():
        rtype = resource.get("Type")
        props = resource.get("Properties") or {}
        if rtype in ("AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable"):
            for index in props.get("GlobalSecondaryIndexes") or []:
                yield from _check_index(logical_id, index)
        if rtype == "AWS::DynamoDB::GlobalTable":
            yield from _check_global_table(logical_id, props)
        elif rtype in _POLICY_HOLDERS:
            for where, document in _policy_documents(logical_id, props):
                yield from _check_policy(where, document)


def _check_index(logical_id: str, index: Mapping[str, Any]) -> Iterator[Finding]:
    name = index.get("IndexName", "?")
    where = f"Resources/{logical_id}/GlobalSecondaryIndexes/{name}"
    projection = index.get("Projection") or {}
    if projection.get("ProjectionType") == "KEYS_ONLY" and projection.get("NonKeyAttributes"):
        yield Finding(
            "Z1001", "error",
            "a KEYS_ONLY index must not list NonKeyAttributes", where,
        )  # fmt: skip
    key_types = [k.get("KeyType") for k in index.get("KeySchema") or []]
    if key_types not in (["HASH"], ["HASH", "RANGE"]):
        yield Finding(
            "Z1002", "error",
            f"index key schema must be HASH or HASH then RANGE, got {key_types}", where,
        )  # fmt: skip


def _check_global_table(logical_id: str, props: Mapping[str, Any]) -> Iterator[Finding]:
    where = f"Resources/{logical_id}"
    regions = [replica.get("Region") for replica in props.get("Replicas") or []]
    twice = sorted({r for r in regions if isinstance(r, str) and regions.count(r) > 1})
    if twice:
        yield Finding("Z1003", "error", f"replica region listed twice: {twice}", where)
    # Every replica's aggregator sums new - old images: a narrower stream view would leave
    # it without one of them (and replication needs a stream in the first place).
    view = (props.get("StreamSpecification") or {}).get("StreamViewType")
    if view != "NEW_AND_OLD_IMAGES":
        yield Finding(
            "Z1004", "error",
            f"a global table's stream must be NEW_AND_OLD_IMAGES, got {view}", where,
        )  # fmt: skip


def _policy_documents(
    logical_id: str, props: Mapping[str, Any]
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    if "PolicyDocument" in props:
        yield f"Resources/{logical_id}/PolicyDocument", props["PolicyDocument"]
    for i, policy in enumerate(props.get("Policies") or []):
        yield f"Resources/{logical_id}/Policies/{i}", policy.get("PolicyDocument") or {}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _check_policy(where: str, document: Mapping[str, Any]) -> Iterator[Finding]:
    for i, statement in enumerate(_as_list(document.get("Statement") or [])):
        if statement.get("Effect") != "Allow":
            continue
        at = f"{where}/Statement/{i}"
        for action in _as_list(statement.get("Action") or []):
            if isinstance(action, str) and "*" in action:
                yield Finding("Z2001", "error", f"wildcard action {action!r}", at)
        if "NotAction" in statement or "NotResource" in statement:
            yield Finding("Z2003", "error", "NotAction/NotResource grants by exclusion", at)
        for resource in _as_list(statement.get("Resource") or []):
            if resource == "*":
                yield Finding("Z2002", "error", "resource '*'", at)
