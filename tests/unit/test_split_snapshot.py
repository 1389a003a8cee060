"""A new shard splits off what its donor held at the count raise (keys.snapshot_parts),
not what the donor holds when the split comes: takes in between are the donor's alone."""

from __future__ import annotations

from dataclasses import replace

from tests.unit._flowkit import KEY, NS, RPM, T0, TABLE, bucket, limit_part, make_level
from zae_limiter import keys
from zae_limiter.flows.write.levels import Rejected
from zae_limiter.flows.write.plan import plan_write
from zae_limiter.flows.write.shares import read_shares, split_full_at, tokens_now
from zae_limiter.models import BucketState

T1, T2 = T0 + 1_000, T0 + 3_000  # a take on the donor, then the split


def _with_full_at(shard: BucketState, full_at: int | None) -> BucketState:
    return replace(shard, limits={"rpm": replace(shard.limits["rpm"], full_at=full_at)})


def _doubled_then_taken() -> tuple[BucketState, int]:
    """Shard 0 (6 of 10 rpm tokens) doubles at T0, then takes 1 token at T1 at count 2;
    and what one bucket (count 1, the same take) holds at T2."""
    single = bucket(T0, {"rpm": 6000}).limits["rpm"]
    raised = replace(bucket(T0, {"rpm": 6000}), shard_count=2)
    raised = replace(raised, split_full_at={"rpm": single.full_at or 0})
    taken = _with_full_at(raised, raised.limits["rpm"].charged(1000, T1, 2))
    one_bucket = replace(single, full_at=single.charged(1000, T1, 1)).tokens(T2)
    return taken, one_bucket


def test_the_split_and_its_donor_hold_exactly_what_one_bucket_would() -> None:
    donor, one_bucket = _doubled_then_taken()
    assert one_bucket == 5500  # 6 - 1 taken + 0.5 refilled (1 token per 6 s)
    copied = split_full_at(donor, RPM, T2)
    made = replace(_with_full_at(donor, copied), shard_id=1, split_full_at={})
    held = tokens_now(donor, RPM, T2) + tokens_now(made, RPM, T2)
    # Copying the donor's current full-at time would take the 1 token twice (4500).
    assert held == one_bucket


def test_reads_count_the_share_not_split_off_yet_at_the_snapshot() -> None:
    donor, one_bucket = _doubled_then_taken()
    [(counted, shares)] = read_shares([donor])
    assert shares == 2
    assert tokens_now(counted, RPM, T2, shares) == one_bucket


def test_a_shard_that_has_not_seen_the_raise_is_read_without_its_old_snapshot() -> None:
    """Its split will raise its count and snapshot its full-at time as it is then."""
    shard0 = replace(bucket(T0, {"rpm": 6000}), shard_count=4)
    old = bucket(T0, {"rpm": 2000}, shard_count=2)
    stale = replace(old, shard_id=1, split_full_at={"rpm": 0})  # 0: full, long ago
    counted = dict((b.shard_id, (b, n)) for b, n in read_shares([shard0, stale]))
    shard1, shares = counted[1]
    assert shares == 2 and shard1.shard_count == 4 and not shard1.split_full_at
    assert tokens_now(shard1, RPM, T0, shares) == 2 * shard1.limits["rpm"].tokens(T0, 4)


def test_the_snapshot_round_trips_and_a_missing_full_at_is_no_snapshot() -> None:
    shard = replace(bucket(T0, {"rpm": 6000}), shard_id=1, shard_count=2)
    shard = replace(shard, split_full_at={"rpm": 12345})
    item = keys.new_bucket_item(NS, shard, T0)
    assert keys.decode_bucket(item).split_full_at == {"rpm": 12345}
    item[keys.limit_attr("rpm", "sf")] = keys.n(keys.NO_SNAPSHOT)
    assert keys.decode_bucket(item).split_full_at == {}
    sets, names, values = keys.snapshot_parts(["rpm"])
    assert sets == ["#split_0 = if_not_exists(#full_at_0, :no_snapshot)"]
    assert names == {"#split_0": "b_rpm_sf", "#full_at_0": "b_rpm_fa"}
    assert values == {":no_snapshot": keys.n(-1)}


def test_a_take_that_doubles_snapshots_what_it_leaves() -> None:
    """The take was planned at the old count: shard 0's full-at times after it are what
    it holds at the doubling, so the snapshot the split copies is each value as the take
    leaves it (a stale snapshot would be wrong; none would let the split copy a later
    give-back a second time)."""
    stored = replace(bucket(T0, {"rpm": 6000, "tpm": 500_000}), split_full_at={"rpm": 1})
    plan = plan_write(stored, make_level(), T0, TABLE, KEY, confirmed=True)
    assert not isinstance(plan, Rejected)
    params = keys.with_doubling(plan.params, 1, 2, T0, T0 - 2_000)
    update, names = params["UpdateExpression"], params["ExpressionAttributeNames"]
    assert " REMOVE " not in update
    snaps = {names[p.split(" = ")[0]]: p.split(" = ")[1] for p in update[4:].split(", ")
             if p.startswith("#split")}  # fmt: skip
    assert set(snaps) == {"b_rpm_sf", "b_tpm_sf"}
    # the rpm take is an ADD (the bucket is short of full): snapshot = stored + the take
    assert snaps["b_rpm_sf"] == "#full_at_0 + :delta_0"
    assert limit_part(params, "rpm")[0] == limit_part(plan.params, "rpm")[0]
