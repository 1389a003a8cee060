"""Changing what an acquire took after the fact: lease adjustments and give-backs.

Usage that already happened is charged whatever the bucket holds (it may go into debt),
so a charge has no token bound: the ADD form while the bucket is short of full, the SET
form once it is (an ADD there would spend the time the bucket sat full). A give-back is
an unconditional ADD of a negative amount. The form comes from the last image of the
shard; a failed condition's ALL_OLD picks it again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from zae_limiter import keys
from zae_limiter.bucket import LimitState
from zae_limiter.flows import Call, Flow, Result, one, together
from zae_limiter.flows.bucket_ttl import DEFAULT_BUCKET_TTL_S
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.write.levels import Taken
from zae_limiter.flows.write.plan import expires_at_s, with_split
from zae_limiter.flows.write.shares import config_of, current
from zae_limiter.limits import Limit
from zae_limiter.models import BucketState

MAX_CHARGE_ATTEMPTS = 4


def charge_write(
    state: RepoState,
    shard: tuple[str, str, int],
    limits: Sequence[Limit],
    delta: Mapping[str, int],
    now_ms: int,
    item: Mapping[str, Any] | None,
    held_adds: Mapping[str, int] | None = None,
    held_exact: Mapping[str, int] | None = None,
    windows: Mapping[str, int] | None = None,
    usage: Mapping[str, int] | None = None,
) -> Call:
    """One write to `shard` (entity, resource, shard id) that changes its consumption by
    `delta` (negative gives back) and its held counts by `held_adds`, the forms picked
    from `item` (the shard as last seen; None: not known). `windows`: for a quota, the
    base of the window its tokens were taken in (`taken_windows`): a give-back lands
    only in that window, and is dropped once `item` shows another. `usage`: spending
    counted in `tc` only, in the window that holds `now_ms` (a reserve's report after its
    quota reset, flows/reserves/book.py `Reserve.gone`)."""
    entity_id, resource, shard_id = shard
    bucket = keys.decode_bucket(item) if item else None
    count = bucket.shard_count if bucket else state.shard_count(entity_id, resource)
    writes = []
    for limit in limits:
        milli = delta.get(limit.name, 0)
        window = (windows or {}).get(limit.name)
        if milli < 0 and window is not None:
            give = _quota_give(bucket, count, limit, milli, window)
            if give is not None:
                writes.append(give)
        elif milli:
            writes.append(_limit_charge(bucket, count, limit, milli, now_ms))
        elif used := (usage or {}).get(limit.name, 0):
            # Charged nothing, but in the new window: released held counts never give
            # the old window back what was spent from it.
            write = _limit_charge(bucket, count, limit, 0, now_ms)
            writes.append(replace(write, consumed=write.consumed + used))
    key = keys.bucket_key(state.namespace, entity_id, resource, shard_id)
    params = keys.take_write(
        state.table,
        key,
        writes,
        shard_count=count,
        now_ms=now_ms,
        held_adds=held_adds,
        held_exact=held_exact,
    )
    if state.bucket_expiry and any(v > 0 for v in delta.values()):
        # A charge after the fact may leave debt: the item must outlive its refill.
        idle = state.bucket_ttls.get((entity_id, resource), DEFAULT_BUCKET_TTL_S)
        params = keys.with_expiry(params, expires_at_s(limits, count, now_ms, idle, delta))
    return Call("update_item", params)


def _limit_charge(
    bucket: BucketState | None, count: int, limit: Limit, milli: int, now_ms: int
) -> keys.LimitWrite:
    if bucket is None:
        bucket = BucketState(
            entity_id="", resource="", shard_id=0, shard_count=count, last_refill_ms=0, limits={}
        )
        seen = current(bucket, limit, now_ms)
        seen = (seen[0], seen[1], False)  # not known: the conditions decide
    else:
        seen = current(bucket, limit, now_ms)
    state, held, rebase = seen
    now_ra, base = state.threshold(now_ms), state.base(now_ms)
    unit = state.unit(count)
    if rebase:
        stored = bucket.limits.get(limit.name)
        epoch = keys.reserve_epoch(now_ms)
        reserved = bucket.reserved.get(limit.name, {})
        tokens = state.tokens(now_ms, count, held)
        write = keys.LimitWrite(
            limit.name,
            keys.REBASE,
            now_ra,
            amount=state.with_tokens(tokens - milli, now_ms, count, held),
            consumed=milli,
            held=tuple((e, reserved.get(e, 0)) for e in (epoch, epoch - 1)),
            config=config_of(state),
            old_full_at=None if stored is None else stored.full_at,
            old_config=None if stored is None else config_of(stored),
            old_tokens=bucket.legacy_tokens.get(limit.name),
        )
        return with_split(write, bucket, limit, now_ms)
    if milli < 0:
        return keys.LimitWrite(limit.name, keys.GIVE, now_ra, amount=milli * unit, consumed=milli)
    full = state.is_full(now_ms)
    moved, bound = session_debt(state, base, base if full else state.full_at, milli * unit)
    if full:
        return keys.LimitWrite(
            limit.name, keys.SET, now_ra, amount=base + moved, consumed=milli,
            config=config_of(state),
        )  # fmt: skip
    return keys.LimitWrite(
        limit.name, keys.ADD, now_ra, amount=moved, consumed=milli, bound=bound,
        config=config_of(state),
    )  # fmt: skip


def session_debt(
    state: LimitState, base: int, full_at: int | None, amount: int
) -> tuple[int, int | None]:
    """How far a charge moves a limit's full-at value from `full_at` (the image's), and
    the bound the value must stay within for that (None: none). A session's start is
    the value's quotient by `ra` (bucket.py), so for a session quota a debt past the
    share again would read as a later session, whole: the charge stops short of it,
    bounded by the image (a client that added meanwhile fails the condition, and the
    charge is planned again from its ALL_OLD). The rest of the debt is not recorded: a
    session in debt admits nothing until it ends, and the debt ends with it (as any
    debt does at a quota's reset), so nothing it would refuse is admitted."""
    if state.window is None or not state.window.session_ms or full_at is None:
        return amount, None
    ra = state.refill_amount_milli
    # The session the value is in (a faster clock may have opened it after `now`).
    top = max(base, full_at // ra * ra) + ra - 1
    moved = max(0, min(amount, top - full_at))
    return moved, top - moved


def _quota_give(
    bucket: BucketState | None, count: int, limit: Limit, milli: int, window: int
) -> keys.LimitWrite | None:
    """A quota's give-back into the window based at `window` (its full-at values lie in
    (window, window + ra)), or None when the image shows that window gone."""
    top = window + limit.refill_amount_milli - 1
    stored = bucket.limits.get(limit.name) if bucket else None
    if stored is not None and not (stored.full_at is not None and window < stored.full_at <= top):
        return None  # taken in a window that reset since: those tokens went with it
    unit = limit.refill_period_ms * count
    amount, floor = milli * unit, window
    if limit.window is not None and limit.window.session_ms:
        amount, floor = session_give(stored, window, amount)
    if not amount:
        return None
    return keys.LimitWrite(
        limit.name, keys.GIVE, floor, amount=amount, bound=top, consumed=-(-amount // unit)
    )


def session_give(stored: LimitState | None, window: int, amount: int) -> tuple[int, int]:
    """A session quota's give-back of `amount` (< 0) into the session based at `window`:
    (the amount, the value the full-at must exceed for it). A session's start is the
    value's quotient by `ra`: moved below the session's base, it would read as a session
    a millisecond older, spent twice over. So it gives at most what the session holds
    spent, by the image and under a condition that says so (planned again from ALL_OLD
    when it fails)."""
    if stored is not None and stored.full_at is not None:
        amount = max(amount, window - stored.full_at)
    return amount, window - amount - 1


def taken_windows(taken: Taken) -> dict[str, int]:
    """For each quota `taken` charged: the base of the window its take landed in, read
    from the item the take left (`after`)."""
    if not taken.after or not any(limit.window for limit in taken.limits):
        return {}
    bucket = keys.decode_bucket(taken.after)
    windows = {}
    for limit in taken.limits:
        if limit.window is not None and limit.name in bucket.limits:
            state = current(bucket, limit, taken.at_ms)[0]
            windows[limit.name] = state.base(taken.at_ms)
    return windows


def charge_all(
    state: RepoState, changes: Sequence[tuple[Taken, Mapping[str, int]]], now_ms: int
) -> Flow[None]:
    """Apply every change, one write per bucket, all at once; a write whose form was wrong
    is sent again in the right one (ALL_OLD shows which)."""
    if not changes:
        return
    windows = [taken_windows(t) for t, _d in changes]
    first = [
        charge_write(
            state, _where(t), t.limits, d, now_ms, t.after or image_of(state, _where(t)),
            windows=w,
        )
        for (t, d), w in zip(changes, windows, strict=True)
    ]  # fmt: skip
    results = yield from together(*first)
    for (taken, delta), result, w in zip(changes, results, windows, strict=True):
        yield from resend_on_old(result, _again(state, taken, delta, now_ms, w))


def _again(
    state: RepoState, taken: Taken, delta: Mapping[str, int], now_ms: int, windows: dict[str, int]
) -> Callable[[Mapping[str, Any]], Call]:
    """The charge planned again from what a failed write found. A shard a merge drained
    since the take (its count at or below its id) passed its share to its receiver, so
    the charge goes there (simulator seed 4098: an `adjust` up charged to the drained,
    refilled shard took from tokens the merge had already moved)."""
    where = _where(taken)

    def again(seen: Mapping[str, Any]) -> Call:
        nonlocal where
        count = keys.decode_bucket(seen).shard_count
        if where[2] >= count >= 1:
            where = (where[0], where[1], where[2] % count)
            seen = image_of(state, where) or {}
        image = seen or None
        return charge_write(state, where, taken.limits, delta, now_ms, image, windows=windows)

    return again


def resend_on_old(result: Result, again: Callable[[Mapping[str, Any]], Call]) -> Flow[Result]:
    """Send a charge again while its form was wrong (each ALL_OLD picks the next)."""
    for _ in range(MAX_CHARGE_ATTEMPTS):
        if result.ok or not result.old:
            return result
        result = yield from one(again(result.old))
    return result


def _where(taken: Taken) -> tuple[str, str, int]:
    return taken.entity_id, taken.resource, taken.shard_id


def image_of(state: RepoState, shard: tuple[str, str, int]) -> Mapping[str, Any] | None:
    """The shard as this client's last write there left it (None: never written)."""
    meta = state.entities.get(shard[0])
    return None if meta is None else meta.images.get((shard[1], shard[2]))
