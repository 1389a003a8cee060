"""The speculative write: which shape it takes, and what makes it exact at the top.

A speculative write consumes with an `ADD` and leaves `rf` alone: the refill since `rf` is
applied by some later write. That is exact only while the refill would not clamp: a bucket
that sits full gains nothing, but a refill applied late counts the whole time since `rf`,
so a bucket drained after sitting full would get its capacity back at once. So the write
proves, with bounds a condition can compare (a condition cannot add), one of two things,
chosen from the last image of the shard this client saw (an `ALL_NEW`, an `ALL_OLD`, a
read):

- the bucket has room (`ceiling_for`): `tk + refill(rf -> now) + held <= capacity`. The
  image's `rf` bounds the refill from above (a later `rf` refills less); the slack the
  image leaves is split between the tokens (which refills by other writers raise) and this
  epoch's held count (which reserves taken by other writers raise). Without an image the
  bounds assume a refill within the last second and no reserves.
- the bucket is full (`fill_for`): then the write sets the tokens and moves `rf` itself.

When the image shows a full bucket but cannot prove it (it was refilled too recently),
the caller writes the refill from the image, fenced on its `rf`.

Only unsharded buckets carry a proof. After a doubling, a donor shard holds the share of
a shard not yet made until that shard's first acquire splits it off, and its item does not
say so: a proof would take that share for an excess and have it clamped away. Sharded
buckets keep the plain speculative write until items record the count their tokens are
held under.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zae_limiter import keys
from zae_limiter.bucket import LimitState
from zae_limiter.flows.bucket_write import Level, effective, grant, share_slack, stored_config
from zae_limiter.flows.context import RepoState

#: Without an image of the shard: assume it was refilled at most this long ago.
BLIND_MS = 1000
#: Images kept per client; the oldest seen goes first.
MAX_IMAGES = 10_000


def image_of(state: RepoState, level: Level) -> Mapping[str, Any] | None:
    return state.images.get((level.entity_id, level.resource, level.shard_id))


def keep_image(state: RepoState, level: Level, item: Mapping[str, Any] | None) -> None:
    """Remember the shard as an item image shows it (None: the shard is gone)."""
    where = (level.entity_id, level.resource, level.shard_id)
    images = state.images
    images.pop(where, None)
    if item:
        images[where] = item
        if len(images) > MAX_IMAGES:
            del images[next(iter(images))]


def ceiling_for(
    image: Mapping[str, Any] | None, level: Level, now_ms: int
) -> keys.Ceiling | None:
    """Bounds under which taking `level` without a refill is exact; None when the image
    says the refill would clamp now (then it must be written)."""
    epoch = keys.reserve_epoch(now_ms)
    since = now_ms - BLIND_MS if image is None else keys.get_n(image, keys.A_REFILL)
    tokens: dict[str, int] = {}
    held: dict[str, int] = {}
    held_before: dict[str, int] = {}
    for limit in level.limits:
        share = effective(limit, level.shard_count)
        gain = share.refill_gain(since, now_ms)
        if image is None:
            tokens[limit.name] = share.capacity_milli - gain
            continue
        name = limit.name
        stored = keys.get_n(image, keys.limit_attr(name, "tk"))
        now_held = max(0, keys.get_n(image, keys.reserve_attr(name, epoch)))
        before = max(0, keys.get_n(image, keys.reserve_attr(name, epoch - 1)))
        slack = share.capacity_milli - gain - stored - now_held - before
        if slack < 0:
            return None
        tokens[name], held[name] = share_slack(stored, now_held, slack)
        held_before[name] = before
    return keys.Ceiling(since, level.shard_count, epoch, tokens, held, held_before)


def fill_for(image: Mapping[str, Any], level: Level, now_ms: int) -> keys.Fill | None:
    """For a bucket `image` shows full: the proof its refill-and-take sends along (see
    `keys.Fill`); None when the image cannot prove it (or the level reports a reserve's
    spending, which moves the room): the caller then writes from the image.

    The proof names a time the refill has run since and the tokens that refill needs to
    fill the room. The later that time, the fewer concurrent writes break it: it is the
    latest from which the refill covers both the image's own shortfall and two takes of
    this size (another client's take of the bucket since the image).
    """
    if level.flush is not None:
        return None
    epoch = keys.reserve_epoch(now_ms)
    shares = {limit.name: effective(limit, level.shard_count) for limit in level.limits}
    rooms: dict[str, int] = {}
    held: dict[str, int] = {}
    held_before: dict[str, int] = {}
    lead = 1
    for name, share in shares.items():
        held[name] = keys.get_n(image, keys.reserve_attr(name, epoch))
        held_before[name] = keys.get_n(image, keys.reserve_attr(name, epoch - 1))
        rooms[name] = share.capacity_milli - max(0, held[name] + held_before[name])
        short = rooms[name] - keys.get_n(image, keys.limit_attr(name, "tk"))
        need = 2 * level.consume_milli.get(name, 0)
        lead = max(lead, _refill_ms(share, max(short, need)))
    refilled_by = now_ms - lead
    least = {
        name: rooms[name] - share.refill_gain(refilled_by, now_ms)
        for name, share in shares.items()
    }
    if keys.get_n(image, keys.A_REFILL) > refilled_by or any(
        keys.get_n(image, keys.limit_attr(name, "tk")) < least[name] for name in shares
    ):
        return None  # the image itself would not pass: nothing proves the bucket full
    hold = grant(level.hold_milli, rooms, level.consume_milli)
    tokens = {
        name: room - level.consume_milli.get(name, 0) - hold.get(name, 0)
        for name, room in rooms.items()
    }
    if any(left < 0 for left in tokens.values()):
        return None  # more than the room: the write from the image rejects it
    return keys.Fill(
        refilled_by, level.shard_count, epoch, least, tokens, held, held_before, hold
    )


def _refill_ms(share: LimitState, amount: int) -> int:
    """About how long `share` takes to refill `amount` millitokens."""
    return -(-amount * share.refill_period_ms // share.refill_amount_milli)


def speculative_write(
    state: RepoState, level: Level, key: keys.Item, now_ms: int, reset: bool
) -> tuple[dict[str, Any] | None, Mapping[str, int], Mapping[str, Any] | None]:
    """(the speculative UpdateItem, the reserve it takes, the image it was chosen from);
    no UpdateItem when the refill must be written from the image instead."""
    configs = {limit.name: stored_config(limit) for limit in level.limits}
    image = image_of(state, level) if level.shard_count == 1 else None
    ceiling = ceiling_for(image, level, now_ms) if level.shard_count == 1 else None
    if ceiling is None and image is not None:
        fill = fill_for(image, level, now_ms)
        if fill is None:
            return None, {}, image
        params = keys.speculative_fill(
            state.table, key, level.consume_milli, configs, fill,
            now_ms=now_ms, reset_window=reset,
        )  # fmt: skip
        return params, fill.hold_milli, image
    params = keys.speculative_consume(
        state.table,
        key,
        level.consume_milli,
        configs,
        now_ms=now_ms,
        reset_window=reset,
        hold_milli=level.hold_milli,
        flush=level.flush,
        ceiling=ceiling,
    )
    return params, level.hold_milli, image
