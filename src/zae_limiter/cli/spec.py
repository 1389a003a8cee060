"""Pure parsing for the CLI: `-l name:rate[/unit][:burst]` specs and the limits YAML file,
and the plan that compares a desired limits file with what is stored.

Nothing here talks to DynamoDB; every function takes values and returns values, and bad
input raises the library's `ValidationError` (exit code 2 in the CLI).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import yaml

from zae_limiter import keys
from zae_limiter.errors import ValidationError
from zae_limiter.limits import Limit

#: What `-l` accepts after the rate, and the period in seconds each means.
UNITS: dict[str, int] = {
    "s": 1,
    "sec": 1,
    "second": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "h": 3600,
    "hour": 3600,
    "d": 86400,
    "day": 86400,
}
_CANONICAL_UNIT = {1: "sec", 60: "min", 3600: "hour", 86400: "day"}
_SPEC = re.compile(
    r"^(?P<name>[^:/\s]+):(?P<rate>\d+)(?:/(?P<unit>[a-z]+|\d+s))?(?::(?P<burst>\d+))?$"
)
#: The key under `entities.ID.limits` that means "every resource" (the entity default).
ALL_RESOURCES = "*"

LevelKind = Literal["entity", "entity_default", "resource", "system"]


#: The suffix of a soft limit's spec (`rpm:100/min:soft`): it counts, never rejects.
SOFT_SUFFIX = ":soft"
#: The suffix of a global limit's spec (`rps:300/sec:global=us-east-1,eu-west-1`): one
#: limit shared by the clients of these regions, in this order (docs/global.md).
GLOBAL_MARK = ":global="


def parse_limit(text: str) -> Limit:
    """`rpm:100/min`, `tpm:100000/min:150000`, `rps:5` (per second), `x:10/30s`; any of
    them ending in `:soft` is a soft limit, in `:global=REGION,REGION,...` a global one."""
    text = text.strip()
    if GLOBAL_MARK in text:
        head, _, regions = text.partition(GLOBAL_MARK)
        return parse_limit(head).across(*(r.strip() for r in regions.split(",")))
    if text.endswith(SOFT_SUFFIX):
        return replace(parse_limit(text.removesuffix(SOFT_SUFFIX)), soft=True)
    match = _SPEC.match(text)
    if match is None:
        raise ValidationError(
            f"invalid limit {text!r}: expected name:rate[/sec|min|hour|day][:burst][:soft], "
            "for example rpm:100/min or tpm:100000/min:150000"
        )
    unit = match["unit"] or "sec"
    if unit in UNITS:
        period = UNITS[unit]
    elif unit.endswith("s") and unit[:-1].isdigit():
        period = int(unit[:-1])
    else:
        raise ValidationError(
            f"invalid limit {text!r}: unknown unit {unit!r}; use sec, min, hour, day or Ns"
        )
    rate = int(match["rate"])
    burst = int(match["burst"]) if match["burst"] is not None else None
    if burst is not None and burst < rate:
        raise ValidationError(
            f"invalid limit {text!r}: burst ({burst}) must be at least the rate ({rate})"
        )
    return Limit(match["name"], rate if burst is None else burst, rate, period)


def parse_limits(texts: Sequence[str]) -> tuple[Limit, ...]:
    """Several specs; a name may appear only once."""
    limits = tuple(parse_limit(text) for text in texts)
    names = [limit.name for limit in limits]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValidationError(f"limit {twice[0]!r} is given twice")
    return limits


def format_limit(limit: Limit) -> str:
    """The `-l` form of a limit; `parse_limit(format_limit(x)) == x`."""
    period = limit.refill_period_seconds
    unit = _CANONICAL_UNIT.get(period, f"{period}s")
    text = f"{limit.name}:{limit.refill_amount}/{unit}"
    if limit.capacity != limit.refill_amount:
        text = f"{text}:{limit.capacity}"
    if limit.regions:
        text = f"{text}{GLOBAL_MARK}{','.join(limit.regions)}"
    return f"{text}{SOFT_SUFFIX}" if limit.soft else text


@dataclass(frozen=True, slots=True, order=True)
class Level:
    """One place limits are stored. `resource` None with an entity is the entity default."""

    kind: LevelKind
    entity_id: str | None = None
    resource: str | None = None

    @classmethod
    def of(cls, entity_id: str | None, resource: str | None) -> Level:
        if entity_id is not None:
            kind: LevelKind = "entity" if resource is not None else "entity_default"
            return cls(kind, entity_id, resource)
        if resource is not None:
            return cls("resource", None, resource)
        return cls("system")

    def describe(self) -> str:
        if self.kind == "entity":
            return f"entity {self.entity_id} / resource {self.resource}"
        if self.kind == "entity_default":
            return f"entity {self.entity_id} / all resources (entity default)"
        if self.kind == "resource":
            return f"resource {self.resource} (resource default)"
        return "system default"


@dataclass(frozen=True, slots=True)
class EntitySpec:
    """An entity as the file declares it; None means "not managed by the file"."""

    entity_id: str
    name: str | None = None
    parent_id: str | None = None
    cascade: bool | None = None


@dataclass(frozen=True, slots=True)
class Desired:
    """A parsed limits file: the entities it declares and the limits at each level it names.

    An empty tuple of limits means "nothing may be stored at this level".
    """

    entities: tuple[EntitySpec, ...] = ()
    levels: Mapping[Level, tuple[Limit, ...]] = field(default_factory=dict)


def _spec_list(where: str, value: object) -> tuple[Limit, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, (str, dict)) for v in value):
        raise ValidationError(f"{where}: expected a list of limit specs like 'rpm:100/min'")
    try:
        if any(isinstance(v, dict) for v in value):
            return _with_schedules(where, value)
        return parse_limits(value)
    except ValidationError as error:
        raise ValidationError(f"{where}: {error}") from None


def _with_schedules(where: str, value: list[Any]) -> tuple[Limit, ...]:
    """Specs, some of them scheduled limits (cli/schedules.py, the mapping form)."""
    from zae_limiter.cli.schedules import parse_scheduled

    limits = tuple(
        parse_limit(v) if isinstance(v, str) else parse_scheduled(f"[{i}]", v, parse_limit)
        for i, v in enumerate(value)
    )
    names = [limit.name for limit in limits]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValidationError(f"limit {twice[0]!r} is given twice")
    return limits


def _mapping(where: str, value: object) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ValidationError(f"{where}: expected a mapping with string keys")
    return value


def _checked(where: str, check: Any, value: str) -> str:
    try:
        return str(check(value))
    except ValidationError as error:
        raise ValidationError(f"{where}: {error}") from None


def _only_keys(where: str, value: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise ValidationError(f"{where}: unknown key {unknown[0]!r} (allowed: {sorted(allowed)})")


def _entity(entity_id: str, body: object, levels: dict[Level, tuple[Limit, ...]]) -> EntitySpec:
    where = f"entities.{entity_id}"
    spec = _mapping(where, body)
    _only_keys(where, spec, {"name", "parent", "cascade", "limits"})
    name, parent, cascade = spec.get("name"), spec.get("parent"), spec.get("cascade")
    if name is not None and not isinstance(name, str):
        raise ValidationError(f"{where}.name: expected text")
    if parent is not None and not isinstance(parent, str):
        raise ValidationError(f"{where}.parent: expected an entity id")
    if cascade is not None and not isinstance(cascade, bool):
        raise ValidationError(f"{where}.cascade: expected true or false")
    for resource, specs in _mapping(f"{where}.limits", spec.get("limits")).items():
        target = None
        if resource != ALL_RESOURCES:
            target = _checked(f"{where}.limits.{resource}", keys.validate_resource, resource)
        levels[Level.of(entity_id, target)] = _spec_list(f"{where}.limits.{resource}", specs)
    return EntitySpec(entity_id, name, parent, cascade)


def parse_limits_file(text: str) -> Desired:
    """Parse the YAML limits file (see docs/cli.md, `limits apply`)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ValidationError(f"limits file is not valid YAML: {error}") from None
    root = _mapping("limits file", data)
    _only_keys("limits file", root, {"system", "resources", "entities"})
    levels: dict[Level, tuple[Limit, ...]] = {}
    if "system" in root:
        levels[Level.of(None, None)] = _spec_list("system", root["system"])
    for resource, specs in _mapping("resources", root.get("resources")).items():
        _checked(f"resources.{resource}", keys.validate_resource, resource)
        levels[Level.of(None, resource)] = _spec_list(f"resources.{resource}", specs)
    entities = [
        _entity(
            _checked("entities", lambda v: keys.validate_id("entity_id", v), entity_id),
            body,
            levels,
        )
        for entity_id, body in _mapping("entities", root.get("entities")).items()
    ]
    return Desired(tuple(creation_order(entities)), levels)


