"""Update expressions (SET, REMOVE, ADD, DELETE), compiled once and applied to a copy.

As in DynamoDB, every operand is read from the item as it was before the update (so
`SET a = b, b = a` swaps), then every action is applied; a path may be the target of
only one action ("Two document paths overlap"), and key attributes cannot be targets.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from zae_limiter.sim.engine import checks
from zae_limiter.sim.engine import expressions as ex
from zae_limiter.sim.engine import values as v
from zae_limiter.sim.engine.errors import Validation
from zae_limiter.sim.engine.parser import Node, Parser

Item = dict[str, v.Value]
WRONG_TYPE = "An operand in the update expression has an incorrect data type"


@dataclass(frozen=True, slots=True)
class Action:
    kind: str  # set, remove, add, delete
    target: tuple[Any, ...]
    operand: ex.Operand | None


@dataclass(frozen=True, slots=True)
class Update:
    actions: tuple[Action, ...]
    #: Every target is a top-level name: the common case, without path walking.
    flat: bool

    def apply(
        self,
        old: Item,
        names: ex.Names,
        values: ex.Values,
        key_attrs: Collection[str],
        size: int,
    ) -> tuple[Item, list[tuple[Any, ...]], int | None]:
        """The new item (old is not changed), the target paths (for UPDATED_*), and the new
        item's size from the old one's `size` (None: not known, measure it)."""
        if self.flat:
            return self._apply_flat(old, names, values, key_attrs, size)
        planned = []
        for action, value in zip(
            self.actions, _operands(self.actions, old, names, values), strict=True
        ):
            planned.append((action, value))
        resolved = [_resolved(a.target, names) for a in self.actions]
        _check_targets(resolved, key_attrs, self.flat)
        new = dict(old)
        for (action, value), path in zip(planned, resolved, strict=True):
            _apply_nested(new, old, action.kind, path, value)
        return new, [a.target for a in self.actions], None

    def _apply_flat(
        self,
        old: Item,
        names: ex.Names,
        values: ex.Values,
        key_attrs: Collection[str],
        size: int,
    ) -> tuple[Item, list[tuple[Any, ...]], int | None]:
        """Top-level targets only (every request the library sends): no path walking,
        and the size follows from the attributes changed."""
        steps = []
        for action, value in zip(
            self.actions, _operands(self.actions, old, names, values), strict=True
        ):
            top = action.target[0]
            steps.append((action.kind, names[top] if top[0] == "#" else top, value))
        if len({name for _, name, _ in steps}) != len(steps) or any(
            name in key_attrs for _, name, _ in steps
        ):
            _check_targets([(name,) for _, name, _ in steps], key_attrs, True)
        new = dict(old)
        for kind, name, value in steps:
            before = old.get(name)
            if kind == "set":
                after = value
            elif kind == "remove":
                after = None
            elif kind == "add" and before and value and "N" in before and "N" in value:
                after = _sum(before["N"], value["N"])  # the hot path: ADD to a number
            else:
                after = _combined(kind, before, value)
            if after is None:
                new.pop(name, None)
            else:
                new[name] = after
            if _same_size(before, after):
                continue  # a number of as many characters: no need to measure both
            if after is not None:
                size += v.attribute_bytes(name, after)
            if before is not None:
                size -= v.attribute_bytes(name, before)
        return new, [a.target for a in self.actions], size


def _operands(
    actions: tuple[Action, ...], old: Item, names: ex.Names, values: ex.Values
) -> list[v.Value | None]:
    """Every action's operand, read from the old item (and, for ADD and DELETE, checked
    against the attribute it changes). When several fail, the one reported is DynamoDB
    Local's: it evaluates every action in the order of a Java HashMap of the targets'
    names and keeps the last failure (the random conformance requests pinned this)."""
    out: list[v.Value | None] = []
    failures: list[tuple[int, Validation]] = []
    for i, action in enumerate(actions):
        try:
            value = None if action.operand is None else action.operand(old, names, values)
            if action.kind in ("add", "delete"):
                _check_combined(action, old, names, value)
            out.append(value)
        except Validation as error:
            failures.append((i, error))
            out.append(None)
    if len(failures) == 1:
        raise failures[0][1]
    if failures:
        order = java_map_order([_show(_resolved(a.target, names)) for a in actions])
        raise max(failures, key=lambda failure: order[failure[0]])[1]
    return out


def _check_combined(action: Action, old: Item, names: ex.Names, value: v.Value | None) -> None:
    target = action.target
    if len(target) == 1:
        top = target[0]
        before = old.get(names[top] if top[0] == "#" else top)
    else:
        before = ex.walk(old, target, names)
    if action.kind == "add" and before and value and "N" in before and "N" in value:
        return  # the hot path: a number added to a number cannot fail
    _combined(action.kind, before, value)


def java_map_order(keys: list[str]) -> list[tuple[int, int]]:
    """Where each key comes when a java.util.HashMap of them (inserted in this order,
    default capacity, load factor 0.75) is iterated: (bucket, insertion index)."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2
    order = []
    for i, key in enumerate(keys):
        h = _java_string_hash(key)
        order.append(((h ^ (h >> 16)) & (capacity - 1), i))
    return order


