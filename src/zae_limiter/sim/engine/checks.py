"""The type checks DynamoDB makes on a request's values before it looks at the item.

A `:value` of a type an operator cannot take (`a < :bool`, `a + :string`, `ADD a :list`)
is a ValidationException even when the condition would have failed anyway, so these run
at binding time, from a list made once per expression text. What a path holds can only
be known from the item; those mistakes are found while evaluating (expressions.py,
updates.py), as DynamoDB finds them.
"""

from __future__ import annotations

from typing import Any

from zae_limiter.sim.engine.errors import Validation
from zae_limiter.sim.engine.parser import Node

#: (placeholder, types it may hold, message with "{type}", whether the type is spelled
#: long: STRING rather than S).
Check = tuple[str, frozenset[str], str, bool]

ORDERED = frozenset({"N", "S", "B"})
NUMBER = frozenset({"N"})
ADDABLE = frozenset({"N", "SS", "NS", "BS"})
SETS = frozenset({"SS", "NS", "BS"})
LIST = frozenset({"L"})
TEXT = frozenset({"S", "B"})
LONG_NAMES = {
    "S": "STRING",
    "N": "NUMBER",
    "B": "BINARY",
    "BOOL": "BOOLEAN",
    "NULL": "NULL",
    "L": "LIST",
    "M": "MAP",
    "SS": "STRING_SET",
    "NS": "NUMBER_SET",
    "BS": "BINARY_SET",
}
_OPERAND = "Invalid {kind}: Incorrect operand type for operator or function; "


def _function(kind: str, name: str) -> str:
    return _OPERAND.format(kind=kind) + f"operator or function: {name}, operand type: {{type}}"


def _clause(name: str) -> str:
    return (
        _OPERAND.format(kind="UpdateExpression")
        + f"operator: {name}, operand type: {{type}}, typeSet: ALLOWED_FOR_{name}_OPERAND"
    )


def condition_checks(tree: Any, kind: str) -> tuple[Check, ...]:
    found: list[Check] = []
    _walk_condition(tree, kind, found)
    return _unique(found)


def _walk_condition(node: Any, kind: str, found: list[Check]) -> None:
    if not isinstance(node, tuple) or not node:
        return
    tag = node[0]
    if tag in ("and", "or", "not"):
        for child in node[1:]:
            _walk_condition(child, kind, found)
    elif tag == "cmp" and node[1] not in ("=", "<>"):
        _values(node[2:4], ORDERED, _function(kind, node[1]), False, found)
    elif tag == "between":
        _values(node[1:4], ORDERED, _function(kind, "BETWEEN"), False, found)
    elif tag == "call" and node[1] == "begins_with" and len(node[2]) == 2:
        _values(node[2][1:], TEXT, _function(kind, "begins_with"), False, found)


def update_checks(clauses: dict[str, list[Node]]) -> tuple[Check, ...]:
    """In the order the operands are written (`clauses` keeps it): `run` reports the
    last that fails, as DynamoDB Local does."""
    found: list[Check] = []
    for clause, nodes in clauses.items():
        for node in nodes:
            if clause == "ADD":
                _values([node[2]], ADDABLE, _clause("ADD"), True, found)
            elif clause == "DELETE":
                _values([node[2]], SETS, _clause("DELETE"), True, found)
            elif clause == "SET":
                _walk_operand(node[2], found)
    return _unique(found)


def _walk_operand(node: Any, found: list[Check]) -> None:
    tag = node[0]
    if tag in ("plus", "minus"):
        sign = "+" if tag == "plus" else "-"
        _values(node[1:3], NUMBER, _function("UpdateExpression", sign), False, found)
        for child in node[1:3]:
            _walk_operand(child, found)
    elif tag == "call":
        if node[1] == "list_append":
            _values(node[2], LIST, _function("UpdateExpression", "list_append"), False, found)
        for child in node[2]:
            _walk_operand(child, found)


def _values(
    operands: Any, allowed: frozenset[str], message: str, long: bool, found: list[Check]
) -> None:
    for operand in operands:
        if operand[0] == "value":
            found.append((operand[1], allowed, message, long))


def _unique(found: list[Check]) -> tuple[Check, ...]:
    return tuple(dict.fromkeys(found))


def run(checks: tuple[Check, ...], values: dict[str, Any], last: bool) -> None:
    """Raise for a value of a wrong type: the first one written, or the `last` (DynamoDB
    Local reports the first in a condition, the last in an update expression)."""
    failed = None
    for placeholder, allowed, message, long in checks:
        value = values[placeholder]
        if "N" in value and "N" in allowed:
            continue  # the usual case, decided without finding the type
        kind = next(iter(value), "")
        if kind not in allowed:
            failed = message.format(type=LONG_NAMES.get(kind, kind) if long else kind)
            if not last:
                break
    if failed is not None:
        raise Validation(failed)
