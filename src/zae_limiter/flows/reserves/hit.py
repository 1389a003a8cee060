"""An acquire served from this client's token reserve: the fast path, all of it here.

Most acquires on a hot bucket are served from memory. They need no flow, no driver and
no request: `serve` answers one in a few dictionary lookups and subtractions, or says
None, and the acquire then takes the full path (flows/acquire.py), which decides
exactly as before: this file only serves what the full path would serve from the same
reserve, with the same effects on the book. It says None when anything needs more than
that: an entity this client does not know, one with a bypass or a cascade parent, a
call whose `consume` or `limits` would not pass validation, limits to resolve that the
config cache no longer holds, or a reserve that is missing, aged, taken under other
limits, or short; a scheduled or soft limit; several resources at once.

Why the checks the full path makes can be skipped here: the reserve of (entity,
resource) was installed by an acquire that validated both names, under limits that were
validated, and it is served only when the call's limits are those same limits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from zae_limiter.flows.records.config import config_levels
from zae_limiter.flows.write.levels import Taken
from zae_limiter.limits import MAX_TOKENS, RESERVED_LIMIT_NAMES, Limit

if TYPE_CHECKING:
    from zae_limiter.flows.context import RepoState


def serve(
    state: RepoState,
    entity_id: str,
    resource: str,
    consume: Mapping[str, int],
    limits: Sequence[Limit] | None,
    now_ms: int,
) -> tuple[Taken, dict[str, int]] | None:
    """What the reserve served, and the validated `consume` in millitokens; None: take
    the full path."""
    book = state.reserves
    if book is None:
        return None
    key = (entity_id, resource)
    held = book._reserves.get(key)  # no lock: a hint, checked again under it
    meta = state.entities.get(entity_id)
    if held is None:
        return None
    facts = None if meta is None else meta.facts
    if facts is not None and (facts.bypass or (facts.parent_id and facts.cascades(resource))):
        return None
    if limits is None:
        if meta is None:
            return None  # the full path reads the entity's record with its limits
        wanted = _cached_limits(state, entity_id, resource, now_ms)
    else:
        wanted = tuple(limits) if isinstance(limits, (list, tuple)) else None
    if wanted is None or wanted != held.limits:
        return None
    for limit in wanted:
        if limit.schedule or limit.soft:
            return None  # the limit in force, and what a soft limit reports: the full path
    amounts = _amounts(consume, wanted)
    if amounts is None:
        return None
    shard = book.serve_hit(key, wanted, amounts, now_ms)
    if shard is None:
        return None
    return Taken(entity_id, resource, shard, amounts, wanted, from_reserve=True), amounts


def _cached_limits(
    state: RepoState, entity_id: str, resource: str, now_ms: int
) -> tuple[Limit, ...] | None:
    """The stored limits as the full path resolves them, when every level is cached (the
    full path would read the missing ones); None otherwise."""
    cache = state.config_cache
    found: tuple[Limit, ...] | None = None
    for _source, cache_key in config_levels(entity_id, resource):
        hit, limits = cache.lookup(cache_key, now_ms)
        if not hit:
            return None
        if found is None and limits:
            found = limits
    return found


def _amounts(consume: Mapping[str, int], limits: tuple[Limit, ...]) -> dict[str, int] | None:
    """`consume` in millitokens when it is valid, names only `limits`, fits each one's
    capacity and takes at least one token; None otherwise (the full path says what is
    wrong)."""
    if not isinstance(consume, Mapping):
        return None
    out: dict[str, int] = {}
    taken = False
    for name, value in consume.items():
        if type(value) is not int or value < 0 or name in RESERVED_LIMIT_NAMES:
            return None
        for limit in limits:
            if limit.name == name:
                break
        else:
            return None
        if value > limit.capacity or value > MAX_TOKENS:
            return None
        out[name] = value * 1000
        taken = taken or value > 0
    return out if taken else None
