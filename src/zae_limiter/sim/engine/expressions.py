"""Condition, filter, key-condition and projection expressions, compiled into closures.

Every compiled function takes `(item, names, values)`: placeholders are resolved at
evaluation, so one compiled form serves every request with the same text, and a repeated
request costs one dict lookup for its parse. DynamoDB's rules that matter here:
- a comparison between values of different types is false, not an error; so is an
  ordering of types that have no order (BOOL, sets, lists, maps);
- a comparison with a missing attribute is false, except `<>`, which is then true;
- NOT binds tighter than AND, which binds tighter than OR.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zae_limiter.sim.engine import checks
from zae_limiter.sim.engine import values as v
from zae_limiter.sim.engine.errors import Validation
from zae_limiter.sim.engine.parser import Node, Parser, placeholders

Item = dict[str, v.Value]
Names = dict[str, str]
Values = dict[str, v.Value]
Operand = Callable[[Item, Names, Values], v.Value | None]
Predicate = Callable[[Item, Names, Values], bool]

_BOOLEAN_FUNCTIONS = frozenset(
    {"attribute_exists", "attribute_not_exists", "attribute_type", "begins_with", "contains"}
)
_UPDATE_FUNCTIONS = frozenset({"if_not_exists", "list_append"})
#: Every function name DynamoDB knows (any other is "Invalid function name").
FUNCTIONS = _BOOLEAN_FUNCTIONS | _UPDATE_FUNCTIONS | {"size"}
_TYPE_NAMES = frozenset({"S", "SS", "N", "NS", "B", "BS", "BOOL", "NULL", "L", "M"})
MISSING_ATTRIBUTE = "The provided expression refers to an attribute that does not exist in the item"


@dataclass(frozen=True, slots=True)
class Compiled:
    """A parsed expression: its evaluator and the placeholders it uses."""

    tree: Any
    fn: Any
    names: frozenset[str]
    values: frozenset[str]
    #: "ConditionExpression" ...: how DynamoDB names it in messages.
    kind: str = ""
    #: Types the request's values must have (checks.py), checked when binding.
    checks: tuple[Any, ...] = ()


def _used(tree: Any) -> tuple[frozenset[str], frozenset[str]]:
    names: set[str] = set()
    values: set[str] = set()
    placeholders(tree, names, values)
    return frozenset(names), frozenset(values)


_CACHE: dict[tuple[str, str], Compiled] = {}
#: The placeholders of a request's expressions together, by the compiled objects' ids
#: (they live in `_CACHE`, and both are cleared together, so an id is never reused).
_UNIONS: dict[tuple[int, ...], tuple[frozenset[str], frozenset[str]]] = {}


def placeholders_of(parts: list[Compiled]) -> tuple[frozenset[str], frozenset[str]]:
    if len(parts) == 1:
        return parts[0].names, parts[0].values
    ids = tuple(id(p) for p in parts)
    found = _UNIONS.get(ids)
    if found is None:
        found = _UNIONS[ids] = (
            frozenset().union(*(p.names for p in parts)),
            frozenset().union(*(p.values for p in parts)),
        )
    return found


def compiled(kind: str, text: str) -> Compiled:
    """The compiled expression, from the cache when this text was seen before."""
    found = _CACHE.get((kind, text))
    if found is not None:
        return found
    result = _COMPILERS[kind](text)
    if len(_CACHE) > 100_000:  # a bound, for a simulator that runs for hours
        _CACHE.clear()
        _UNIONS.clear()
    _CACHE[(kind, text)] = result
    return result


def _condition(text: str, kind: str) -> Compiled:
    parser = Parser(text, kind)
    tree = parser.condition()
    parser.done()
    names, used_values = _used(tree)
    return Compiled(
        tree, predicate(tree, kind), names, used_values, kind, checks.condition_checks(tree, kind)
    )


def _projection(text: str) -> Compiled:
    parser = Parser(text, "ProjectionExpression")
    paths = parser.projection()
    parser.done()
    names, used_values = _used(paths)
    return Compiled(paths, [p[1] for p in paths], names, used_values, "ProjectionExpression")


# ---------------------------------------------------------------- paths and operands
def resolve(part: str, names: Names) -> str:
    if part[0] == "#":
        found = names.get(part)
        if found is None:
            raise Validation(
                "An expression attribute name used in the document path is not defined; "
                f"attribute name: {part}"
            )
        return found
    return part


def path_getter(parts: tuple[Any, ...]) -> Operand:
    first = parts[0]
    if len(parts) == 1:
        if first[0] == "#":
            return lambda item, names, _values: item.get(names[first])
        return lambda item, _names, _values: item.get(first)

    def get(item: Item, names: Names, _values: Values) -> v.Value | None:
        return walk(item, parts, names)

    return get


def walk(item: Item, parts: tuple[Any, ...], names: Names) -> v.Value | None:
    current: v.Value | None = item.get(resolve(parts[0], names))
    for part in parts[1:]:
        if current is None:
            return None
        if isinstance(part, int):
            seq = current.get("L")
            current = seq[part] if seq is not None and part < len(seq) else None
        else:
            members = current.get("M")
            current = members.get(resolve(part, names)) if members is not None else None
    return current


def operand(node: Node, kind: str) -> Operand:
    """A condition's operand (updates.py has its own: other functions, other rules)."""
    tag = node[0]
    if tag == "path":
        return path_getter(node[1])
    if tag == "value":
        key = node[1]
        return lambda _item, _names, values: values[key]
    if tag == "call":
        return _value_function(node, kind)
    raise Validation(f'Invalid {kind}: Syntax error; token: "{tag}"')


