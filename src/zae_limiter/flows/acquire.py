"""acquire(): what was asked, validated (every check raises a `ValidationError` saying
what was wrong, before anything is written); the levels; the take from the entity (and
its parent): on to flows/scaling/any_shard.py and flows/write/take.py. Cascade: the
first acquire of a child learns `(cascade, parent_id)` and takes from the parent after
the child; once the entity cache knows them, child and parent writes go out together in
one round trip. If any level is rejected or fails, what the others took is given back
(flows/reserves/ops.py `compensate`): no tokens created or destroyed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from zae_limiter import keys
from zae_limiter.errors import RateLimitExceeded, ValidationError
from zae_limiter.flows import Flow, lockstep
from zae_limiter.flows.bucket_ttl import DEFAULT_BUCKET_TTL_S
from zae_limiter.flows.context import EntityFacts, RepoState
from zae_limiter.flows.records.config import Prefetched, Resolved, require_limits, resolve_levels
from zae_limiter.flows.regional_limits import Wanted, learn_entity, split_global, take_global
from zae_limiter.flows.reserves import ops as reserve_ops
from zae_limiter.flows.reserves.ops import compensate
from zae_limiter.flows.scaling.any_shard import take_any_shard
from zae_limiter.flows.write.levels import Level, Rejected, Taken
from zae_limiter.flows.write.memory import exceeded, local_rejection, raise_if_known_exhausted
from zae_limiter.flows.write.take import NOT_FETCHED
from zae_limiter.limits import MAX_TOKENS, RESERVED_LIMIT_NAMES, Limit, in_force, validate_limits
from zae_limiter.models import ResolvedLimits


@dataclass(frozen=True, slots=True)
class Acquired:
    taken: tuple[Taken, ...]
    #: The validated `consume`, in millitokens (the lease starts from it).
    consumed_milli: Mapping[str, int] = field(default_factory=dict)
    #: The entity the acquire was for (its cascade parent may be in `taken` too).
    entity_id: str = ""
    #: The entity has a bypass: nothing was taken, nothing was checked.
    bypassed: bool = False
    #: What was taken from regional shares of global limits (docs/global.md): a lease's
    #: rollback and adjustments change these shares too.
    shared: tuple[Wanted, ...] = ()

    def own(self) -> Taken | None:
        """What was taken from the entity itself."""
        return next((t for t in self.taken if t.entity_id == self.entity_id), None)

    def soft_exceeded(self) -> tuple[tuple[str, str], ...]:
        """(entity, limit) of every soft limit this acquire went past: a hard limit
        there would have rejected it (docs/quotas.md, "Soft limits"). Asked after every
        acquire: a take without a soft limit is passed over without a call."""
        over: list[tuple[str, str]] = []
        for t in self.taken:
            for limit in t.limits:
                if limit.soft:
                    over.extend((t.entity_id, name) for name in t.soft_over())
                    break
        return tuple(over)

    @property
    def limit_names(self) -> frozenset[str]:
        names = {limit.name for t in self.taken for limit in t.limits}
        return frozenset(names | {limit.name for _e, _r, limit, _m in self.shared})


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


def check_fits(
    amounts: Mapping[str, int], limits: Mapping[str, Sequence[Limit]], entity_id: str
) -> None:
    """Every consumed limit is configured for at least one of the resources (`limits`:
    the entity's, by resource), and no amount exceeds a capacity it is taken from."""
    for name, milli in amounts.items():
        having = []
        for r, ls in limits.items():
            for lim in ls:
                if lim.name == name:
                    having.append((r, lim))
        if not having:
            where = " or ".join(repr(r) for r in limits)
            configured = sorted({lim.name for ls in limits.values() for lim in ls})
            raise ValidationError(
                f"consume names limit {name!r}, which is not configured for entity "
                f"{entity_id!r} on resource {where} (configured: {configured})"
            )
        for _resource, limit in having:
            if milli > limit.capacity * 1000:  # `capacity_milli`, inline: every acquire
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


#: Call shapes this client has validated, at most this many: (entity, resource, the ids
#: of the limits passed, or None) -> (resources, those limits, whether one is scheduled).
#: A hot key asked again skips the checks of its ids and limits; the entry holds the
#: limits, so their ids cannot be reused while it stands. Cleared whole when full.
ASKED_MAX = 4096


def validate_acquire(
    state: RepoState,
    entity_id: str,
    resource: str | Sequence[str],
    consume: Mapping[str, int],
    limits: Sequence[Limit] | None,
    now_ms: int,
) -> tuple[tuple[str, ...], dict[str, int], tuple[Limit, ...] | None]:
    """What an acquire asks, validated: its resources, its amounts in millitokens, and
    the limits it passes (those in force at `now_ms`), or None (the stored ones apply)."""
    shape: tuple[object, ...] | None = None
    if type(entity_id) is str and type(resource) is str:
        if limits is None:
            shape = (entity_id, resource, None)
        elif type(limits) is list or type(limits) is tuple:
            shape = (entity_id, resource, *map(id, limits))
    known = state.asked_shapes.get(shape) if shape is not None else None
    if known is None:  # a new shape: checked in full, in the order errors are reported
        keys.validate_id("entity_id", entity_id)
        resources = validate_resources(resource)
    amounts = validate_amounts("consume", consume)
    if not any(amounts.values()):
        raise ValidationError("consume must take at least one token of one limit")
    if known is None:
        given = validate_limits(limits) if limits is not None else None
        scheduled = given is not None and any(limit.schedule for limit in given)
        known = (resources, given, scheduled)
        if shape is not None:
            if len(state.asked_shapes) >= ASKED_MAX:
                state.asked_shapes.clear()
            state.asked_shapes[shape] = known
    resources, override, scheduled = known
    if scheduled and override is not None:
        return resources, amounts, in_force(override, now_ms)
    return resources, amounts, override


#: What the call asked, validated: (entity, resources, amounts in millitokens, the limits
#: it passes or None, now).
_AskedFor = tuple[str, tuple[str, ...], dict[str, int], tuple[Limit, ...] | None, int]


def _level(
    state: RepoState,
    entity_id: str,
    resource: str,
    limits: tuple[Limit, ...],
    amounts: Mapping[str, int],
    bucket_ttl_s: int | None = None,
) -> Level:
    consume: dict[str, int] = {}
    for name, value in amounts.items():
        for limit in limits:
            if limit.name == name:
                consume[name] = value
                break
    meta = state.entities.get(entity_id)
    facts = meta.facts if meta is not None else None
    parent_id = facts.parent_id if facts is not None else None
    ttl = DEFAULT_BUCKET_TTL_S if bucket_ttl_s is None else bucket_ttl_s
    if ttl != DEFAULT_BUCKET_TTL_S or (entity_id, resource) in state.bucket_ttls:
        state.bucket_ttls[(entity_id, resource)] = ttl  # for this bucket's later charges
    return Level(
        entity_id=entity_id,
        resource=resource,
        limits=limits,
        consume_milli=consume,
        shard_id=0,
        shard_count=1 if meta is None else meta.shards.counts.get(resource, 1),
        cascade=bool(facts is not None and parent_id is not None and facts.cascades(resource)),
        parent_id=parent_id,
        bucket_ttl_s=ttl,
    )


def _has_global(levels: Sequence[Level]) -> bool:
    """Whether a level has a global limit (`Limit.is_global`, read as its field: this is
    asked on every acquire, and almost always answered no)."""
    for lv in levels:
        for limit in lv.limits:
            if limit.regions:
                return True
    return False


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
    cascade): all of them or none, every write in one round trip. The levels to take
    from come first (what was asked, resolved); global limits add their regional shares
    around the take (`_shared`)."""
    asked_for = validate_acquire(state, entity_id, resource, consume, limits, now_ms)
    resources, amounts, override = asked_for  # the stored limits apply when None
    # Resolved first, even for an entity known to bypass: an expired cache entry reads
    # the record again, which is how another client's end of the bypass is seen.
    meta = state.entities.get(entity_id)
    pairs = []
    for r in resources:
        pairs.append((entity_id, r))
    if meta is not None and meta.facts.parent_id is not None:  # its cascade parents too
        pairs.extend(state.known_parents(entity_id, resources))
    if override is not None:
        found: tuple[Resolved, Prefetched] = (
            dict.fromkeys(pairs, ResolvedLimits(override, "call")),
            {},
        )
    else:
        found = yield from resolve_levels(state, pairs, None, now_ms)
    meta = state.entities.get(entity_id)  # learned from the record just read
    if meta is not None and meta.facts.bypass:
        return Acquired((), amounts, entity_id, bypassed=True)
    levels = _own_levels(state, entity_id, resources, found[0], amounts)
    asked = (entity_id, resources, amounts, override, now_ms)
    parent_known = meta is not None and meta.facts.parent_id is not None
    if parent_known:  # its known cascade parents
        levels += yield from _parent_levels(state, asked, found)
    if state.shares is not None:
        has_global = _has_global(levels)
        # Facts from the record are settled: asked of the field first.
        done = meta is not None and (meta.facts.record or settled(meta.facts, resources))
        if has_global or not (parent_known or done):
            return (yield from _shared(state, asked, levels, found, (has_global, speculative)))
    return (
        yield from _take_all(
            state, entity_id, levels, (amounts, override), found[1], (now_ms, speculative)
        )
    )


def settled(facts: EntityFacts, resources: Sequence[str]) -> bool:
    """Whether a bucket write of these resources can teach nothing new (`Entities.learn`
    keeps these facts): else it may name a parent, whose levels an acquire takes late."""
    return facts.record or all(map(facts.cascade_for.__contains__, resources))


def _shared(
    state: RepoState,
    asked: _AskedFor,
    levels: list[Level],
    found: tuple[Resolved, Prefetched],
    how: tuple[bool, bool],
) -> Flow[Acquired]:
    """The take, with this region's shares of global limits (docs/global.md): split
    from the levels before it, taken after it; a cascade parent the take teaches may
    have global limits of its own."""
    entity_id, _resources, amounts, override, now_ms = asked
    has_global, speculative = how
    wanted: list[Wanted] = []
    if has_global:
        levels, wanted = split_global(state, levels, entity_id)
        # No bucket write of the entity will say whether it cascades: its record does.
        writes_none = wanted and not any(lv.entity_id == entity_id for lv in levels)
        if writes_none and (yield from learn_entity(state, entity_id)):
            parents = yield from _parent_levels(state, asked, found)
            more, more_wanted = split_global(state, parents, entity_id)
            levels, wanted = [*levels, *more], [*wanted, *more_wanted]
    late = not state.parent_known(entity_id)  # a parent learned now is taken late
    acquired = yield from _take_all(
        state, entity_id, levels, (amounts, override), found[1], (now_ms, speculative)
    )
    if late and state.parent_known(entity_id):
        # The late parents' regional limits were taken (_take_parent); now their global ones.
        parents = yield from _parent_levels(state, asked, ({}, {}))
        wanted += split_global(state, parents, entity_id)[1]
    if wanted:  # this region's share of the global limits, after the rest
        refused = yield from take_global(state.shares, state.table, state.namespace, wanted, now_ms)
        if refused is not None:
            yield from compensate(state, acquired.taken, now_ms)
            raise refused
        return replace(acquired, shared=tuple(wanted))
    return acquired


def _parent_levels(
    state: RepoState, asked: _AskedFor, found: tuple[Resolved, Prefetched]
) -> Flow[list[Level]]:
    """The levels of the entity's cascade parents this client knows of."""
    entity_id, resources, amounts, override, now_ms = asked
    resolved, prefetched = found
    more = state.known_parents(entity_id, resources)
    missing = [pair for pair in more if pair not in resolved]
    if missing:
        extra, fetched = yield from resolve_levels(state, missing, override, now_ms)
        resolved.update(extra)
        prefetched.update(fetched)
    levels = []
    for p, r in more:
        limits = resolved[(p, r)]
        if limits is not None:
            levels.append(_level(state, p, r, limits.limits, amounts, limits.bucket_ttl_s))
    return levels


