"""The Engine: tables, one lock, the stream, the capacity report, the dispatch by name."""

from __future__ import annotations

import bisect
import json
import threading
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ParamValidationError

from zae_limiter.sim.engine import ops, reads
from zae_limiter.sim.engine import values as v
from zae_limiter.sim.engine.capacity import Tally, consumed, write_units
from zae_limiter.sim.engine.errors import (
    CONDITION_FAILED_MESSAGE,
    RESPONSE_METADATA,
    EngineError,
    IdempotentMismatch,
    InUse,
    TransactionCanceled,
    Validation,
    client_error,
    invalid,
    table_not_found,
)
from zae_limiter.sim.engine.stream import Change, StreamRecord, record
from zae_limiter.sim.engine.table import Table, TableKey

Item = dict[str, v.Value]
Handler = Callable[["Engine", dict[str, Any]], dict[str, Any]]
#: DynamoDB keeps a transaction's ClientRequestToken this long.
TOKEN_TTL_MS = 10 * 60 * 1000


class Engine:
    """An in-memory DynamoDB. `clock` (epoch ms) stamps stream records and table creation
    times; nothing else reads time, and nothing is random."""

    def __init__(self, clock: Callable[[], int], region: str = "sim") -> None:
        self.clock = clock
        self.arn_prefix = f"arn:aws:dynamodb:{region}:000000000000"
        self.tables: dict[str, Table] = {}
        #: Per table, every change as a small tuple (see `stream.Change`); the records'
        #: dicts are built when asked for, once each (a write pays only for the tuple).
        self.streams: dict[str, list[Change]] = {}
        self._built: dict[str, list[StreamRecord]] = {}
        self._sequence = 0
        self._tokens: dict[str, tuple[str, int, dict[str, Any]]] = {}
        # The sync runner makes a round's calls from a thread pool: one at a time here.
        self._lock = threading.RLock()

    # ------------------------------------------------------------ the API
    def call(self, op: str, params: dict[str, Any]) -> dict[str, Any]:
        """One DynamoDB call by botocore's snake_case name; raises ClientError as botocore."""
        handler = _HANDLERS.get(op)
        if handler is None:
            raise client_error(op, "UnknownOperationException", f"engine has no {op}")
        with self._lock:
            try:
                response = handler(self, params)
            except EngineError as error:
                raise error.to_client_error(op) from None
            except (TypeError, AttributeError) as error:
                # A value of the wrong Python type (a number given as an int) that botocore
                # would have refused before sending; anything else is the engine's bug and
                # must not pass for a refused request.
                found = v.malformed(params)
                if found is None:
                    raise
                raise ParamValidationError(report=f"{op}: {found}") from error
        response["ResponseMetadata"] = {**RESPONSE_METADATA, "HTTPHeaders": {}}
        return response

    def items(self, table: str) -> list[Item]:
        """Every item (copies), in key order."""
        with self._lock:
            found = self._named(table, "scan")
            return [v.copy_item(found.items[k]) for k in sorted(found.items, key=_order)]

    def get(self, table: str, key: Item) -> Item | None:
        """The stored item itself, not a copy: cheap for checkers; never change it."""
        with self._lock:
            found = self._named(table, "get_item")
            try:
                pykey, _ = found.key_of(key)
            except EngineError as error:
                raise error.to_client_error("get_item") from None
            return found.items.get(pykey)

    def records(self, table: str) -> list[StreamRecord]:
        """Every change recorded so far, in order (a new list of the shared records)."""
        with self._lock:
            found = self._named(table, "get_records")
            changes = self.streams.get(table, [])
            built = self._built.setdefault(table, [])
            arn = self.stream_arn(found)
            built.extend(
                record(change, found.stream_view or "", arn) for change in changes[len(built) :]
            )
            return list(built)

    def forget_records(self, table: str, through: str | None = None) -> int:
        """Drop the records up to and including sequence number `through` (all when
        None), and the old images only they kept alive: a long simulation reads the
        stream as it goes and need not hold it whole. Returns how many were dropped."""
        with self._lock:
            self._named(table, "get_records")
            changes = self.streams.get(table, [])
            # Sequence numbers rise along the list: count the ones at or before `through`.
            cut = (
                len(changes)
                if through is None
                else bisect.bisect_right([change[0] for change in changes], int(through))
            )
            del changes[:cut]
            built = self._built.get(table, [])
            del built[: min(cut, len(built))]
            return cut

    def apply_image(self, table: str, key: Item, item: Item | None) -> None:
        """Replace or delete an item unconditionally (a replicator's write); recorded in
        the stream like any change."""
        with self._lock:
            found = self._named(table, "put_item")
            try:
                pykey, key_item = found.key_of(key)
                new = None if item is None else {k: v.stored(val) for k, val in item.items()}
                size = 0
                if new is not None:
                    checked, size = found.check_item(new)
                    if checked != pykey:
                        raise ValueError("the item's key differs from the key given")
            except EngineError as error:
                raise error.to_client_error("put_item") from None
            self.commit(found, pykey, key_item, new, size)

    def _named(self, table: str, op: str) -> Table:
        """The table, or the ClientError a request to it would raise."""
        try:
            return self.table(table)
        except EngineError as error:
            raise error.to_client_error(op) from None

    # ------------------------------------------------------------ shared by operations
    def table(self, name: Any) -> Table:
        found = self.tables.get(name) if isinstance(name, str) else None
        if found is None:
            raise table_not_found(str(name))
        return found

    def commit(
        self, table: Table, key: TableKey, key_item: Item, new: Item | None, size: int = 0
    ) -> Item | None:
        old_size = table.sizes.get(key, 0)
        old = table.write(key, new, size)
        if old == new or table.stream_view is None:
            return old  # DynamoDB writes no stream record for a write that changes nothing
        self._sequence += 1
        # Stored items are never changed in place, so the images need no copies.
        change = (
            self._sequence,
            self.clock(),
            key_item,
            old,
            new,
            size if new is not None else old_size,
        )
        self.streams.setdefault(table.name, []).append(change)
        return old

    def stream_arn(self, table: Table) -> str:
        return f"{self.arn_prefix}:table/{table.name}/stream/{table.created_ms:013d}"

    def token_response(self, token: str, fingerprint: str) -> dict[str, Any] | None:
        now = self.clock()
        for stale in [t for t, (_, at, _) in self._tokens.items() if now - at >= TOKEN_TTL_MS]:
            del self._tokens[stale]
        seen = self._tokens.get(token)
        if seen is None:
            return None
        if seen[0] != fingerprint:
            raise IdempotentMismatch(
                "The request uses the same client token as a previous, but non-identical request."
            )
        return dict(seen[2])

    def remember_token(self, token: str, fingerprint: str, response: dict[str, Any]) -> None:
        self._tokens[token] = (fingerprint, self.clock(), dict(response))


