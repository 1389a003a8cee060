"""Operator controls on one bucket: reset it to full, or top it up by an amount, on every
shard at once, with the audit event that says who did it and why.

Both write every shard and the event in one TransactWriteItems: all of it or none of it.
- A reset SETs each limit's full-at time to "full now" on the condition that the shard
  still holds the full-at time, config and count read (the REBASE form): an acquire that
  lands in between fails the transaction, and the shard is planned again from the item
  the cancellation returns (ALL_OLD), or read again. So a reset never forgives a take it
  did not see: what was taken after the reset is still taken.
- A top-up of n tokens gives n in total, split over the shards by what each lacks to be
  full (a bucket holds no more than its capacity, so a grant past full would vanish).
  Each shard's give-back is an unconditional ADD that moves its full-at time back: it
  commutes with any take, so nothing read can make it wrong, only smaller (time that
  refills the shard meanwhile leaves less room). What does not fit is not granted and
  is reported. The transaction carries a ClientRequestToken: a request resent after a
  lost answer (botocore's retries) is applied once, never twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zae_limiter import keys
from zae_limiter.bucket import LimitState
from zae_limiter.errors import (
    CONDITION_FAILED_REASON,
    TRANSACTION_CANCELLED,
    RateLimiterUnavailable,
    ValidationError,
)
from zae_limiter.flows import Call, Flow, Result, one, pause
from zae_limiter.flows.batch import batch_get
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.records.audit import MAX_ATTEMPTS, Auditor, too_busy
from zae_limiter.flows.records.entities import entity_bucket_keys
from zae_limiter.models import BucketState

#: A transaction holds 100 items: the shards and the event.
MAX_SHARDS = 99
#: Backoff before another attempt after a transaction lost to a concurrent write (ms).
CONFLICT_PAUSE_MS = 20


@dataclass(frozen=True, slots=True)
class TopUp:
    """What a top-up granted, per limit, in tokens (a fraction when the room was the
    bound), and what it could not (the bucket had no room for it)."""

    granted: dict[str, float]
    refused: dict[str, float]
    shards: int


def read_items(state: RepoState, entity_id: str, resource: str) -> Flow[list[dict[str, Any]]]:
    """Every shard item of the bucket, by shard id (GSI3 keys, then BatchGetItem)."""
    keys.validate_id("entity_id", entity_id)
    keys.validate_resource(resource)
    found = yield from entity_bucket_keys(state, entity_id, resource)
    items = yield from batch_get(state, found)
    ordered = sorted(items.values(), key=lambda i: keys.decode_bucket(i).shard_id)
    if not ordered:
        raise ValidationError(f"{entity_id} has no bucket for {resource} (nothing acquired yet)")
    if len(ordered) > MAX_SHARDS:
        raise ValidationError(f"{len(ordered)} shards: more than one transaction holds")
    return ordered


def reset_write(state: RepoState, item: Mapping[str, Any], now_ms: int) -> dict[str, Any]:
    """The shard full now, for every limit it stores, under exactly the values read."""
    bucket = keys.decode_bucket(item)
    count = bucket.shard_count
    writes = []
    for name, stored in bucket.user_limits.items():
        config = (stored.capacity_milli, stored.refill_amount_milli, stored.refill_period_ms)
        full = full_now(stored, count, now_ms)
        writes.append(
            keys.LimitWrite(
                name,
                keys.REBASE,
                stored.threshold(now_ms),
                amount=full,
                config=config,
                old_full_at=stored.full_at,
                old_config=config,
                old_tokens=bucket.legacy_tokens.get(name),
            )
        )
    key = keys.bucket_key(state.namespace, bucket.entity_id, bucket.resource, bucket.shard_id)
    params = keys.take_write(
        state.table,
        key,
        writes,
        shard_count=bucket.shard_count,
        now_ms=now_ms,
        legacy_rf=bucket.last_refill_ms if bucket.legacy_tokens else None,
    )
    return keys.tx_update(params)


def full_now(stored: LimitState, count: int, now_ms: int) -> int:
    """The full-at value of a shard full at `now_ms`, as its limit reads it. For a quota
    it stands for the window, not for `now`: `now * ra` would read as a calendar window
    spent since its start, and as a session opened by the reset. A session quota is left
    with no session open, on every shard, so the next take opens one (on shard 0, which
    the other shards join: flows/scaling/sessions.py)."""
    return stored.with_tokens(stored.room(count), now_ms, count)


def reset_bucket(
    state: RepoState,
    entity_id: str,
    resource: str,
    now_ms: int,
    auditor: Auditor,
    reason: str | None,
) -> Flow[int]:
    """Every shard of the bucket full; the number of shards reset."""
    items = yield from read_items(state, entity_id, resource)
    for _attempt in range(MAX_ATTEMPTS):
        before = _tokens(items, now_ms)
        event = auditor.put(
            state,
            "reset_bucket",
            entity_id=entity_id,
            resource=resource,
            before={"tokens": before},
            after={"reason": reason, "shards": len(items)},
        )
        parts = [reset_write(state, item, now_ms) for item in items]
        result = yield from _send(parts, event, auditor.new_id())
        if result is not None and result.ok:
            forget_shortage(state, entity_id, resource)
            return len(items)
        items = yield from _again(state, items, result)
        if not items:
            raise ValidationError(f"the bucket of {entity_id} for {resource} was deleted")
    raise too_busy(f"the bucket of {entity_id} for {resource}")


def top_up(
    state: RepoState,
    entity_id: str,
    resource: str,
    amounts: Mapping[str, int],
    now_ms: int,
    auditor: Auditor,
    reason: str | None,
) -> Flow[TopUp]:
    """Give the bucket `amounts` (limit -> whole tokens) in total over its shards."""
    wanted = _validated(amounts)
    for _attempt in range(MAX_ATTEMPTS):
        items = yield from read_items(state, entity_id, resource)
        buckets = [keys.decode_bucket(i) for i in items]
        unknown = set(wanted) - {n for b in buckets for n in b.user_limits}
        if unknown:
            raise ValidationError(f"no limit {sorted(unknown)} on {entity_id} for {resource}")
        plan = split_grant(buckets, wanted, now_ms)
        granted = {n: sum(p.get(n, 0) for p in plan) for n in wanted}
        parts = [_give(state, b, p) for b, p in zip(buckets, plan, strict=True) if p]
        if not parts:
            return _outcome(wanted, granted, 0)
        event = auditor.put(
            state,
            "top_up",
            entity_id=entity_id,
            resource=resource,
            before={"tokens": _tokens(items, now_ms)},
            after={"reason": reason, "granted": _whole(granted), "asked": dict(amounts)},
        )
        result = yield from _send(parts, event, auditor.new_id())
        if result is not None and result.ok:
            forget_shortage(state, entity_id, resource)
            return _outcome(wanted, granted, len(parts))
        # Cancelled: nothing was applied, so planning again from a new read is safe.
    raise too_busy(f"the bucket of {entity_id} for {resource}")


def forget_shortage(state: RepoState, entity_id: str, resource: str) -> None:
    """This client no longer rejects the bucket locally: it just gave it tokens. (Other
    clients keep a shortage they learned until its retry-after: docs/controls.md.)"""
    state.exhausted.pop((entity_id, resource), None)


def split_grant(
    buckets: Sequence[BucketState], wanted: Mapping[str, int], now_ms: int
) -> list[dict[str, int]]:
    """Millitokens per shard and limit: each shard gets at most what it lacks to be full,
    and all of them together at most `wanted` (millitokens)."""
    plan: list[dict[str, int]] = [{} for _ in buckets]
    for name, milli in wanted.items():
        left = milli
        for i, bucket in enumerate(buckets):
            stored = bucket.user_limits.get(name)
            # A schema-v2 shard (`tk`) counts differently; the next take converts it.
            if stored is None or name in bucket.legacy_tokens or left <= 0:
                continue
            give = min(left, stored.deficit(now_ms, bucket.shard_count))
            if give > 0:
                plan[i][name] = give
                left -= give
    return plan


def _give(state: RepoState, bucket: BucketState, milli: Mapping[str, int]) -> dict[str, Any]:
    # Full-at units per millitoken of the shard's share: the amounts are exact.
    back = {n: m * bucket.user_limits[n].unit(bucket.shard_count) for n, m in milli.items()}
    key = keys.bucket_key(state.namespace, bucket.entity_id, bucket.resource, bucket.shard_id)
    return keys.tx_update(keys.give_back_write(state.table, key, back, {}))


def _send(parts: list[dict[str, Any]], event: dict[str, Any], token: str) -> Flow[Result | None]:
    """The transaction; None when it lost to a concurrent write (nothing applied)."""
    call = Call("transact_write_items", keys.transact([*parts, event], token))
    try:
        return (yield from one(call))
    except RateLimiterUnavailable as error:
        if error.code != TRANSACTION_CANCELLED:
            raise
        yield from pause(CONFLICT_PAUSE_MS)
        return None


def _again(
    state: RepoState, items: list[dict[str, Any]], result: Result | None
) -> Flow[list[dict[str, Any]]]:
    """The shards to plan from next: the item a failed condition returned (ALL_OLD),
    read again when it returned none; a shard deleted meanwhile is left out."""
    reasons = [] if result is None else result.response.get("CancellationReasons") or []
    fresh: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        reason = reasons[i] if i < len(reasons) else {}
        if reason and reason.get("Code") != CONDITION_FAILED_REASON:
            fresh.append(item)
        elif reason.get("Item"):
            fresh.append(reason["Item"])
        else:
            read = yield from one(
                Call("get_item", keys.get_consistent(state.table, keys.item_key(item)))
            )
            if read.item is not None:
                fresh.append(read.item)
    return fresh


def _validated(amounts: Mapping[str, int]) -> dict[str, int]:
    if not amounts:
        raise ValidationError("a top-up names at least one limit and its amount")
    for name, amount in amounts.items():
        if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
            raise ValidationError(f"top-up of {name} must be a positive whole number")
    return {name: amount * 1000 for name, amount in amounts.items()}


def _tokens(items: Sequence[Mapping[str, Any]], now_ms: int) -> dict[str, float]:
    """Tokens per limit over the shards read (what the event records as before)."""
    total: dict[str, int] = {}
    for item in items:
        bucket = keys.decode_bucket(item)
        for name, stored in bucket.user_limits.items():
            tokens = stored.tokens(now_ms, bucket.shard_count)
            total[name] = total.get(name, 0) + tokens
    return _whole(total)


def _whole(milli: Mapping[str, int]) -> dict[str, float]:
    return {name: m / 1000 for name, m in milli.items()}


def _outcome(wanted: Mapping[str, int], granted: Mapping[str, int], shards: int) -> TopUp:
    refused = {n: (wanted[n] - granted.get(n, 0)) / 1000 for n in wanted}
    return TopUp(_whole(granted), {n: r for n, r in refused.items() if r}, shards)
