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
   - a receiving shard (shard 0 included) gets `now` plus half the two leads: at half
     the count a millitoken is worth half as much full-at time. Shard 0 also gets
     `sd = now` and loses its quiet mark.
   The sum of tokens over all shards at `now` is the same before and after (rounded in
   the limiter's favour); usage counters (`tc`) are never touched.
4. A cancelled transaction (anything moved) is simply dropped: the next quiet batch
   nominates the merge again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from zae_limiter import keys
from zae_limiter.aggregator.plan import AggregatorConfig, MergeCandidate
from zae_limiter.bucket import LimitState
from zae_limiter.errors import ZaeLimiterError
from zae_limiter.flows import Call, Flow, one

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


def _behind(state: LimitState, now_ms: int) -> int:
    """How far a limit's full-at time is ahead of `now` (0 when full)."""
    if state.full_at is None:
        return 0
    return max(0, state.full_at - now_ms * state.refill_amount_milli)


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
    if any(set(b.user_limits) != names or b.legacy_tokens for b in stored.values()):
        return None  # shards disagree on their limits, or v2 ones: leave them to the clients
    if any(configs[(i, name)] != configs[(0, name)] for i, name in configs):
        return None
    if any(c[2] < keys.QUOTA_PERIOD_BELOW for c in configs.values()):
        return None  # a quota's window clock is not `now`: its shards are never merged
    updates = []
    for i in sorted(i for i in items if i < new):
        partner = stored.get(i + new)
        own = stored[i].user_limits
        full_at = {}
        for name in names:
            ra = own[name].refill_amount_milli
            ahead = _behind(own[name], now_ms)
            if partner is not None:
                ahead += _behind(partner.user_limits[name], now_ms)
                # a crashed client's expired count on the drained shard is spent tokens
                lost = keys.lost_milli(partner.reserved.get(name, {}), now_ms)
                ahead += lost * partner.user_limits[name].unit(old)
            # At half the count a millitoken is worth half as much full-at time: the
            # receiver then lacks what the two lacked together (rounded up).
            full_at[name] = now_ms * ra + -(-ahead // 2)
        updates.append(_update(config, cand, i, old, new, own, full_at, now_ms if i == 0 else None))
    for j in sorted(i for i in items if i >= new):
        if j % new not in items:
            return None
        own = stored[j].user_limits
        # A drained shard holds nothing until well after the merge: a client with a stale
        # count that still routes there is rejected and learns the new count from it.
        until = now_ms + config.freeze_ms
        full_at = {
            name: until * own[name].refill_amount_milli + own[name].room(new) * own[name].unit(new)
            for name in names
        }
        updates.append(_update(config, cand, j, old, new, own, full_at, None))
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
    shard0_now_ms: int | None,
) -> dict[str, Any]:
    return keys.merge_update(
        config.table,
        keys.bucket_key(cand.ns, cand.entity_id, cand.resource, shard_id),
        old_count=old,
        new_count=new,
        old_full_at={name: state.full_at for name, state in own.items()},
        new_full_at=full_at,
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
        result = yield from one(Call("transact_write_items", keys.merge_transaction(updates)))
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
