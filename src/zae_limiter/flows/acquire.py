"""acquire(): validate, resolve limits, take from the entity (and its parent), settle.

Cascade: the first acquire of a child learns `(cascade, parent_id)` and takes from the
parent after the child; once the entity cache knows them, child and parent writes go
out together in one round trip. If any level is rejected or fails, what the others took
is given back, so no tokens are created or destroyed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from zae_limiter import keys
from zae_limiter.errors import (
    RateLimitExceeded,
    ValidationError,
)
from zae_limiter.flows import Flow, lockstep
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.expiry import DEFAULT_BUCKET_TTL_S
from zae_limiter.flows.records.config import require_limits, resolve_and_fetch
from zae_limiter.flows.reserves import ops as reserve_ops
from zae_limiter.flows.scaling.any_shard import take_any_shard
from zae_limiter.flows.write.charge import charge_all
from zae_limiter.flows.write.levels import Level, Rejected, Taken
from zae_limiter.flows.write.memory import image_of_age, local_rejection
from zae_limiter.flows.write.take import NOT_FETCHED
from zae_limiter.limits import MAX_TOKENS, RESERVED_LIMIT_NAMES, Limit, in_force, validate_limits
from zae_limiter.models import ResolvedLimits

log = logging.getLogger("zae_limiter")


@dataclass(frozen=True, slots=True)
class Acquired:
    taken: tuple[Taken, ...]
    #: The validated `consume`, in millitokens (the lease starts from it).
    consumed_milli: Mapping[str, int] = field(default_factory=dict)
    #: The entity the acquire was for (its cascade parent may be in `taken` too).
    entity_id: str = ""
    #: The entity has a bypass: nothing was taken, nothing was checked.
    bypassed: bool = False

    def own(self) -> Taken | None:
        """What was taken from the entity itself."""
        for taken in self.taken:
            if taken.entity_id == self.entity_id:
                return taken
        return None

    def soft_exceeded(self) -> tuple[tuple[str, str], ...]:
        """(entity, limit) of every soft limit this acquire went past: a hard limit
        there would have rejected it (docs/quotas.md, "Soft limits")."""
        return tuple((t.entity_id, name) for t in self.taken for name in t.soft_over())

    @property
    def limit_names(self) -> frozenset[str]:
        return frozenset(limit.name for t in self.taken for limit in t.limits)


def validate_amounts(what: str, amounts: object, *, allow_negative: bool = False) -> dict[str, int]:
    """Token amounts by limit name, in millitokens."""
    if not isinstance(amounts, Mapping):
        raise ValidationError(f"{what} must be a mapping of limit name to whole tokens")
    out: dict[str, int] = {}
    for name, value in amounts.items():
        if name in RESERVED_LIMIT_NAMES:
            raise ValidationError(f"{what}: limit {name!r} is reserved and cannot be consumed")
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError(f"{what}[{name!r}] must be a whole number, got {value!r}")
        if (value < 0 and not allow_negative) or abs(value) > MAX_TOKENS:
            raise ValidationError(
                f"{what}[{name!r}] must be between 0 and {MAX_TOKENS}, got {value}"
            )
        out[str(name)] = value * 1000
    return out


def _check_fits(
    amounts: Mapping[str, int], limits: Mapping[str, Sequence[Limit]], entity_id: str
) -> None:
    """Every consumed limit is configured for at least one of the resources (`limits`:
    the entity's, by resource), and no amount exceeds a capacity it is taken from."""
    for name, milli in amounts.items():
        having = [(r, lim) for r, ls in limits.items() for lim in ls if lim.name == name]
        if not having:
            where = " or ".join(repr(r) for r in limits)
            configured = sorted({lim.name for ls in limits.values() for lim in ls})
            raise ValidationError(
                f"consume names limit {name!r}, which is not configured for entity "
                f"{entity_id!r} on resource {where} (configured: {configured})"
            )
        for _resource, limit in having:
            if milli > limit.capacity_milli:
                raise ValidationError(
                    f"consume[{name!r}] = {milli // 1000} can never be granted: the limit's "
                    f"capacity is {limit.capacity}"
                )


#: One acquire takes from at most this many resources: each is a write (two with
#: cascade) in the acquire's one round trip.
MAX_RESOURCES = 10


def validate_resources(resource: object) -> tuple[str, ...]:
    """One resource, or several distinct ones (a sequence of names), in the order given."""
    if isinstance(resource, str):
        return (keys.validate_resource(resource),)
    if not isinstance(resource, (list, tuple)) or not resource:
        raise ValidationError(
            f"resource must be a name or a non-empty list of names, got {resource!r}"
        )
    if len(resource) > MAX_RESOURCES:
        raise ValidationError(
            f"an acquire takes from at most {MAX_RESOURCES} resources, got {len(resource)}"
        )
    names = tuple(keys.validate_resource(r) for r in resource)
    if len(set(names)) != len(names):
        raise ValidationError(f"resource names a resource twice: {list(names)}")
    return names


#: (entity, resource) -> its shard-0 bucket item as read with the config (None: absent).
Prefetched = dict[tuple[str, str], Any]
Resolved = dict[tuple[str, str], ResolvedLimits | None]


def _resolve_levels(
    state: RepoState,
    pairs: Sequence[tuple[str, str]],
    override: tuple[Limit, ...] | None,
    now_ms: int,
) -> Flow[tuple[Resolved, Prefetched]]:
    """Limits per (entity, resource); for buckets this client has no image of it may plan
    from, the shard-0 item rides along in the config BatchGetItem, so the first write
    needs no extra read."""
    if override is not None:
        return {pair: ResolvedLimits(override, "call") for pair in pairs}, {}
    unknown = [(e, r) for e, r in pairs if image_of_age(state, e, (r, 0), now_ms) is None]
    bucket_keys = {(e, r): keys.bucket_key(state.namespace, e, r, 0) for e, r in unknown}
    resolved, found = yield from resolve_and_fetch(state, pairs, now_ms, list(bucket_keys.values()))
    prefetched: Prefetched = {}
    if found or not bucket_keys:
        for pair, k in bucket_keys.items():
            prefetched[pair] = found.get((k[keys.PK]["S"], k[keys.SK]["S"]))
    return {pair: resolved[pair] for pair in pairs}, prefetched


def _level(
    state: RepoState,
    entity_id: str,
    resource: str,
    limits: tuple[Limit, ...],
    amounts: Mapping[str, int],
    bucket_ttl_s: int | None = None,
) -> Level:
    names = {limit.name for limit in limits}
    meta = state.entities.get(entity_id)
    facts = meta.facts if meta is not None else None
    ttl = DEFAULT_BUCKET_TTL_S if bucket_ttl_s is None else bucket_ttl_s
    if ttl != DEFAULT_BUCKET_TTL_S or (entity_id, resource) in state.bucket_ttls:
        state.bucket_ttls[(entity_id, resource)] = ttl  # for this bucket's later charges
    return Level(
        entity_id=entity_id,
        resource=resource,
        limits=limits,
        consume_milli={n: v for n, v in amounts.items() if n in names},
        shard_id=0,
        shard_count=state.shard_count(entity_id, resource),
        cascade=bool(facts and facts.cascades(resource)),
        parent_id=facts.parent_id if facts else None,
        bucket_ttl_s=ttl,
    )


def _bypassed(state: RepoState, entity_id: str) -> bool:
    meta = state.entities.get(entity_id)
    return meta is not None and meta.facts.bypass


def _parent_of(state: RepoState, entity_id: str, resource: str) -> str | None:
    meta = state.entities.get(entity_id)
    if meta is None:
        return None
    facts = meta.facts
    return facts.parent_id if facts.cascades(resource) else None


def acquire(
    state: RepoState,
    entity_id: str,
    resource: str | Sequence[str],
    consume: Mapping[str, int],
    limits: Sequence[Limit] | None,
    now_ms: int,
    speculative: bool,
) -> Flow[Acquired]:
    """Take `consume` from the entity's bucket of each resource (and its parent's, with
    cascade): all of them or none, every write in one round trip."""
    keys.validate_id("entity_id", entity_id)
    resources = validate_resources(resource)
    amounts = validate_amounts("consume", consume)
    if not any(amounts.values()):
        raise ValidationError("consume must take at least one token of one limit")
    override = in_force(validate_limits(limits), now_ms) if limits is not None else None
    if _bypassed(state, entity_id):
        return Acquired((), amounts, entity_id, bypassed=True)
    resolved, prefetched = yield from _resolve_levels(
        state, _pairs(state, entity_id, resources), override, now_ms
    )
    if _bypassed(state, entity_id):  # learned from the record just read
        return Acquired((), amounts, entity_id, bypassed=True)
    found = {r: require_limits(resolved[(entity_id, r)], entity_id, r) for r in resources}
    own = {r: found[r].limits for r in resources}
    _check_fits(amounts, own, entity_id)
    levels = [
        _level(state, entity_id, r, own[r], amounts, found[r].bucket_ttl_s) for r in resources
    ]
    more = [(p, r) for r in resources if (p := _known_parent(state, entity_id, r)) is not None]
    if any(pair not in resolved for pair in more):
        extra, fetched = yield from _resolve_levels(
            state, [pair for pair in more if pair not in resolved], override, now_ms
        )
        resolved.update(extra)
        prefetched.update(fetched)
    for p, r in more:
        parent_limits = resolved[(p, r)]
        if parent_limits is not None:
            levels.append(
                _level(state, p, r, parent_limits.limits, amounts, parent_limits.bucket_ttl_s)
            )
    served, rest = reserve_ops.serve(state, levels, now_ms)
    if not rest:
        return Acquired(tuple(served), amounts, entity_id)
    outcomes = yield from _take_levels(state, served, rest, now_ms, speculative, prefetched)
    reserve_ops.keep(state, rest, outcomes[len(served) :], now_ms)
    outcomes += yield from _late_parents(
        state, entity_id, (levels, outcomes), amounts, override, (now_ms, speculative)
    )
    return (yield from _conclude(state, outcomes, now_ms, amounts, entity_id))


def _pairs(state: RepoState, entity_id: str, resources: Sequence[str]) -> list[tuple[str, str]]:
    pairs = [(entity_id, r) for r in resources]
    parents = [(_parent_of(state, entity_id, r), r) for r in resources]
    return pairs + [(p, r) for p, r in parents if p is not None]


def _known_parent(state: RepoState, entity_id: str, resource: str) -> str | None:
    """The parent to take from together with the entity, when the entity is known."""
    return _parent_of(state, entity_id, resource) if entity_id in state.entities else None


def _late_parents(
    state: RepoState,
    entity_id: str,
    taken: tuple[Sequence[Level], Sequence[object]],
    amounts: Mapping[str, int],
    override: tuple[Limit, ...] | None,
    how: tuple[int, bool],
) -> Flow[list[object]]:
    """Cascade learned from the child's own bucket: the parent goes second, this once,
    for each resource whose child take went through and had no parent level."""
    levels, outcomes = taken
    now_ms, speculative = how
    if any(_failed(o) for o in outcomes):
        return []  # all or nothing: the settle gives back what was taken
    with_parent = {lv.resource for lv in levels if lv.entity_id != entity_id}
    late: list[object] = []
    for lv in levels:
        parent = _parent_of(state, entity_id, lv.resource)
        if lv.entity_id != entity_id or lv.resource in with_parent or parent is None:
            continue
        try:
            late.append(
                (
                    yield from _take_parent(
                        state, parent, lv.resource, amounts, override, now_ms, speculative
                    )
                )
            )
        except Exception as error:
            late.append(error)
        if _failed(late[-1]):
            break
    return late


def _take_levels(
    state: RepoState,
    served: Sequence[Taken],
    levels: Sequence[Level],
    now_ms: int,
    speculative: bool,
    prefetched: Prefetched,
) -> Flow[list[object]]:
    """Outcomes of every level: those a reserve served, then one write per other level,
    all in one round trip (a level known to be exhausted rejects them all locally)."""
    try:
        _raise_if_known_exhausted(state, levels, now_ms)
    except RateLimitExceeded:
        reserve_ops.keep(state, levels, [None] * len(levels), now_ms)  # nothing was written
        yield from compensate(state, served, now_ms)
        raise
    flows = [
        take_any_shard(
            state, lv, now_ms, speculative, prefetched.get((lv.entity_id, lv.resource), NOT_FETCHED)
        )
        for lv in levels
    ]
    if len(flows) > 1:
        return [*served, *(yield from lockstep(flows, stop=_failed))]
    # One level, the common case: its flow runs directly (lockstep's bookkeeping is for
    # several), its failure becoming its outcome just as lockstep would make it.
    try:
        outcome: object = yield from flows[0]
    except Exception as error:
        outcome = error
    return [*served, outcome]


def _take_parent(
    state: RepoState,
    parent: str,
    resource: str,
    amounts: Mapping[str, int],
    override: tuple[Limit, ...] | None,
    now_ms: int,
    speculative: bool,
) -> Flow[Taken | Rejected | None]:
    resolved, prefetched = yield from _resolve_levels(state, [(parent, resource)], override, now_ms)
    parent_limits = resolved[(parent, resource)]
    if parent_limits is None:
        return None
    level = _level(
        state, parent, resource, parent_limits.limits, amounts, parent_limits.bucket_ttl_s
    )
    known = local_rejection(state, level, now_ms)
    if known is not None:
        return known
    return (
        yield from take_any_shard(
            state, level, now_ms, speculative, prefetched.get((parent, resource), NOT_FETCHED)
        )
    )


def _failed(outcome: object) -> bool:
    return isinstance(outcome, (Rejected, BaseException))


def _raise_if_known_exhausted(state: RepoState, levels: Sequence[Level], now_ms: int) -> None:
    rejections = [r for lv in levels if (r := local_rejection(state, lv, now_ms)) is not None]
    if rejections:
        raise _exceeded(rejections)


def _exceeded(rejections: Sequence[Rejected]) -> RateLimitExceeded:
    violations = [v for r in rejections for v in r.violations]
    return RateLimitExceeded(violations, max(r.retry_after_ms for r in rejections) / 1000)


def _conclude(
    state: RepoState,
    outcomes: Sequence[object],
    now_ms: int,
    amounts: Mapping[str, int],
    entity_id: str,
) -> Flow[Acquired]:
    taken = tuple(o for o in outcomes if isinstance(o, Taken))
    if not any(_failed(o) for o in outcomes):
        return Acquired(taken, amounts, entity_id)
    yield from compensate(state, taken, now_ms)
    rejections = [o for o in outcomes if isinstance(o, Rejected)]
    if rejections:
        raise _exceeded(rejections)
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    raise errors[0]


def compensate(state: RepoState, taken: Sequence[Taken], now_ms: int) -> Flow[None]:
    """Give back everything `taken` consumed: into this client's reserve of the bucket when
    it holds one, else with one write per bucket, all at once."""
    changes = []
    for t in taken:
        back = {n: -v for n, v in t.consumed_milli.items() if v}
        if back and not reserve_ops.change_locally(state, t, back, now_ms):
            changes.append((t, back))
    if not changes:
        return
    try:
        yield from charge_all(state, changes, now_ms)
    except Exception:
        log.warning("could not give back tokens for %s", [t.entity_id for t in taken])


def record_adjustments(
    state: RepoState, acquired: Acquired, pending_milli: Mapping[str, int], now_ms: int
) -> Flow[None]:
    """Record a lease's adjustments: in this client's reserve of the bucket when it can
    cover them, else with one write per bucket taken, all at once."""
    changes = []
    for t in acquired.taken:
        names = {limit.name for limit in t.limits}
        delta = {n: v for n, v in pending_milli.items() if v and n in names}
        reserve_ops.note_adjustment(state, t, delta, now_ms)
        if delta and not reserve_ops.change_locally(state, t, delta, now_ms):
            changes.append((t, delta))
    if changes:
        try:
            yield from charge_all(state, changes, now_ms)
        except Exception:
            log.warning("could not record lease adjustments %s", dict(pending_milli))