def _value_function(node: Node, kind: str) -> Operand:
    name, args = node[1], node[2]
    if name == "size":
        arity(name, args, 1, kind)
        inner = operand(args[0], kind)

        def size(item: Item, names: Names, values: Values) -> v.Value | None:
            found = inner(item, names, values)
            n = None if found is None else v.size_of(found)
            return None if n is None else {"N": str(n)}

        return size
    if name in _BOOLEAN_FUNCTIONS or name in _UPDATE_FUNCTIONS or name == "size":
        raise Validation(
            f"Invalid {kind}: The function is not allowed to be used this way in an "
            f"expression; function: {name}"
        )
    raise Validation(f"Invalid {kind}: Invalid function name; function: {name}")


def arity(name: str, args: list[Node], count: int, kind: str) -> None:
    if len(args) != count:
        raise Validation(
            f"Invalid {kind}: Incorrect number of operands for operator or function; "
            f"operator or function: {name}, number of operands: {len(args)}"
        )


# ---------------------------------------------------------------- predicates
def predicate(node: Node, kind: str) -> Predicate:
    tag = node[0]
    if tag in ("and", "or"):
        return _chain(tag, [predicate(n, kind) for n in _flattened(tag, node)])
    if tag == "not":
        a = predicate(node[1], kind)
        return lambda item, names, values: not a(item, names, values)
    if tag == "cmp":
        return _comparison(node, kind)
    if tag == "between":
        return _between(operand(node[1], kind), operand(node[2], kind), operand(node[3], kind))
    if tag == "in":
        return _in(operand(node[1], kind), [operand(n, kind) for n in node[2]])
    if tag == "call" and node[1] in _BOOLEAN_FUNCTIONS:
        return _boolean_function(node[1], node[2], kind)
    if tag == "call":
        _value_function(node, kind)  # unknown and update functions raise here
        raise Validation(
            f"Invalid {kind}: The function is not allowed to be used this way in an "
            f"expression; function: {node[1]}"
        )
    raise Validation(f"Invalid {kind}: Syntax error; a condition was expected")


def _flattened(tag: str, node: Node) -> list[Node]:
    """`a AND b AND c` as [a, b, c]: one loop instead of a call per level (the library's
    conditions chain 20 or more)."""
    if node[0] != tag:
        return [node]
    return [*_flattened(tag, node[1]), *_flattened(tag, node[2])]


