"""Stored limits: set/get/delete at each level, and resolution through the config cache.

Resolution order: entity+resource > entity default > resource default > system default.
A miss resolves every missing level (and unknown entity metadata) in one BatchGetItem.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any, Literal, cast
from weakref import WeakKeyDictionary

from zae_limiter import keys, schema
from zae_limiter.config_cache import ConfigCache
from zae_limiter.errors import SchemaVersionError, ValidationError
from zae_limiter.flows import Call, Flow, one
from zae_limiter.flows.batch import batch_get
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.records.audit import Auditor, audited_change, limits_json
from zae_limiter.flows.records.version import read_version
from zae_limiter.flows.write.memory import image_of_age
from zae_limiter.limits import Limit, in_force, validate_limits
from zae_limiter.models import LimitSource, ResolvedLimits

FailurePolicy = Literal["block", "allow"]
FAILURE_POLICIES: tuple[FailurePolicy, ...] = ("block", "allow")

#: The stored failure policy last seen on the system config item, per client (keyed by
#: its config cache). Kept past the cache TTL: it is needed when DynamoDB is down.
_stored_policies: WeakKeyDictionary[ConfigCache[Any], FailurePolicy | None] = WeakKeyDictionary()


def check_failure_policy(value: object) -> FailurePolicy:
    if value not in FAILURE_POLICIES:
        raise ValidationError(f"on_unavailable must be 'block' or 'allow', got {value!r}")
    return "allow" if value == "allow" else "block"


def stored_failure_policy(state: RepoState) -> FailurePolicy | None:
    """The policy stored in the system defaults, as this client last read it."""
    return _stored_policies.get(state.config_cache)


def learn_failure_policy(state: RepoState, system_item: keys.Item | None) -> None:
    value = (system_item or {}).get(keys.A_ON_UNAVAILABLE, {}).get("S")
    _stored_policies[state.config_cache] = (
        check_failure_policy(value) if value in FAILURE_POLICIES else None
    )


def config_levels(entity_id: str, resource: str) -> list[tuple[LimitSource, Hashable]]:
    """(source, cache key) of each level, most specific first."""
    return [
        ("entity", ("entity", entity_id, resource)),
        ("entity_default", ("entity", entity_id, keys.DEFAULT_RESOURCE)),
        ("resource", ("resource", resource)),
        ("system", ("system",)),
    ]


def _item_key(state: RepoState, cache_key: Hashable) -> keys.Item:
    """The config item of a level; built only on a cache miss (the hot path hits)."""
    ns = state.namespace
    kind, *rest = cast(tuple[str, ...], cache_key)
    if kind == "entity":
        return keys.entity_config_key(ns, rest[0], rest[1])
    if kind == "resource":
        return keys.resource_config_key(ns, rest[0])
    return keys.system_config_key(ns)


def reads_record(state: RepoState, entity_id: str, own_limits_missed: bool) -> bool:
    """Whether this resolution reads the entity's record: when the entity is not known,
    and with its own limits when their cache entry expired, so what this client knows of
    its cascade, parent and bypass is never older than that entry."""
    return own_limits_missed or entity_id not in state.entities


def resolve(
    state: RepoState,
    wanted: Sequence[tuple[str, str]],
    now_ms: int,
) -> Flow[dict[tuple[str, str], ResolvedLimits | None]]:
    """Resolve limits for several (entity, resource) pairs, and learn unknown entities."""
    resolved, _found = yield from resolve_and_fetch(state, wanted, now_ms, ())
    return resolved


def resolve_and_fetch(
    state: RepoState,
    wanted: Sequence[tuple[str, str]],
    now_ms: int,
    also: Sequence[keys.Item],
) -> Flow[tuple[dict[tuple[str, str], ResolvedLimits | None], dict[tuple[str, str], Any]]]:
    """Resolve limits, learn unknown entities, and fetch `also` in the same round trip.

    Cached levels cost nothing; every missing level of every pair, the META item of any
    entity the entity cache does not know, and the `also` keys are fetched in one
    BatchGetItem. `also` is only fetched when the batch happens anyway; the second
    result holds what was found, by (PK, SK).
    """
    cache = state.config_cache
    known: dict[Hashable, tuple[Limit, ...] | None] = {}
    fetch: list[keys.Item] = []
    fetch_ids: dict[tuple[str, str], Hashable] = {}
    known_missed: set[Hashable] = set()
    for entity_id, resource in wanted:
        for _source, cache_key in config_levels(entity_id, resource):
            if cache_key in known:
                continue
            hit, value = cache.lookup(cache_key, now_ms)
            if hit:
                known[cache_key] = value
            else:
                known[cache_key] = None
                known_missed.add(cache_key)
                item_key = _item_key(state, cache_key)
                fetch.append(item_key)
                fetch_ids[keys.key_id(item_key)] = cache_key
        if reads_record(state, entity_id, ("entity", entity_id, resource) in known_missed):
            fetch.append(keys.entity_key(state.namespace, entity_id))
    found: dict[tuple[str, str], Any] = {}
    if fetch:
        found = yield from batch_get(state, [*fetch, *also])
        for found_id, cache_key in fetch_ids.items():
            item = found.get(found_id)
            if cache_key == ("system",):
                learn_failure_policy(state, item)
            limits = keys.decode_limits(item) if item is not None else None
            known[cache_key] = limits or None
            cache.store(cache_key, limits or None, now_ms)
            # Refetched with the limits, so it is as fresh as their cache entry.
            state.level_ttls[cache_key] = keys.bucket_ttl_of(item)
        for entity_id, _resource in wanted:
            meta_item = found.get(keys.key_id(keys.entity_key(state.namespace, entity_id)))
            # No META: an implicit entity, which never cascades. That is not cached, so
            # a later create_entity() is still seen.
            if meta_item is not None:
                entity = keys.decode_entity(meta_item)
                state.entities.learn(
                    entity_id,
                    entity.cascade,
                    entity.parent_id,
                    dict(entity.cascade_for),
                    bypass=entity.bypass,
                    reread=True,
                )
    out: dict[tuple[str, str], ResolvedLimits | None] = {}
    for entity_id, resource in wanted:
        out[(entity_id, resource)] = None
        ttl = _bucket_ttl(state, entity_id, resource)
        for source, cache_key in config_levels(entity_id, resource):
            limits = known.get(cache_key)
            if limits:
                # The stored schedule picks the limit in force from the time passed in:
                # a boundary needs no read, each client switches by its own clock.
                out[(entity_id, resource)] = ResolvedLimits(
                    in_force(limits, now_ms), source, ttl
                )
                break
    return out, found


def _bucket_ttl(state: RepoState, entity_id: str, resource: str) -> int | None:
    """The bucket TTL of the most specific level that stores one (flows/bucket_ttl.py)."""
    for _source, cache_key in config_levels(entity_id, resource):
        seconds = state.level_ttls.get(cache_key)
        if seconds is not None:
            return seconds
    return None


def evict(state: RepoState, entity_id: str | None, resource: str | None) -> None:
    if entity_id is not None:
        state.config_cache.evict(("entity", entity_id, resource or keys.DEFAULT_RESOURCE))
    elif resource is not None:
        state.config_cache.evict(("resource", resource))
    else:
        state.config_cache.evict(("system",))


def config_key_for(state: RepoState, entity_id: str | None, resource: str | None) -> keys.Item:
    ns = state.namespace
    if entity_id is not None:
        return keys.entity_config_key(ns, entity_id, resource or keys.DEFAULT_RESOURCE)
    if resource is not None:
        return keys.resource_config_key(ns, resource)
    return keys.system_config_key(ns)


def validate_level(entity_id: str | None, resource: str | None) -> None:
    if entity_id is not None:
        keys.validate_id("entity_id", entity_id)
    if resource is not None:
        keys.validate_resource(resource)


#: The schema each kind of limit needs, and the older clients that schema keeps out.
_NEEDS = {
    "scheduled": (
        schema.SCHEDULE_SCHEMA_VERSION,
        "scheduled limits need {v}, which keeps out clients that would enforce the base "
        "numbers at all hours",
    ),
    "quota": (
        schema.QUOTA_SCHEMA_VERSION,
        "quotas need {v}, which keeps out clients that would read a quota as a refilling limit",
    ),
    "global": (
        schema.GLOBAL_SCHEMA_VERSION,
        "global limits need {v}, which keeps out clients that would ignore the regions "
        "and enforce the whole limit in each region",
    ),
}


def _kinds_needing_schema(limits: Sequence[Limit]) -> list[str]:
    kinds = []
    if any(limit.schedule for limit in limits):
        kinds.append("scheduled")
    elif any(limit.window is not None for limit in limits):
        kinds.append("quota")
    if any(limit.is_global for limit in limits):
        kinds.append("global")
    return kinds


def _schema_allows(state: RepoState, kinds: Sequence[str]) -> Flow[None]:
    """A quota is stored only in a table at schema 4 or later, a scheduled limit at 5, a
    global limit at 6: the version record then keeps out every client that would misread
    it (a quota as a refilling limit, a schedule as its base numbers at all hours, a
    global limit as the whole limit in every region)."""
    record = yield from read_version(state)
    for kind in kinds:
        needed, what = _NEEDS[kind]
        if record is not None and record.schema_version < needed:
            raise SchemaVersionError(
                f"table {state.table!r} has schema version {record.schema_version}: "
                f"{what.format(v=needed)}: run `zae-limiter migrate --name {state.table}` first"
            )


def set_limits(
    state: RepoState,
    entity_id: str | None,
    resource: str | None,
    limits: Iterable[Limit],
    now_ms: int,
    auditor: Auditor,
    on_unavailable: FailurePolicy | None = None,
) -> Flow[None]:
    """Store limits at one level; the system level may also store the failure policy.

    The item and its audit event are written in one transaction, conditional on the item
    being as read (the event's "before").
    """
    validate_level(entity_id, resource)
    if on_unavailable is not None:
        check_failure_policy(on_unavailable)
        if entity_id is not None or resource is not None:
            raise ValidationError("on_unavailable is stored with the system defaults only")
    checked = validate_limits(list(limits) if not isinstance(limits, (list, tuple)) else limits)
    kinds = _kinds_needing_schema(checked)
    if kinds:
        yield from _schema_allows(state, kinds)
    kind = (
        "entity_config"
        if entity_id is not None
        else ("resource_config" if resource is not None else "system_config")
    )
    extra = {keys.A_ENTITY_ID: entity_id} if entity_id is not None else {}
    if resource is not None:
        extra[keys.A_RESOURCE] = resource
    if on_unavailable is not None:
        extra[keys.A_ON_UNAVAILABLE] = on_unavailable
    item = keys.config_item(
        config_key_for(state, entity_id, resource), checked, state.namespace, now_ms, kind, **extra
    )
    item_key = config_key_for(state, entity_id, resource)

    def plan(before: keys.Item | None) -> list[dict[str, Any]]:
        event = auditor.put(
            state,
            "set_limits",
            entity_id=entity_id,
            resource=resource,
            before=_config_json(before),
            after=_config_json(item),
        )
        # The level's bucket TTL is not a limit: replacing the limits keeps it.
        kept = keys.with_bucket_ttl(item, keys.bucket_ttl_of(before))
        put = keys.tx_put(state.table, kept, keys.unchanged(before, keys.CONFIG_VERSION_ATTRS))
        return [put, event]

    yield from audited_change(state, item_key, _limits_at(item_key), plan)
    evict(state, entity_id, resource)
    if entity_id is None and resource is None:
        learn_failure_policy(state, item)


def get_limits(
    state: RepoState, entity_id: str | None, resource: str | None
) -> Flow[tuple[Limit, ...]]:
    validate_level(entity_id, resource)
    item_key = config_key_for(state, entity_id, resource)
    result = yield from one(Call("get_item", keys.get_consistent(state.table, item_key)))
    return keys.decode_limits(result.item) if result.item else ()


def _limits_at(item_key: keys.Item) -> str:
    pk, sk = keys.key_id(item_key)
    return f"the limits at {pk} {sk}"


def _config_json(item: keys.Item | None) -> dict[str, Any] | None:
    if item is None:
        return None
    body = limits_json(keys.decode_limits(item))
    policy = item.get(keys.A_ON_UNAVAILABLE, {}).get("S")
    if policy is not None:
        body["on_unavailable"] = policy
    return body


def delete_limits(
    state: RepoState, entity_id: str | None, resource: str | None, auditor: Auditor
) -> Flow[bool]:
    """Delete the limits of one level with its audit event; False when none were stored."""
    validate_level(entity_id, resource)
    item_key = config_key_for(state, entity_id, resource)

    def plan(before: keys.Item | None) -> list[dict[str, Any]] | None:
        if before is None:
            return None
        event = auditor.put(
            state,
            "delete_limits",
            entity_id=entity_id,
            resource=resource,
            before=_config_json(before),
        )
        condition = keys.unchanged(before, keys.CONFIG_VERSION_ATTRS)
        return [keys.tx_delete(state.table, item_key, condition), event]

    deleted = (yield from audited_change(state, item_key, _limits_at(item_key), plan)) is not None
    evict(state, entity_id, resource)
    if entity_id is None and resource is None:
        learn_failure_policy(state, None)
    return deleted


def get_failure_policy(state: RepoState) -> Flow[FailurePolicy | None]:
    """Read the stored failure policy (consistent read); this client remembers it."""
    result = yield from one(
        Call("get_item", keys.get_consistent(state.table, keys.system_config_key(state.namespace)))
    )
    learn_failure_policy(state, result.item)
    return stored_failure_policy(state)


def require_limits(
    resolved: ResolvedLimits | None, entity_id: str, resource: str
) -> ResolvedLimits:
    if resolved is None:
        raise ValidationError(
            f"no limits for entity {entity_id!r} on resource {resource!r}: pass limits=[...] "
            "or store them with set_limits(), set_resource_defaults() or set_system_defaults()"
        )
    return resolved


#: (entity, resource) -> its shard-0 bucket item as read with the config (None: absent).
Prefetched = dict[tuple[str, str], Any]
Resolved = dict[tuple[str, str], ResolvedLimits | None]


def resolve_levels(
    state: RepoState,
    pairs: Sequence[tuple[str, str]],
    override: tuple[Limit, ...] | None,
    now_ms: int,
) -> Flow[tuple[Resolved, Prefetched]]:
    """Limits per (entity, resource); for buckets this client has no image of it may plan
    from, the shard-0 item rides along in the config BatchGetItem, so the first write
    needs no extra read."""
    if override is not None:
        return dict.fromkeys(pairs, ResolvedLimits(override, "call")), {}
    only_global = state.shares.only_global if state.shares is not None else ()
    unknown = []
    for e, r in pairs:
        if image_of_age(state, e, (r, 0), now_ms) is None and (e, r) not in only_global:
            unknown.append((e, r))
    bucket_keys = {(e, r): keys.bucket_key(state.namespace, e, r, 0) for e, r in unknown}
    resolved, found = yield from resolve_and_fetch(state, pairs, now_ms, list(bucket_keys.values()))
    prefetched: Prefetched = {}
    if found or not bucket_keys:
        for pair, k in bucket_keys.items():
            prefetched[pair] = found.get((k[keys.PK]["S"], k[keys.SK]["S"]))
    return {pair: resolved[pair] for pair in pairs}, prefetched