def _take_all(
    state: RepoState,
    entity_id: str,
    levels: list[Level],
    asked: tuple[Mapping[str, int], tuple[Limit, ...] | None],
    prefetched: Prefetched,
    how: tuple[int, bool],
) -> Flow[Acquired]:
    amounts, override = asked
    now_ms, speculative = how
    if state.reserves is None:  # reserves off: every level goes to DynamoDB
        served: list[Taken] = []
        rest = levels
    else:
        served, rest = reserve_ops.serve(state, levels, now_ms)
        if not rest:
            return Acquired(tuple(served), amounts, entity_id)
    outcomes = yield from _take_levels(state, served, rest, now_ms, speculative, prefetched)
    if state.reserves is not None:
        reserve_ops.keep(state, rest, outcomes[len(served) :], now_ms)
    meta = state.entities.get(entity_id)
    if meta is not None and meta.facts.parent_id is not None:  # else no parent to take late
        outcomes += yield from _late_parents(
            state, entity_id, (levels, outcomes), amounts, override, how
        )
    if len(outcomes) == 1 and type(outcomes[0]) is Taken:  # one take, done: `_conclude`'s answer
        return Acquired((outcomes[0],), amounts, entity_id)
    return (yield from _conclude(state, outcomes, now_ms, amounts, entity_id))


