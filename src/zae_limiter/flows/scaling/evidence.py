"""Evidence that a partition is the bottleneck, read from the bucket items' write windows.

Every hot-path write counts itself in its item's write-rate window (`wn` writes since
`ws`), together with the failed conditional writes of the same take before it: those
took the partition's capacity as well. A client restarts a window once it is two
seconds old, and the restart keeps the window before it (`wps`, `wpn`), so an image
taken just after a restart still has a second or more of history behind it.

Two judgements read these windows. After a good write, a window that proves its
partition past 80% of the write limit prompts a doubling (`partition_bound` with
`DOUBLING_THRESHOLD`). After a throttled write, the question is whose limit refused it:
the partition's (a shard running near its limit: double) or the table's (provisioned
capacity, an on-demand peak: more shards would only add writes). DynamoDB says so
itself when it gives a throttle's reasons (`RateLimiterUnavailable.partition_throttled`,
see `entity_evidence`): a partition's own limit proves a one-shard entity's partition
full at once, the table's rules a doubling out. Otherwise the windows decide: a client
with no recent window of the shard reads the item once (at most every
`EVIDENCE_READ_MS`): reads do not take write capacity, and a fleet of clients that each
write a shard now and then would otherwise never hold any evidence when a throttle
comes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from zae_limiter import keys
from zae_limiter.errors import RateLimiterUnavailable
from zae_limiter.flows import Call, Flow, one
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.scaling import throttled
from zae_limiter.flows.scaling.knowledge import WindowSeen
from zae_limiter.flows.write.levels import Level
from zae_limiter.flows.write.memory import learn

#: A write-rate window must span this long before its rate can prompt a doubling.
MIN_EVIDENCE_MS = 1000
#: Double when a partition's write rate passes this share of its write limit.
DOUBLING_THRESHOLD = 0.8
#: How far (in standard deviations of a Poisson count) a window's writes must pass the
#: threshold before they prove the partition hot: ~2% false alarms per window judged.
EVIDENCE_SIGMAS = 2.0
#: A throttled write's shard doubles when its own rate is significantly past this share
#: of the limit. A partition that is the bottleneck takes its whole limit, and a capped
#: count can never pass the 80% line by much; but a shard past 60% that doubles leaves
#: halves past 30%, which can never prove 60% again: at most one doubling beyond the
#: count that keeps every shard under 80%, whatever a burst does.
THROTTLED_THRESHOLD = 0.6
THROTTLED_EVIDENCE_SIGMAS = 1.0
#: A window seen longer ago than this says nothing about why a write is throttled now.
THROTTLE_EVIDENCE_AGE_MS = 2 * keys.WINDOW_MS
#: A throttled client reads a shard's window at most this often. A window needs a
#: second or two at a partition's rate to prove anything, and a fleet's clients read on
#: their own: at 250 ms, four clients without reserves on one or two shards refused
#: for seconds read 150-190 windows in a 30 s run, a tenth of its requests.
EVIDENCE_READ_MS = 500
#: A throttle that names the shard's partition proves it full over this much before it
#: (ms): its capacity is per second.
REFUSAL_PROOF_MS = 1000
#: ... but only while the entity has fewer shards than this. A refusal says the partition
#: ran out in that instant, not that its load needs more: on an entity of many shards a
#: burst on one of them does that now and then (measured: `reserve=False` at 8x one
#: partition, taking refusals as proof on 32 shards, went on to 64 on a burst of 6
#: throttles), and the windows judge whether the load does.
REFUSAL_PROVES_BELOW = 2
#: ... or, for a client without reserves, once one acquire's writes were refused by name
#: on this many shards (on every shard, of an entity of fewer): a burst on one shard does
#: not do that, a count too low for the load does it to every write. Two were not enough:
#: under the fixed window a bunch of retries at a second's start met two refusing shards
#: of 16, and the count went to 64 (1 run of 1). (`double` also wants the shards' windows
#: to average AVERAGE_SHARE from 4 shards on.)
REFUSED_SHARDS_PROVE = 3


def refusals_prove(refused_shards: int, count: int) -> bool:
    """Whether refusals by name on `refused_shards` distinct shards of one acquire prove
    an entity of `count` shards too few for its load (REFUSED_SHARDS_PROVE)."""
    return refused_shards >= min(REFUSED_SHARDS_PROVE, max(2, count))


def window_seen(item: Mapping[str, Any], seen_ms: int, partition_wcu: int) -> WindowSeen:
    """A shard's write-rate window as an image of its item shows it at `seen_ms`
    (`partition_wcu`: the write limit when the item does not record one)."""
    return WindowSeen(
        keys.get_n(item, keys.A_WINDOW_START, seen_ms),
        keys.get_n(item, keys.A_WINDOW_WRITES),
        seen_ms,
        keys.partition_wcu(item, partition_wcu),
        keys.get_n(item, keys.A_SHARD_COUNT, 1),
        keys.get_n(item, keys.A_PREV_WINDOW_START, -1),
        keys.get_n(item, keys.A_PREV_WINDOW_WRITES),
        keys.get_n(item, keys.A_SHARD_DOUBLED, -1),
    )


def measured(seen: WindowSeen, longest: bool = False) -> tuple[int, int, int] | None:
    """(start ms, writes, span ms) of the stretch a window shows: the current window once
    it spans `MIN_EVIDENCE_MS`, else the current and the previous one together; None when
    neither spans it. With `longest`, the two together whenever there is one before."""
    span_ms = seen.seen_ms - seen.start_ms
    joined = 0 <= seen.prev_start_ms < seen.start_ms
    if span_ms >= MIN_EVIDENCE_MS and not (longest and joined):
        return seen.start_ms, seen.writes, span_ms
    if joined:
        union_ms = seen.seen_ms - seen.prev_start_ms
        if union_ms >= MIN_EVIDENCE_MS:
            return seen.prev_start_ms, seen.writes + seen.prev_writes, union_ms
    return None


def evidence_since(seen: WindowSeen, longest: bool = False) -> int:
    """When the evidence a window gives began (shard 0 refuses it if it doubled since)."""
    stretch = measured(seen, longest)
    return seen.start_ms if stretch is None else stretch[0]


def partition_bound(
    seen: WindowSeen, threshold: float, sigmas: float, longest: bool = False
) -> bool:
    """Whether a window's writes prove the partition runs past `threshold` of its limit.

    A shard well below its limit still sees random bursts: at 2.5 writes/s, a 2 s window
    holds 8 or more writes (80% of 5/s) one time in eight. So the count must pass what a
    partition at the threshold would show by `sigmas` Poisson deviations (sqrt of the
    expected count): at 1,000 writes/s that is a few percent of the threshold, at 5/s it
    is what separates a hot shard from a lucky one. The write that brought the window
    back is not counted: it is there because someone looked.
    """
    stretch = measured(seen, longest)
    if stretch is None:
        return False  # less than a second of writes: too few to tell a trend from chance
    _start, writes, span_ms = stretch
    expected = threshold * seen.partition_wcu * span_ms / 1000
    return writes - 1 > expected + sigmas * math.sqrt(expected)


def throttle_evidence(state: RepoState, level: Level, now_ms: int) -> int | None:
    """When a write to `level`'s shard was throttled: the start of the stretch that shows
    this partition is the bottleneck, or None when the client has no such evidence.

    A throttle alone does not say whose limit was hit. If the shard's own rate (the last
    window this client saw there) was not near the partition's limit, the pressure is the
    table's (provisioned capacity, on-demand peak, account limits): more shards would
    only add writes, so no doubling.

    The current window is judged alone (a load that just rose is not diluted by a quiet
    window before it), and then with the one before it: on a partition of a few writes a
    second, a full partition's one window is too few writes to pass the bound (at 5/s a
    window must be past 1.5 s old, and at its limit all the while), and the partition
    refuses until the count doubles. The longer stretch has less noise, so it adds
    little to what a table-level limit below the threshold can pass by chance.
    """
    meta = state.entities.get(level.entity_id)
    seen = None if meta is None else meta.shards.seen.get((level.resource, level.shard_id))
    if seen is None or now_ms - seen.seen_ms > THROTTLE_EVIDENCE_AGE_MS:
        return None
    if seen.shard_count < state.shard_count(level.entity_id, level.resource):
        return None  # measured before the last doubling: shard 0 would refuse it anyway
    floor = last_doubling(state, level.entity_id, level.resource)
    for longest in (False, True):
        if partition_bound(seen, THROTTLED_THRESHOLD, THROTTLED_EVIDENCE_SIGMAS, longest):
            since = evidence_since(seen, longest)
            if since >= floor:
                return since
    return None


def last_doubling(state: RepoState, entity_id: str, resource: str) -> int:
    """When shard 0 last doubled, as the latest image of it this client holds shows it
    (-1: not known). A window that began before it counted traffic meant for half the
    shards, and shard 0 refuses a doubling on it (`doubling._due`).

    A window does not record the count it began under, only the count its item holds
    now: a doubling that rides on a take (flows/write/take.py) raises shard 0's count
    without restarting its window. Judged as evidence, such a window spends this
    client's doubling try on a read that shard 0 then turns down, and the client may not
    try again for a whole window (measured: `reserve=False` at 8x a partition, fixed
    window without reasons, 2 -> 4 held back from second 4.5 to 6.5 by one such try)."""
    meta = state.entities.get(entity_id)
    zero = None if meta is None else meta.shards.seen.get((resource, 0))
    return -1 if zero is None else zero.doubled_ms


def read_evidence(state: RepoState, level: Level, now_ms: int) -> Flow[int | None]:
    """`throttle_evidence`, reading the shard's window first when this client holds no
    recent one that can decide (one consistent GetItem, at most every EVIDENCE_READ_MS)."""
    since = throttle_evidence(state, level, now_ms)
    meta = state.entities.get(level.entity_id)
    if since is not None or meta is None:
        return since
    where = (level.resource, level.shard_id)
    seen = meta.shards.seen.get(where)
    if seen is not None and now_ms - seen.seen_ms < EVIDENCE_READ_MS:
        return None  # what this client saw just now did not show a hot partition
    if not meta.shards.may_read(where, now_ms, EVIDENCE_READ_MS):
        return None
    key = keys.bucket_key(state.namespace, level.entity_id, level.resource, level.shard_id)
    try:
        read = yield from one(Call("get_item", keys.get_consistent(state.table, key)))
    except RateLimiterUnavailable:
        return None  # reads throttled too: the table is short of capacity, not one shard
    if not read.item:
        return None
    # The item is this client's image of the shard, as a write's ALL_NEW would be: its
    # next write there plans from it instead of reading first (often a shard it never
    # wrote: the other shard read below). And a client whose writes are all throttled
    # never sees an ALL_NEW: the read is how it learns that the entity has more shards
    # than it knew, and spreads over them.
    learn(state, level, read.item, now_ms)  # the count and the window start, as a write's
    meta.shards.saw(where, window_seen(read.item, now_ms, state.partition_wcu))
    return throttle_evidence(state, level, now_ms)


def entity_evidence(
    state: RepoState, level: Level, now_ms: int, partition: bool | None = None
) -> Flow[int | None]:
    """`read_evidence` for the throttled shard and, on an entity with more than one
    shard, for another one as well: None unless both prove their partitions hot.

    `partition`: whose limit DynamoDB said refused the write (see
    `RateLimiterUnavailable.partition_throttled`; None: it gave no reason). The table's
    or the account's: None at once, nothing read, since no doubling can help. The
    partition's, on an entity of one shard: the proof itself, dated REFUSAL_PROOF_MS
    before the refusal (at a few writes a second a window needs seconds to prove what
    the reason says at once, and the partition refuses all the while). On an entity of
    more shards the windows decide, as without a reason: there, one refusal is as likely
    a burst on one shard as a load the count is too low for.

    An entity's acquires spread over its shards, so a count that is too low shows on
    all of them; one hot shard among quiet ones is a burst of its own (a client's
    reserve writes go to one shard, a fleet's reserves expire together), which doubling
    the whole entity would not relieve: it passes, or the reserves stretch."""
    if partition is False:
        return None
    if partition and state.shard_count(level.entity_id, level.resource) < REFUSAL_PROVES_BELOW:
        return now_ms - REFUSAL_PROOF_MS
    since = yield from read_evidence(state, level, now_ms)
    count = state.shard_count(level.entity_id, level.resource)  # the read may teach it
    if since is None or count < 2:
        return since
    others = [shard for shard in range(count) if shard != level.shard_id]
    for shard in others:
        known = throttle_evidence(state, replace(level, shard_id=shard), now_ms)
        if known is not None:
            return min(since, known)
    # Not shard 0 while this client leaves it to the growth: its window is quiet then.
    shard = throttled.any_shard(state, level, others, now_ms)
    other = replace(level, shard_id=shard, shard_count=count)
    also = yield from read_evidence(state, other, now_ms)
    return None if also is None else min(since, also)
