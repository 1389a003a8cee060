"""An acquire served from this client's token reserve: the fast path, all of it here.

Most acquires on a hot bucket are served from memory. They need no flow, no driver and
no request: `serve` answers one in a few dictionary lookups and subtractions, or says
None, and the acquire then takes the full path (flows/acquire.py), which decides
exactly as before: this file only serves what the full path would serve from the same
reserve, with the same effects on the book. It says None when anything needs more than
that: an entity this client does not know, one with a bypass or a cascade parent, a
call whose `consume` or `limits` would not pass validation, limits to resolve that the
config cache no longer holds, or a reserve that is missing, aged, taken under other
limits, or short; a scheduled, soft or global limit; several resources at once.

Why the checks the full path makes can be skipped here: the reserve of (entity,
resource) was installed by an acquire that validated both names, under limits that were
validated, and it is served only when the call's limits are those same limits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from zae_limiter.flows.records.config import config_levels
from zae_limiter.flows.reserves.demand import DEMAND_TAU_MS
from zae_limiter.flows.write.levels import Taken
from zae_limiter.limits import MAX_TOKENS, RESERVED_LIMIT_NAMES, Limit

if TYPE_CHECKING:
    from zae_limiter.flows.context import RepoState
    from zae_limiter.flows.reserves.book import Key, ReserveBook


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
        if limit.schedule or limit.soft or limit.regions:
            # The limit in force, what a soft limit reports, a region's share: the full path.
            return None
    amounts = _amounts(consume, wanted)
    if amounts is None:
        return None
    shard = _spend(book, key, wanted, amounts, now_ms)
    if shard is None:
        return None
    return Taken(entity_id, resource, shard, amounts, wanted, from_reserve=True), amounts


def _spend(
    book: ReserveBook, key: Key, limits: tuple[Limit, ...], amounts: dict[str, int], now_ms: int
) -> int | None:
    """`ReserveBook.record` and `spend` of one acquire, written out (this is their one hot
    caller): the shard the reserve came from, or None with nothing changed."""
    with book._lock:
        held = book._reserves.get(key)
        if held is None or held.limits != limits:
            return None
        # ReserveBook._covers: young enough, in its quota window, enough left, no debt.
        if now_ms - held.born_ms >= book.settings.max_age_ms:
            return None  # never spent past its age: the full path's write renews it
        if held.window_end_ms is not None and held.crossed(now_ms):
            return None
        left = held.left
        for name, milli in amounts.items():
            if milli and left.get(name, 0) < milli:
                return None
        if min(left.values(), default=0) < 0:
            return None
        demand = book._demand.get(key)
        if demand is None:
            book._record(key, amounts, now_ms, 1)
        else:
            if now_ms > demand.at_ms:  # Demand.decay
                factor = math.exp(-(now_ms - demand.at_ms) / DEMAND_TAU_MS)
                demand.count *= factor
                totals = demand.amounts
                for name in totals:
                    totals[name] *= factor
                demand.at_ms = now_ms
            demand.count += 1
            totals = demand.amounts
            for name, milli in amounts.items():
                totals[name] = max(0.0, totals.get(name, 0.0) + milli)
        for name, milli in amounts.items():
            if milli:
                left[name] -= milli
        held.used_ms = now_ms
        book.stats.hits += 1
        return held.shard_id


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