def _java_string_hash(text: str) -> int:
    """String.hashCode(), as an unsigned 32-bit number (the shift above is unsigned)."""
    h = 0
    data = text.encode("utf-16-be")
    for j in range(0, len(data), 2):
        h = (31 * h + (data[j] << 8 | data[j + 1])) & 0xFFFFFFFF
    return h


def _resolved(target: tuple[Any, ...], names: ex.Names) -> tuple[Any, ...]:
    return tuple(p if isinstance(p, int) else ex.resolve(p, names) for p in target)


def _check_targets(paths: list[tuple[Any, ...]], key_attrs: Collection[str], flat: bool) -> None:
    for path in paths:
        if path[0] in key_attrs:
            raise Validation(
                f"One or more parameter values were invalid: Cannot update attribute "
                f"{path[0]}. This attribute is part of the key"
            )
    if flat and len({p[0] for p in paths}) == len(paths):
        return
    for i, one in enumerate(paths):
        for two in paths[i + 1 :]:
            short = min(len(one), len(two))
            if one[:short] == two[:short]:
                raise Validation(
                    "Invalid UpdateExpression: Two document paths overlap with each other; "
                    "must remove or rewrite one of these paths; "
                    f"path one: [{_show(one)}], path two: [{_show(two)}]"
                )


def _show(path: tuple[Any, ...]) -> str:
    return ", ".join(f"[{p}]" if isinstance(p, int) else str(p) for p in path)


def _same_size(before: v.Value | None, after: v.Value | None) -> bool:
    if before is None or after is None:
        return False
    a, b = before.get("N"), after.get("N")
    return (
        a is not None
        and b is not None
        and len(a) == len(b)
        and (a[0] == "-") == (b[0] == "-")
        and ("." in a) == ("." in b)
    )


def _sum(a: str, b: str) -> v.Value:
    if a.isdigit() and b.isdigit() and a.isascii() and b.isascii():
        return {"N": str(int(a) + int(b))}
    return v.number_value(v.add_numbers(v.parse_number(a), v.parse_number(b)))


