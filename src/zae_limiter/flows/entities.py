"""Entities: create, read, list, children, delete."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from zae_limiter import keys
from zae_limiter.errors import EntityExistsError, EntityNotFoundError, ValidationError
from zae_limiter.flows import Call, Flow, one, paginate, pause
from zae_limiter.flows.config import batch_get
from zae_limiter.flows.context import RepoState
from zae_limiter.models import Entity


def get_entity(state: RepoState, entity_id: str) -> Flow[Entity | None]:
    keys.validate_id("entity_id", entity_id)
    result = yield from one(
        Call(
            "get_item",
            {
                "TableName": state.table,
                "Key": keys.entity_key(state.namespace, entity_id),
                "ConsistentRead": True,
            },
        )
    )
    return keys.decode_entity(result.item) if result.item else None


def create_entity(
    state: RepoState,
    entity_id: str,
    name: str | None,
    parent_id: str | None,
    cascade: bool,
    now_ms: int,
) -> Flow[Entity]:
    keys.validate_id("entity_id", entity_id)
    if name is not None and (not isinstance(name, str) or len(name) > 1024):
        raise ValidationError("name must be a string of at most 1024 characters")
    if cascade and parent_id is None:
        raise ValidationError(f"entity {entity_id!r}: cascade=True needs a parent_id")
    if parent_id is not None:
        keys.validate_id("parent_id", parent_id)
        if parent_id == entity_id:
            raise ValidationError(f"entity {entity_id!r} cannot be its own parent")
        parent = yield from get_entity(state, parent_id)
        if parent is None:
            raise EntityNotFoundError(parent_id)
        yield from _refuse_cycle(state, entity_id, parent)
    entity = Entity(entity_id, name, parent_id, cascade, now_ms)
    result = yield from one(
        Call("put_item", keys.put_new(state.table, keys.encode_entity(state.namespace, entity)))
    )
    if not result.ok:
        raise EntityExistsError(entity_id)
    state.entities.pop(entity_id, None)
    return entity


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
    return sorted(keys.parse_entity_pk(i[keys.PK]["S"])[1] for i in items)


def get_entities(state: RepoState, entity_ids: Sequence[str]) -> Flow[list[Entity]]:
    """The entities that exist among `entity_ids`, in that order (one BatchGetItem per 100)."""
    for entity_id in entity_ids:
        keys.validate_id("entity_id", entity_id)
    wanted = [keys.entity_key(state.namespace, e) for e in entity_ids]
    found = yield from batch_get(state, wanted)
    items = (found.get((k[keys.PK]["S"], k[keys.SK]["S"])) for k in wanted)
    return [keys.decode_entity(item) for item in items if item is not None]


def entity_bucket_keys(
    state: RepoState, entity_id: str, resource: str | None = None
) -> Flow[list[dict[str, Any]]]:
    items = yield from paginate(
        Call(
            "query", keys.bucket_query_for_entity(state.table, state.namespace, entity_id, resource)
        )
    )
    return [{keys.PK: i[keys.PK], keys.SK: i[keys.SK]} for i in items]


def delete_entity(state: RepoState, entity_id: str) -> Flow[int]:
    """Delete the entity's record, configs, usage and bucket shards. Refuses with children."""
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
    doomed = [{keys.PK: i[keys.PK], keys.SK: i[keys.SK]} for i in own]
    doomed += yield from entity_bucket_keys(state, entity_id)
    yield from batch_delete(state, doomed)
    state.entities.pop(entity_id, None)
    state.config_cache.clear()
    state.exhausted = {k: v for k, v in state.exhausted.items() if k[0] != entity_id}
    return len(doomed)


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
