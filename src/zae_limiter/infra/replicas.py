"""The replicas of a global table: what DescribeTable says, and what a deploy changes.

DescribeTable, asked in one replica's region, answers for that replica in `TableStatus`
and lists the table's other replicas in `Replicas` (version 2019.11.21: `RegionName`,
`ReplicaStatus`, ...). A table without replicas has no `Replicas` member at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zae_limiter.infra.aws import Aws
from zae_limiter.infra.table_only import describe_table


@dataclass(frozen=True, slots=True)
class Replica:
    region: str
    status: str
    #: Set when DynamoDB says why a replica is not ACTIVE (e.g. a KMS key it cannot use).
    detail: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"region": self.region, "status": self.status, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class RegionChange:
    """Replicas a deploy adds and removes, in the order the options list them."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.removed)

    def as_dict(self) -> dict[str, list[str]]:
        return {"added": list(self.added), "removed": list(self.removed)}


def replicas_of(described: Mapping[str, Any], region: str) -> tuple[Replica, ...]:
    """Every replica, the asked region's first; () for a table that is not global."""
    listed = described.get("Replicas") or []
    if not listed:
        return ()
    others = tuple(
        Replica(
            str(r.get("RegionName", "?")),
            str(r.get("ReplicaStatus", "?")),
            r.get("ReplicaStatusDescription"),
        )
        for r in listed
    )
    if any(r.region == region for r in others):
        # Some answers list the asked region too; keep its own entry, put it first.
        return tuple(sorted(others, key=lambda r: r.region != region))
    return (Replica(region, str(described.get("TableStatus", "?"))), *others)


def region_change(current: Sequence[str], wanted: Sequence[str]) -> RegionChange:
    return RegionChange(
        added=tuple(r for r in wanted if r not in current),
        removed=tuple(r for r in current if r not in wanted),
    )


def current_regions(aws: Aws, name: str) -> tuple[str, ...] | None:
    """The table's replica regions as deployed (its own region alone if it is not
    global); None when there is no table yet."""
    described = describe_table(aws, name)
    if described is None:
        return None
    found = replicas_of(described, aws.region)
    return tuple(r.region for r in found) if found else (aws.region,)
