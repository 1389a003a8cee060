"""Idle bucket items expire (docs/quotas.md, Idle buckets expire), on moto (sync
in-process, async over HTTP). Neither moto nor DynamoDB Local deletes expired items, so
the tests check the `ttl` each write gives an item, and simulate the expiry: the item is
deleted as DynamoDB's TTL would delete it, at its `ttl`, and the acquires after it must
admit exactly what an ideal bucket fed the same arrivals admits (nothing is lost and
nothing is given: a bucket is full and holds no reserve when its item may go)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Api, Clock
from tests.exactness_model import IdealBucket
from zae_limiter import Limit, RateLimitExceeded, keys
from zae_limiter.flows import Call, one
from zae_limiter.flows.bucket_ttl import DEFAULT_BUCKET_TTL_S
from zae_limiter.flows.write.plan import RESERVE_HORIZON_MS

HOURLY = Limit.per_hour("rph", 10)  # a whole capacity refills in an hour
MINUTE = Limit.per_minute("rpm", 60)
# The test clock starts at 1_800_000_000_000 ms, 2027-01-15 08:00:00 UTC.
FEBRUARY_MS = 1_801_440_000_000  # 2027-02-01 00:00:00 UTC: the monthly window's end


def _item(api: Api, entity_id: str = "e", resource: str = "api") -> dict[str, Any] | None:
    key = keys.bucket_key(api.repo.state.namespace, entity_id, resource, 0)
    call = Call("get_item", keys.get_consistent(api.repo.state.table, key))
    item: dict[str, Any] | None = api.run(api.repo.run(one(call))).item
    return item


def _expire(api: Api, entity_id: str = "e", resource: str = "api") -> None:
    """What DynamoDB's TTL does to the item once its `ttl` has passed."""
    key = keys.bucket_key(api.repo.state.namespace, entity_id, resource, 0)
    api.run(api.repo.run(one(Call("delete_item", {"TableName": api.repo.state.table, "Key": key}))))


def _take(api: Api, n: int, limits: list[Limit], name: str) -> int:
    admitted = 0
    for _ in range(n):
        try:
            with api.acquire("e", "api", {name: 1}, limits=limits):
                admitted += 1
        except RateLimitExceeded:
            pass
    return admitted


