"""The reads: GetItem, Query, Scan, BatchGetItem.

Pagination follows DynamoDB: `Limit` counts items read (before the filter), and a page
that stops because of the limit returns `LastEvaluatedKey` (the table key, plus the index
key on an index) even when nothing follows it. The 1 MB page size is not modelled: the
library's pages are far smaller.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterator
from typing import Any

from zae_limiter.sim.engine import expressions as ex
from zae_limiter.sim.engine import values as v
from zae_limiter.sim.engine.errors import Validation, invalid
from zae_limiter.sim.engine.ops import bind
from zae_limiter.sim.engine.table import Index, Partition, Table, Tables

Item = dict[str, v.Value]
#: DynamoDB Local's words (AWS adds the attribute's name); same code.
MISSED = "Query condition missed key schema element"


def read_units(size: int, consistent: bool) -> float:
    units = max(1, math.ceil(size / 4096))
    return float(units) if consistent else units / 2


def _projection(params: dict[str, Any]) -> ex.Compiled | None:
    text = params.get("ProjectionExpression")
    if "AttributesToGet" in params:
        raise Validation("The engine does not support the legacy parameter AttributesToGet")
    return None if text is None else ex.compiled("projection", text)


def _shape(item: Item, proj: ex.Compiled | None, names: ex.Names) -> Item:
    if proj is None:
        return v.copy_item(item)
    return ex.project(item, proj.fn, names)


def get_item(engine: Tables, params: dict[str, Any]) -> tuple[dict[str, Any], float]:
    table = engine.table(params.get("TableName"))
    proj = _projection(params)
    names, _ = bind(params, proj)
    key, _key_item = table.key_of(params.get("Key"))
    item = table.items.get(key)
    consistent = bool(params.get("ConsistentRead"))
    response: dict[str, Any] = {}
    if item is not None:
        response["Item"] = _shape(item, proj, names)
    # The table keeps each item's billed size as it is written: no need to measure it.
    size = 0 if item is None else table.sizes[key]
    return response, read_units(size, consistent)


def batch_get_item(engine: Tables, params: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    requests = params.get("RequestItems") or {}
    total = sum(len(r.get("Keys") or []) for r in requests.values())
    if total > 100:
        raise Validation("Too many items requested for the BatchGetItem call")
    if total == 0:
        raise Validation(
            "1 validation error detected: Value at 'requestItems' failed to "
            "satisfy constraint: Member must have length greater than or equal to 1"
        )
    responses: dict[str, list[Item]] = {}
    units: list[Any] = []
    for name, request in requests.items():
        got, used = _batch_get_one(engine, name, request)
        responses[name] = got
        units.append((name, used))
    return {"Responses": responses, "UnprocessedKeys": {}}, units


def _batch_get_one(engine: Tables, name: str, request: dict[str, Any]) -> tuple[list[Item], float]:
    table = engine.table(name)
    proj = _projection(request)
    names, _ = bind(request, proj)
    seen: set[Any] = set()
    consistent = bool(request.get("ConsistentRead"))
    found: list[Item] = []
    used = 0.0
    for raw in request.get("Keys") or []:
        key, _ = table.key_of(raw)
        if key in seen:
            raise Validation("Provided list of item keys contains duplicates")
        seen.add(key)
        item = table.items.get(key)
        used += read_units(0 if item is None else table.sizes[key], consistent)
        if item is not None:
            found.append(_shape(item, proj, names))
    return found, used


# ---------------------------------------------------------------- query and scan
def query(engine: Tables, params: dict[str, Any]) -> tuple[dict[str, Any], float]:
    table = engine.table(params.get("TableName"))
    index = _index(table, params)
    key_text = params.get("KeyConditionExpression")
    if key_text is None:
        raise Validation(
            "Either the KeyConditions or KeyConditionExpression parameter must "
            "be specified in the request."
        )
    key_cond = ex.compiled("key", key_text)
    filt = _filter(params)
    proj = _projection(params)
    names, values = bind(params, key_cond, filt, proj)
    hash_name = table.hash_key if index is None else index.hash_key
    range_name = table.range_key if index is None else index.range_key
    hash_value, range_test = _key_condition(key_cond.tree, names, values, hash_name, range_name)
    part = table.partition(index, v.sort_key(hash_value))
    forward = params.get("ScanIndexForward", True) is not False
    start = _start_position(table, index, params.get("ExclusiveStartKey"))
    if (
        start is not None
        and range_test is not None
        and range_name is not None
        and not (range_test(params["ExclusiveStartKey"].get(range_name)))
    ):
        raise Validation("The provided starting key does not match the range key predicate")
    if index is not None and filt is not None:
        _projects(table, index, filt, names)
    entries = _walk(part, start, forward)
    if range_test is not None and range_name is not None:
        entries = (e for e in entries if range_test(table.items[e[1]].get(range_name)))
    return _page(table, index, entries, params, filt, proj, names, values)


def scan(engine: Tables, params: dict[str, Any]) -> tuple[dict[str, Any], float]:
    table = engine.table(params.get("TableName"))
    index = _index(table, params)
    filt = _filter(params)
    proj = _projection(params)
    names, values = bind(params, filt, proj)
    segment, total = params.get("Segment"), params.get("TotalSegments")
    if (segment is None) != (total is None):
        raise Validation(
            "The TotalSegments parameter is required but was not present in the "
            "request when Segment parameter is present"
        )
    # One deterministic order: by partition key, then sort key (DynamoDB's is by hash).
    parts = table.partitions if index is None else index.partitions
    start = _start_position(table, index, params.get("ExclusiveStartKey"))
    entries = _scan_entries(parts, start, segment, total)
    return _page(table, index, entries, params, filt, proj, names, values)


def _scan_entries(
    parts: dict[Any, Partition], start: tuple[Any, Any] | None, segment: Any, total: Any
) -> Iterator[tuple[Any, Any]]:
    for hash_value in sorted(parts):
        if total is not None and _segment_of(hash_value, int(total)) != int(segment):
            continue
        if start is not None and hash_value < start[0]:
            continue
        part = parts[hash_value]
        skip = part.after(start[1]) if start is not None and hash_value == start[0] else 0
        for position in part.ordered()[skip:]:
            yield (hash_value, position), part.entries[position]


def _segment_of(hash_value: Any, total: int) -> int:
    return zlib.crc32(repr(hash_value).encode()) % total


def _projects(table: Table, index: Index, filt: ex.Compiled, names: ex.Names) -> None:
    """A filter on an index may only read what the index projects."""
    kind = index.projection.get("ProjectionType", "ALL")
    if kind == "ALL":
        return
    have = {
        *table.key_names,
        index.hash_key,
        index.range_key,
        *index.projection.get("NonKeyAttributes", []),
    }
    wanted: set[str] = set()
    _top_names(filt.tree, names, wanted)
    missing = sorted(wanted - have)
    if missing:
        raise invalid(
            f"Secondary index {index.name} does not project one or more filter "
            f"attributes: [{', '.join(missing)}]"
        )


def _top_names(node: Any, names: ex.Names, found: set[str]) -> None:
    if isinstance(node, list):
        for child in node:
            _top_names(child, names, found)
    elif isinstance(node, tuple) and node:
        if node[0] == "path":
            found.add(ex.resolve(node[1][0], names))
        else:
            for child in node[1:]:
                _top_names(child, names, found)


def _index(table: Table, params: dict[str, Any]) -> Index | None:
    name = params.get("IndexName")
    if name is None:
        return None
    index = table.indexes.get(name)
    if index is None:
        raise Validation(f"The table does not have the specified index: {name}")
    if params.get("ConsistentRead"):
        raise Validation("Consistent reads are not supported on global secondary indexes")
    return index


def _filter(params: dict[str, Any]) -> ex.Compiled | None:
    text = params.get("FilterExpression")
    return None if text is None else ex.compiled("filter", text)


def _walk(
    part: Partition | None, start: tuple[Any, Any] | None, forward: bool
) -> Iterator[tuple[Any, Any]]:
    if part is None:
        return
    order = part.ordered()
    if forward:
        begin = 0 if start is None else part.after(start[1])
        for position in order[begin:]:
            yield position, part.entries[position]
    else:
        end = len(order) if start is None else _before(order, start[1])
        for position in reversed(order[:end]):
            yield position, part.entries[position]


def _before(order: list[Any], position: Any) -> int:
    import bisect

    return bisect.bisect_left(order, position)


def _start_position(table: Table, index: Index | None, start: Any) -> tuple[Any, Any] | None:
    """(partition, position) just before which a page resumes."""
    if start is None:
        return None
    wanted = len(table.key_names) + (
        0
        if index is None
        else len({index.hash_key, index.range_key} - {None} - set(table.key_names))
    )
    if not isinstance(start, dict) or len(start) != wanted:
        raise Validation("Exclusive Start Key must have same size as table's key schema")
    try:
        table_key, _ = table.key_of({k: start[k] for k in table.key_names})
    except KeyError:
        raise invalid(
            "The provided starting key is invalid: The provided key element does "
            "not match the schema"
        ) from None
    if index is None:
        return table_key
    entry = index.entry({k: v.stored(val) for k, val in start.items()}, table_key)
    if entry is None:
        raise invalid("The provided starting key is invalid")
    return entry


def _page(
    table: Table,
    index: Index | None,
    entries: Iterator[tuple[Any, Any]],
    params: dict[str, Any],
    filt: ex.Compiled | None,
    proj: ex.Compiled | None,
    names: ex.Names,
    values: ex.Values,
) -> tuple[dict[str, Any], float]:
    limit = params.get("Limit")
    if limit is not None and limit < 1:
        raise Validation(
            "1 validation error detected: Value at 'limit' failed to satisfy "
            "constraint: Member must have value greater than or equal to 1"
        )
    count_only = params.get("Select") == "COUNT"
    items: list[Item] = []
    scanned = matched = size = 0
    last: Item | None = None
    for _position, key in entries:
        item = table.items[key]
        seen = item if index is None else index.projected(item, table.key_names)
        scanned += 1
        size += table.sizes[key] if index is None else v.item_bytes(seen)
        if filt is None or filt.fn(seen, names, values):
            matched += 1
            if not count_only:
                items.append(_shape(seen, proj, names))
        if limit is not None and scanned >= limit:
            last = _last_key(table, index, item)
            break
    response: dict[str, Any] = {} if count_only else {"Items": items}
    response["Count"] = matched
    response["ScannedCount"] = scanned
    if last is not None:
        response["LastEvaluatedKey"] = last
    return response, read_units(size, bool(params.get("ConsistentRead")))


def _last_key(table: Table, index: Index | None, item: Item) -> Item:
    names: tuple[str, ...] = table.key_names
    if index is not None:
        names = names + tuple(k for k in (index.hash_key, index.range_key) if k)
    return {k: v.copy_value(item[k]) for k in dict.fromkeys(names)}


def _key_condition(
    tree: Any, names: ex.Names, values: ex.Values, hash_name: str, range_name: str | None
) -> tuple[v.Value, Callable[[v.Value | None], bool] | None]:
    """The partition key's value and a test of the sort key, from the key condition."""
    if tree[0] in ("or", "not"):
        raise Validation(f"Invalid operator used in KeyConditionExpression: {tree[0].upper()}")
    parts = [tree[1], tree[2]] if tree[0] == "and" else [tree]
    hash_value: v.Value | None = None
    range_test = None
    for node in parts:
        attr = _key_attr(node, names)
        if attr == hash_name and node[0] == "cmp" and node[1] == "=" and hash_value is None:
            hash_value = _literal(node[3], values)
        elif attr == range_name and range_name is not None and range_test is None:
            range_test = _range_test(node, values)
        elif attr in (hash_name, range_name):
            raise Validation("Query key condition not supported")
        else:
            raise Validation(MISSED)
    if hash_value is None:
        raise Validation(MISSED)
    return hash_value, range_test


