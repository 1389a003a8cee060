"""Reserves a crashed client left behind: held counts of an epoch past its return
margin, which no one will report or give back. The next client to write the shard sees
them in its ALL_NEW and charges them to the full-at times (from there time refills them);
until that lands, readers count them as taken (keys.lost_milli).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zae_limiter import keys
from zae_limiter.flows import Flow, one
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.write.charge import MAX_CHARGE_ATTEMPTS, charge_write
from zae_limiter.flows.write.levels import Level


def charge_lost(
    state: RepoState, level: Level, item: Mapping[str, Any], now_ms: int
) -> Flow[None] | None:
    """The write that charges a crashed client's expired held counts to the full-at times
    (from there time refills them), when `item` shows any; None, the common case, else.
    Until it lands, readers count them as taken (keys.lost_milli)."""
    # One search of the names joined: a generator over every attribute cost more than the
    # rest of the after-write checks (this runs after every write).
    if keys.RESERVE_MARK not in "\n".join(item) or not _lost(level, item, now_ms):
        return None
    return _charge_lost(state, level, item, now_ms)


def _lost(level: Level, item: Mapping[str, Any], now_ms: int) -> dict[str, int]:
    reserved = keys.decode_reserved(item)
    counts: dict[str, int] = {}
    for limit in level.limits:
        counts.update(keys.expired_counts(limit.name, reserved.get(limit.name, {}), now_ms))
    return counts


def _charge_lost(
    state: RepoState, level: Level, item: Mapping[str, Any], now_ms: int
) -> Flow[None]:
    shard = (level.entity_id, level.resource, level.shard_id)
    for _ in range(MAX_CHARGE_ATTEMPTS):
        counts = _lost(level, item, now_ms)
        if not counts:
            return  # another client charged them first
        delta: dict[str, int] = {}
        for limit in level.limits:
            for epoch in keys.decode_reserved(item).get(limit.name, {}):
                attr = keys.reserve_attr(limit.name, epoch)
                delta[limit.name] = delta.get(limit.name, 0) + counts.get(attr, 0)
        released = {attr: -count for attr, count in counts.items()}
        call = charge_write(state, shard, level.limits, delta, now_ms, item, released, counts)
        result = yield from one(call)
        if result.ok or not result.old:
            return
        item = result.old
