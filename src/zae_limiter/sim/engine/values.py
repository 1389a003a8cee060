"""Attribute values in DynamoDB's typed form ({"N": "12"}), and what expressions do with them.

Items keep the wire form: a response is then a shallow copy away, and a value dict is
never changed in place once stored (an update puts a new dict), so items may share them.
Numbers are decimal strings on the wire; they are computed as Python int when integral
(exact, and fast) and as Decimal with DynamoDB's 38 digits otherwise, and written back
in the canonical form DynamoDB returns (no exponent, no trailing zeros, no '+', no "-0").
"""

from __future__ import annotations

from decimal import Context, Decimal, InvalidOperation
from typing import Any

from botocore.exceptions import ParamValidationError

from zae_limiter.sim.engine.errors import Validation

Value = dict[str, Any]
Number = int | Decimal

#: DynamoDB keeps 38 significant digits.
_CONTEXT = Context(prec=38)
#: Enough digits to see that a number has more than 38 (the check is then exact).
_CONTEXT_WIDE = Context(prec=200, Emax=999_999, Emin=-999_999)
_SCALARS = frozenset({"S", "N", "B", "BOOL", "NULL"})
_SETS = frozenset({"SS", "NS", "BS"})
_TYPES = _SCALARS | _SETS | {"L", "M"}


#: DynamoDB's range of magnitudes.
_LARGEST = Decimal("9.9999999999999999999999999999999999999E+125")
_SMALLEST = Decimal("1E-130")
_NOT_A_NUMBER = "A value provided cannot be converted into a number"


def parse_number(text: str) -> Number:
    if text.isdigit() and text.isascii():
        return int(text)  # the common case: no sign, no point, no exponent
    if text[:1] == "-" and text[1:].isdigit() and text.isascii():
        return int(text)
    if not isinstance(text, str) or not text or text != text.strip() or "_" in text:
        raise Validation(_NOT_A_NUMBER)  # Python would accept spaces and underscores
    try:
        number = Decimal(text)
    except InvalidOperation:
        raise Validation(_NOT_A_NUMBER) from None
    if not number.is_finite():
        raise Validation(_NOT_A_NUMBER)
    if number and abs(number) > _LARGEST:
        raise Validation(
            "Number overflow. Attempting to store a number with magnitude "
            "larger than supported range"
        )
    if number and abs(number) < _SMALLEST:
        raise Validation(
            "Number underflow. Attempting to store a number with magnitude "
            "smaller than supported range"
        )
    if len(number.normalize(_CONTEXT_WIDE).as_tuple().digits) > 38:
        raise Validation("Attempting to store more than 38 significant digits in a Number")
    if number == number.to_integral_value():
        return int(number)
    return number


def format_number(number: Number) -> str:
    if isinstance(number, int):
        return str(number)
    if number == number.to_integral_value():
        return str(int(number))
    text = format(number.normalize(_CONTEXT), "f")
    return text


def canonical_number(text: str) -> str:
    if text.isdigit() and text.isascii() and (text[0] != "0" or text == "0"):
        return text  # the common case, already canonical
    return format_number(parse_number(text))


def add_numbers(a: Number, b: Number) -> Number:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return _narrow(_CONTEXT.add(Decimal(a), Decimal(b)))


def sub_numbers(a: Number, b: Number) -> Number:
    if isinstance(a, int) and isinstance(b, int):
        return a - b
    return _narrow(_CONTEXT.subtract(Decimal(a), Decimal(b)))


def _narrow(number: Decimal) -> Number:
    return int(number) if number == number.to_integral_value() else number


def number_value(number: Number) -> Value:
    return {"N": format_number(number)}


def type_of(value: Value) -> str:
    for kind in value:
        return str(kind)
    raise Validation(
        "Supplied AttributeValue is empty, must contain exactly one of the supported datatypes"
    )


def stored(value: Any) -> Value:
    """A caller's value as the engine keeps it: a fresh dict, numbers canonical."""
    if not isinstance(value, dict) or len(value) != 1:
        raise Validation(
            "Supplied AttributeValue is empty, must contain exactly one of the supported datatypes"
        )
    kind, raw = next(iter(value.items()))
    if not _typed(kind, raw):
        # What botocore's parameter validation refuses before anything is sent.
        raise ParamValidationError(
            report=f"Invalid type for parameter {kind}, value: {raw!r}, type: "
            f"{type(raw).__name__}, valid types: {_PYTHON_TYPES[kind].__name__}"
        )
    if kind == "N":
        return {"N": canonical_number(raw)}
    if kind == "B":
        return {"B": bytes(raw)}
    if kind in ("S", "BOOL", "NULL"):
        return {kind: raw}
    if kind == "SS" or kind == "BS":
        return _stored_set(kind, raw, raw)
    if kind == "NS":
        return _stored_set(kind, raw, [canonical_number(x) for x in raw])
    if kind == "L":
        return {"L": [stored(v) for v in raw]}
    if kind == "M":
        return {"M": {k: stored(v) for k, v in raw.items()}}
    raise Validation(f"Supplied AttributeValue has an unknown type {kind}")


def malformed(params: Any) -> str | None:
    """The first attribute value of the wrong Python type anywhere in a request (checked
    only after a request failed, so the hot path pays nothing for it)."""
    if isinstance(params, list):
        return next((m for m in map(malformed, params) if m is not None), None)
    if not isinstance(params, dict):
        return None
    if len(params) == 1:
        kind, raw = next(iter(params.items()))
        if kind in _PYTHON_TYPES and (kind == "M" or not isinstance(raw, dict)):
            if not _typed(kind, raw):
                return f"{kind} value {raw!r} is a {type(raw).__name__}"
            if kind in _SETS and not all(_typed(kind[0], m) for m in raw):
                return f"{kind} value {raw!r} has a member of the wrong type"
            if kind in ("L", "M"):
                return malformed(list(raw) if kind == "L" else list(raw.values()))
            return None
    return next((m for m in map(malformed, params.values()) if m is not None), None)


