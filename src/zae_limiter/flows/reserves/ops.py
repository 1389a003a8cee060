"""What an acquire, a lease and a closing client do with token reserves.

The book (`flows/reserves/book.py`) is the state; these functions connect it to the acquire
flow's levels and outcomes, and write reserves back. See docs/reserves.md.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from zae_limiter import keys
from zae_limiter.errors import (
    CONTENDED,
    SHARD_NOT_FOUND,
    SHED,
    RateLimiterUnavailable,
    ValidationError,
)
from zae_limiter.flows import Call, Flow, Result
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.reserves.book import Key, Reserve
from zae_limiter.flows.write.charge import charge_all, charge_write, image_of, resend_on_old
from zae_limiter.flows.write.levels import Level, Rejected, Taken
from zae_limiter.flows.write.shares import current

log = logging.getLogger("zae_limiter")


def _key(level: Level | Taken) -> Key:
    return (level.entity_id, level.resource)


def serve(
    state: RepoState, levels: Sequence[Level], now_ms: int
) -> tuple[list[Taken], list[Level]]:
    """Serve what the reserves cover; the rest goes to DynamoDB, asking for a reserve
    when its bucket is hot in this client."""
    book = state.reserves
    if book is None:
        return [], list(levels)
    served: list[Taken] = []
    rest: list[Level] = []
    for level in levels:
        key = _key(level)
        book.record(key, level.consume_milli, now_ms)
        shard = book.spend(key, level.limits, level.consume_milli, now_ms)
        if shard is not None:
            served.append(
                Taken(
                    level.entity_id,
                    level.resource,
                    shard,
                    level.consume_milli,
                    level.limits,
                    from_reserve=True,
                )
            )
            continue
        renewal = book.renew(key, level.limits, level.shard_count, now_ms)
        want = book.want(key, level.limits, level.consume_milli, level.shard_count, now_ms)
        if not want:
            rest.append(level if renewal is None else replace(level, flush=renewal))
            continue
        # One flush per write: a renewal goes first, the held reserve's spending waits.
        flushed = None if renewal is not None else book.flush(key, level.shard_count, now_ms)
        flush = renewal if flushed is None else flushed[1]
        rest.append(replace(level, hold_milli=want, flush=flush))
    return served, rest


def preferred_shard(state: RepoState, level: Level) -> int | None:
    """The shard this client's reserve of the bucket came from: a top-up goes there, so
    one reserve keeps growing instead of being returned for another shard's."""
    if level.flush is not None and level.flush.back is not None:
        # A renewal: the aged reserve's counts are on its shard, so the write goes there.
        shard = level.flush.shard_id
        return shard if shard < level.shard_count else None
    if state.reserves is None or not level.hold_milli:
        return None
    held = state.reserves.holding(_key(level))
    return None if held is None or held.shard_id >= level.shard_count else held.shard_id


#: Failures that prove no write was applied: refused before it was sent, or every
#: conditional write failed.
NOT_SENT_CODES = frozenset({"CapacityExhausted", CONTENDED, SHARD_NOT_FOUND, SHED})


def _not_applied(outcome: object) -> bool:
    """The level's write certainly did not happen (a throttle, a failed condition, a flow
    closed before it wrote); a timeout or a lost connection leaves it unknown."""
    if outcome is None or isinstance(outcome, (Rejected, ValidationError)):
        return True
    return isinstance(outcome, RateLimiterUnavailable) and (
        outcome.throttled or outcome.code in NOT_SENT_CODES
    )


def keep(
    state: RepoState, levels: Sequence[Level], outcomes: Sequence[object], now_ms: int
) -> None:
    """Put on the book every reserve that the acquire's writes moved out, and put back
    every flush that a write certainly did not carry (`outcomes[i]` is `levels[i]`'s)."""
    book = state.reserves
    if book is None:
        return
    for level, outcome in zip(levels, outcomes, strict=False):
        if level.flush is None:
            continue
        # A write that happened says whether it carried the flush (not on another shard,
        # nor when it created the bucket); a failed one may have, unless it was certainly
        # not applied.
        if isinstance(outcome, Taken):
            may_have_carried = outcome.flushed
        else:
            may_have_carried = not _not_applied(outcome)
        if not may_have_carried:
            book.unflush(_key(level), level.flush, now_ms, level.limits)
        elif level.flush.back is not None:
            # A renewal: its write gave the reserve back, or left it unknown whether it
            # did (its counts then stay raised until their epoch ends: lost, not created).
            if isinstance(outcome, Taken):
                book.returned(level.flush.back, renewed=True)
            else:
                book.lost()
    for outcome in outcomes:
        if isinstance(outcome, Taken) and outcome.held_milli:
            book.install(
                _key(outcome),
                outcome.shard_id,
                outcome.limits,
                outcome.held_milli,
                outcome.epoch,
                now_ms,
                session_end(outcome),
            )


def session_end(taken: Taken) -> int | None:
    """When the session of `taken`'s session quotas ends, as its write left the item (a
    reserve taken in it is never spent past it); None without session quotas."""
    sessions = [limit for limit in taken.limits if limit.window and limit.window.session_ms]
    if not sessions or not taken.after:
        return None
    bucket = keys.decode_bucket(taken.after)
    ends = [
        end
        for limit in sessions
        if (end := current(bucket, limit, taken.at_ms)[0].reset_at(taken.at_ms)) is not None
    ]
    return min(ends, default=None)