def _chain(tag: str, parts: list[Predicate]) -> Predicate:
    if tag == "and":

        def every(item: Item, names: Names, values: Values) -> bool:
            for part in parts:  # noqa: SIM110 (a loop: no generator frame per request)
                if not part(item, names, values):
                    return False
            return True

        return every

    def some(item: Item, names: Names, values: Values) -> bool:
        for part in parts:  # noqa: SIM110 (a loop: no generator frame per request)
            if part(item, names, values):
                return True
        return False

    return some


def _comparison(node: Node, kind: str) -> Predicate:
    op, left, right = node[1], node[2], node[3]
    test = _value_test(op)
    if left[0] == "path" and len(left[1]) == 1 and left[1][0][0] == "#" and right[0] == "value":
        # `#name <op> :value`, the shape of nearly every comparison the library sends:
        # read both here rather than through two operand closures.
        name, key = left[1][0], right[1]
        return lambda item, names, values: test(item.get(names[name]), values[key])
    first, second = operand(left, kind), operand(right, kind)
    return lambda item, names, values: test(first(item, names, values), second(item, names, values))


ValueTest = Callable[[v.Value | None, v.Value | None], bool]


def _value_test(op: str) -> ValueTest:
    if op == "=":

        def eq(a: v.Value | None, b: v.Value | None) -> bool:
            # Same text is equal (stored numbers are canonical); else compare by value.
            return a is not None and b is not None and (a == b or v.equal(a, b))

        return eq
    if op == "<>":
        return lambda a, b: a is None or b is None or not v.equal(a, b)
    test = _ORDER_TESTS[op]
    parse = v.parse_number

    def order(a: v.Value | None, b: v.Value | None) -> bool:
        if a is None or b is None:
            return False
        an, bn = a.get("N"), b.get("N")
        if an is not None and bn is not None:  # the usual case: two numbers
            if an.isdigit() and bn.isdigit() and an.isascii() and bn.isascii():
                return test(int(an), int(bn))
            return test(parse(an), parse(bn))
        pair = v.ordered(a, b)
        return pair is not None and test(pair[0], pair[1])

    return order


_ORDER_TESTS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _between(x: Operand, low: Operand, high: Operand) -> Predicate:
    def between(item: Item, names: Names, values: Values) -> bool:
        a, lo, hi = x(item, names, values), low(item, names, values), high(item, names, values)
        if lo is not None and hi is not None:
            bounds = v.ordered(lo, hi)
            if bounds is not None and bounds[0] > bounds[1]:
                raise Validation(
                    "Invalid ConditionExpression: The BETWEEN operator requires upper bound "
                    "to be greater than or equal to lower bound; lower bound operand: "
                    f"AttributeValue: {_shown(lo)}, upper bound operand: AttributeValue: "
                    f"{_shown(hi)}"
                )
        if a is None or lo is None or hi is None:
            return False
        first, second = v.ordered(a, lo), v.ordered(a, hi)
        return (
            first is not None
            and second is not None
            and first[0] >= first[1]
            and second[0] <= second[1]
        )

    return between


def _shown(value: v.Value) -> str:
    kind, raw = next(iter(value.items()))
    return f"{{{kind}:{raw}}}"


def _in(x: Operand, options: list[Operand]) -> Predicate:
    def within(item: Item, names: Names, values: Values) -> bool:
        a = x(item, names, values)
        if a is None:
            return False
        return any((b := o(item, names, values)) is not None and v.equal(a, b) for o in options)

    return within


