"""Several resources in one acquire (docs/controls.md) on both faces: a model's limits and
an "all models" budget taken together, all or nothing, in one round trip; the lease
adjusts and gives back each."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from zae_limiter import Limit, RateLimitExceeded, ValidationError

if TYPE_CHECKING:
    from tests.conftest import Api

BOTH = ["gpt-4", "all-models"]


def family(api: Api) -> Api:
    client = api.new_client(reserve=False)
    client.set_resource_defaults(
        "gpt-4", [Limit.per_minute("rpm", 100), Limit.per_minute("tpm", 10_000)]
    )
    client.set_resource_defaults("all-models", [Limit.per_minute("tpm", 15_000)])
    return client


def left(api: Api) -> tuple[dict[str, int], dict[str, int]]:
    return api.available("k1", "gpt-4"), api.available("k1", "all-models")


def test_one_acquire_takes_from_every_resource_in_one_round_trip(api: Api) -> None:
    client = family(api)
    with client.acquire("k1", BOTH, {"rpm": 1, "tpm": 500}):
        pass  # first acquire: config and buckets created
    with client.meter() as meter:
        with client.acquire("k1", BOTH, {"rpm": 1, "tpm": 500}) as lease:
            lease.adjust(tpm=300)  # the call used 800: both budgets count it
    assert meter.round_trips == 2  # the take (both writes at once), the adjustment
    assert left(client) == ({"rpm": 98, "tpm": 8_700}, {"tpm": 13_700})
    assert client.limiter.get_stats().resources["all-models"].admitted == 2


def test_a_refusal_on_one_resource_takes_nothing_from_the_others(api: Api) -> None:
    client = family(api)
    with client.acquire("k1", "all-models", {"tpm": 14_000}):
        pass  # someone used most of the shared budget
    with pytest.raises(RateLimitExceeded) as raised:
        with client.acquire("k1", BOTH, {"rpm": 1, "tpm": 2_000}):
            pass
    assert [(v.resource, v.limit_name) for v in raised.value.violations] == [("all-models", "tpm")]
    assert left(client) == ({"rpm": 100, "tpm": 10_000}, {"tpm": 1_000})


def test_a_failed_block_gives_back_to_every_resource(api: Api) -> None:
    client = family(api)
    with pytest.raises(RuntimeError):
        with client.acquire("k1", BOTH, {"rpm": 5, "tpm": 1_000}):
            raise RuntimeError("the call failed")
    assert left(client) == ({"rpm": 100, "tpm": 10_000}, {"tpm": 15_000})


def test_cascade_takes_each_resources_parent(api: Api) -> None:
    client = family(api)
    client.create_entity("org")
    client.create_entity("k1", parent_id="org", cascade_for={"all-models": True})
    for _ in range(2):  # the first learns the cascade, the second takes all at once
        with client.acquire("k1", BOTH, {"rpm": 1, "tpm": 100}):
            pass
    assert client.available("org", "all-models") == {"tpm": 14_800}
    assert client.available("org", "gpt-4") == {"rpm": 100, "tpm": 10_000}


def test_bad_resource_lists_are_refused(api: Api) -> None:
    client = family(api)
    for bad, says in (
        ([], "non-empty"),
        (["gpt-4", "gpt-4"], "twice"),
        ([f"r{i}" for i in range(11)], "at most 10"),
    ):
        with pytest.raises(ValidationError, match=says):
            with client.acquire("k1", bad, {"tpm": 1}):
                pass
    with pytest.raises(ValidationError, match="'gpt-4' or 'all-models'"):
        with client.acquire("k1", BOTH, {"images": 1}):
            pass