def _combined(kind: str, current: v.Value | None, value: v.Value | None) -> v.Value | None:
    """What ADD or DELETE makes of the current value; None: the attribute goes."""
    assert value is not None
    vkind, raw = next(iter(value.items()))
    if kind == "add":
        if vkind not in ("N", "SS", "NS", "BS"):
            raise Validation(
                "Invalid UpdateExpression: Incorrect operand type for operator or function; "
                f"operator: ADD, operand type: {_TYPE_WORDS.get(vkind, vkind)}, "
                "typeSet: ALLOWED_FOR_ADD_OPERAND"
            )
        if current is None:
            return v.stored(value)  # the caller's dict: the engine keeps its own copy
        if vkind == "N":
            held = current.get("N")
            if held is None:
                raise Validation(WRONG_TYPE)
            a, b = v.parse_number(held), v.parse_number(raw)
            if type(a) is int and type(b) is int:
                return {"N": str(a + b)}
            return v.number_value(v.add_numbers(a, b))
        if vkind not in current:
            raise Validation(WRONG_TYPE)
        members = list(current[vkind])
        seen = {v.sort_key({vkind[0]: m}) for m in members}
        added = v.stored(value)[vkind]  # canonical numbers, checked for duplicates
        members.extend(m for m in added if v.sort_key({vkind[0]: m}) not in seen)
        return {vkind: v.sorted_members(vkind, members)}
    if vkind not in ("SS", "NS", "BS"):
        raise Validation(
            "Invalid UpdateExpression: Incorrect operand type for operator or function; "
            f"operator: DELETE, operand type: {_TYPE_WORDS.get(vkind, vkind)}, "
            "typeSet: ALLOWED_FOR_DELETE_OPERAND"
        )
    if current is None:
        return None
    if vkind not in current:
        raise Validation(WRONG_TYPE)
    gone = {v.sort_key({vkind[0]: m}) for m in raw}
    left = [m for m in current[vkind] if v.sort_key({vkind[0]: m}) not in gone]
    return {vkind: left} if left else None