def _boolean_function(name: str, args: list[Node], kind: str) -> Predicate:
    if name in ("attribute_exists", "attribute_not_exists"):
        arity(name, args, 1, kind)
        if args[0][0] != "path":
            raise Validation(
                f"Invalid {kind}: Operator or function requires a document path; "
                f"operator or function: {name}"
            )
        get = path_getter(args[0][1])
        if name == "attribute_exists":
            return lambda item, names, values: get(item, names, values) is not None
        return lambda item, names, values: get(item, names, values) is None
    arity(name, args, 2, kind)
    first, second = operand(args[0], kind), operand(args[1], kind)
    test = _BINARY_TESTS[name]

    def call(item: Item, names: Names, values: Values) -> bool:
        a, b = first(item, names, values), second(item, names, values)
        return a is not None and b is not None and test(a, b)

    return call


def _attribute_type(a: v.Value, b: v.Value) -> bool:
    wanted = b.get("S")
    if wanted not in _TYPE_NAMES:
        raise Validation(
            "Invalid ConditionExpression: Invalid attribute type name found; type: "
            f"{wanted}, valid types: {{B,NULL,SS,BOOL,L,BS,N,NS,S,M}}"
        )
    return bool(v.type_of(a) == wanted)


def _begins_with(a: v.Value, b: v.Value) -> bool:
    (ka, ra), (kb, rb) = next(iter(a.items())), next(iter(b.items()))
    if kb not in ("S", "B"):
        raise Validation(
            "Invalid ConditionExpression: Incorrect operand type for operator or function; "
            f"operator or function: begins_with, operand type: {kb}"
        )
    return ka == kb and bool(ra[: len(rb)] == rb)


def _contains(a: v.Value, b: v.Value) -> bool:
    (ka, ra), (kb, rb) = next(iter(a.items())), next(iter(b.items()))
    if (ka == "S" and kb == "S") or (ka == "B" and kb == "B"):
        return bool(rb in ra)
    if ka in ("SS", "NS", "BS") and kb == ka[0]:
        return any(v.equal({kb: m}, b) for m in ra)
    if ka == "L":
        return any(v.equal(m, b) for m in ra)
    return False


_BINARY_TESTS: dict[str, Callable[[v.Value, v.Value], bool]] = {
    "attribute_type": _attribute_type,
    "begins_with": _begins_with,
    "contains": _contains,
}


# ---------------------------------------------------------------- projections
def project(item: Item, paths: list[tuple[Any, ...]], names: Names) -> Item:
    """The attributes a ProjectionExpression names (copies, ready to hand out)."""
    out: Item = {}
    for parts in paths:
        if len(parts) == 1:
            name = resolve(parts[0], names)
            found = item.get(name)
            if found is not None:
                out[name] = v.copy_value(found)
            continue
        _project_nested(item, parts, names, out)
    return out


def _project_nested(item: Item, parts: tuple[Any, ...], names: Names, out: Item) -> None:
    found = walk(item, parts, names)
    if found is None:
        return
    # Rebuild the path's containers in the output; list elements are kept in order.
    top = resolve(parts[0], names)
    source: v.Value = item[top]
    kind = "L" if isinstance(parts[1], int) else "M"
    target = out.setdefault(top, {kind: [] if kind == "L" else {}})
    for depth, part in enumerate(parts[1:], start=1):
        last = depth == len(parts) - 1
        key: Any = part if isinstance(part, int) else resolve(part, names)
        source = source["L"][key] if isinstance(part, int) else source["M"][key]
        nxt: v.Value = (
            v.copy_value(source)
            if last
            else ({"L": []} if isinstance(parts[depth + 1], int) else {"M": {}})
        )
        if isinstance(part, int):
            target["L"].append(nxt)
        else:
            nxt = target["M"].setdefault(key, nxt)
        target = nxt


_COMPILERS: dict[str, Callable[[str], Compiled]] = {
    "condition": lambda text: _condition(text, "ConditionExpression"),
    "filter": lambda text: _condition(text, "FilterExpression"),
    "key": lambda text: _condition(text, "KeyConditionExpression"),
    "projection": _projection,
}


def register(kind: str, compiler: Callable[[str], Compiled]) -> None:
    """updates.py adds its compiler here (it imports this module, not the reverse)."""
    _COMPILERS[kind] = compiler
