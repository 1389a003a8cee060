"""A quota take that no single shard covers, while the shards together do (issue 39).

A quota never refills, so a shard's fraction of a token stays out of reach of whole-token
takes until the reset: fractions come from a split that halves an odd deficit (moved to
shard 0 when it can be, flows/scaling/fractions.py, but not when that move is refused or
unanswered, nor when the aggregator told the donor the count), from an amount the shard
count does not divide (1,000 on 16 shards: 62.5 each), and the last whole tokens may sit
on a shard the take's tries missed (it tries up to three). Left alone, the window admits
less than its quota.

So when every shard tried refused a quota, the take reads all the shards (one consistent
BatchGetItem) and, when their quota tokens together cover it, moves what the chosen shard
lacks onto it from its siblings in one transaction: bounded takes on the siblings, a
give-back into the same window on the target (never past its room), the consumption
counters moved as well (their sum is unchanged). The take then goes to that shard as
any take does. A move creates no token and loses none: all or nothing, each part under
its condition, planned from the read; a move whose transaction failed or went unanswered
is planned again from a new read (applied or not, the tokens are all still there), and a
take that another client beat to the moved tokens gathers again (a few times at most).

What it costs: nothing until a quota refuses on every shard tried; then one read of
every shard (1 RCU each), and when a move is planned, one transaction (2 WCU per shard
in it) and one more read and write for the take. A refusal that the read confirms
(the shards together lack the tokens) is remembered like a one-shard refusal, until the
reset, so an exhausted quota costs that read once per client and window.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from zae_limiter import keys
from zae_limiter.bucket import LimitState
from zae_limiter.errors import RateLimiterUnavailable
from zae_limiter.flows import Call, Flow, one, pause
from zae_limiter.flows.context import Exhausted, RepoState
from zae_limiter.flows.write.charge import charge_write
from zae_limiter.flows.write.levels import Level, Rejected, Taken
from zae_limiter.flows.write.plan import enforces, plan_write
from zae_limiter.flows.write.shares import current, stored_config
from zae_limiter.flows.write.take import take
from zae_limiter.limits import Limit
from zae_limiter.models import BucketState

#: Moves (and takes after them) before the refusal stands: each failure is another
#: client's write landing in between, which took tokens or moved them.
MAX_GATHER_ATTEMPTS = 4
#: A transaction holds at most 100 parts: the target and this many siblings.
MAX_SOURCES = 24
#: After a transaction lost to a concurrent one (TransactionConflict).
CONFLICT_PAUSE_MS = 20


@dataclass(frozen=True, slots=True)
class Move:
    """Millitokens per quota to move from siblings onto `target` (source -> name -> milli)."""

    target: int
    sources: Mapping[int, Mapping[str, int]]


def may_gather(state: RepoState, level: Level, refused: Rejected) -> bool:
    """Whether a refusal of every shard tried is worth a read of them all: the bucket
    has several shards and a quota was among the limits that refused."""
    count = max(level.shard_count, state.shard_count(level.entity_id, level.resource))
    if count < 2:
        return False
    # Every limit that refused is a quota: a refilling one would refuse the take after
    # the move as well (and comes back with time).
    # Calendar quotas only: a session quota's shards join shard 0's session one by one
    # (flows/scaling/sessions.py), and moving tokens between them is not done yet.
    quotas = {limit.name for limit in level.limits if _calendar(limit)}
    return bool(refused.violations) and all(v.limit_name in quotas for v in refused.violations)


def _calendar(limit: Limit) -> bool:
    return limit.window is not None and not limit.window.session_ms


def gather(
    state: RepoState,
    level: Level,
    refused: Rejected,
    now_ms: int,
) -> Flow[Taken | Rejected]:
    """Move what one shard lacks onto it from its siblings, then take there; `refused`
    when the shards together lack it."""
    level = replace(level, hold_milli={}, flush=None, joined={})
    quotas = _quotas(level)
    if not quotas:
        return refused
    for attempt in range(MAX_GATHER_ATTEMPTS):
        items = yield from read_all(state, level)
        shards = {i: keys.decode_bucket(item) for i, item in items.items()}
        if not shards:
            return refused
        move = plan_move(level, quotas, shards, now_ms)
        unmade = [i for i in range(shards[0].shard_count) if i not in shards]
        if move is None and unmade:
            # Their shares are still in their donors' snapshots: a take there makes one,
            # and the next read counts it.
            made = yield from _on_unmade(state, level, unmade, now_ms)
            if made is not None:
                return made
            continue
        if move is None:
            _remember(state, level, refused, shards, now_ms)
            return refused
        if move.sources and not (yield from _send(state, level, items, move, now_ms)):
            yield from pause(CONFLICT_PAUSE_MS * (attempt + 1))
            continue
        here = replace(level, shard_id=move.target, shard_count=shards[move.target].shard_count)
        outcome = yield from take(state, here, now_ms, False)
        if isinstance(outcome, Taken):
            return outcome
    return refused


def _on_unmade(
    state: RepoState, level: Level, unmade: Sequence[int], now_ms: int
) -> Flow[Taken | None]:
    """A take on each shard not made yet (making it), until one admits."""
    for shard_id in unmade:
        here = replace(level, shard_id=shard_id, shard_count=max(level.shard_count, shard_id + 1))
        try:
            outcome = yield from take(state, here, now_ms, False)
        except RateLimiterUnavailable:
            continue  # not made now (shard 0 moved on, a throttle): the next read says
        if isinstance(outcome, Taken):
            return outcome
    return None


def _quotas(level: Level) -> tuple[Limit, ...]:
    return tuple(
        limit
        for limit in level.limits
        if _calendar(limit) and enforces(limit) and level.consume_milli.get(limit.name)
    )


def read_all(state: RepoState, level: Level) -> Flow[dict[int, keys.Item]]:
    """Every shard of the bucket that exists and is live (a consistent read), by id;
    {} when shard 0 is missing. A shard a merge drained (its count at or below its id)
    holds no share, and a shard not made yet is left out (its share is in its donor's
    snapshot until a take makes it)."""
    count = max(level.shard_count, state.shard_count(level.entity_id, level.resource))
    found: dict[int, keys.Item] = {}
    counts: dict[int, int] = {}
    for _ in range(2):  # a second read when shard 0 shows a higher count
        wanted = [i for i in range(count) if i not in found]
        for start in range(0, len(wanted), 100):
            ids = wanted[start : start + 100]
            params = keys.shards_read(
                state.table, state.namespace, level.entity_id, level.resource, ids
            )
            result = yield from one(Call("batch_get_item", params))
            for item in result.response.get("Responses", {}).get(state.table, []):
                bucket = keys.decode_bucket(item)
                found[bucket.shard_id] = item
                counts[bucket.shard_id] = bucket.shard_count
        if 0 not in found:
            return {}
        if counts[0] <= count:
            break
        count = counts[0]
    return {i: item for i, item in found.items() if i < counts[i] and i < count}


def plan_move(
    level: Level, quotas: Sequence[Limit], shards: Mapping[int, BucketState], now_ms: int
) -> Move | None:
    """The shard to take from and what to move onto it (pure); None when the shards
    together hold less than the take asks, or no shard has room for what it lacks."""
    have = {limit.name: _have(shards, limit, now_ms) for limit in quotas}
    for limit in quotas:
        if sum(have[limit.name].values()) < level.consume_milli[limit.name]:
            return None
    first = quotas[0].name
    order = sorted(have[first], key=lambda i: (-have[first][i], i))
    for target in order:
        sources = _sources(level, quotas, shards, have, target, now_ms)
        if sources is not None:
            return Move(target, sources)
    return None


def _have(shards: Mapping[int, BucketState], limit: Limit, now_ms: int) -> dict[int, int]:
    """Millitokens each shard can give of calendar quota `limit` now: those in the window,
    less reserves' held counts (a shard under other numbers gives none)."""
    out = {}
    for shard_id, bucket in shards.items():
        state, held, rebase = current(bucket, limit, now_ms)
        out[shard_id] = 0 if rebase else max(0, state.tokens(now_ms, bucket.shard_count, held))
    return out