_TYPE_WORDS = {
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


def _apply_top(new: Item, old: Item, kind: str, name: str, value: v.Value | None) -> None:
    if kind == "set":
        assert value is not None
        new[name] = value
        return
    if kind == "remove":
        new.pop(name, None)
        return
    result = _combined(kind, old.get(name), value)
    if result is None:
        new.pop(name, None)
    else:
        new[name] = result


def _apply_nested(
    new: Item, old: Item, kind: str, path: tuple[Any, ...], value: v.Value | None
) -> None:
    if len(path) == 1:
        _apply_top(new, old, kind, path[0], value)
        return
    if kind in ("add", "delete"):
        current = _walk_resolved(old, path)
        value = _combined(kind, current, value)
        kind = "remove" if value is None else "set"
    # Copy each container on the way down: stored values are shared, never changed.
    top = new.get(path[0])
    if top is None:
        if kind == "remove":
            return
        raise Validation(
            "The document path provided in the update expression is invalid for update"
        )
    holder = v.copy_value(top)
    new[path[0]] = holder
    node = holder
    for part in path[1:-1]:
        child = _child(node, part)
        if child is None:
            if kind == "remove":
                return
            raise Validation(
                "The document path provided in the update expression is invalid for update"
            )
        copied = dict(child)
        _put(node, part, copied)
        node = copied
    _finish(node, path[-1], kind, value)


def _walk_resolved(item: Item, path: tuple[Any, ...]) -> v.Value | None:
    current = item.get(path[0])
    for part in path[1:]:
        if current is None:
            return None
        current = _child(current, part)
    return current


def _child(node: v.Value, part: Any) -> v.Value | None:
    if isinstance(part, int):
        seq = node.get("L")
        return seq[part] if seq is not None and part < len(seq) else None
    members = node.get("M")
    return None if members is None else members.get(part)


def _put(node: v.Value, part: Any, value: v.Value) -> None:
    if isinstance(part, int):
        node["L"][part] = value
    else:
        node["M"][part] = value


def _finish(node: v.Value, part: Any, kind: str, value: v.Value | None) -> None:
    container = node.get("L" if isinstance(part, int) else "M")
    if container is None:
        raise Validation(
            "The document path provided in the update expression is invalid for update"
        )
    if kind == "remove":
        if isinstance(part, int):
            if part < len(container):
                del container[part]
        else:
            container.pop(part, None)
        return
    if isinstance(part, int) and part >= len(container):
        container.append(value)
    else:
        container[part] = value


# ---------------------------------------------------------------- update operands
def operand(node: Node) -> ex.Operand:
    """An operand of SET: a path that must exist, a value (copied: it may be stored), a
    function, or `a + b` / `a - b`."""
    tag = node[0]
    if tag == "path":
        getter = ex.path_getter(node[1])

        def present(item: Item, names: ex.Names, values: ex.Values) -> v.Value:
            found = getter(item, names, values)
            if found is None:
                raise Validation(ex.MISSING_ATTRIBUTE)
            return found

        return present
    if tag == "value":
        key = node[1]
        return lambda _item, _names, values: v.stored(values[key])
    if tag in ("plus", "minus"):
        return arithmetic(tag, operand(node[1]), operand(node[2]))
    if tag == "call" and node[1] in ("if_not_exists", "list_append"):
        return update_function(node[1], node[2], "UpdateExpression")
    if tag == "call" and node[1] in ex.FUNCTIONS:
        raise Validation(
            "Invalid UpdateExpression: The function is not allowed to be used this way in "
            f"an expression; function: {node[1]}"
        )
    if tag == "call":
        raise Validation(f"Invalid UpdateExpression: Invalid function name; function: {node[1]}")
    raise Validation(f'Invalid UpdateExpression: Syntax error; token: "{tag}"')


def arithmetic(tag: str, left: ex.Operand, right: ex.Operand) -> ex.Operand:
    combine = v.add_numbers if tag == "plus" else v.sub_numbers

    def compute(item: Item, names: ex.Names, values: ex.Values) -> v.Value:
        a, b = left(item, names, values), right(item, names, values)
        if a is None or b is None or "N" not in a or "N" not in b:
            raise Validation(WRONG_TYPE)
        return v.number_value(combine(v.parse_number(a["N"]), v.parse_number(b["N"])))

    return compute


def update_function(name: str, args: list[Node], kind: str) -> ex.Operand:
    if len(args) != 2:
        raise Validation(
            f"Invalid {kind}: Incorrect number of operands for operator or function; "
            f"operator or function: {name}, number of operands: {len(args)}"
        )
    if name == "if_not_exists":
        if args[0][0] != "path":
            raise Validation(
                f"Invalid {kind}: Operator or function requires a document path; "
                "operator or function: if_not_exists"
            )
        probe = ex.path_getter(args[0][1])
        fallback = operand(args[1])

        def if_not_exists(item: Item, names: ex.Names, values: ex.Values) -> v.Value | None:
            found = probe(item, names, values)
            return found if found is not None else fallback(item, names, values)

        return if_not_exists
    first, second = operand(args[0]), operand(args[1])

    def list_append(item: Item, names: ex.Names, values: ex.Values) -> v.Value:
        a, b = first(item, names, values), second(item, names, values)
        if a is None or b is None or "L" not in a or "L" not in b:
            raise Validation(WRONG_TYPE)
        return {"L": [*a["L"], *b["L"]]}

    return list_append


def _compile(text: str) -> ex.Compiled:
    parser = Parser(text, "UpdateExpression")
    clauses = parser.update()
    # Actions in the order written (the parser keeps it): DynamoDB Local's error order
    # depends on it (`java_map_order`).
    actions = [_action(node) for nodes in clauses.values() for node in nodes]
    flat = all(len(a.target) == 1 for a in actions)
    names, used_values = ex._used(list(clauses.values()))
    return ex.Compiled(
        clauses,
        Update(tuple(actions), flat),
        names,
        used_values,
        "UpdateExpression",
        checks.update_checks(clauses),
    )


def _action(node: Node) -> Action:
    kind, target = node[0], node[1][1]
    if kind == "remove":
        return Action(kind, target, None)
    if kind == "set":
        return Action(kind, target, operand(node[2]))
    key = node[2][1]

    def fetch(_item: Item, _names: ex.Names, values: ex.Values) -> v.Value:
        return values[key]  # ADD and DELETE copy what they keep

    return Action(kind, target, fetch)


ex.register("update", _compile)