def _typed(kind: str, raw: Any) -> bool:
    if kind == "B":
        return isinstance(raw, (bytes, bytearray))
    wanted = _PYTHON_TYPES.get(kind)
    return wanted is None or type(raw) is wanted


_PYTHON_TYPES: dict[str, type] = {
    "S": str,
    "N": str,
    "B": bytes,
    "BOOL": bool,
    "NULL": bool,
    "SS": list,
    "NS": list,
    "BS": list,
    "L": list,
    "M": dict,
}


def _stored_set(kind: str, raw: list[Any], members: list[Any]) -> Value:
    if not raw:
        word = {"SS": "string", "NS": "number", "BS": "binary"}[kind]
        raise Validation(
            f"One or more parameter values were invalid: An {word} set  may not be empty"
        )
    unique = set(_set_key(kind, m) for m in members)
    if len(unique) != len(members):
        raise Validation("Input collection contains duplicates")
    return {kind: sorted_members(kind, members)}


def sorted_members(kind: str, members: list[Any]) -> list[Any]:
    """A set's members in one order (sets have none): sorted, as DynamoDB Local returns
    them, so that equal sets are equal lists and runs are reproducible."""
    return sorted(members, key=lambda m: _set_key(kind, m))


def copy_value(value: Value) -> Value:
    """A copy a caller may change freely: scalars are immutable inside, so one level."""
    kind, raw = next(iter(value.items()))
    if kind in _SCALARS:
        return {kind: raw}
    if kind in _SETS:
        return {kind: list(raw)}
    if kind == "L":
        return {"L": [copy_value(v) for v in raw]}
    return {"M": {k: copy_value(v) for k, v in raw.items()}}


def copy_item(item: dict[str, Value]) -> dict[str, Value]:
    return {
        name: dict(value) if "N" in value or "S" in value else copy_value(value)
        for name, value in item.items()
    }


def _set_key(kind: str, member: Any) -> Any:
    if kind == "NS":
        return parse_number(member)
    return member


def equal(a: Value, b: Value) -> bool:
    ka, ra = next(iter(a.items()))
    kb, rb = next(iter(b.items()))
    if ka != kb:
        return False
    if ka == "N":
        return ra == rb or parse_number(ra) == parse_number(rb)
    if ka in _SETS:
        return set(_set_key(ka, m) for m in ra) == set(_set_key(kb, m) for m in rb)
    if ka == "L":
        return len(ra) == len(rb) and all(equal(x, y) for x, y in zip(ra, rb, strict=True))
    if ka == "M":
        return ra.keys() == rb.keys() and all(equal(ra[k], rb[k]) for k in ra)
    return bool(ra == rb)


def ordered(a: Value, b: Value) -> tuple[Any, Any] | None:
    """The two values as Python objects that order like DynamoDB orders them, or None
    when they cannot be ordered (different types, or not N, S or B): the comparison is
    then false, not an error."""
    ka, ra = next(iter(a.items()))
    kb, rb = next(iter(b.items()))
    if ka != kb:
        return None
    if ka == "N":
        return parse_number(ra), parse_number(rb)
    if ka == "S":
        return ra, rb  # code point order is UTF-8 byte order
    if ka == "B":
        return bytes(ra), bytes(rb)
    return None


def sort_key(value: Value) -> Any:
    """A Python key that sorts index and table keys (S, N or B) as DynamoDB does."""
    kind, raw = next(iter(value.items()))
    if kind == "N":
        return parse_number(raw)
    if kind == "B":
        return bytes(raw)
    return raw


def size_of(value: Value) -> int | None:
    """What the size() function returns; None for types it does not apply to."""
    kind, raw = next(iter(value.items()))
    if kind == "S":
        return len(raw.encode("utf-8"))
    if kind == "B":
        return len(raw)
    if kind in _SETS or kind in ("L", "M"):
        return len(raw)
    return None


def item_bytes(item: dict[str, Value]) -> int:
    """DynamoDB's billed size of an item: names plus values, roughly as documented."""
    return sum(attribute_bytes(name, v) for name, v in item.items())


def attribute_bytes(name: str, value: Value) -> int:
    raw = value.get("N")
    if raw is not None:  # inline: the hot path measures a dozen numbers per write
        size: int = (len(raw) - raw.startswith("-") - ("." in raw) + 1) // 2 + 1
    else:
        size = _value_bytes(value)
    return (len(name) if name.isascii() else len(name.encode("utf-8"))) + size


def _value_bytes(value: Value) -> int:
    kind, raw = next(iter(value.items()))
    if kind == "N":
        # About 1 byte per 2 significant digits, plus 1 (sign and point are not counted).
        return int((len(raw) - raw.startswith("-") - ("." in raw) + 1) // 2 + 1)
    if kind == "S":
        return len(raw) if raw.isascii() else len(raw.encode("utf-8"))
    if kind == "B":
        return len(raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in _SETS:
        return sum(_value_bytes({kind[0]: m}) for m in raw)
    if kind == "L":
        return 3 + sum(1 + _value_bytes(v) for v in raw)
    return 3 + sum(len(k.encode("utf-8")) + 1 + _value_bytes(v) for k, v in raw.items())