def _sources(
    level: Level,
    quotas: Sequence[Limit],
    shards: Mapping[int, BucketState],
    have: Mapping[str, Mapping[int, int]],
    target: int,
    now_ms: int,
) -> dict[int, dict[str, int]] | None:
    """What each sibling gives `target`, richest first; None when the target has no
    room for it (a give-back never fills a shard past its room)."""
    sources: dict[int, dict[str, int]] = {}
    bucket = shards[target]
    for limit in quotas:
        name = limit.name
        lacking = level.consume_milli[name] - have[name][target]
        if lacking <= 0:
            continue
        state = current(bucket, limit, now_ms)[0]
        base, at = state.base(now_ms), state.full_at
        in_window = at is not None and base < at < base + state.refill_amount_milli
        # The give-back lands in the window the target's image is in, or nowhere.
        if not in_window or state.deficit(now_ms, bucket.shard_count) < lacking:
            return None
        givers = sorted((i for i in have[name] if i != target), key=lambda i: (-have[name][i], i))
        for giver in givers:
            part = min(lacking, have[name][giver])
            if part <= 0:
                break
            sources.setdefault(giver, {})[name] = part
            lacking -= part
        if lacking > 0 or len(sources) > MAX_SOURCES:
            return None
    return sources


def _send(
    state: RepoState,
    level: Level,
    items: Mapping[int, keys.Item],
    move: Move,
    now_ms: int,
) -> Flow[bool]:
    """The move's one transaction; whether it applied. Unanswered or refused, it is
    planned again from a new read: applied or not, no token was created or lost."""
    parts = []
    given: dict[str, int] = {}
    for shard_id, amounts in sorted(move.sources.items()):
        bucket = keys.decode_bucket(items[shard_id])
        limits = tuple(limit for limit in level.limits if limit.name in amounts)
        part = replace(level, limits=limits, consume_milli=dict(amounts), shard_id=shard_id,
                       shard_count=bucket.shard_count)  # fmt: skip
        key = keys.bucket_key(state.namespace, level.entity_id, level.resource, shard_id)
        plan = plan_write(bucket, part, now_ms, state.table, key, reset_window=False)
        if isinstance(plan, Rejected):
            return False
        parts.append(keys.tx_update(plan.params))
        for name, milli in amounts.items():
            given[name] = given.get(name, 0) + milli
    target = keys.decode_bucket(items[move.target])
    gives = [limit for limit in level.limits if limit.name in given]
    windows = {limit.name: current(target, limit, now_ms)[0].base(now_ms) for limit in gives}
    where = (level.entity_id, level.resource, move.target)
    back = {name: -milli for name, milli in given.items()}
    give = charge_write(state, where, gives, back, now_ms, items[move.target], windows=windows)
    parts.append(keys.tx_update(give.params))
    token = f"gather-{state.rng.getrandbits(96):024x}"
    try:
        result = yield from one(Call("transact_write_items", keys.transact(parts, token)))
    except RateLimiterUnavailable:
        return False
    return result.ok


def _remember(
    state: RepoState,
    level: Level,
    refused: Rejected,
    shards: Mapping[int, BucketState],
    now_ms: int,
) -> None:
    """The shards together lack the tokens: reject locally until the reset, as a
    one-shard bucket's refusal is (flows/write/memory.py). A quota refills nothing
    before its reset; what a give-back returns meanwhile is seen once the memory ends."""
    limits: dict[str, LimitState] = {}
    for limit in _quotas(level):
        total = sum(_have(shards, limit, now_ms).values())
        cfg = stored_config(limit)
        limits[limit.name] = replace(cfg, full_at=cfg.with_tokens(total, now_ms, 1))
    if limits:
        until = now_ms + refused.retry_after_ms
        state.exhausted[(level.entity_id, level.resource)] = Exhausted(until, limits, {})
