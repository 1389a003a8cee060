"""A session quota on an entity of several shards: one session, whichever shard is taken.

A session is opened by the first admitted take and lasts `session_ms`; its start is the
full-at value of the bucket item (bucket.py), so each shard's item could open its own.
Shard 0's item is the session instead: it opens there only (a take on shard 0 opens it
as on a one-shard bucket), and every other shard joins the session shard 0 shows open.
A take on shard k >= 1 whose item holds no live session (ended, never opened, or made
empty by a split) plans its SET from shard 0's session start rather than from `now`:

- shard 0 shows a session S live at `now`: shard k SETs from S, under its own "my session
  has ended" (a client that joined first fails the condition, and its ALL_OLD is an ADD);
- shard 0 shows none, or one that a faster clock opened after `now`: the take goes to
  shard 0 instead, whose SET opens the session (or which refuses until it begins).

Why no session admits more than its quota: every start a shard k stores is one that
shard 0 opened; a shard's starts only grow (it SETs only over a session ended at `now`,
a start live at `now`, hence newer), so it never goes back to a session it left; and a
shard spends at most its share in any session it holds. A split copies its donor's
full-at values (flows/scaling/split.py): a new shard is in its donor's session from birth.

Cost: nothing while a shard's session is live. Once per session per client, one
consistent read of shard 0, remembered until that session ends (`ShardKnowledge.sessions`).
"""

from __future__ import annotations

from dataclasses import replace

from zae_limiter import keys
from zae_limiter.flows import Call, Flow, one
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.write.levels import Level
from zae_limiter.flows.write.shares import current
from zae_limiter.limits import Limit
from zae_limiter.models import BucketState


def is_session(limit: Limit) -> bool:
    return limit.window is not None and bool(limit.window.session_ms)


def unjoined(level: Level, bucket: BucketState, now_ms: int) -> tuple[Limit, ...]:
    """The session quotas of `level` for which shard k >= 1 (`bucket`) holds no live
    session at `now_ms`: its take must join shard 0's. () on shard 0, or when all hold one."""
    if not level.shard_id:
        return ()
    return tuple(
        limit for limit in level.limits if is_session(limit) and not live(bucket, limit, now_ms)
    )


def live(bucket: BucketState, limit: Limit, now_ms: int) -> bool:
    state = current(bucket, limit, now_ms)[0]
    return not state.is_full(now_ms)


def open_start(bucket: BucketState, limit: Limit, now_ms: int) -> int | None:
    """The start of the session `bucket` (shard 0) holds open at `now_ms`; None when it
    holds none, or one a clock ahead of this one opened after `now_ms`."""
    state = current(bucket, limit, now_ms)[0]
    if state.full_at is None or state.is_full(now_ms):
        return None
    start = state.full_at // state.refill_amount_milli
    return start if start <= now_ms else None


def joined(
    state: RepoState, level: Level, needed: tuple[Limit, ...], now_ms: int
) -> Flow[Level | None]:
    """`level` with the session of shard 0 each of `needed` joins (`Level.joined`); None
    when shard 0 has none open: the take goes to shard 0, which opens it."""
    meta = state.entities.get(level.entity_id)
    known = {} if meta is None else meta.shards.sessions
    starts: dict[str, int] = {}
    for limit in needed:
        start = known.get((level.resource, limit.name))
        length = limit.window.session_ms if limit.window else None
        if start is not None and length and start <= now_ms < start + length:
            starts[limit.name] = start
    if len(starts) < len(needed):
        key = keys.bucket_key(state.namespace, level.entity_id, level.resource, 0)
        read = yield from one(Call("get_item", keys.get_consistent(state.table, key)))
        if not read.item:
            return None
        shard0 = keys.decode_bucket(read.item)
        for limit in needed:
            start = open_start(shard0, limit, now_ms)
            if start is None:
                return None
            starts[limit.name] = start
            if meta is not None:
                meta.shards.session_open(level.resource, limit.name, start)
    return replace(level, joined={**level.joined, **starts})