def _own_levels(
    state: RepoState,
    entity_id: str,
    resources: Sequence[str],
    resolved: Resolved,
    amounts: Mapping[str, int],
) -> list[Level]:
    """The entity's level of each resource, once its limits are known to fit `amounts`."""
    found: dict[str, ResolvedLimits] = {}
    own: dict[str, tuple[Limit, ...]] = {}
    for r in resources:
        got = resolved[(entity_id, r)]
        found[r] = got if got is not None else require_limits(got, entity_id, r)
        own[r] = found[r].limits
    check_fits(amounts, own, entity_id)
    levels = []
    for r in resources:
        levels.append(_level(state, entity_id, r, own[r], amounts, found[r].bucket_ttl_s))
    return levels


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
        parent = state.parent_of(entity_id, lv.resource)
        if lv.entity_id != entity_id or lv.resource in with_parent or parent is None:
            continue
        try:
            asked = (amounts, override, now_ms, speculative)
            late.append((yield from _take_parent(state, parent, lv.resource, asked)))
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
        if state.exhausted:  # a shortage this client remembers may reject them all
            raise_if_known_exhausted(state, levels, now_ms)
    except RateLimitExceeded:
        reserve_ops.keep(state, levels, [None] * len(levels), now_ms)  # nothing was written
        yield from compensate(state, served, now_ms)
        raise
    flows = []
    for lv in levels:
        fetched = prefetched.get((lv.entity_id, lv.resource), NOT_FETCHED)
        flows.append(take_any_shard(state, lv, now_ms, speculative, fetched))
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
    asked: tuple[Mapping[str, int], tuple[Limit, ...] | None, int, bool],
) -> Flow[Taken | Rejected | None]:
    amounts, override, now_ms, speculative = asked
    resolved, prefetched = yield from resolve_levels(state, [(parent, resource)], override, now_ms)
    parent_limits = resolved[(parent, resource)]
    if parent_limits is None:
        return None
    regional = tuple(limit for limit in parent_limits.limits if not limit.is_global)
    level = _level(state, parent, resource, regional, amounts, parent_limits.bucket_ttl_s)
    if len(regional) < len(parent_limits.limits) and not any(level.consume_milli.values()):
        return None  # only global limits asked: the acquire takes them from their shares
    known = local_rejection(state, level, now_ms)
    if known is not None:
        return known
    fetched = prefetched.get((parent, resource), NOT_FETCHED)
    return (yield from take_any_shard(state, level, now_ms, speculative, fetched))


def _failed(outcome: object) -> bool:
    return isinstance(outcome, (Rejected, BaseException))


def _conclude(
    state: RepoState,
    outcomes: Sequence[object],
    now_ms: int,
    amounts: Mapping[str, int],
    entity_id: str,
) -> Flow[Acquired]:
    taken: list[Taken] = []
    failed = False
    for o in outcomes:
        if isinstance(o, Taken):
            taken.append(o)
        elif isinstance(o, (Rejected, BaseException)):  # _failed
            failed = True
    if not failed:
        return Acquired(tuple(taken), amounts, entity_id)
    yield from compensate(state, taken, now_ms)
    rejections = [o for o in outcomes if isinstance(o, Rejected)]
    if rejections:
        raise exceeded(rejections)
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    raise errors[0]
