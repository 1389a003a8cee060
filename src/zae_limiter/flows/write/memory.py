"""What a client remembers of the buckets it wrote or read: their last images (the
next write plans from them; held in flows/write/images.py), shortages that reject without
a request, the entity facts and shard counts items carry."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from zae_limiter import keys
from zae_limiter.errors import RateLimitExceeded
from zae_limiter.flows.context import EntityState, RepoState
from zae_limiter.flows.write import plan
from zae_limiter.flows.write.levels import Level, Rejected
from zae_limiter.models import LimitStatus


def local_rejection(state: RepoState, level: Level, now_ms: int) -> Rejected | None:
    """Reject without a request when a remembered shortage still holds. Never admits."""
    memory = state.exhausted.get((level.entity_id, level.resource))
    if memory is None:
        return None
    if now_ms >= memory.until_ms:
        del state.exhausted[(level.entity_id, level.resource)]
        return None
    violations = []
    wait = 0
    for limit in level.limits:
        seen = memory.limits.get(limit.name)
        if seen is None or not plan.enforces(limit):
            continue
        held = memory.held.get(limit.name, 0)
        have = seen.tokens(now_ms, 1, held)
        need = level.consume_milli.get(limit.name, 0)
        if have < need or have < 0:
            ms = max(1, seen.ms_until(max(need, 0), now_ms, 1, held))
            wait = max(wait, ms)
            violations.append(
                LimitStatus(
                    entity_id=level.entity_id,
                    resource=level.resource,
                    limit_name=limit.name,
                    capacity=seen.capacity_milli // 1000,
                    available=have // 1000,
                    requested=-(-need // 1000),
                    retry_after_seconds=ms / 1000,
                    kind="rate" if seen.window is None else "quota",
                    resets_at_ms=None if seen.window is None else seen.reset_at(now_ms),
                )
            )
    if not violations:
        return None
    return Rejected(level.entity_id, level.resource, tuple(violations), wait)


def remember(state: RepoState, level: Level, outcome: Rejected) -> None:
    # One shard's shortage says nothing about its siblings: remember unsharded buckets only.
    if outcome.memory is not None and level.shard_count == 1:
        state.exhausted[(outcome.entity_id, outcome.resource)] = outcome.memory


def learn(
    state: RepoState, level: Level, attributes: Mapping[str, Any], now_ms: int
) -> EntityState | None:
    """ALL_NEW carries the entity's immutable facts and the shard count shard 0 knows;
    the entity's record in this client (None when there was nothing to learn from).
    `now_ms`: when DynamoDB showed it (a later write plans from it: `image_of_age`)."""
    if not attributes:
        return None
    count, cascade, parent, bypass, window_start = keys.written_facts(attributes)
    meta = state.entities.get(level.entity_id)
    # A bucket teaches facts only when they are not known (`Entities.learn`): asked of
    # the facts first, so a steady write makes no call for them.
    if meta is None or not (meta.facts.record or level.resource in meta.facts.cascade_for):
        meta = state.entities.learn(
            level.entity_id, cascade, parent, of=level.resource, bypass=bypass
        )
    if parent is not None and meta.facts.parent_id is not None:  # a move to follow?
        follow_move(meta, level, cascade, parent)
    where = (level.resource, level.shard_id)
    shards = meta.shards
    # What the owner would write, unless it holds it already (a steady write: the same
    # count, within the same window).
    if shards.counts.get(level.resource) != count or shards.starts.get(where) != window_start:
        shards.written(where, count, window_start)
    meta.images.keep(where, attributes, now_ms)
    if state.exhausted:
        state.exhausted.pop((level.entity_id, level.resource), None)
    return meta


def image(state: RepoState, level: Level) -> Mapping[str, Any] | None:
    """The item as this client's last write to the shard left it (None: never written)."""
    meta = state.entities.get(level.entity_id)
    return None if meta is None else meta.images.get((level.resource, level.shard_id))


#: An image older than this many reserve epochs (2 minutes) is not planned from: its
#: write would have to name the held count of every epoch since (flows/write/plan.py), so the
#: client reads the bucket first. One that comes back after a minute or more reads its
#: config again (its cache's TTL), and the bucket rides along (flows/acquire.py).
MAX_IMAGE_EPOCHS = 6


def image_of_age(
    state: RepoState, entity_id: str, where: tuple[str, int], now_ms: int
) -> tuple[Mapping[str, Any], int] | None:
    """This client's image of the entity's shard `where` (resource, shard) and when it
    was taken, when young enough to plan a write from (None: no image, or too old)."""
    meta = state.entities.get(entity_id)
    if meta is None:
        return None
    remembered, since = meta.images.items.get(where), meta.images.at.get(where)
    if remembered is None or since is None:
        return None
    epoch = keys.RESERVE_EPOCH_MS  # `reserve_epoch` of each, inline: every acquire
    if now_ms // epoch - since // epoch > MAX_IMAGE_EPOCHS:
        return None
    return remembered, since


def follow_move(meta: EntityState, level: Level, cascade: bool, parent: str | None) -> None:
    """The entity moved when shard 0 names another parent than this client knows:
    set_parent relinks its buckets after its record and shard 0 existed then, so what
    the write just showed is newer, and the next cascade goes to the new parent
    (docs/controls.md, "Move an entity to a new parent"). A later shard may have been
    made by a client that had not seen the move, and a bucket made without knowing the
    entity names no parent: neither is followed. Only a move from one parent to another
    is: an entity without a parent does not cascade, so moving it changes nothing to
    follow (its cascade is turned on by an update, which clients learn as before)."""
    known = meta.facts.parent_id
    if known is not None and parent is not None and known != parent and level.shard_id == 0:
        meta.moved(parent, level.resource, cascade)


def raise_if_known_exhausted(state: RepoState, levels: Sequence[Level], now_ms: int) -> None:
    rejections = []
    for lv in levels:
        rejected = local_rejection(state, lv, now_ms)
        if rejected is not None:
            rejections.append(rejected)
    if rejections:
        raise exceeded(rejections)


def exceeded(rejections: Sequence[Rejected]) -> RateLimitExceeded:
    violations = [v for r in rejections for v in r.violations]
    return RateLimitExceeded(violations, max(r.retry_after_ms for r in rejections) / 1000)
