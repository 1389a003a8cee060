"""Soft limits (docs/quotas.md, "Soft limits") on both faces: a soft limit takes its
tokens like any limit and never rejects; `get_stats()` counts what it would have
rejected; next to a hard limit, only the hard one rejects."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from zae_limiter import Limit, RateLimitExceeded

if TYPE_CHECKING:
    from tests.conftest import Api, Clock

SOFT = Limit.per_minute("rpm", 10, soft=True)
HARD_TPM = Limit.per_minute("tpm", 1_000)


def take(api: Api, consume: dict[str, int], limits: list[Limit] | None = None) -> None:
    with api.acquire("k1", "gpt-4", consume, limits=limits):
        pass


def test_a_soft_limit_alone_never_rejects_and_counts_what_it_would_have(api: Api) -> None:
    client = api.new_client(reserve=False)
    client.set_limits("k1", [SOFT], resource="gpt-4")  # stored: the flag round-trips
    assert client.get_limits("k1", resource="gpt-4") == (SOFT,)
    for _ in range(25):  # 10 fit; a hard limit would have rejected the next 15
        take(client, {"rpm": 1})
    stats = client.limiter.get_stats().resources["gpt-4"]
    assert (stats.admitted, stats.rejected) == (25, 0)
    assert stats.soft_rejected == 15
    assert stats.soft_rejected_by_limit == {"rpm": 15}
    # the bucket counted every take: 15 below zero, refilling from there
    assert client.available("k1", "gpt-4") == {"rpm": -15}


def test_only_the_hard_limit_rejects_next_to_a_soft_one(api: Api, clock: Clock) -> None:
    client = api.new_client(reserve=False)
    limits = [SOFT, HARD_TPM]
    for _ in range(12):  # the soft rpm runs 2 past its 10
        take(client, {"rpm": 1, "tpm": 50}, limits)
    with pytest.raises(RateLimitExceeded) as raised:  # tpm has 400 left
        take(client, {"rpm": 1, "tpm": 500}, limits)
    assert [v.limit_name for v in raised.value.violations] == ["tpm"]
    take(client, {"rpm": 1, "tpm": 400}, limits)  # rpm still past its limit: admitted
    stats = client.limiter.get_stats().resources["gpt-4"]
    assert (stats.admitted, stats.rejected, stats.soft_rejected) == (13, 1, 3)
    # the rejected acquire took nothing from the soft limit either
    assert client.available("k1", "gpt-4", limits=limits) == {"rpm": -3, "tpm": 0}


def test_a_cascade_parents_soft_limit_never_rejects_the_child(api: Api) -> None:
    client = api.new_client(reserve=False)
    client.create_entity("org")
    client.create_entity("k1", parent_id="org", cascade=True)
    client.set_limits("org", [Limit.per_minute("rpm", 5, soft=True)], resource="gpt-4")
    client.set_limits("k1", [Limit.per_minute("rpm", 100)], resource="gpt-4")
    for _ in range(8):
        take(client, {"rpm": 1})
    assert client.limiter.get_stats().resources["gpt-4"].soft_rejected == 3
    assert client.available("org", "gpt-4")["rpm"] == -3
