"""A cascade parent's global limits (docs/global.md, "Cascade"): a child's acquire takes
the parent's global limits from the parent's share in this region, whether the client
knows the parent from the child's record, learns it from the child's bucket write (taken
late), or must read the record because the child's limits are all global (no bucket
write to learn from). Both faces, moto."""

from __future__ import annotations

import pytest

from tests.conftest import Api
from zae_limiter import Limit, RateLimitExceeded
from zae_limiter.flows import regional as core
from zae_limiter.keys import regions as rk

REGIONS = ("us-east-1", "eu-west-1", "ap-southeast-1")  # the test client is in us-east-1
ORG_SHARE = 9  # a third of 30, rounded down


def _consumed(api: Api, entity: str, limit: str) -> int:
    key = rk.share_key(api.repo.namespace, entity, "api", limit, "us-east-1")
    answer = api.run(
        api.repo.client.get_item(TableName=api.repo.table_name, Key=key, ConsistentRead=True)
    )
    return core.decode(answer["Item"]).consumed_milli // 1000 if "Item" in answer else 0


def _drain(
    api: Api, entity: str, consume: dict[str, int], by: str = "org", **kwargs: object
) -> int:
    """Acquires until one is refused (by `by`'s limit): how many were admitted."""
    admitted = 0
    with pytest.raises(RateLimitExceeded) as caught:
        for _ in range(40):
            with api.acquire(entity, "api", consume, **kwargs):
                admitted += 1
    assert {v.entity_id for v in caught.value.violations} == {by}
    return admitted


@pytest.mark.parametrize("reader", ["creator", "another client"])
def test_a_stored_global_limit_of_the_parent_is_taken_from_its_share(api: Api, reader: str) -> None:
    api.create_entity("org")
    api.create_entity("k1", parent_id="org", cascade=True)
    api.set_limits("org", [Limit.per_minute("rpm", 30).across(*REGIONS)], "api")
    api.set_limits("k1", [Limit.per_minute("rpm", 100)], "api")
    client = api if reader == "creator" else api.new_client()
    assert _drain(client, "k1", {"rpm": 1}) == ORG_SHARE
    assert _consumed(api, "org", "rpm") == ORG_SHARE


def test_a_parent_learned_from_the_childs_write_has_its_global_limits_taken(api: Api) -> None:
    api.create_entity("org")
    api.create_entity("k1", parent_id="org", cascade=True)
    limits = [Limit.per_minute("rpm", 100), Limit.per_minute("gpm", 30).across(*REGIONS)]
    fresh = api.new_client()  # limits passed: it reads no record, the child's write says
    # Passed limits hold for the parent too: the child's share of gpm (9 here) runs out
    # first (it is taken first), and the parent's share gave as much.
    assert _drain(fresh, "k1", {"rpm": 1, "gpm": 1}, by="k1", limits=limits) == ORG_SHARE
    assert _consumed(api, "org", "gpm") == ORG_SHARE == _consumed(api, "k1", "gpm")


def test_a_child_whose_limits_are_all_global_reads_its_record(api: Api) -> None:
    api.create_entity("org")
    api.create_entity("k1", parent_id="org", cascade=True)
    limits = [Limit.per_minute("gpm", 30).across(*REGIONS)]
    for _ in range(5):  # the parent's own use: 4 left of its share here
        with api.acquire("org", "api", {"gpm": 1}, limits=limits):
            pass
    fresh = api.new_client()  # limits passed, no bucket written: it reads the record
    assert _drain(fresh, "k1", {"gpm": 1}, limits=limits) == ORG_SHARE - 5
    assert _consumed(api, "org", "gpm") == ORG_SHARE
    assert _consumed(api, "k1", "gpm") == ORG_SHARE - 5  # the refused one's given back


def test_an_implicit_entity_with_only_global_limits_reads_its_record_once(api: Api) -> None:
    limits = [Limit.per_minute("gpm", 300).across(*REGIONS)]
    with api.acquire("solo", "api", {"gpm": 1}, limits=limits):
        pass
    with api.meter() as m:
        with api.acquire("solo", "api", {"gpm": 1}, limits=limits):
            pass
    assert [op for op in m.ops if op != "query"] == ["update_item"]
