"""The writes: PutItem, UpdateItem, DeleteItem, a transaction's ConditionCheck.

Each is planned first (`plan_*`: key, old item, condition, new item) without touching the
table, then committed; a transaction plans all its parts before committing any.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zae_limiter.sim.engine import (
    checks,
    updates,  # noqa: F401  (registers the update compiler)
)
from zae_limiter.sim.engine import expressions as ex
from zae_limiter.sim.engine import values as v
from zae_limiter.sim.engine.errors import ConditionFailed, Validation
from zae_limiter.sim.engine.table import Table, TableKey, Tables

Item = dict[str, v.Value]
_EMPTY: Item = {}


@dataclass(slots=True)
class Planned:
    """A write ready to commit, or refused by its condition (`ok` False)."""

    table: Table
    key: TableKey
    key_item: Item
    old: Item | None
    new: Item | None
    ok: bool = True
    write: bool = True
    targets: list[tuple[Any, ...]] = field(default_factory=list)
    names: ex.Names = field(default_factory=dict)
    #: Billed size of `new` (0 when deleting).
    size: int = 0

    @property
    def old_size(self) -> int:
        return 0 if self.old is None else self.table.sizes[self.key]


def bind(params: dict[str, Any], *parts: ex.Compiled | None) -> tuple[ex.Names, ex.Values]:
    """The request's placeholders, checked against those its expressions use: every one
    used must be given, and every one given must be used, as DynamoDB requires."""
    names = params.get("ExpressionAttributeNames")
    values = params.get("ExpressionAttributeValues")
    used = [p for p in parts if p is not None]
    if not used:
        if names is not None:
            raise Validation(
                "ExpressionAttributeNames can only be specified when using expressions"
            )
        if values is not None:
            raise Validation(
                "ExpressionAttributeValues can only be specified when using expressions"
            )
        return {}, {}
    if values is not None and not values:
        raise Validation("ExpressionAttributeValues must not be empty")
    if names is not None and not names:
        raise Validation("ExpressionAttributeNames must not be empty")
    want_names, want_values = ex.placeholders_of(used)
    given_names, given_values = names or {}, values or {}
    if given_names.keys() != want_names or given_values.keys() != want_values:
        _undefined(used, given_names, given_values)
        _unused(given_names, want_names, "ExpressionAttributeNames")
        _unused(given_values, want_values, "ExpressionAttributeValues")
    # The update's value types are checked before the condition's, as DynamoDB Local does.
    for part in sorted(used, key=lambda p: p.kind != "UpdateExpression"):
        if part.checks:
            checks.run(part.checks, given_values, last=part.kind == "UpdateExpression")
    return given_names, given_values


def _undefined(used: list[ex.Compiled], names: ex.Names, values: ex.Values) -> None:
    for part in used:
        for name in sorted(part.names - names.keys()):
            raise Validation(
                f"Invalid {part.kind}: An expression attribute name used in the document "
                f"path is not defined; attribute name: {name}"
            )
        for value in sorted(part.values - values.keys()):
            raise Validation(
                f"Invalid {part.kind}: An expression attribute value used in expression is "
                f"not defined; attribute value: {value}"
            )


def _unused(given: dict[str, Any], wanted: frozenset[str], field_name: str) -> None:
    extra = sorted(given.keys() - wanted)
    if not extra:
        return
    raise Validation(
        f"Value provided in {field_name} unused in expressions: keys: {{{', '.join(extra)}}}"
    )


def validate(params: dict[str, Any]) -> None:
    """Compile a write's expressions and check its placeholders and value types, as
    DynamoDB does for every part of a transaction before it reads any item."""
    text = params.get("UpdateExpression")
    update = None if text is None else ex.compiled("update", text)
    bind(params, condition_of(params), update)


def condition_of(params: dict[str, Any]) -> ex.Compiled | None:
    _no_legacy(params)
    text = params.get("ConditionExpression")
    return None if text is None else ex.compiled("condition", text)


def _no_legacy(params: dict[str, Any]) -> None:
    for legacy in ("Expected", "AttributeUpdates", "ConditionalOperator"):
        if legacy in params:
            raise Validation(f"The engine does not support the legacy parameter {legacy}")


def _check(cond: ex.Compiled | None, old: Item | None, names: ex.Names, values: ex.Values) -> bool:
    return cond is None or bool(cond.fn(old if old is not None else _EMPTY, names, values))


def plan_put(engine: Tables, params: dict[str, Any]) -> Planned:
    table = engine.table(params.get("TableName"))
    cond = condition_of(params)
    names, values = bind(params, cond)
    raw = params.get("Item")
    if not isinstance(raw, dict):
        raise Validation(
            "1 validation error detected: Value null at 'item' failed to satisfy "
            "constraint: Member must not be null"
        )
    item = {name: v.stored(value) for name, value in raw.items()}
    key, size = table.check_item(item)
    old = table.items.get(key)
    ok = _check(cond, old, names, values)
    return Planned(table, key, table.item_key(item), old, item, ok, size=size)


def plan_delete(engine: Tables, params: dict[str, Any]) -> Planned:
    table = engine.table(params.get("TableName"))
    cond = condition_of(params)
    names, values = bind(params, cond)
    key, key_item = table.key_of(params.get("Key"))
    old = table.items.get(key)
    ok = _check(cond, old, names, values)
    return Planned(table, key, key_item, old, None, ok, write=old is not None)


def plan_check(engine: Tables, params: dict[str, Any]) -> Planned:
    table = engine.table(params.get("TableName"))
    cond = condition_of(params)
    if cond is None:
        raise Validation("ConditionExpression must be specified for a ConditionCheck")
    names, values = bind(params, cond)
    key, key_item = table.key_of(params.get("Key"))
    old = table.items.get(key)
    ok = _check(cond, old, names, values)
    planned = Planned(table, key, key_item, old, old, ok, write=False)
    planned.size = planned.old_size
    return planned


def plan_update(engine: Tables, params: dict[str, Any]) -> Planned:
    table = engine.table(params.get("TableName"))
    cond = condition_of(params)
    text = params.get("UpdateExpression")
    update = None if text is None else ex.compiled("update", text)
    names, values = bind(params, cond, update)
    key, key_item = table.key_of(params.get("Key"))
    old = table.items.get(key)
    if not _check(cond, old, names, values):
        return Planned(table, key, key_item, old, None, ok=False)
    base = old if old is not None else key_item
    size = table.sizes[key] if old is not None else v.item_bytes(key_item)
    if update is None:
        return Planned(table, key, key_item, old, dict(base), size=size)
    new, targets, known = update.fn.apply(base, names, values, table.key_names, size)
    if known is not None and old is not None and table.index_keys_kept(old, new):
        size = table.check_size(known)  # keys and index keys untouched: only the size
    else:
        _, size = table.check_item(new, known)
    return Planned(table, key, key_item, old, new, targets=targets, names=names, size=size)


def failed(planned: Planned, params: dict[str, Any]) -> ConditionFailed:
    want = params.get("ReturnValuesOnConditionCheckFailure", "NONE")
    if want == "ALL_OLD" and planned.old is not None:
        return ConditionFailed(v.copy_item(planned.old))
    return ConditionFailed()


_RETURN_VALUES = {
    "put_item": ("NONE", "ALL_OLD"),
    "delete_item": ("NONE", "ALL_OLD"),
    "update_item": ("NONE", "ALL_OLD", "ALL_NEW", "UPDATED_OLD", "UPDATED_NEW"),
}


def return_values(op: str, params: dict[str, Any]) -> str:
    want = params.get("ReturnValues", "NONE")
    if want not in _RETURN_VALUES[op]:
        raise Validation("Return values set to invalid value")
    failure = params.get("ReturnValuesOnConditionCheckFailure", "NONE")
    if failure not in ("NONE", "ALL_OLD"):
        raise Validation("Return values on condition check failure set to invalid value")
    return str(want)


def attributes(planned: Planned, want: str) -> Item | None:
    """What ReturnValues asks back, as a copy; None when DynamoDB returns no Attributes."""
    if want == "NONE":
        return None
    if want == "ALL_OLD":
        found = planned.old
    elif want == "ALL_NEW":
        found = planned.new
    else:
        source = planned.old if want == "UPDATED_OLD" else planned.new
        found = ex.project(source, planned.targets, planned.names) if source else None
        return found or None
    return v.copy_item(found) if found else None