def _order(key: TableKey) -> tuple[Any, ...]:
    return (key[0], "" if key[1] is None else key[1])


# ---------------------------------------------------------------- single-item writes
def _single_write(op: str, plan: Callable[[Engine, dict[str, Any]], ops.Planned]) -> Handler:
    def handle(engine: Engine, params: dict[str, Any]) -> dict[str, Any]:
        want = ops.return_values(op, params)
        planned = plan(engine, params)
        if not planned.ok:
            raise ops.failed(planned, params)
        response: dict[str, Any] = {}
        found = ops.attributes(planned, want)
        if found is not None:
            response["Attributes"] = found
        units, indexes = write_units(planned)
        if planned.write:
            engine.commit(planned.table, planned.key, planned.key_item, planned.new, planned.size)
        cap = consumed(params, planned.table.name, units, indexes)
        if cap is not None:
            response["ConsumedCapacity"] = cap
        return response

    return handle


def _reads(fn: Callable[[Engine, dict[str, Any]], tuple[dict[str, Any], float]]) -> Handler:
    def handle(engine: Engine, params: dict[str, Any]) -> dict[str, Any]:
        response, units = fn(engine, params)
        index = params.get("IndexName")
        table = str(params.get("TableName"))
        # A read of an index is charged to the index, the table's own share being 0.
        cap = (
            consumed(params, table, 0.0, {index: units})
            if index
            else consumed(params, table, units)
        )
        if cap is not None:
            response["ConsumedCapacity"] = cap
        return response

    return handle