def _key_attr(node: Any, names: ex.Names) -> str | None:
    if node[0] in ("cmp", "between"):
        target = node[2] if node[0] == "cmp" else node[1]
    elif node[0] == "call" and node[1] == "begins_with" and len(node[2]) == 2:
        target = node[2][0]
    else:
        raise Validation("Query key condition not supported")
    if target[0] != "path" or len(target[1]) != 1:
        raise Validation("Query key condition not supported")
    return ex.resolve(target[1][0], names)


def _literal(node: Any, values: ex.Values) -> v.Value:
    if node[0] != "value":
        raise Validation("Query key condition not supported")
    return values[node[1]]


def _range_test(node: Any, values: ex.Values) -> Callable[[v.Value | None], bool]:
    if node[0] == "call":
        prefix = _literal(node[2][1], values)
        return lambda value: value is not None and _starts(value, prefix)
    if node[0] == "cmp" and node[1] == "<>":
        raise Validation("Invalid operator used in KeyConditionExpression: <>")
    # The sort key's test is the condition's own comparison on a one-attribute item, so
    # its rules (types, BETWEEN's bounds) are the condition evaluator's.
    slot = ("path", ("#k",))
    tree = (
        ("cmp", node[1], slot, node[3]) if node[0] == "cmp" else ("between", slot, node[2], node[3])
    )
    probe = ex.predicate(tree, "KeyConditionExpression")
    names = {"#k": "k"}
    return lambda value: value is not None and probe({"k": value}, names, values)


def _starts(value: v.Value, prefix: v.Value) -> bool:
    (ka, ra), (kb, rb) = next(iter(value.items())), next(iter(prefix.items()))
    return ka == kb and bool(ra[: len(rb)] == rb)
