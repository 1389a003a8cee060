"""Entities: create, read, update, list, children, delete; each change with its audit event."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from zae_limiter import keys
from zae_limiter.errors import EntityExistsError, EntityNotFoundError, ValidationError
from zae_limiter.flows import Call, Flow, one, paginate, pause
from zae_limiter.flows.batch import batch_get
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.records.audit import (
    Auditor,
    audited_change,
    entity_json,
    limits_json,
    write_transaction,
)
from zae_limiter.models import Entity


def get_entity(state: RepoState, entity_id: str) -> Flow[Entity | None]:
    keys.validate_id("entity_id", entity_id)
    entity_key = keys.entity_key(state.namespace, entity_id)
    result = yield from one(Call("get_item", keys.get_consistent(state.table, entity_key)))
    return keys.decode_entity(result.item) if result.item else None


def _check_links(state: RepoState, entity: Entity) -> Flow[None]:
    """Name, parent and cascade make sense: the parent exists and closes no cycle."""
    if entity.name is not None and (not isinstance(entity.name, str) or len(entity.name) > 1024):
        raise ValidationError("name must be a string of at most 1024 characters")
    if not isinstance(entity.cascade, bool):
        raise ValidationError(f"cascade must be True or False, got {entity.cascade!r}")
    if not isinstance(entity.bypass, bool):
        raise ValidationError(f"bypass must be True or False, got {entity.bypass!r}")
    if entity.cascade and entity.parent_id is None:
        raise ValidationError(f"entity {entity.entity_id!r}: cascade=True needs a parent_id")
    for resource, on in entity.cascade_for:
        keys.validate_resource(resource)
        if not isinstance(on, bool):
            raise ValidationError(f"cascade_for[{resource!r}] must be True or False, got {on!r}")
        if on and entity.parent_id is None:
            raise ValidationError(
                f"entity {entity.entity_id!r}: cascade for {resource!r} needs a parent_id"
            )
    if entity.parent_id is not None:
        keys.validate_id("parent_id", entity.parent_id)
        if entity.parent_id == entity.entity_id:
            raise ValidationError(f"entity {entity.entity_id!r} cannot be its own parent")
        parent = yield from get_entity(state, entity.parent_id)
        if parent is None:
            raise EntityNotFoundError(entity.parent_id)
        yield from _refuse_cycle(state, entity.entity_id, parent)


def create_entity(
    state: RepoState,
    entity_id: str,
    name: str | None,
    parent_id: str | None,
    cascade: bool,
    auditor: Auditor,
    cascade_for: Mapping[str, bool] | None = None,
    bypass: bool = False,
) -> Flow[Entity]:
    keys.validate_id("entity_id", entity_id)
    entity = Entity(entity_id, name, parent_id, cascade, auditor.now_ms, pairs(cascade_for), bypass)
    yield from _check_links(state, entity)
    put = keys.tx_put(
        state.table, keys.encode_entity(state.namespace, entity), keys.unchanged(None, ())
    )
    event = auditor.put(state, "create_entity", entity_id=entity_id, after=entity_json(entity))
    if not (yield from write_transaction(state, [put, event])):
        raise EntityExistsError(entity_id)
    state.entities.forget(entity_id)
    return entity


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: "Leave this field as it is" for `update_entity`.
UNSET: Final = _Unset()
_ENTITY_ATTRS = (
    keys.A_NAME,
    keys.A_PARENT,
    keys.A_CASCADE,
    keys.A_CREATED,
    keys.A_CASCADE_FOR,
    keys.A_BYPASS,
)


def pairs(cascade_for: Mapping[str, bool] | None) -> tuple[tuple[str, bool], ...]:
    """`Entity.cascade_for` from a mapping of resource -> cascades."""
    if cascade_for is None:
        return ()
    if not isinstance(cascade_for, Mapping):
        raise ValidationError(f"cascade_for must map resources to True/False, got {cascade_for!r}")
    return tuple(sorted(cascade_for.items()))


def update_entity(
    state: RepoState,
    entity_id: str,
    name: str | _Unset | None,
    parent_id: str | _Unset | None,
    cascade: bool | _Unset,
    auditor: Auditor,
    cascade_for: Mapping[str, bool] | _Unset = UNSET,
    bypass: bool | _Unset = UNSET,
    why: tuple[str, str | None] = ("update_entity", None),
) -> Flow[Entity]:
    """Change an entity's name, parent, cascade (`cascade_for` replaces the per-resource
    choices whole) or bypass; its bucket shards follow the new links. `why`: the audit
    event's action and the operator's reason (recorded in its `after`, when given)."""
    keys.validate_id("entity_id", entity_id)
    action, reason = why

    def plan(read: keys.Item | None) -> Flow[list[dict[str, Any]]]:
        if read is None:
            raise EntityNotFoundError(entity_id)
        before = keys.decode_entity(read)
        after = _updated(before, name, parent_id, cascade, cascade_for, bypass)
        yield from _check_links(state, after)
        item = keys.encode_entity(state.namespace, after)
        put = keys.tx_put(state.table, item, keys.unchanged(read, _ENTITY_ATTRS))
        recorded = entity_json(after)
        if reason is not None:
            recorded["reason"] = reason
        event = auditor.put(
            state, action, entity_id=entity_id, before=entity_json(before), after=recorded
        )
        return [put, event]

    entity_key = keys.entity_key(state.namespace, entity_id)
    replaced = yield from audited_change(state, entity_key, f"entity {entity_id!r}", plan)
    if replaced is None:  # the plan refuses a missing entity: never here
        raise EntityNotFoundError(entity_id)
    before = keys.decode_entity(replaced)
    # What the committed attempt wrote.
    after = _updated(before, name, parent_id, cascade, cascade_for, bypass)
    if _links(after) != _links(before):
        yield from _relink_buckets(state, after)
    state.entities.forget(entity_id)
    return after


def _updated(
    before: Entity,
    name: str | _Unset | None,
    parent_id: str | _Unset | None,
    cascade: bool | _Unset,
    cascade_for: Mapping[str, bool] | _Unset = UNSET,
    bypass: bool | _Unset = UNSET,
) -> Entity:
    after = replace(
        before,
        bypass=before.bypass if isinstance(bypass, _Unset) else bypass,
        name=before.name if isinstance(name, _Unset) else name,
        parent_id=before.parent_id if isinstance(parent_id, _Unset) else parent_id,
        cascade=before.cascade if isinstance(cascade, _Unset) else cascade,
        cascade_for=(before.cascade_for if isinstance(cascade_for, _Unset) else pairs(cascade_for)),
    )
    if after.parent_id is None and isinstance(cascade, _Unset):
        after = replace(after, cascade=False)  # no parent left to cascade to
    if after.parent_id is None and isinstance(cascade_for, _Unset):
        after = replace(after, cascade_for=())
    return after


def _links(entity: Entity) -> tuple[bool, str | None, tuple[tuple[str, bool], ...], bool]:
    return entity.cascade, entity.parent_id, entity.cascade_for, entity.bypass


def _relink_buckets(state: RepoState, entity: Entity) -> Flow[None]:
    """Bucket shards carry cascade and parent, which clients learn from: follow the entity.

    Not part of the transaction (an entity may have many shards); a shard created in
    between already reads the new entity record.
    """
    for bucket in (yield from entity_bucket_keys(state, entity.entity_id)):
        # Each bucket carries its own resource's cascade.
        cascades = entity.cascades(keys.parse_bucket_pk(bucket[keys.PK]["S"])[2])
        yield from one(
            Call(
                "update_item",
                keys.bucket_relink(state.table, bucket, cascades, entity.parent_id, entity.bypass),
            )
        )


def _refuse_cycle(state: RepoState, entity_id: str, parent: Entity) -> Flow[None]:
    """Walk up from the parent; meeting the new entity would close a loop."""
    seen = {parent.entity_id}
    current = parent
    while current.parent_id is not None:
        if current.parent_id == entity_id or current.parent_id in seen:
            raise ValidationError(
                f"parent {parent.entity_id!r} would make a cycle through {current.parent_id!r}"
            )
        seen.add(current.parent_id)
        nxt = yield from get_entity(state, current.parent_id)
        if nxt is None:
            return
        current = nxt


def get_children(state: RepoState, parent_id: str) -> Flow[list[Entity]]:
    keys.validate_id("parent_id", parent_id)
    items = yield from paginate(
        Call("query", keys.entity_query_children(state.table, state.namespace, parent_id))
    )
    return sorted((keys.decode_entity(i) for i in items), key=lambda e: e.entity_id)


def list_entities(state: RepoState) -> Flow[list[str]]:
    """Ids of every entity in the namespace (from the KEYS_ONLY namespace index)."""
    items = yield from paginate(
        Call("query", keys.namespace_query_entities(state.table, state.namespace))
    )
    return sorted(keys.parse_entity_pk(keys.pk_of(i))[1] for i in items)


def get_entities(state: RepoState, entity_ids: Sequence[str]) -> Flow[list[Entity]]:
    """The entities that exist among `entity_ids`, in that order (one BatchGetItem per 100)."""
    for entity_id in entity_ids:
        keys.validate_id("entity_id", entity_id)
    wanted = [keys.entity_key(state.namespace, e) for e in entity_ids]
    found = yield from batch_get(state, wanted)
    items = (found.get(keys.key_id(k)) for k in wanted)
    return [keys.decode_entity(item) for item in items if item is not None]


def entity_bucket_keys(
    state: RepoState, entity_id: str, resource: str | None = None
) -> Flow[list[dict[str, Any]]]:
    items = yield from paginate(
        Call(
            "query", keys.bucket_query_for_entity(state.table, state.namespace, entity_id, resource)
        )
    )
    return [keys.item_key(i) for i in items]


#: A transaction holds 100 items: the event, the META item and this many configs.
_CONFIGS_IN_TRANSACTION = 98


def delete_entity(state: RepoState, entity_id: str, auditor: Auditor) -> Flow[int]:
    """Delete the entity's record, configs, usage and bucket shards. Refuses with children.

    The record and the configs go in one transaction with the audit event (whose "before"
    holds them); usage and bucket shards, which are not configuration, are deleted after.
    """
    keys.validate_id("entity_id", entity_id)
    children = yield from get_children(state, entity_id)
    if children:
        raise ValidationError(
            f"entity {entity_id!r} has {len(children)} children "
            f"({', '.join(c.entity_id for c in children[:5])}); delete them first"
        )
    own = yield from paginate(
        Call("query", keys.entity_query_items(state.table, state.namespace, entity_id))
    )
    doomed = [keys.item_key(i) for i in own]
    configured = [k for k in doomed if keys.key_id(k)[1] == keys.SK_META or keys.config_level(k)]
    if configured:
        yield from _delete_configured(state, entity_id, configured, auditor)
        doomed = [k for k in doomed if k not in configured]
    yield from batch_delete(state, doomed)
    buckets = yield from entity_bucket_keys(state, entity_id)
    yield from delete_buckets(state, entity_id, buckets)
    state.entities.forget(entity_id)
    state.config_cache.clear()
    state.exhausted = {k: v for k, v in state.exhausted.items() if k[0] != entity_id}
    return len(doomed) + len(buckets)


def delete_buckets(state: RepoState, entity_id: str, found: list[keys.Item]) -> Flow[None]:
    """Delete the entity's bucket shards so that none comes back: a client that still
    knows the entity may be making shard k >= 1 from shard 0 as the deletion runs.

    Per resource, shard 0 is first marked (`keys.mark_deleting`): a shard k >= 1 is made
    only in a transaction that checks shard 0 exists unmarked (`keys.create_split_bucket`),
    so none is made from then on. Every shard below the count the mark returns is then
    deleted by key (the index `found` came from may not list one made just now), with
    those `found` beyond it (a merge's drained shards), and shard 0 last.
    """
    ns = state.namespace
    by_resource: dict[str, set[int]] = {}
    for found_key in found:
        _ns, _entity, resource, shard = keys.parse_bucket_pk(keys.pk_of(found_key))
        by_resource.setdefault(resource, set()).add(shard)
    doomed: list[keys.Item] = []
    firsts: list[keys.Item] = []
    for resource, shards in sorted(by_resource.items()):
        first = keys.bucket_key(ns, entity_id, resource, 0)
        marked = yield from one(Call("update_item", keys.mark_deleting(state.table, first)))
        count = keys.get_n(marked.attributes, keys.A_SHARD_COUNT, 1) if marked.ok else 1
        if marked.ok or 0 in shards:
            firsts.append(first)
        rest = (shards | set(range(count))) - {0}
        doomed += [keys.bucket_key(ns, entity_id, resource, i) for i in sorted(rest)]
    yield from batch_delete(state, doomed)
    for first in firsts:
        yield from one(Call("delete_item", keys.delete_marked(state.table, first)))


def _delete_configured(
    state: RepoState, entity_id: str, configured: list[keys.Item], auditor: Auditor
) -> Flow[None]:
    """The META item and the configs, with the audit event, in one transaction."""
    found = yield from batch_get(state, configured)
    overflow = configured[_CONFIGS_IN_TRANSACTION + 1 :]
    yield from batch_delete(state, overflow)  # rare: an entity with limits on >98 resources
    meta = found.get((keys.entity_pk(state.namespace, entity_id), keys.SK_META))
    before: dict[str, Any] = {
        "entity": None if meta is None else entity_json(keys.decode_entity(meta))
    }
    before["limits"] = {}
    for (pk, sk), item in sorted(found.items()):
        level = keys.config_level(keys.key(pk, sk))
        if level is not None:
            before["limits"][level[1] or "*"] = limits_json(keys.decode_limits(item))["limits"]
    deletes = [keys.tx_delete(state.table, k) for k in configured[: _CONFIGS_IN_TRANSACTION + 1]]
    event = auditor.put(state, "delete_entity", entity_id=entity_id, before=before)
    # A change between the read and this write is not guarded: the items go either way.
    yield from write_transaction(state, [*deletes, event])


def batch_delete(state: RepoState, item_keys: list[dict[str, Any]]) -> Flow[None]:
    for start in range(0, len(item_keys), 25):
        chunk = [{"DeleteRequest": {"Key": k}} for k in item_keys[start : start + 25]]
        request: dict[str, Any] = {state.table: chunk}
        attempt = 0
        while request:
            result = yield from one(Call("batch_write_item", {"RequestItems": request}))
            request = result.response.get("UnprocessedItems") or {}
            if request:
                attempt += 1
                yield from pause(min(1000, 25 * 2**attempt))
