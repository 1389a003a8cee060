"""Namespaces: list them, count what one holds, and delete one.

Every item of a namespace (entities, limit configs, bucket shards, usage snapshots, audit
events) carries GSI4 keys: partition key the bare namespace. The index is KEYS_ONLY, and a
KEYS_ONLY entry also holds the table's key, so one index query lists what to delete. The
schema version record carries no GSI4 keys: it belongs to no namespace and is never touched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from zae_limiter import keys
from zae_limiter.errors import ValidationError
from zae_limiter.flows import Call, Flow, one, paginate, pause
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.records.audit import Auditor
from zae_limiter.flows.records.entities import batch_delete

#: What a namespace deletion may write per second unless told otherwise.
DEFAULT_DELETE_WCU = 200
#: Estimated WCU to delete one item: the table, plus each index that holds its keys.
_DELETE_WCU = {"bucket": 4, "entity": 3}
_OTHER_DELETE_WCU = 2
_BATCH = 25

Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class NamespaceInfo:
    """What a namespace holds, counted by kind; `buckets` counts (entity, resource) pairs."""

    namespace: str
    counts: dict[str, int] = field(default_factory=dict)
    buckets: int = 0

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "items": self.total,
            "entities": self.counts.get("entity", 0),
            "limit_configs": self.counts.get("config", 0),
            "buckets": self.buckets,
            "bucket_shards": self.counts.get("bucket", 0),
            "usage_snapshots": self.counts.get("usage", 0),
            "audit_events": self.counts.get("audit", 0),
        }


def _entries(state: RepoState, ns: str) -> Flow[list[dict[str, Any]]]:
    return (yield from paginate(Call("query", keys.namespace_query_keys(state.table, ns))))


def list_namespaces(state: RepoState) -> Flow[list[str]]:
    entries = yield from paginate(Call("scan", keys.namespace_scan(state.table)))
    found = {keys.index_namespace(e) for e in entries}
    return sorted(found - {"", keys.TABLE_NAMESPACE})


def namespace_info(state: RepoState, ns: str | None) -> Flow[NamespaceInfo]:
    ns = keys.validate_namespace(ns or state.namespace)
    counts: dict[str, int] = {}
    buckets: set[tuple[str, str]] = set()
    for entry in (yield from _entries(state, ns)):
        kind = keys.index_kind(entry)
        counts[kind] = counts.get(kind, 0) + 1
        if kind == "bucket":
            _ns, entity_id, resource, _shard = keys.parse_bucket_pk(keys.pk_of(entry))
            buckets.add((entity_id, resource))
    return NamespaceInfo(ns, counts, len(buckets))


def list_limit_levels(state: RepoState) -> Flow[list[tuple[str | None, str | None]]]:
    levels = [keys.config_level(e) for e in (yield from _entries(state, state.namespace))]
    return sorted(
        (level for level in levels if level is not None),
        key=lambda lv: (lv[0] or "", lv[1] or ""),
    )


def delete_namespace(
    state: RepoState,
    ns: str,
    wcu_per_second: int,
    on_progress: Progress | None,
    auditor: Auditor,
) -> Flow[int]:
    """Delete every item of `ns` in batches of 25, pausing so as to stay within
    `wcu_per_second`. Items already gone are not counted, so a second run resumes."""
    ns = keys.validate_namespace(ns)
    if (
        isinstance(wcu_per_second, bool)
        or not isinstance(wcu_per_second, int)
        or wcu_per_second < 1
    ):
        raise ValidationError(
            f"wcu_per_second must be a positive whole number, got {wcu_per_second!r}"
        )
    entries = yield from _entries(state, ns)
    if not entries:
        return 0
    total = len(entries)
    before = {"namespace": ns, "items": total}
    event = auditor.put(state, "delete_namespace", namespace=keys.TABLE_NAMESPACE, before=before)
    yield from one(Call("transact_write_items", keys.transact([event])))
    deleted = 0
    while entries:
        for start in range(0, len(entries), _BATCH):
            chunk = entries[start : start + _BATCH]
            yield from batch_delete(state, [keys.item_key(e) for e in chunk])
            deleted += len(chunk)
            if on_progress is not None:
                on_progress(min(deleted, total), total)
            cost = sum(_DELETE_WCU.get(keys.index_kind(e), _OTHER_DELETE_WCU) for e in chunk)
            yield from pause(cost * 1000 // wcu_per_second)
        # The index is eventually consistent: ask again until it shows nothing left.
        entries = yield from _entries(state, ns)
        total = max(total, deleted + len(entries))
    if ns == state.namespace:
        state.entities.clear()
        state.config_cache.clear()
        state.exhausted.clear()
    return deleted
