"""A schedule of library operations, run on any DynamoDB client: the engine's (tests/sim)
or a recording client on DynamoDB Local (tests/engine/test_sim_conformance.py).

Everything is driven by an injected clock and keepers are kept idle (reserves live far
longer than the schedule), so the requests sent depend only on the responses received.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from zae_limiter import Limit, RateLimitExceeded, SyncRateLimiter, SyncRepository
from zae_limiter.flows.reserves.book import ReserveSettings

TABLE = "sim-conformance"
RPM = Limit.per_minute("rpm", 100)
TPM = Limit.per_minute("tpm", 10_000)
ROOMY = [Limit.per_minute("rpm", 60_000), Limit.per_minute("tpm", 6_000_000)]
#: Reserves that live longer than the interleaved part of the schedule (under 1 s).
LASTING = ReserveSettings(idle_ms=15_000, max_age_ms=15_000)


class Clock:
    """Milliseconds that move only when the schedule says so."""

    def __init__(self, start_ms: int = 1_800_000_000_000) -> None:
        self.now_ms = start_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, seconds: float) -> None:
        self.now_ms += int(seconds * 1000)


@dataclass
class Seen:
    """What the schedule observed, for assertions."""

    values: dict[str, Any] = field(default_factory=dict)
    rejected: int = 0


@dataclass
class Where:
    """The client and table a schedule runs on."""

    client: Any
    table: str = TABLE


def _open(at: Where, clock: Clock, **options: Any) -> tuple[SyncRepository, SyncRateLimiter]:
    client, table = at.client, at.table
    repo = SyncRepository.open(
        name=table, create_table=True, client=client, lean=False, clock=clock, **options
    )
    return repo, SyncRateLimiter(repo)


def run_schedule(
    client: Any, clock: Clock, *, table: str = TABLE, with_doubling: bool = True
) -> Seen:
    seen = Seen()
    client = Where(client, table)
    repo, lim = _open(client, clock, reserve=False)
    repos = [repo]
    try:
        _entities_and_limits(lim, seen)
        _acquires(lim, clock, seen)
        _interleaved(client, clock, seen, repos)
        if with_doubling:
            _doubling(client, clock, seen, repos)
        _administration(Where(client.client, table), clock, seen, repos)
        seen.values["deleted"] = lim.delete_entity("key-2")
    finally:
        for opened in repos:
            opened.close()
    return seen


def _entities_and_limits(lim: SyncRateLimiter, seen: Seen) -> None:
    lim.create_entity("org", name="The org")
    lim.create_entity("key-1", parent_id="org", cascade=True)
    lim.create_entity("key-2")
    lim.set_limits("key-1", [RPM, TPM], resource="gpt-4")
    lim.set_limits("org", [Limit.per_minute("rpm", 150)], resource="gpt-4")
    lim.set_limits("key-2", ROOMY, resource="gpt-4")
    seen.values["limits"] = lim.get_limits("key-1", resource="gpt-4")


def _administration(at: Where, clock: Clock, seen: Seen, repos: list[SyncRepository]) -> None:
    """The off-path operations: entities, defaults at each level, audit, namespaces."""
    repo, lim = _open(at, clock, reserve=False, namespace="admin")
    repos.append(repo)
    lim.create_entity("team")
    lim.create_entity("member", parent_id="team")
    lim.update_entity("member", name="A member", cascade=True)
    lim.create_entity("other-team")
    lim.update_entity("member", parent_id="other-team")
    seen.values["children"] = [e.entity_id for e in lim.get_children("other-team")]
    seen.values["entities"] = [e.entity_id for e in lim.get_entities(["team", "nope", "member"])]
    seen.values["listed"] = sorted(lim.list_entities())
    lim.set_system_defaults([Limit.per_minute("rpm", 30)])
    lim.set_resource_defaults("api", [Limit.per_minute("rpm", 20)])
    lim.set_limits("member", [Limit.per_minute("rpm", 10)])
    seen.values["levels"] = sorted(map(str, lim.list_limit_levels()))
    seen.values["resolved"] = lim.resolve_limits("member", "api")
    with lim.acquire("member", "api", {"rpm": 10}):
        pass
    seen.values["wait"] = lim.time_until_available("member", "api", {"rpm": 5})
    seen.values["resources"] = lim.list_resources("member")
    assert lim.delete_limits("member") and lim.delete_resource_defaults("api")
    assert lim.delete_system_defaults()
    seen.values["audit"] = len(lim.get_audit_events("member"))
    seen.values["namespaces"] = sorted(lim.list_namespaces())
    seen.values["info"] = lim.namespace_info("admin")
    seen.values["deleted_ns"] = lim.delete_namespace("admin")


def _acquires(lim: SyncRateLimiter, clock: Clock, seen: Seen) -> None:
    with lim.acquire("key-1", "gpt-4", {"rpm": 1, "tpm": 500}) as lease:
        lease.adjust(tpm=242)
    seen.values["after_adjust"] = lim.available("key-1", "gpt-4")
    seen.values["org_after_adjust"] = lim.available("org", "gpt-4")
    with pytest.raises(RuntimeError), lim.acquire("key-1", "gpt-4", {"rpm": 5, "tpm": 700}):
        raise RuntimeError("the upstream call failed: tokens go back")
    seen.values["after_rollback"] = lim.available("key-1", "gpt-4")
    for _ in range(120):  # past the 100 rpm of key-1: some are refused
        try:
            with lim.acquire("key-1", "gpt-4", {"rpm": 1, "tpm": 10}):
                pass
        except RateLimitExceeded:
            seen.rejected += 1
        clock.advance(0.01)
    seen.values["org_after_burst"] = lim.available("org", "gpt-4")
    seen.values["shards"] = lim.get_shards("key-1", "gpt-4")


def _interleaved(client: Where, clock: Clock, seen: Seen, repos: list[SyncRepository]) -> None:
    """Three clients, reserves on for two of them, taking turns on one bucket."""
    limiters = []
    for reserve in (LASTING, LASTING, False):
        repo, lim = _open(client, clock, reserve=reserve)
        repos.append(repo)
        limiters.append(lim)
    for i in range(90):
        with limiters[i % 3].acquire("key-2", "gpt-4", {"rpm": 1, "tpm": 100}):
            pass
        clock.advance(0.005)
    for repo in repos[-3:]:
        repo.return_reserves(True)
    seen.values["key2_after"] = limiters[2].available("key-2", "gpt-4")


def _doubling(client: Where, clock: Clock, seen: Seen, repos: list[SyncRepository]) -> None:
    repo, hot = _open(client, clock, reserve=False, partition_wcu=10)
    repos.append(repo)
    limits = [Limit.per_minute("rpm", 6000)]
    for i in range(38):
        clock.advance(1.0 if i == 8 else 0.04)
        with hot.acquire("hot", "api", {"rpm": 1}, limits=limits):
            pass
    seen.values["hot_shards"] = hot.get_shards("hot", "api")