def _batch_get(engine: Engine, params: dict[str, Any]) -> dict[str, Any]:
    response, used = reads.batch_get_item(engine, params)
    tally = Tally()
    for name, units in used:
        tally.add(name, units, {})
    caps = tally.report(params)
    if caps is not None:
        response["ConsumedCapacity"] = caps
    return response


def _batch_write(engine: Engine, params: dict[str, Any]) -> dict[str, Any]:
    requests = params.get("RequestItems") or {}
    planned: list[ops.Planned] = []
    for name, writes in requests.items():
        seen: set[TableKey] = set()
        for write in writes:
            if "PutRequest" in write:
                one = ops.plan_put(engine, {"TableName": name, **write["PutRequest"]})
            elif "DeleteRequest" in write:
                one = ops.plan_delete(engine, {"TableName": name, **write["DeleteRequest"]})
            else:
                raise Validation("Supplied AttributeValue has no PutRequest or DeleteRequest")
            if one.key in seen:
                raise Validation("Provided list of item keys contains duplicates")
            seen.add(one.key)
            planned.append(one)
    if not 0 < len(planned) <= 25:
        raise Validation(
            "Too many items requested for the BatchWriteItem call"
            if planned
            else "The batch write request list is empty"
        )
    tally = Tally()
    for one in planned:
        tally.add(one.table.name, *write_units(one))
        if one.write:
            engine.commit(one.table, one.key, one.key_item, one.new, one.size)
    response: dict[str, Any] = {"UnprocessedItems": {}}
    caps = tally.report(params)
    if caps is not None:
        response["ConsumedCapacity"] = caps
    return response


# ---------------------------------------------------------------- transactions
_TX_PLANS = {
    "Put": ops.plan_put,
    "Update": ops.plan_update,
    "Delete": ops.plan_delete,
    "ConditionCheck": ops.plan_check,
}


def _transact(engine: Engine, params: dict[str, Any]) -> dict[str, Any]:
    parts = params.get("TransactItems") or []
    if not 0 < len(parts) <= 100:
        raise Validation(
            "1 validation error detected: Value at 'transactItems' failed to "
            "satisfy constraint: Member must have length between 1 and 100"
        )
    token = params.get("ClientRequestToken")
    fingerprint = ""
    if token is not None:
        fingerprint = json.dumps(
            {k: val for k, val in params.items() if k != "ReturnConsumedCapacity"},
            sort_keys=True,
            default=str,
        )
        again = engine.token_response(token, fingerprint)
        if again is not None:
            return again
    planned, reasons = _plan_transaction(engine, parts)
    if any(r["Code"] != "None" for r in reasons):
        raise TransactionCanceled(reasons)
    tally = Tally(factor=2.0)  # a transactional write costs twice
    for one in planned:
        tally.add(one.table.name, *(write_units(one) if one.write else (1.0, {})))
        if one.write:
            engine.commit(one.table, one.key, one.key_item, one.new, one.size)
    response: dict[str, Any] = {}
    caps = tally.report(params)
    if caps is not None:
        response["ConsumedCapacity"] = caps
    if token is not None:
        engine.remember_token(token, fingerprint, response)
    return response


def _plan_transaction(
    engine: Engine, parts: list[dict[str, Any]]
) -> tuple[list[ops.Planned], list[dict[str, Any]]]:
    planned: list[ops.Planned] = []
    reasons: list[dict[str, Any]] = []
    seen: set[tuple[str, TableKey]] = set()
    for part in parts:
        if len(part) != 1 or next(iter(part)) not in _TX_PLANS:
            raise Validation("TransactItems can only contain one of Check, Put, Update or Delete")
        ops.return_values("put_item", {**next(iter(part.values())), "ReturnValues": "NONE"})
        # Every part's expressions and value types are checked before any item is read.
        ops.validate(next(iter(part.values())))
    for part in parts:
        kind, body = next(iter(part.items()))
        one = _TX_PLANS[kind](engine, body)
        if (one.table.name, one.key) in seen:
            raise Validation("Transaction request cannot include multiple operations on one item")
        seen.add((one.table.name, one.key))
        planned.append(one)
        if one.ok:
            reasons.append({"Code": "None"})
            continue
        # DynamoDB Local ends a ConditionCheck's message with a period, no other's.
        message = CONDITION_FAILED_MESSAGE + ("." if kind == "ConditionCheck" else "")
        reason: dict[str, Any] = {"Code": "ConditionalCheckFailed", "Message": message}
        want = body.get("ReturnValuesOnConditionCheckFailure", "NONE")
        if want == "ALL_OLD" and one.old is not None:
            reason["Item"] = v.copy_item(one.old)
        reasons.append(reason)
    return planned, reasons