def creation_order(entities: Sequence[EntitySpec]) -> list[EntitySpec]:
    """Parents declared in the file come before their children; a cycle is an error."""
    by_id = {e.entity_id: e for e in entities}
    ordered: list[EntitySpec] = []
    done: set[str] = set()

    def visit(entity: EntitySpec, path: tuple[str, ...]) -> None:
        if entity.entity_id in done:
            return
        if entity.entity_id in path:
            cycle = " -> ".join((*path, entity.entity_id))
            raise ValidationError(f"entities form a cycle: {cycle}")
        parent = by_id.get(entity.parent_id or "")
        if parent is not None:
            visit(parent, (*path, entity.entity_id))
        done.add(entity.entity_id)
        ordered.append(entity)

    for entity in entities:
        visit(entity, ())
    return ordered


Action = Literal["add", "change", "remove"]


@dataclass(frozen=True, slots=True)
class LevelChange:
    action: Action
    level: Level
    before: tuple[Limit, ...]
    after: tuple[Limit, ...]


@dataclass(frozen=True, slots=True)
class ApplyPlan:
    create: tuple[EntitySpec, ...] = ()
    changes: tuple[LevelChange, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.create and not self.changes


def _same(a: Sequence[Limit], b: Sequence[Limit]) -> bool:
    return {x.name: x for x in a} == {x.name: x for x in b}


def entity_conflicts(wanted: EntitySpec, stored: Any) -> list[str]:
    """What the file says about an existing entity that differs from it (cannot be changed)."""
    out = []
    for attr, stored_attr in (("name", "name"), ("parent_id", "parent_id"), ("cascade", "cascade")):
        value = getattr(wanted, attr)
        if value is not None and value != getattr(stored, stored_attr):
            out.append(
                f"entity {wanted.entity_id!r}: {attr} is {getattr(stored, stored_attr)!r} "
                f"but the file says {value!r}"
            )
    return out


def plan(
    desired: Desired,
    existing: set[str],
    stored: Mapping[Level, tuple[Limit, ...]],
) -> ApplyPlan:
    """Compare the file with what is stored: entities to create, levels to add/change/remove.

    `existing` holds the ids of entities that already exist; `stored` the limits currently
    stored at each level the file names (an empty tuple when nothing is stored).
    """
    create = tuple(e for e in desired.entities if e.entity_id not in existing)
    changes: list[LevelChange] = []
    for level in sorted(desired.levels, key=_level_order):
        after, before = desired.levels[level], stored.get(level, ())
        if _same(before, after):
            continue
        action: Action = "add" if not before else ("remove" if not after else "change")
        changes.append(LevelChange(action, level, before, after))
    return ApplyPlan(create, tuple(changes))


def _level_order(level: Level) -> tuple[int, str, str]:
    rank = {"system": 0, "resource": 1, "entity_default": 2, "entity": 3}[level.kind]
    return rank, level.entity_id or "", level.resource or ""