def test_each_write_moves_the_ttl_past_the_time_the_bucket_is_full_again(
    api: Api, clock: Clock
) -> None:
    start = clock.now_ms
    _take(api, 4, [HOURLY], "rph")
    expected = -(-(start + 3_600_000) // 1000) + DEFAULT_BUCKET_TTL_S
    assert keys.expiry_of(_item(api)) == expected
    clock.now_ms += 90_000
    _take(api, 1, [HOURLY], "rph")
    assert keys.expiry_of(_item(api)) == expected + 90
    # A limit that refills within a reserve's life: the reserve's horizon decides.
    with api.acquire("e", "fast", {"rpm": 1}, limits=[MINUTE]):
        pass
    horizon = clock.now_ms + max(60_000, RESERVE_HORIZON_MS)
    fast = _item(api, resource="fast")
    assert keys.expiry_of(fast) == -(-horizon // 1000) + DEFAULT_BUCKET_TTL_S


def test_a_simulated_expiry_admits_exactly_what_an_ideal_bucket_admits(
    api: Api, clock: Clock
) -> None:
    api = api.new_client(reserve=False)  # exact per acquire: nothing idle in a reserve
    api.set_bucket_ttl(60, resource="api")  # a short idle period: expiry comes soon
    api.set_resource_defaults("api", [HOURLY])
    ideal = IdealBucket(HOURLY, clock.now_ms)
    plan = [(0, 6), (600_000, 3), (1_200_000, 5)]  # drained, then a little refill
    start = clock.now_ms
    for offset, n in plan:
        clock.now_ms = start + offset
        expected = sum(ideal.take(1, clock.now_ms) for _ in range(n))
        assert _take_stored(api, n) == expected
    ttl = keys.expiry_of(_item(api))
    assert ttl is not None
    clock.now_ms = ttl * 1000  # when DynamoDB may delete it: full, nothing held
    assert api.available("e", "api") == {"rph": 10}
    _expire(api)
    burst = 15
    expected = sum(ideal.take(1, clock.now_ms) for _ in range(burst))
    assert _take_stored(api, burst) == expected == 10


def _take_stored(api: Api, n: int) -> int:
    admitted = 0
    for _ in range(n):
        try:
            with api.acquire("e", "api", {"rph": 1}):
                admitted += 1
        except RateLimitExceeded:
            pass
    return admitted


def test_a_quota_bucket_does_not_expire_while_its_window_holds_spent_tokens(
    api: Api, clock: Clock
) -> None:
    monthly = Limit.quota("requests", 3)
    api.set_limits("e", [monthly], resource="api")
    api.set_bucket_ttl(60, entity_id="e", resource="api")
    for _ in range(3):
        with api.acquire("e", "api", {"requests": 1}):
            pass
    ttl = keys.expiry_of(_item(api))
    assert ttl == FEBRUARY_MS // 1000 + 60  # the window's end, then the idle minute
    clock.now_ms = ttl * 1000 - 61_000  # a day's idle would be long past: still spent
    with pytest.raises(RateLimitExceeded):
        with api.acquire("e", "api", {"requests": 1}):
            pass
    clock.now_ms = ttl * 1000
    assert api.available("e", "api") == {"requests": 3}  # a new window: nothing to lose


def test_the_bucket_ttl_is_chosen_by_the_most_specific_level_that_stores_one(
    api: Api, clock: Clock
) -> None:
    api.set_resource_defaults("api", [HOURLY])
    api.set_bucket_ttl(300)  # system
    api.set_bucket_ttl(120, resource="api")
    assert api.get_bucket_ttl(resource="api") == 120
    assert api.get_resource_defaults("api") == (HOURLY,)  # limits kept
    api.set_resource_defaults("api", [HOURLY])  # and a limits change keeps the TTL
    assert api.get_bucket_ttl(resource="api") == 120
    base = -(-(clock.now_ms + 3_600_000) // 1000)
    _take_stored(api, 1)
    assert keys.expiry_of(_item(api)) == base + 120
    api.set_bucket_ttl(0, entity_id="e")  # this entity's buckets never expire
    _take_stored(api, 1)
    assert keys.expiry_of(_item(api)) is None
    api.set_bucket_ttl(None, entity_id="e")  # removed: the resource's again
    _take_stored(api, 1)
    assert keys.expiry_of(_item(api)) == base + 120
    events = [e for e in api.get_audit_events("e") if e.action == "set_bucket_ttl"]
    assert [(e.before, e.after) for e in events] == [
        ({"bucket_ttl": None}, {"bucket_ttl": 0}),
        ({"bucket_ttl": 0}, {"bucket_ttl": None}),
    ]


def test_bad_bucket_ttls_are_refused(api: Api) -> None:
    from zae_limiter.errors import ValidationError

    for bad in (-1, 400 * 86_400, 1.5, True):
        with pytest.raises(ValidationError, match="bucket_ttl must be"):
            api.set_bucket_ttl(bad)


def test_a_sharded_bucket_never_expires(api: Api, clock: Clock) -> None:
    from tests.integration.test_shards import heat

    hot = api.new_client(partition_wcu=10, reserve=False)
    limits = [Limit.custom("rpm", 1000, 1, 3600)]
    with hot.acquire("hot", "api", {"rpm": 1}, limits=limits):
        pass
    assert keys.expiry_of(_item(hot, "hot")) is not None  # one shard: it may expire
    heat(hot, clock, limits)
    assert hot.get_shards("hot", "api")[0].shard_count == 2
    while len(hot.get_shards("hot", "api")) < 2:
        clock.advance(0.5)
        with hot.acquire("hot", "api", {"rpm": 1}, limits=limits):
            pass
    for shard in (0, 1):
        key = keys.bucket_key(hot.repo.state.namespace, "hot", "api", shard)
        found = hot.run(
            hot.repo.run(one(Call("get_item", {"TableName": hot.repo.state.table, "Key": key})))
        )
        assert keys.expiry_of(found.item) is None, shard


def test_below_schema_5_no_ttl_is_written_and_no_schedule_stored(api: Api) -> None:
    from zae_limiter.errors import SchemaVersionError
    from zae_limiter.flows.records.version import write_version

    api.run(api.repo.run(write_version(api.repo.state, 4, "0.3.0", 0, "test")))
    older = api.new_client()  # opens the table at schema 4: an older client may share it
    with older.acquire("e", "api", {"rph": 1}, limits=[HOURLY]):
        pass
    item = _item(older)
    assert item is not None and keys.expiry_of(item) is None
    night = HOURLY.during("0 22 * * *", "0 6 * * *", Limit.per_hour("rph", 50))
    with pytest.raises(SchemaVersionError, match="scheduled limits need 5"):
        older.set_limits("e", [night], resource="api")
    # What a reader sees of a bucket does not depend on its ttl.
    assert keys.decode_bucket({**item, keys.TTL: {"N": "1"}}) == keys.decode_bucket(item)


# docs/operations.md, "Idle buckets and storage": the sizes it computes from.
STORED_BYTES = {"rpm": (416, 649), "rpm+tpm": (486, 649)}
DYNAMODB_ITEM_OVERHEAD = 100  # bytes per item, in the table and in each index


def test_the_item_sizes_operations_md_computes_from(api: Api) -> None:
    """A bucket item as written (an entity id of 21 characters, resource `gpt-4o`), sized
    by DynamoDB's rules, and its entries in the three KEYS_ONLY indexes it sits in."""
    from zae_limiter.sim.engine.values import item_bytes

    cases = {
        "rpm": [Limit.per_minute("rpm", 1000)],
        "rpm+tpm": [Limit.per_minute("rpm", 1000), Limit.per_minute("tpm", 100_000)],
    }
    for label, limits in cases.items():
        entity = f"user-{label.replace('+', '-')}-0001234"[:21].ljust(21, "x")
        with api.acquire(entity, "gpt-4o", {limits[0].name: 1}, limits=limits):
            pass
        item = _item(api, entity, "gpt-4o")
        assert item is not None and keys.TTL in item
        indexes = sum(
            item_bytes({k: item[k] for k in ("PK", "SK", f"{gsi}PK", f"{gsi}SK")})
            + DYNAMODB_ITEM_OVERHEAD
            for gsi in ("GSI2", "GSI3", "GSI4")
        )
        measured = (item_bytes(item), indexes)
        print(label, measured, "ttl:", item_bytes({keys.TTL: item[keys.TTL]}))
        assert measured == STORED_BYTES[label], label
