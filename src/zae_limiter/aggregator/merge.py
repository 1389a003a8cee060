"""Shard merging: halve an entity's `shard_count` without creating or losing a token.

Protocol (one flow per nominated (entity, resource), N shards -> M = N // 2, never < 1):

1. Read shards 0..N-1 with one consistent BatchGetItem, and check again, on these fresh
   items, that shard 0 still says N, has been quiet (`qs`) and unchanged (`sd`) for the
   quiet period, and that no shard's current write rate reaches `shard_down`.
2. Shard j >= M is drained into shard j % M: the receiver then lacks, at `now`, what the
   two lacked together (each shard's deficit is its full-at time's lead over `now`).
3. Write everything in ONE TransactWriteItems, so it happens entirely or not at all:
   every shard is fenced on `shard_count = N` and on its full-at times as read (no write
   may have landed since the read; the entity is quiet, and a cancelled merge is
   nominated again), and SETs `shard_count = M`.
   - a drained shard gets full-at times that leave it empty until `now + freeze`: a
     client with a stale cache that still routes there is rejected and moves to another
     shard; its count (M <= its id) tells it the shard is retired.
   - a receiving shard (shard 0 included) gets the full-at times at which it holds, at
     `now` and the halved count, what the shards it absorbs held. Shard 0 also gets
     `sd = now` and loses its quiet mark.
   - a shard a doubling made room for and no acquire has made yet is not an item: its
     share sits in its donor's split snapshot (`sf`, flows/write/shares.py), and readers
     and its first acquire take it from there. The merge counts it so (not as a full
     shard: seed 455 of the simulator), sets each receiver's snapshot to what the
     unmade shards it stands for now hold, and checks in the same transaction that each
     is still unmade.
   The sum of tokens over all shards at `now` is the same before and after (rounded in
   the limiter's favour); usage counters (`tc`) are never touched.
4. A cancelled transaction (anything moved) is simply dropped: the next quiet batch
   nominates the merge again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from zae_limiter import keys
from zae_limiter.aggregator.plan import AggregatorConfig, MergeCandidate
from zae_limiter.bucket import LimitState
from zae_limiter.errors import ZaeLimiterError
from zae_limiter.flows import Call, Flow, one
from zae_limiter.flows.write.shares import donor_of
from zae_limiter.models import BucketState

log = logging.getLogger("zae_limiter.aggregator")


def read_shards(config: AggregatorConfig, cand: MergeCandidate) -> Flow[dict[int, Any] | None]:
    wanted = [
        keys.bucket_key(cand.ns, cand.entity_id, cand.resource, i) for i in range(cand.shard_count)
    ]
    result = yield from one(Call("batch_get_item", keys.batch_get_consistent(config.table, wanted)))
    if result.response.get("UnprocessedKeys"):
        return None
    items: dict[int, Any] = {}
    for item in result.response.get("Responses", {}).get(config.table, []):
        items[keys.parse_bucket_pk(keys.pk_of(item))[3]] = item
    return items


def still_quiet(
    items: Mapping[int, Any], cand: MergeCandidate, config: AggregatorConfig, now_ms: int
) -> bool:
    shard0 = items.get(0)
    if shard0 is None or keys.get_n(shard0, keys.A_SHARD_COUNT, 1) != cand.shard_count:
        return False
    since = keys.get_n(shard0, keys.A_QUIET_SINCE, -1)
    changed = keys.get_n(shard0, keys.A_SHARD_DOUBLED, 0)
    if since < 0 or min(now_ms - since, now_ms - changed) < config.merge_quiet_ms:
        return False
    if any(_holds_reserves(item, now_ms) for item in items.values()):
        # Clients serve a hot entity from token reserves: few writes, yet not quiet, and
        # a drained shard could not take their reserves back.
        return False
    return all(
        keys.write_rate(item, now_ms) / keys.partition_wcu(item) < config.shard_down
        for item in items.values()
    )


def _holds_reserves(item: Mapping[str, Any], now_ms: int) -> bool:
    return any(
        keys.held_milli(epochs, now_ms) > 0 for epochs in keys.decode_reserved(item).values()
    )


def _all_at(stored: Mapping[int, BucketState], count: int) -> bool:
    """Whether every shard read records `count`. One that still records a lower count
    (the raise not propagated to it yet) holds its unmade partners' shares in its own
    full-at times, and its snapshot is older than that raise: planned from it, the merge
    would count the old snapshot for them, and the transaction's count fence passes
    once the propagation lands between the read and the write (tokens created)."""
    return all(bucket.shard_count == count for bucket in stored.values())


def _slot_full_at(stored: Mapping[int, BucketState], slot: int, name: str) -> int | None:
    """The full-at value slot `slot`'s share stands at, as readers count it and as its
    first acquire would make it (flows/write/shares.py): its own once made; before that,
    its donor's split snapshot, or shard 0's when the donor was never made either."""
    bucket = stored.get(slot)
    if bucket is not None:
        return bucket.user_limits[name].full_at
    donor = donor_of(slot)
    holder = stored[donor] if donor in stored else stored[0]
    return holder.split_full_at.get(name, holder.user_limits[name].full_at)


def _absorbed(
    stored: Mapping[int, BucketState], i: int, old: int, new: int, name: str, now_ms: int
) -> int:
    """Millitokens slot `i` holds after the merge: what the slots it absorbs (`s % new ==
    i`) hold at `now` at the old count, made or not. A drained shard's expired held
    counts (a crashed client's) are spent tokens; the receiver's own stay on it."""
    cfg = stored[0].user_limits[name]
    total = 0
    for slot in range(i, old, new):
        total += replace(cfg, full_at=_slot_full_at(stored, slot, name)).tokens(now_ms, old)
        bucket = stored.get(slot)
        if slot != i and bucket is not None:
            total -= keys.lost_milli(bucket.reserved.get(name, {}), now_ms)
    return total


def _receivers(
    stored: Mapping[int, BucketState], old: int, new: int, names: set[str], now_ms: int
) -> tuple[dict[int, dict[str, int]], dict[int, dict[str, int]]]:
    """(each made receiver's new full-at times, its new split snapshots).

    A slot below the new count that was never made keeps its share in its holder's
    snapshot (its donor, or shard 0), as readers and its first acquire take it: the
    holder's snapshot is set to the emptiest share it stands for (it may stand for
    several; rounding in the limiter's favour never creates a token). A receiver that
    stands for none snapshots its own new full-at times.
    """
    full_at: dict[int, dict[str, int]] = {}
    served: dict[int, dict[str, int]] = {}
    for i in range(new):
        for name in sorted(names):
            cfg = stored[0].user_limits[name]
            at = cfg.with_tokens(_absorbed(stored, i, old, new, name, now_ms), now_ms, new)
            if i in stored:
                full_at.setdefault(i, {})[name] = at
                continue
            holder = served.setdefault(donor_of(i) if donor_of(i) in stored else 0, {})
            holder[name] = max(holder.get(name, at), at)
    split = {i: {**own, **served.get(i, {})} for i, own in full_at.items()}
    return full_at, split


def plan_merge(
    items: Mapping[int, Any], cand: MergeCandidate, config: AggregatorConfig, now_ms: int
) -> list[dict[str, Any]] | None:
    """The TransactWriteItems updates of a halving; None when it cannot be done safely."""
    old, new = cand.shard_count, cand.shard_count // 2
    if new < 1:
        return None
    stored = {i: keys.decode_bucket(item) for i, item in items.items()}
    names = set(stored[0].user_limits)
    configs = {
        (i, name): _config(b.user_limits[name])
        for i, b in stored.items()
        for name in names
        if name in b.user_limits
    }
    if not _all_at(stored, old):
        return None
    if any(set(b.user_limits) != names or b.legacy_tokens for b in stored.values()):
        return None  # shards disagree on their limits, or v2 ones: leave them to the clients
    if any(configs[(i, name)] != configs[(0, name)] for i, name in configs):
        return None
    if any(c[2] < keys.QUOTA_PERIOD_BELOW for c in configs.values()):
        return None  # a quota's window clock is not `now`: its shards are never merged
    full_at, split = _receivers(stored, old, new, names, now_ms)
    updates = [
        _update(config, cand, i, old, new, stored[i].user_limits, full_at[i], split[i],
                now_ms if i == 0 else None)
        for i in sorted(full_at)
    ]  # fmt: skip
    for j in sorted(i for i in items if i >= new):
        if j % new not in items:
            return None
        own = stored[j].user_limits
        # A drained shard holds nothing until well after the merge: a client with a stale
        # count that still routes there is rejected and learns the new count from it.
        until = now_ms + config.freeze_ms
        drained = {
            name: until * own[name].refill_amount_milli + own[name].room(new) * own[name].unit(new)
            for name in names
        }
        updates.append(_update(config, cand, j, old, new, own, drained, None, None))
    return updates


def _config(state: LimitState) -> tuple[int, int, int]:
    return state.capacity_milli, state.refill_amount_milli, state.refill_period_ms


def _update(
    config: AggregatorConfig,
    cand: MergeCandidate,
    shard_id: int,
    old: int,
    new: int,
    own: Mapping[str, LimitState],
    full_at: Mapping[str, int],
    split: Mapping[str, int] | None,
    shard0_now_ms: int | None,
) -> dict[str, Any]:
    return keys.merge_update(
        config.table,
        keys.bucket_key(cand.ns, cand.entity_id, cand.resource, shard_id),
        old_count=old,
        new_count=new,
        old_full_at={name: state.full_at for name, state in own.items()},
        new_full_at=full_at,
        new_split=split,
        shard0_now_ms=shard0_now_ms,
    )


def merge(config: AggregatorConfig, cand: MergeCandidate, now_ms: int) -> Flow[bool]:
    """Halve the shard count of one (entity, resource); True when it happened."""
    items = yield from read_shards(config, cand)
    if items is None or not still_quiet(items, cand, config, now_ms):
        return False
    updates = plan_merge(items, cand, config, now_ms)
    if not updates:
        return False
    try:
        absent = [
            keys.bucket_key(cand.ns, cand.entity_id, cand.resource, i)
            for i in range(cand.shard_count)
            if i not in items
        ]
        params = keys.merge_transaction(updates, config.table, absent)
        result = yield from one(Call("transact_write_items", params))
    except ZaeLimiterError as error:
        log.info("merge of %s/%s not done: %s", cand.entity_id, cand.resource, error)
        return False
    if not result.ok:  # a shard moved since it was read (a condition failed)
        log.info("merge of %s/%s not done: a shard changed", cand.entity_id, cand.resource)
        return False
    log.info(
        "merged %s/%s: %d -> %d shards",
        cand.entity_id,
        cand.resource,
        cand.shard_count,
        cand.shard_count // 2,
    )
    return True