# ---------------------------------------------------------------- tables
def _create_table(engine: Engine, params: dict[str, Any]) -> dict[str, Any]:
    name = params.get("TableName")
    if not isinstance(name, str) or not name:
        raise Validation("TableName must be a non-empty string")
    if name in engine.tables:
        raise InUse("Cannot create preexisting table")
    defined = {a["AttributeName"] for a in params.get("AttributeDefinitions") or []}
    used = {k["AttributeName"] for k in params.get("KeySchema") or []}
    for gsi in params.get("GlobalSecondaryIndexes") or []:
        used.update(k["AttributeName"] for k in gsi["KeySchema"])
    if defined != used:
        raise invalid(
            "Some AttributeDefinitions are not used. AttributeDefinitions: "
            f"[{', '.join(sorted(defined))}], keys used: [{', '.join(sorted(used))}]"
            if defined - used
            else "Some index key attributes are not defined in AttributeDefinitions. Keys: "
            f"[{', '.join(sorted(used - defined))}], AttributeDefinitions: "
            f"[{', '.join(sorted(defined))}]"
        )
    keep = json.loads(json.dumps(params))  # ours: the caller may reuse its dict
    table = Table(keep, engine.clock())
    engine.tables[name] = table
    return {"TableDescription": table.describe(engine.arn_prefix)}


def _describe_table(engine: Engine, params: dict[str, Any]) -> dict[str, Any]:
    return {"Table": engine.table(params.get("TableName")).describe(engine.arn_prefix)}


def _delete_table(engine: Engine, params: dict[str, Any]) -> dict[str, Any]:
    table = engine.table(params.get("TableName"))
    description = table.describe(engine.arn_prefix)
    del engine.tables[table.name]
    engine.streams.pop(table.name, None)
    engine._built.pop(table.name, None)
    return {"TableDescription": {**description, "TableStatus": "DELETING"}}


def _update_ttl(engine: Engine, params: dict[str, Any]) -> dict[str, Any]:
    table = engine.table(params.get("TableName"))
    spec = dict(params.get("TimeToLiveSpecification") or {})
    table.params["TimeToLiveSpecification"] = spec
    return {"TimeToLiveSpecification": spec}


def _describe_ttl(engine: Engine, params: dict[str, Any]) -> dict[str, Any]:
    table = engine.table(params.get("TableName"))
    spec = table.params.get("TimeToLiveSpecification")
    if not spec or not spec.get("Enabled"):
        return {"TimeToLiveDescription": {"TimeToLiveStatus": "DISABLED"}}
    return {
        "TimeToLiveDescription": {
            "TimeToLiveStatus": "ENABLED",
            "AttributeName": spec["AttributeName"],
        }
    }


def _list_tables(engine: Engine, params: dict[str, Any]) -> dict[str, Any]:
    return {"TableNames": sorted(engine.tables)}


_HANDLERS: dict[str, Handler] = {
    "put_item": _single_write("put_item", ops.plan_put),
    "update_item": _single_write("update_item", ops.plan_update),
    "delete_item": _single_write("delete_item", ops.plan_delete),
    "get_item": _reads(reads.get_item),
    "query": _reads(reads.query),
    "scan": _reads(reads.scan),
    "batch_get_item": _batch_get,
    "batch_write_item": _batch_write,
    "transact_write_items": _transact,
    "create_table": _create_table,
    "describe_table": _describe_table,
    "delete_table": _delete_table,
    "update_time_to_live": _update_ttl,
    "describe_time_to_live": _describe_ttl,
    "list_tables": _list_tables,
}
