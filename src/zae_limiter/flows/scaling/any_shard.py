"""Take one level from any shard of its entity: the first shard, others when one is
drained, and what a throttled write does next (another shard, a wait, a doubling, the
client's reserve; flows/scaling/throttled.py holds the waits and the gate).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from zae_limiter import keys
from zae_limiter.errors import SHARD_NOT_FOUND, RateLimiterUnavailable
from zae_limiter.flows import Flow, pause
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.reserves import ops as reserve_ops
from zae_limiter.flows.scaling import gather, throttled
from zae_limiter.flows.scaling.doubling import double, may_double
from zae_limiter.flows.scaling.evidence import REFUSAL_PROOF_MS, entity_evidence, refusals_prove
from zae_limiter.flows.write.levels import Level, Rejected, Taken
from zae_limiter.flows.write.take import NOT_FETCHED, take


def take_any_shard(
    state: RepoState, level: Level, now_ms: int, speculative: bool, prefetched: Any
) -> Flow[Taken | Rejected]:
    """Take from a random shard; a drained shard is not the entity: try up to two others.

    A throttled write was not applied, so it is tried again (flows/scaling/throttled.py): on a
    shard not tried yet, then after short jittered waits, until the acquire's wait budget
    is spent. A throttle on a shard whose measured write rate shows its partition is the
    bottleneck also prompts one doubling try on shard 0 (and the next try goes to shard 1
    when only one is known: a probe). A reserve write that is throttled stretches the
    client's reserve first (fewer, larger writes), and counts as evidence all the same.
    """
    if prefetched is not NOT_FETCHED:
        _learn_from_prefetched(state, level, prefetched)
    count = level.shard_count
    if count == 1 and not level.hold_milli and level.flush is None:
        shard, preferred = 0, None  # one shard, no reserve to top up or renew
    else:
        shard, preferred = _first_shard(state, level, prefetched)
    tries = throttled.Tries([shard], state.jitter)
    meta = state.entities.get(level.entity_id)
    # The gate and recent refusals, asked only of a bucket that has any: a steady
    # acquire's entity has neither.
    if meta is not None and (meta.gate.closed or meta.gate.refused):
        # A doubling this client wishes for rides on this take: sent at once, to shard 0.
        rider = preferred is None and throttled.rides_doubling(state, level)
        gate = 0 if rider else throttled.gate_ms(state, level, now_ms)
        if gate and throttled.sheds(state, level, now_ms):
            raise throttled.shed(level)
        if gate:  # this client was throttled on the bucket just now: hold back first
            tries.woke((yield from pause(tries.hold_back(gate))))
            served = throttled.from_reserve(state, level, tries.now(now_ms))
            if served is not None:
                return served
        if throttled.refused_lately(state, level, now_ms):
            level = throttled.with_reserve(state, level, tries.now(now_ms))
            if shard == 0 and preferred is None and prefetched is NOT_FETCHED:
                shard = throttled.any_shard(state, level, list(range(count)), now_ms)
                tries.tried = [shard]
        if rider:
            shard = 0
            tries.tried = [shard]
    while True:
        here = level
        if shard != level.shard_id or level.shard_count <= shard or level.flush is not None:
            here = _on_shard(level, shard, count, preferred)
        at_ms = tries.now(now_ms) if tries.waited_ms or tries.woke_ms else now_ms
        try:
            outcome = yield from take(state, here, at_ms, speculative, prefetched)
        except RateLimiterUnavailable as error:
            if error.code == SHARD_NOT_FOUND and tries.throttles:
                # A probe after a throttle found no such shard: shard 0's count is known
                # now, and the try goes to one that exists.
                known = state.shard_count(level.entity_id, level.resource)
                shard = state.rng.randrange(max(1, known))
                prefetched = NOT_FETCHED
                continue
            if error.code == SHARD_NOT_FOUND:
                outcome = None  # a stale count: shard 0's is known now, pick again
            elif not error.throttled:
                raise
            else:
                lead = _lead(state, level, speculative)
                retry = yield from _retry_after_throttle(
                    state, level, here, tries, (at_ms, now_ms), lead, error.partition_throttled
                )
                if retry is None:
                    raise
                if isinstance(retry, (Taken, Rejected)):
                    return retry  # served by the client's reserve, or its lead, after a wait
                (level, shard), prefetched = retry, NOT_FETCHED
                continue
        else:
            if isinstance(outcome, Taken):
                if state.reserves is not None:
                    throttled.note_reserve_write(state, here, False, at_ms)
                meta = state.entities.get(level.entity_id)
                if meta is not None and meta.gate.closed:
                    throttled.note_success(state, here)
                return outcome
        count = max(state.shard_count(level.entity_id, level.resource), 1)
        others = tries.untried(count)
        if not others:
            if outcome is None:
                raise RateLimiterUnavailable(
                    f"no shard of {level.entity_id}/{level.resource} could take the request"
                )
            if isinstance(outcome, Rejected) and gather.may_gather(state, level, outcome):
                # A quota's tokens spread over the shards: moved where one take covers them.
                return (yield from gather.gather(state, level, outcome, now_ms))
            return outcome
        shard = state.rng.choice(others)
        tries.tried.append(shard)
        prefetched = NOT_FETCHED


def _first_shard(state: RepoState, level: Level, prefetched: Any) -> tuple[int, int | None]:
    """(the shard to write first, the shard of the client's reserve if it holds one)."""
    count = level.shard_count
    shard = 0 if count == 1 or prefetched is not NOT_FETCHED else state.rng.randrange(count)
    # Neither a reserve to top up nor one to renew (every write without reserves): none.
    wants = level.hold_milli or level.flush is not None
    preferred = reserve_ops.preferred_shard(state, level) if wants else None
    if preferred is not None and prefetched is NOT_FETCHED:
        shard = preferred
    return shard, preferred


def _retry_after_throttle(
    state: RepoState,
    level: Level,
    here: Level,
    tries: throttled.Tries,
    times: tuple[int, int],
    lead: throttled.Lead,
    partition: bool | None,
) -> Flow[tuple[Level, int] | Taken | Rejected | None]:
    """After a throttled write on `here` at `times` (the write's, the acquire's start):
    (the level to try again, the shard), or the level served from the client's reserve
    (or its lead's write) after a wait, or None (the budget is spent). `partition`: whose
    limit DynamoDB said refused it (None: it did not say)."""
    at_ms, now_ms = times
    throttled.note_reserve_write(state, here, True, at_ms)
    crowded = throttled.crowded(state, here, at_ms)  # asked before this throttle closes it
    # Refusals that name the partition are evidence while a doubling may come of them
    # (`refusals_prove`): those tries keep their budget. Without reserves only.
    evidence = partition and may_double(state, level.entity_id, level.resource, at_ms)
    if state.reserves is None and not evidence:
        by_another = crowded and throttled.gate_until(state, here) != tries.own_gate
        tries.refused_again(throttled.refusal_row(state, here), by_another)
    throttled.note_throttle(state, here, at_ms)
    if not crowded:
        tries.own_gate = throttled.gate_until(state, here)
    waits = tries.waits
    next_shard = yield from _after_throttle(state, level, here, tries, (at_ms, crowded), partition)
    if next_shard is None:
        return (yield from throttled.wait_for_reserve(state, level, tries, now_ms, lead))
    if tries.waits > waits:  # it waited: a reserve may cover it now
        served = throttled.from_reserve(state, level, tries.now(now_ms))
        if served is not None:
            return served
    return throttled.with_reserve(state, level, tries.now(now_ms)), next_shard


def _lead(state: RepoState, level: Level, speculative: bool) -> throttled.Lead:
    """The write a waiting acquire sends for the client's reserve when it leads: one try,
    asking for a reserve, on the shard of the client's reserve or any that exists."""

    def write(at_ms: int) -> Flow[Taken | Rejected | None]:
        count = max(state.shard_count(level.entity_id, level.resource), 1)
        preferred = reserve_ops.preferred_shard(state, level)
        # A client whose writes were all refused has not seen a doubling by others: one
        # known shard is probed past (a missing shard says the count, flows/write/take.py).
        probe = 2 if state.max_shards > 1 else 1
        shard = state.rng.randrange(max(count, probe)) if preferred is None else preferred
        here = _on_shard(throttled.with_reserve(state, level, at_ms), shard, count, preferred)
        try:
            outcome = yield from take(state, here, at_ms, speculative, NOT_FETCHED)
        except RateLimiterUnavailable as error:
            if error.code == SHARD_NOT_FOUND:
                return None
            if not error.throttled:
                raise
            throttled.note_reserve_write(state, here, True, at_ms)
            throttled.note_throttle(state, here, at_ms)
            # Evidence all the same:
            yield from _double_on_evidence(state, level, here, at_ms, error.partition_throttled)
            return None
        if isinstance(outcome, Taken):
            throttled.note_reserve_write(state, here, False, at_ms)
            throttled.note_success(state, here)
        return outcome

    return write


def _on_shard(level: Level, shard: int, count: int, preferred: int | None) -> Level:
    here = level
    if shard != level.shard_id or level.shard_count <= shard:
        here = replace(level, shard_id=shard, shard_count=max(count, shard + 1))
    if here.flush is not None and shard != preferred:
        here = replace(here, flush=None)  # the reserve's spending belongs to its shard
    return here


def _after_throttle(
    state: RepoState,
    level: Level,
    here: Level,
    tries: throttled.Tries,
    when: tuple[int, bool],
    partition: bool | None,
) -> Flow[int | None]:
    """The shard to try after a throttle on `here` (None: give up), doubling first when
    this client's view of the shard shows its partition is the bottleneck. `when`: the
    time, and whether the client's gate on the bucket was closed then (`crowded`: another
    shard is then tried only after a wait, as any retry)."""
    now_ms, crowded = when
    tries.throttles += 1
    if partition:
        tries.refused.add(here.shard_id)
    if not tries.doubled:
        refused = len(tries.refused)
        tries.doubled = yield from _double_on_evidence(
            state, level, here, now_ms, partition, refused
        )
    count = state.shard_count(level.entity_id, level.resource)
    if tries.doubled:
        count = max(count, 2)
    others = [] if crowded else tries.untried(count)
    if others:
        shard = throttled.any_shard(state, level, others, now_ms)
        tries.tried.append(shard)
        return shard
    # The gate binds retries too: a client's acquires throttled together are one refusal,
    # and each retrying on its own backoff would send the partition one write per acquire.
    wait = tries.wait_ms(throttled.gate_ms(state, here, now_ms))
    if wait is None:
        return None
    tries.woke((yield from pause(wait)))
    # Any shard that exists (the probe's count is not one: shard 0 said how many there are).
    known = max(1, state.shard_count(level.entity_id, level.resource))
    return throttled.any_shard(state, level, list(range(known)), now_ms)


def _double_on_evidence(
    state: RepoState,
    level: Level,
    here: Level,
    now_ms: int,
    partition: bool | None,
    refused_shards: int = 0,
) -> Flow[bool]:
    """After a throttle on `here`: a doubling try when DynamoDB named the shard's
    partition as the limit (of a one-shard entity, or on `refused_shards` distinct shards
    of this acquire, see REFUSED_SHARDS_PROVE), or this client's view of the shard shows it is
    the bottleneck; whether it tried. Never when DynamoDB named the table's limit."""
    if not may_double(state, level.entity_id, level.resource, now_ms):
        return False
    count = state.shard_count(level.entity_id, level.resource)
    # Without reserves only: with them, a cold start's refusals are the burst of writes
    # before each client holds a reserve, which the reserves end, not the load's need.
    if partition and state.reserves is None and refusals_prove(refused_shards, count):
        # Dated as one refusal's proof is: shard 0 refuses it within a second of a doubling.
        since: int | None = now_ms - REFUSAL_PROOF_MS
    else:
        since = yield from entity_evidence(state, here, now_ms, partition)
    if since is None:
        return False
    names = [limit.name for limit in level.limits]
    yield from double(state, level.entity_id, level.resource, now_ms, since, True, names)
    return True


def _learn_from_prefetched(state: RepoState, level: Level, prefetched: Any) -> None:
    """Shard 0's item, read with the configs, carries the entity's facts: keep them even
    if the write that follows fails, or every throttled acquire would read configs again."""
    if not prefetched or level.entity_id in state.entities:
        return
    bucket = keys.decode_bucket(prefetched)
    meta = state.entities.learn(
        level.entity_id,
        bucket.cascade,
        bucket.parent_id,
        of=level.resource,
        bypass=keys.get_bool(prefetched, keys.A_BYPASS),
    )
    meta.shards.hinted(level.resource, bucket.shard_count)