def change_locally(
    state: RepoState, taken: Taken, delta: Mapping[str, int], now_ms: int
) -> dict[str, int]:
    """Apply what it can of a consumption change to the reserve of the bucket it was
    taken from; the rest (all of it with no reserve there) needs a write."""
    book = state.reserves
    if book is None or not delta:
        return dict(delta)
    return book.apply_change(_key(taken), taken.shard_id, delta, now_ms)


def note_adjustment(state: RepoState, taken: Taken, delta: Mapping[str, int], now_ms: int) -> None:
    """Adjustments count in the demand a reserve is sized from (tpm by real usage)."""
    if state.reserves is not None and delta:
        state.reserves.record(_key(taken), delta, now_ms, count=0)


def return_call(
    state: RepoState, key: Key, held: Reserve, now_ms: int
) -> tuple[Call, dict[str, int]]:
    """The write that gives a reserve back, and the tokens it gives back.

    Its unspent tokens go back while readers still count its held counts; later they are
    lost (counted as spent), since the capacity they held is already free again.
    """
    return return_write(state, key, held, now_ms, image_of(state, _shard(key, held)))


def return_write(
    state: RepoState, key: Key, held: Reserve, now_ms: int, item: Mapping[str, Any] | None
) -> tuple[Call, dict[str, int]]:
    """`return_call` with its forms picked from `item`: every held count it raised goes
    down, and what it spent is charged to the full-at times (its unspent tokens come back
    through the held counts alone)."""
    spent, back = held.settlement(now_ms)
    released = keys.held_deltas({}, 0, keys.Flush({}, held.taken))
    gone = held.gone(now_ms)
    charged = {name: milli for name, milli in spent.items() if name not in gone}
    usage = {name: milli for name, milli in spent.items() if name in gone and milli > 0}
    call = charge_write(
        state, _shard(key, held), held.limits, charged, now_ms, item, released, usage=usage
    )
    return call, back


def _shard(key: Key, held: Reserve) -> tuple[str, str, int]:
    return key[0], key[1], held.shard_id


def _settled(held: Reserve) -> bool:
    """Nothing left, nothing held on the item, nothing spent unreported."""
    return not any(held.left.values()) and not any(held.taken_total().values())


def give_back_reserves(
    state: RepoState, items: Sequence[tuple[Key, Reserve]], now_ms: int
) -> Flow[None]:
    """Write reserves back, all in one round trip.

    A throttled return was not applied: it is tried again later. Any other failure leaves
    the outcome unknown, and a second ADD could create tokens: those tokens are lost
    (counted as spent), never retried.
    """
    book = state.reserves
    if book is None or not items:
        return
    pending = []
    for key, held in items:
        if _settled(held):  # spent to the last token and reported: nothing to write
            book.returned({})
        else:
            pending.append((key, held))
    items = pending
    if not items:
        return
    planned = [return_call(state, key, held, now_ms) for key, held in items]
    results = list((yield tuple(call for call, _back in planned)))
    for i, ((key, held), result) in enumerate(zip(items, results, strict=True)):
        if isinstance(result, Result) and not result.ok and result.old:
            # The bucket was full where this client thought it was not, or the other way
            # round: the return was not applied, and its ALL_OLD picks the right form.
            # A shard a merge drained since is written again in place, not redirected to
            # its receiver (as a lease's charge is, flows/write/charge.py `_again`): a
            # merge waits until no held count is live (aggregator/merge.py), and moves
            # the expired ones to the receiver as spent, so what this return releases
            # and charges belongs to no share any more (tokens lost, never created); a
            # raise back over the shard deletes the drained item first, and a return that
            # then finds no item fails its count condition with nothing to plan from.
            resend = lambda seen, k=key, h=held: return_write(state, k, h, now_ms, seen)[0]  # noqa: E731
            try:
                results[i] = yield from resend_on_old(result, resend)
            except Exception as error:  # unknown outcome: as below, never sent again
                results[i] = error
    again: list[tuple[Key, Reserve]] = []
    for (key, held), (_call, back), result in zip(items, planned, results, strict=True):
        if isinstance(result, RateLimiterUnavailable) and result.throttled:
            again.append((key, held))
        elif isinstance(result, BaseException) or not getattr(result, "ok", False):
            book.lost()
            log.warning("a token reserve of %s/%s could not be returned: %s", *key, result)
        else:
            book.returned(back)
    if again:
        book.retry_later(again, now_ms)


def compensate(state: RepoState, taken: Sequence[Taken], now_ms: int) -> Flow[None]:
    """Give back everything `taken` consumed: into this client's reserve of the bucket when
    it holds one, else with one write per bucket, all at once."""
    changes = []
    for t in taken:
        back = {n: -v for n, v in t.consumed_milli.items() if v}
        rest = change_locally(state, t, back, now_ms) if back else {}
        if rest:
            changes.append((t, rest))
    if not changes:
        return
    try:
        yield from charge_all(state, changes, now_ms)
    except Exception:
        log.warning("could not give back tokens for %s", [t.entity_id for t in taken])


def record_adjustments(
    state: RepoState, taken: Sequence[Taken], pending_milli: Mapping[str, int], now_ms: int
) -> Flow[None]:
    """Record a lease's adjustments: in this client's reserve of the bucket when it can
    cover them, else with one write per bucket taken, all at once."""
    changes = []
    for t in taken:
        names = {limit.name for limit in t.limits}
        delta = {n: v for n, v in pending_milli.items() if v and n in names}
        note_adjustment(state, t, delta, now_ms)
        rest = change_locally(state, t, delta, now_ms) if delta else {}
        if rest:
            changes.append((t, rest))
    if changes:
        try:
            yield from charge_all(state, changes, now_ms)
        except Exception:
            log.warning("could not record lease adjustments %s", dict(pending_milli))
