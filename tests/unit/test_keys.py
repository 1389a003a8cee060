"""Key builders, parsers, codecs and expression builders (keys.py), and the table shape."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zae_limiter import keys, table
from zae_limiter.bucket import LimitState
from zae_limiter.errors import ValidationError
from zae_limiter.limits import Limit
from zae_limiter.models import BucketState, Entity

PROPS = settings(max_examples=200, deadline=None)
NS = "tenant-a"
TABLE = "limits"

# Printable ids as validate_id accepts them: no '#', no control/format characters, no
# leading or trailing whitespace.
_id_chars = st.characters(
    blacklist_categories=("Cc", "Cf", "Cs", "Zl", "Zp"), blacklist_characters="#"
)
ids = st.text(_id_chars, min_size=1, max_size=256).filter(lambda v: v == v.strip())
resources = ids.filter(lambda v: v != keys.DEFAULT_RESOURCE)
namespaces = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}", fullmatch=True).filter(
    lambda v: v != "_"
)
limit_names = st.from_regex(r"[a-z][a-z0-9_]{0,31}", fullmatch=True).filter(lambda v: v != "wcu")


# ---------------------------------------------------------------- key round trips
@PROPS
@given(namespaces, ids, resources, st.integers(0, 10**6))
def test_bucket_pk_round_trips(ns: str, entity_id: str, resource: str, shard: int) -> None:
    assert keys.validate_id("entity_id", entity_id) == entity_id
    assert keys.validate_resource(resource) == resource
    pk = keys.bucket_pk(ns, entity_id, resource, shard)
    assert keys.parse_bucket_pk(pk) == (ns, entity_id, resource, shard)
    key = keys.bucket_key(ns, entity_id, resource, shard)
    assert key == {"PK": {"S": pk}, "SK": {"S": "#STATE"}}


@PROPS
@given(namespaces, ids)
def test_entity_pk_round_trips(ns: str, entity_id: str) -> None:
    pk = keys.entity_pk(ns, entity_id)
    assert pk == f"{ns}/ENTITY#{entity_id}"
    assert keys.parse_entity_pk(pk) == (ns, entity_id)


@PROPS
@given(
    resources,
    st.sampled_from(["hourly", "daily"]),
    st.from_regex(r"[0-9T:\-]{1,20}", fullmatch=True),
)
def test_usage_sk_round_trips(resource: str, window: str, start: str) -> None:
    assert keys.parse_usage_sk(keys.usage_sk(resource, window, start)) == (resource, window, start)


@pytest.mark.parametrize(
    "pk",
    [
        "ns/ENTITY#e",
        "ns/BUCKET#e#r",
        "ns/BUCKET#e#r#x",
        "ns/BUCKET#e#r#1#2",
        "ns/BUCKET#e#r#-1",
        "BUCKET#e#r#0",
    ],
)
def test_parse_bucket_pk_rejects_other_keys(pk: str) -> None:
    with pytest.raises(ValueError, match="bucket"):
        keys.parse_bucket_pk(pk)


@pytest.mark.parametrize("pk", ["ns/ENTITY#", "ns/BUCKET#e#r#0", "ENTITY#e"])
def test_parse_entity_pk_rejects_other_keys(pk: str) -> None:
    with pytest.raises(ValueError, match="entity"):
        keys.parse_entity_pk(pk)


@pytest.mark.parametrize("sk", ["#CONFIG#r", "#USAGE#r#hourly", "#META", "USAGE#r#h#s#x"])
def test_parse_usage_sk_rejects_other_keys(sk: str) -> None:
    with pytest.raises(ValueError, match="usage"):
        keys.parse_usage_sk(sk)


def test_key_formats_follow_the_design() -> None:
    assert keys.entity_key(NS, "e1") == {"PK": {"S": "tenant-a/ENTITY#e1"}, "SK": {"S": "#META"}}
    assert keys.entity_config_key(NS, "e1", "gpt") == {
        "PK": {"S": "tenant-a/ENTITY#e1"},
        "SK": {"S": "#CONFIG#gpt"},
    }
    assert keys.resource_config_key(NS, "gpt") == {
        "PK": {"S": "tenant-a/RESOURCE#gpt"},
        "SK": {"S": "#CONFIG"},
    }
    assert keys.system_config_key(NS) == {"PK": {"S": "tenant-a/SYSTEM#"}, "SK": {"S": "#CONFIG"}}
    assert keys.version_key() == {"PK": {"S": "_/SYSTEM#"}, "SK": {"S": "#VERSION"}}
    assert keys.bucket_pk(NS, "e1", "gpt", 3) == "tenant-a/BUCKET#e1#gpt#3"
    assert keys.usage_sk("gpt", "hourly", "2024") == "#USAGE#gpt#hourly#2024"
    assert keys.parent_pk(NS, "p") == "tenant-a/PARENT#p"
    assert keys.limit_attr("rpm", "tk") == "b_rpm_tk"


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize("validator", [keys.validate_resource, lambda v: keys.validate_id("id", v)])
@pytest.mark.parametrize(
    "bad",
    [
        "",
        None,
        5,
        "x" * 257,
        "a#b",
        "#",
        "a\x00b",
        "a\nb",
        "a\tb",
        "a\x7fb",
        "a\u200bb",  # zero-width space (Cf)
        "a\u2028b",  # line separator
        "a\u2029b",  # paragraph separator
        " a",
        "a ",
        "\u00a0a",  # non-breaking space
        "a\u3000",  # ideographic space
    ],
)
def test_ids_and_resources_reject(validator: Callable[[object], str], bad: object) -> None:
    with pytest.raises(ValidationError):
        validator(bad)


def test_id_length_limit_is_256() -> None:
    assert keys.validate_id("entity_id", "x" * 256) == "x" * 256
    with pytest.raises(ValidationError, match="256"):
        keys.validate_id("entity_id", "x" * 257)


@pytest.mark.parametrize("good", ["a", "user-1", "tenant/42", "a b", "ünïcødé", "日本", "x" * 256])
def test_ids_accept(good: str) -> None:
    assert keys.validate_id("entity_id", good) == good
    assert keys.validate_resource(good) == good


def test_default_resource_is_reserved_for_resources_only() -> None:
    with pytest.raises(ValidationError, match="reserved"):
        keys.validate_resource("_default_")
    assert keys.validate_id("entity_id", "_default_") == "_default_"


def test_validation_error_names_the_kind() -> None:
    with pytest.raises(ValidationError, match="entity_id"):
        keys.validate_id("entity_id", "a#b")


@pytest.mark.parametrize(
    "bad",
    ["", "_", "-ns", ".ns", "_ns", "a/b", "a#b", "a b", "n" * 65, 5, "ns\n", "é"],
)
def test_namespace_rejects(bad: object) -> None:
    with pytest.raises(ValidationError, match="namespace"):
        keys.validate_namespace(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("good", ["default", "a", "Tenant_1.prod-2", "n" * 64, "0"])
def test_namespace_accepts(good: str) -> None:
    assert keys.validate_namespace(good) == good


def test_namespace_none_is_default() -> None:
    assert keys.validate_namespace(None) == keys.DEFAULT_NAMESPACE == "default"


# ---------------------------------------------------------------- codecs
@PROPS
@given(
    ids,
    st.one_of(st.none(), st.text(max_size=50)),
    st.one_of(st.none(), ids),
    st.booleans(),
    st.one_of(st.none(), st.integers(0, 10**13)),
)
def test_entity_round_trips(
    entity_id: str, name: str | None, parent: str | None, cascade: bool, created: int | None
) -> None:
    entity = Entity(entity_id, name, parent, cascade, created)
    item = keys.encode_entity(NS, entity)
    assert keys.decode_entity(item) == entity
    assert item["PK"] == {"S": keys.entity_pk(NS, entity_id)}
    assert item["SK"] == {"S": "#META"}
    if parent is None:
        assert "GSI1PK" not in item and "GSI1SK" not in item
    else:
        assert item["GSI1PK"] == {"S": keys.parent_pk(NS, parent)}
        assert item["GSI1SK"] == {"S": f"CHILD#{entity_id}"}


def test_children_query_uses_gsi1_and_parent_key() -> None:
    params = keys.entity_query_children(TABLE, NS, "p")
    item = keys.encode_entity(NS, Entity("c", parent_id="p"))
    assert params["IndexName"] == "GSI1"
    assert params["ExpressionAttributeNames"]["#pk"] == "GSI1PK"
    assert params["ExpressionAttributeValues"][":pk"] == item["GSI1PK"]


limits_strategy = st.lists(
    st.builds(
        Limit,
        limit_names,
        st.integers(1, 10**12),
        st.integers(1, 10**12),
        st.integers(1, 366 * 86400),
    ),
    min_size=1,
    max_size=6,
    unique_by=lambda limit: limit.name,
)


@PROPS
@given(limits_strategy, st.integers(0, 10**13))
def test_limits_round_trip_through_config_item(limits: list[Limit], now_ms: int) -> None:
    item = keys.config_item(
        keys.entity_config_key(NS, "e1", "gpt"), limits, NS, now_ms, "entity_config", resource="gpt"
    )
    assert keys.decode_limits(item) == tuple(sorted(limits, key=lambda limit: limit.name))
    assert item["resource"] == {"S": "gpt"}
    assert item["created_at"] == {"N": str(now_ms)}
    assert item["kind"] == {"S": "entity_config"}
    assert item["PK"] == {"S": keys.entity_pk(NS, "e1")}


def test_decode_limits_of_item_without_limits_is_empty() -> None:
    assert keys.decode_limits({}) == ()


limit_states = st.builds(
    LimitState,
    capacity_milli=st.integers(1, 10**15),
    refill_amount_milli=st.integers(1, 10**15),
    refill_period_ms=st.integers(1, 10**10),
    total_consumed_milli=st.integers(0, 10**15),
    full_at=st.one_of(st.none(), st.integers(0, 10**30)),
)


@st.composite
def bucket_states(draw: st.DrawFn) -> BucketState:
    names = draw(st.lists(limit_names, min_size=1, max_size=5, unique=True))
    shard_count = draw(st.integers(1, 64))
    return BucketState(
        entity_id=draw(ids),
        resource=draw(resources),
        shard_id=draw(st.integers(0, shard_count - 1)),
        shard_count=shard_count,
        last_refill_ms=0,
        limits={name: draw(limit_states) for name in names},
        cascade=draw(st.booleans()),
        parent_id=draw(st.one_of(st.none(), ids)),
        partition_wcu=draw(st.integers(1, 10**6)),
    )


@PROPS
@given(bucket_states(), st.integers(0, 10**13))
def test_bucket_round_trips(bucket: BucketState, now: int) -> None:
    item = keys.new_bucket_item(NS, bucket, now)
    decoded = keys.decode_bucket(item)
    # a new item opens its write-rate window with its first write
    assert decoded == replace(bucket, window_start_ms=now, window_writes=1)
    assert dict(decoded.limits) == dict(bucket.limits)
    assert "rf" not in item and not any(attr.endswith("_tk") for attr in item)
    assert item["PK"] == {
        "S": keys.bucket_pk(NS, bucket.entity_id, bucket.resource, bucket.shard_id)
    }
    assert item["SK"] == {"S": "#STATE"}


def _state(cp: int = 2, ra: int = 3, rp: int = 4, fa: int | None = 5) -> LimitState:
    return LimitState(capacity_milli=cp, refill_amount_milli=ra, refill_period_ms=rp, full_at=fa)


def test_hidden_wcu_limit_is_not_an_application_limit() -> None:
    bucket = BucketState("e", "r", 0, 1, 0, {"rpm": _state()}, partition_wcu=700)
    item = keys.new_bucket_item(NS, bucket, 5)
    item["b_wcu_fa"] = {"N": "3"}
    item["b_wcu_ra"] = {"N": "3"}
    item["b_wcu_rp"] = {"N": "3"}
    decoded = keys.decode_bucket(item)
    assert set(decoded.limits) == {"rpm"}
    assert decoded.partition_wcu == 700


@PROPS
@given(bucket_states())
def test_bucket_items_never_carry_gsi1_keys(bucket: BucketState) -> None:
    item = keys.new_bucket_item(NS, bucket, 0)
    assert "GSI1PK" not in item and "GSI1SK" not in item
    for index in table.INDEXES:
        if index.partition_key in item or index.sort_key in item:
            assert index.projection == "KEYS_ONLY", index.name


def test_bucket_index_keys() -> None:
    bucket = BucketState("e1", "gpt", 2, 4, 0, {"rpm": _state()})
    item = keys.new_bucket_item(NS, bucket, 0)
    assert item["GSI2PK"] == {"S": keys.resource_pk(NS, "gpt")}
    assert item["GSI3PK"] == {"S": keys.entity_pk(NS, "e1")}
    assert item["GSI3SK"] == {"S": "BUCKET#gpt#2"}
    assert item["GSI4PK"] == {"S": NS}
    query = keys.bucket_query_for_entity(TABLE, NS, "e1", "gpt")
    assert query["IndexName"] == "GSI3"
    assert query["ExpressionAttributeValues"][":pk"] == item["GSI3PK"]
    assert item["GSI3SK"]["S"].startswith(query["ExpressionAttributeValues"][":prefix"]["S"])


def test_decode_bucket_ignores_incomplete_and_foreign_attributes() -> None:
    item = keys.new_bucket_item(NS, BucketState("e", "r", 0, 1, 0, {"rpm": _state()}), 5)
    item["b_half_fa"] = {"N": "7"}  # no cp/ra/rp: not a usable limit
    item["b_zero_cp"] = {"N": "1"}
    item["b_zero_ra"] = {"N": "1"}
    item["b_zero_rp"] = {"N": "0"}  # a zero period would divide by zero
    item["b_str_fa"] = {"S": "x"}
    item["b_"] = {"N": "1"}
    assert set(keys.decode_bucket(item).limits) == {"rpm"}


def test_decode_bucket_reads_a_schema_v2_limit_as_legacy_tokens() -> None:
    item = {"rf": {"N": "900"}, "b_rpm_tk": {"N": "4000"}, "b_rpm_cp": {"N": "10000"},
            "b_rpm_ra": {"N": "10000"}, "b_rpm_rp": {"N": "60000"}}  # fmt: skip
    decoded = keys.decode_bucket(item)
    assert decoded.legacy_tokens == {"rpm": 4000}
    assert decoded.last_refill_ms == 900
    assert decoded.limits["rpm"].full_at is None
    converted = {**item, "b_rpm_fa": {"N": "1"}}
    assert keys.decode_bucket(converted).legacy_tokens == {}


def test_decode_bucket_defaults() -> None:
    decoded = keys.decode_bucket({})
    assert decoded.shard_count == 1
    assert decoded.limits == {}
    assert decoded.parent_id is None


# ---------------------------------------------------------------- take expressions
def _used_and_bound(params: dict[str, Any]) -> None:
    """Every placeholder used is bound, and every bound one used (DynamoDB insists)."""
    text = params["UpdateExpression"] + " " + params["ConditionExpression"]
    assert set(re.findall(r":\w+", text)) == set(params["ExpressionAttributeValues"])
    assert set(re.findall(r"#\w+", text)) == set(params["ExpressionAttributeNames"])


def _write(name: str, form: str, **kw: Any) -> keys.LimitWrite:
    return keys.LimitWrite(name, form, 1000, config=(10_000, 10_000, 60_000), **kw)


def test_take_write_forms() -> None:
    key = keys.bucket_key(NS, "e", "r", 0)
    held = ((7, 0), (6, 2000))
    writes = [
        _write("rpm", keys.ADD, amount=60_000, bound=5000, consumed=1000, held=held),
        _write("tpm", keys.SET, amount=9000, consumed=10),
        _write("rpd", keys.CHECK, bound=4000, held=held),
        _write("old", keys.GIVE, amount=-60_000, consumed=-1000),
    ]
    params = keys.take_write(TABLE, key, writes, shard_count=2, now_ms=1)
    assert params["Key"] == key
    assert params["ReturnValues"] == "ALL_NEW"
    assert params["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"
    update, cond = params["UpdateExpression"], params["ConditionExpression"]
    names, values = params["ExpressionAttributeNames"], params["ExpressionAttributeValues"]
    assert names["#full_at_0"] == "b_rpm_fa" and names["#used_0"] == "b_rpm_tc"
    assert "#full_at_0 :delta_0" in update and "#full_at_0 > :now_0" in cond
    assert "#full_at_0 <= :bound_0" in cond
    assert "#full_at_1 = :full_at_1" in update and "#full_at_1 <= :now_1" in cond
    assert "#full_at_2" not in update and "#full_at_2 <= :bound_2" in cond
    assert "#full_at_3 :delta_3" in update and values[":delta_3"] == {"N": "-60000"}
    # held counts by value, on the bounded forms only
    assert names["#held1_0"] == keys.reserve_attr("rpm", 6)
    assert values[":held1_0"] == {"N": "2000"}
    assert "#held0_1" not in cond
    assert "#shards = :shards" in cond and values[":shards"] == {"N": "2"}
    assert "GSI" not in update and "rf" not in update
    _used_and_bound(params)


def test_take_write_rebase_and_legacy_conversion() -> None:
    rebase = _write("rpm", keys.REBASE, amount=77, old_config=(1, 2, 3), old_tokens=500)
    params = keys.take_write(
        TABLE, keys.bucket_key(NS, "e", "r", 0), [rebase], shard_count=1, now_ms=1,
        legacy_rf=900, remove=["b_rpm_rs1"],
    )  # fmt: skip
    update, cond = params["UpdateExpression"], params["ConditionExpression"]
    assert "#full_at_0 = :full_at_0" in update and "#cap_0 = :cap_0" in update
    assert "attribute_not_exists(#full_at_0)" in cond and "#cap_0 = :was_cap_0" in cond
    assert "#tokens_0 = :was_tokens_0" in cond and "#refilled = :was_refilled" in cond
    assert "REMOVE #stale0, #refilled, #tokens_0" in update
    _used_and_bound(params)


def test_take_write_moves_held_counts_some_exactly() -> None:
    params = keys.take_write(
        TABLE, keys.bucket_key(NS, "e", "r", 0), [], shard_count=1, now_ms=1,
        held_adds={"b_rpm_rs9": 3000, "b_rpm_rs1": -500}, held_exact={"b_rpm_rs1": 500},
    )  # fmt: skip
    assert "#reserve0 :reserve0" in params["UpdateExpression"]
    assert "#reserve1 :reserve1" in params["UpdateExpression"]
    assert "#reserve1 = :was_reserve1" in params["ConditionExpression"]
    assert "#reserve0 =" not in params["ConditionExpression"]
    _used_and_bound(params)


def test_take_write_with_many_limits_has_distinct_placeholders() -> None:
    writes = [_write(f"l{i}", keys.ADD, amount=i, bound=i) for i in range(12)]
    params = keys.take_write(
        TABLE, keys.bucket_key(NS, "e", "r", 0), writes, shard_count=1, now_ms=1
    )
    for i in range(12):
        assert params["ExpressionAttributeNames"][f"#full_at_{i}"] == f"b_l{i}_fa"
    _used_and_bound(params)


def test_create_bucket_is_conditional_put_returning_old() -> None:
    item = keys.new_bucket_item(NS, BucketState("e", "r", 0, 1, 0, {}), 0)
    params = keys.create_bucket(TABLE, item)
    assert params["Item"] is item
    assert params["ConditionExpression"] == "attribute_not_exists(#pk)"
    assert params["ExpressionAttributeNames"] == {"#pk": "PK"}
    assert params["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"


# ---------------------------------------------------------------- table shape
def test_create_table_params() -> None:
    params = table.create_table_params("my-table")
    assert params["TableName"] == "my-table"
    assert params["KeySchema"] == [
        {"AttributeName": "PK", "KeyType": "HASH"},
        {"AttributeName": "SK", "KeyType": "RANGE"},
    ]
    assert params["BillingMode"] == "PAY_PER_REQUEST"
    assert params["StreamSpecification"] == {
        "StreamEnabled": True,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    gsis = {g["IndexName"]: g for g in params["GlobalSecondaryIndexes"]}
    assert set(gsis) == {"GSI1", "GSI2", "GSI3", "GSI4"}
    expected_projection = {
        "GSI1": "ALL",
        "GSI2": "KEYS_ONLY",
        "GSI3": "KEYS_ONLY",
        "GSI4": "KEYS_ONLY",
    }
    for name, gsi in gsis.items():
        assert gsi["KeySchema"] == [
            {"AttributeName": f"{name}PK", "KeyType": "HASH"},
            {"AttributeName": f"{name}SK", "KeyType": "RANGE"},
        ]
        assert gsi["Projection"] == {"ProjectionType": expected_projection[name]}
    defined = {d["AttributeName"]: d["AttributeType"] for d in params["AttributeDefinitions"]}
    used = {"PK", "SK"} | {f"{g}{k}" for g in gsis for k in ("PK", "SK")}
    assert defined == dict.fromkeys(used, "S")


def test_create_table_params_without_stream() -> None:
    assert "StreamSpecification" not in table.create_table_params("t", stream=False)


def test_only_gsi1_projects_all() -> None:
    assert [i.name for i in table.INDEXES if i.projection == "ALL"] == ["GSI1"]


# ---------------------------------------------------------------- write-rate window
def test_every_take_counts_the_write_in_the_window() -> None:
    key = keys.bucket_key(NS, "e", "r", 0)
    writes = [_write("rpm", keys.ADD, amount=1, bound=2)]
    counted = keys.take_write(TABLE, key, writes, shard_count=1, now_ms=123)
    assert re.search(r"ADD .*\bwn :writes\b", counted["UpdateExpression"])
    assert counted["ExpressionAttributeValues"][":writes"] == {"N": "1"}
    assert "ws" not in counted["UpdateExpression"]
    reset = keys.take_write(TABLE, key, writes, shard_count=1, now_ms=123, reset_window=True)
    update = reset["UpdateExpression"]
    assert update.startswith("SET ")
    assert reset["ExpressionAttributeValues"][":now_ms"] == {"N": "123"}
    assert "wn = :writes" in update and "ws = :now_ms" in update
    # the restart keeps the window it ends
    assert "wps = if_not_exists(ws, :now_ms)" in update
    assert "wpn = if_not_exists(wn, :zero)" in update
    # failed conditional writes of the same take are counted with the one that lands
    retried = keys.take_write(TABLE, key, writes, shard_count=1, now_ms=123, writes_counted=3)
    assert retried["ExpressionAttributeValues"][":writes"] == {"N": "3"}
    for params in (counted, reset, retried):
        _used_and_bound(params)


@pytest.mark.parametrize(
    ("ws", "wn", "now", "rate"),
    [
        (None, None, 5000, 0.0),
        (1000, 0, 5000, 0.0),
        (1000, 500, 1500, 500.0),  # under a second: divided by one second, never more
        (1000, 500, 3000, 250.0),
    ],
)
def test_write_rate(ws: int | None, wn: int | None, now: int, rate: float) -> None:
    item: dict[str, Any] = {}
    if ws is not None:
        item["ws"] = {"N": str(ws)}
    if wn is not None:
        item["wn"] = {"N": str(wn)}
    assert keys.write_rate(item, now) == rate


def test_partition_wcu_default() -> None:
    assert keys.partition_wcu({}) == 1000
    assert keys.partition_wcu({"b_wcu_cp": {"N": "0"}}, 400) == 400
    assert keys.partition_wcu({"b_wcu_cp": {"N": "3000"}}) == 3000
