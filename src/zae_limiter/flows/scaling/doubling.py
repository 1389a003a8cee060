"""When a shard count doubles, and the write that doubles it.

After a good write, the write-rate window its ALL_NEW shows may prove the partition
hot (flows/scaling/evidence.py): then one conditional write on shard 0 raises the count, at most
once per window per client. A shard that records an older count than shard 0 is told the
new one first. A throttled acquire doubles through `double` as well (flows/scaling/any_shard.py),
on the evidence a throttle needs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from zae_limiter import keys
from zae_limiter.errors import RateLimiterUnavailable
from zae_limiter.flows import Call, Flow, one
from zae_limiter.flows.context import EntityState, RepoState
from zae_limiter.flows.scaling import fractions, made
from zae_limiter.flows.scaling.evidence import (
    DOUBLING_THRESHOLD,
    EVIDENCE_SIGMAS,
    THROTTLE_EVIDENCE_AGE_MS,
    evidence_since,
    measured,
    partition_bound,
    window_seen,
)
from zae_limiter.flows.scaling.throttled import SATURATED_ROW
from zae_limiter.flows.write.levels import Level

#: After a throttled doubling try, this client may try again this soon (not a full window).
THROTTLED_DOUBLING_RETRY_MS = 250
#: From this many shards on, a doubling also needs the shards' windows this client saw to
#: carry, pooled, the share of their write limit that a doubling is for (DOUBLING_THRESHOLD),
#: or this client to be refused over and over (`busy_on_average`).
AVERAGE_FROM_COUNT = 4
AVERAGE_SHARE = DOUBLING_THRESHOLD


def scale_after_write(
    state: RepoState, meta: EntityState, level: Level, attributes: Mapping[str, Any], now_ms: int
) -> Flow[None] | None:
    """After a good write this client learned from (flows/write/take.py `after_write`):
    the flow that doubles the shards when the ALL_NEW proves this partition hot, or
    propagates the count (None, the common case: no generator is made).

    A shard that still records an older count than shard 0 is told the new one first:
    clients that write to it learn the count from its ALL_NEW, and until they do, its
    rate includes their traffic meant for fewer shards, which is no reason to double.
    """
    count = meta.shards.counts.get(level.resource, 1)
    seen = window_seen(attributes, now_ms, state.partition_wcu)
    if level.shard_id and seen.shard_count < count:
        return _propagate(state, level, count, now_ms)
    meta.shards.saw((level.resource, level.shard_id), seen)
    if (
        partition_bound(seen, DOUBLING_THRESHOLD, EVIDENCE_SIGMAS)
        and _entity_hot(meta, level, count, now_ms)
    ):
        names = [limit.name for limit in level.limits]
        since = evidence_since(seen)
        return double(state, level.entity_id, level.resource, now_ms, since, False, names)
    return None


def _entity_hot(meta: EntityState, level: Level, count: int, now_ms: int) -> bool:
    """On an entity of several shards, whether another shard's window this client saw
    recently (under the same count) also proves its partition hot.

    Every write judges its own shard's window, so an entity of many shards runs many
    tests at once, and one of them passes by chance now and then: a lost race and its
    retry arrive together, so shard windows are burstier than a Poisson count. A count
    that is too low shows on every shard; one hot shard among quiet ones is a burst.
    """
    if count < 2:
        return True
    for (resource, shard), seen in meta.shards.seen.items():
        if resource != level.resource or shard == level.shard_id or shard >= count:
            continue
        if now_ms - seen.seen_ms > THROTTLE_EVIDENCE_AGE_MS or seen.shard_count < count:
            continue
        if partition_bound(seen, DOUBLING_THRESHOLD, EVIDENCE_SIGMAS):
            return True
    return False


def _propagate(state: RepoState, level: Level, count: int, now_ms: int) -> Flow[None]:
    key = keys.bucket_key(state.namespace, level.entity_id, level.resource, level.shard_id)
    try:
        names = [limit.name for limit in level.limits]
        params = keys.propagate_shard_count(state.table, key, count, names, now_ms=now_ms)
        raised = yield from one(Call("update_item", params))
    except RateLimiterUnavailable:
        return  # a hot shard: the next write to it tries again
    if raised.ok and raised.attributes:
        # A donor from now on, as when a split raises it: its quotas' fractions of a
        # token go to shard 0, or they would stay out of reach of whole-token takes.
        yield from fractions.settle_donor(state, level, level.shard_id, raised.attributes, now_ms)


def double(
    state: RepoState,
    entity_id: str,
    resource: str,
    now_ms: int,
    measured_since: int,
    confirm: bool = False,
    limits: Sequence[str] = (),
) -> Flow[None]:
    """One conditional write on shard 0; at most one try per client per window.

    `measured_since` is when the evidence began (the write-rate window's start); shard 0
    refuses evidence older than its last doubling. With `confirm` (a throttled client,
    whose view may be seconds old) shard 0 is read first: a write to a hot partition
    that its condition then refuses would spend the capacity the partition lacks.
    """
    meta = state.entities.learn(entity_id, False, None)
    count = meta.shards.counts.get(resource, 1)
    if not may_double(state, entity_id, resource, now_ms):
        return
    if not busy_on_average(meta, resource, count, now_ms):
        return
    meta.shards.try_doubling(resource, now_ms)
    key = keys.bucket_key(state.namespace, entity_id, resource, 0)
    where = (state.table, state.namespace, entity_id, resource, count)
    # A raise over an unmade shard would overwrite the snapshot its share sits in, and one
    # over a drained shard would count what it refilled since (flows/scaling/made.py).
    if confirm:
        # Shard 0 and the shards the check reads in one read (was a GetItem, then a batch).
        zero, ready = yield from made.with_shard0(*where)
        due = _due(state, zero, resource, count, measured_since)
        if not (due and ready):
            _turned_down(state, meta, resource, zero, (count, ready and not due), now_ms)
            return
    elif not (yield from made.all_made(*where)):
        return
    try:
        params = keys.double_shards(
            state.table, key, count, count * 2, now_ms, measured_since, limits
        )
        result = yield from one(Call("update_item", params))
    except RateLimiterUnavailable:
        # Shard 0 is throttled too. Try again soon (after the next good write), not after a
        # whole window: the doubling is what relieves it. Other clients try as well.
        meta.shards.try_doubling(resource, now_ms - keys.WINDOW_MS + THROTTLED_DOUBLING_RETRY_MS)
        meta.shards.want_doubling(resource, count, measured_since)
        return
    seen = result.attributes if result.ok else (result.old or {})
    if seen:
        meta.shards.told(resource, max(count, keys.decode_bucket(seen).shard_count))


def _turned_down(
    state: RepoState,
    meta: EntityState,
    resource: str,
    zero: Any,
    why: tuple[int, bool],
    now_ms: int,
) -> None:
    """After a confirming read turned a doubling down with shard 0 still at the count
    (`why`: the count, and whether only the evidence's age did): shard 0's window as read
    becomes this client's view of it, so the next judgement dates evidence from there
    (`evidence.last_doubling`). And when the evidence was only older than shard 0's last
    doubling (every shard below the count made), this client may try again as after a
    throttled doubling write, not a whole window later: fresh evidence comes within a
    second, and the partitions refuse all the while. Measured (`reserve=False` at 8x a
    partition, fixed window without reasons): one such try held 2 -> 4 back for 2 s."""
    count, stale = why
    if not zero or keys.get_n(zero, keys.A_SHARD_COUNT, 1) != count:
        return
    meta.shards.read((resource, 0), window_seen(zero, now_ms, state.partition_wcu))
    if stale:
        meta.shards.try_doubling(resource, now_ms - keys.WINDOW_MS + THROTTLED_DOUBLING_RETRY_MS)


def may_double(state: RepoState, entity_id: str, resource: str, now_ms: int) -> bool:
    """Whether `double` would try now: the count has room to double, and this client has
    not tried in the last window. A throttled acquire asks before it reads any evidence:
    reads that could only lead to a doubling this client would not try are waste."""
    meta = state.entities.get(entity_id)
    count = 1 if meta is None else meta.shards.counts.get(resource, 1)
    last = None if meta is None else meta.shards.tried.get(resource)
    return count * 2 <= state.max_shards and (last is None or now_ms - last >= keys.WINDOW_MS)


def busy_on_average(meta: EntityState, resource: str, count: int, now_ms: int) -> bool:
    """Whether the shards' windows this client saw lately (under `count`, at least two)
    carry, pooled (all their writes over all their time), AVERAGE_SHARE of their write
    limit or more; or this client is refused over and over (`refused_over_and_over`).

    Each doubling is judged on one or two shards' windows, and on an entity of many
    shards, with a throttle now and then from a burst on one of them, such a test passes
    by chance sooner or later. A count that is too low shows on the average shard.

    Neither end of a window is a write of the load's rate: the write that restarted it
    (it counts itself: keys `window_parts`) and the one that brought it back (there
    because someone looked). Counting the first, as `partition_bound` does, adds a write
    to every window of a second or two: measured at 16 shards of 8x a partition (50%
    each), windows averaged that way read 0.69, and with a bar at 0.4 the count went to
    32 on the next burst; counted without both ends, the same windows read 0.55. (A
    window a raise restarted begins with no write and reads a write low, which only
    holds a doubling back while the count is new.)"""
    if count < AVERAGE_FROM_COUNT or refused_over_and_over(meta, resource):
        return True
    writes = 0
    capacity = 0.0  # the writes the windows' partitions could take in their spans
    windows = 0
    for (name, _shard), seen in meta.shards.seen.items():
        if name != resource or seen.shard_count != count:
            continue
        stretch = measured(seen)
        if stretch is None or now_ms - seen.seen_ms > THROTTLE_EVIDENCE_AGE_MS:
            continue
        _start, counted, span_ms = stretch
        writes += max(0, counted - 2)
        capacity += span_ms * seen.partition_wcu / 1000
        windows += 1
    # Fewer than two: a doubling judged on two windows has them, so this is a client
    # whose windows are from before the last doubling (restarted since, or too young).
    return windows >= 2 and writes >= AVERAGE_SHARE * capacity


def refused_over_and_over(meta: EntityState, resource: str) -> bool:
    """Whether this client's writes to the bucket were refused SATURATED_ROW times in a row
    (flows/scaling/throttled.py: a write through unwinds one). Then the count is too low
    whatever the windows average: while a fleet spreads over a count just raised, the new
    shards are quiet (a client that knew the old count writes the old shards, a new shard
    is made by its first take) and the old ones full, and the average of the windows reads
    0.6 while one partition's worth of the load gets through (measured: 4 shards, 8x a
    partition, fixed window, 4-7 admitted a second of 40; the pooled windows 0.62-0.64).
    On a count the load needs, a throttle is a burst, and a write through soon follows."""
    return meta.gate.state(resource)[1] >= SATURATED_ROW


def _due(state: RepoState, item: Any, resource: str, count: int, since: int) -> bool:
    """Whether shard 0's item as just read (None: absent) still has `count` shards and no
    doubling since `since` (it learns a higher count on the way: the caller then spreads
    over it instead)."""
    if not item:
        return True
    shard0 = keys.decode_bucket(item)
    if shard0.shard_count > count:
        meta = state.entities.learn(
            shard0.entity_id, shard0.cascade, shard0.parent_id, of=resource
        )
        meta.shards.told(resource, shard0.shard_count)
        return False
    return keys.get_n(item, keys.A_SHARD_DOUBLED, 0) <= since
