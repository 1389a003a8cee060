"""Shard merging: halve an entity's `shard_count` without creating or losing a token.

Protocol (one flow per nominated (entity, resource), N shards -> M = N // 2, never < 1):

1. Read shards 0..N-1 with one consistent BatchGetItem, and check again, on these fresh
   items, that shard 0 still says N, has been quiet (`qs`) and unchanged (`sd`) for the
   quiet period, and that no shard's current write rate reaches `shard_down`.
2. Bring every shard's tokens to `now` with its current effective limits (original / N).
   Shard j >= M is drained into shard j % M: it gives all its (refilled) tokens away.
3. Write everything in ONE TransactWriteItems, so it happens entirely or not at all:
   - a drained shard: condition `shard_count = N AND rf = :read AND tk = :read` (exact:
     no write may have landed since the read); SET `shard_count = M`, `rf = now + freeze`,
     ADD `-tk` (to zero). With no tokens and a refill time in the future, a client with
     a stale cache that still routes there is rejected and moves to another shard; its
     count (M <= its id) tells it the shard is retired.
   - a receiving shard (shard 0 included): condition `shard_count = N AND rf = :read AND
     tk <= :read` (speculative takes may land in between: ADD commutes with them); SET
     `shard_count = M`, `rf = now`; ADD its own refill gain plus what its partner held.
     Shard 0 also gets `sd = now` and loses its quiet mark.
   Capacities add up: each shard held at most original // N, and a receiver may now hold
   original // M >= 2 * (original // N). The sum of tokens over all shards at `now` is
   the same before and after; usage counters (`tc`) are never touched.
4. A cancelled transaction (anything moved) is simply dropped: the next quiet batch
   nominates the merge again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from zae_limiter import keys
from zae_limiter.aggregator.plan import AggregatorConfig, MergeCandidate
from zae_limiter.aggregator.shards import effective_state
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


def _refilled(item: Mapping[str, Any], count: int, now_ms: int) -> tuple[int, dict[str, int]]:
    """(rf, {limit: (tokens at now) - (stored tokens)}) with the current effective limits."""
    bucket = keys.decode_bucket(item)
    at = max(now_ms, bucket.last_refill_ms)
    gains = {
        name: effective_state(stored, count).refilled(bucket.last_refill_ms, at).tokens_milli
        - stored.tokens_milli
        for name, stored in bucket.user_limits.items()
    }
    return bucket.last_refill_ms, gains


def plan_merge(
    items: Mapping[int, Any], cand: MergeCandidate, config: AggregatorConfig, now_ms: int
) -> list[dict[str, Any]] | None:
    """The TransactWriteItems updates of a halving; None when it cannot be done safely."""
    old, new = cand.shard_count, cand.shard_count // 2
    if new < 1:
        return None
    stored = {i: keys.decode_bucket(item).user_limits for i, item in items.items()}
    names = set(stored[0])
    if any(set(limits) != names for limits in stored.values()):
        return None  # shards disagree on their limits: leave them to the clients
    receive: dict[int, dict[str, int]] = {i: dict.fromkeys(names, 0) for i in range(new)}
    updates = []
    for j in sorted(i for i in items if i >= new):
        target = j % new
        if target not in items:
            return None
        rf, gains = _refilled(items[j], old, now_ms)
        tokens = {name: stored[j][name].tokens_milli for name in names}
        for name in names:
            receive[target][name] += tokens[name] + gains[name]
        updates.append(
            keys.merge_update(
                config.table,
                keys.bucket_key(cand.ns, cand.entity_id, cand.resource, j),
                old_count=old,
                new_count=new,
                old_refill_ms=rf,
                new_refill_ms=max(now_ms, rf) + config.freeze_ms,
                add_milli={name: -v for name, v in tokens.items()},
                expect_milli=tokens,
                exact=True,
            )
        )
    for i in sorted(i for i in items if i < new):
        rf, gains = _refilled(items[i], old, now_ms)
        updates.append(
            keys.merge_update(
                config.table,
                keys.bucket_key(cand.ns, cand.entity_id, cand.resource, i),
                old_count=old,
                new_count=new,
                old_refill_ms=rf,
                new_refill_ms=max(now_ms, rf),
                add_milli={name: gains[name] + receive[i][name] for name in names},
                expect_milli={name: stored[i][name].tokens_milli for name in names},
                exact=False,
                shard0_now_ms=now_ms if i == 0 else None,
            )
        )
    return updates


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
