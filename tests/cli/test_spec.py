"""The pure parts of the CLI: limit specs, the limits file, and the plan."""

from __future__ import annotations

import pytest

from zae_limiter import Entity, Limit, ValidationError
from zae_limiter.cli.spec import (
    EntitySpec,
    Level,
    creation_order,
    entity_conflicts,
    format_limit,
    parse_limit,
    parse_limits,
    parse_limits_file,
    plan,
)


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        ("rpm:100/min", Limit.per_minute("rpm", 100)),
        ("tpm:100000/min:150000", Limit.per_minute("tpm", 100_000, 150_000)),
        ("rps:5", Limit.per_second("rps", 5)),
        ("rps:5/s", Limit.per_second("rps", 5)),
        ("rph:10/hour", Limit.per_hour("rph", 10)),
        ("rph:10/h:20", Limit.per_hour("rph", 10, 20)),
        ("daily:2000/day", Limit.per_day("daily", 2000)),
        ("x:10/30s", Limit.custom("x", 10, 10, 30)),
        (" rpm:1/minute ", Limit.per_minute("rpm", 1)),
    ],
)
def test_parse_limit(text: str, limit: Limit) -> None:
    assert parse_limit(text) == limit
    assert parse_limit(format_limit(limit)) == limit


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rpm", "expected name:rate"),
        ("rpm:", "expected name:rate"),
        ("rpm:ten/min", "expected name:rate"),
        ("rpm:-1/min", "expected name:rate"),
        ("rpm:1.5/min", "expected name:rate"),
        ("rpm:100/week", "unknown unit 'week'"),
        ("rpm:100/min:50", "burst (50) must be at least the rate (100)"),
        ("wcu:100", "reserved"),
        ("RPM:100", "invalid limit name"),
        ("rpm:0", "between 1 and"),
    ],
)
def test_parse_limit_rejects(text: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_limit(text)


def test_format_limit() -> None:
    assert format_limit(Limit.per_minute("tpm", 100_000, 150_000)) == "tpm:100000/min:150000"
    assert format_limit(Limit.per_second("rps", 5)) == "rps:5/sec"
    assert format_limit(Limit.custom("x", 10, 10, 30)) == "x:10/30s"


def test_parse_limits_refuses_a_name_twice() -> None:
    with pytest.raises(ValidationError, match="'rpm' is given twice"):
        parse_limits(["rpm:1", "tpm:2", "rpm:3/min"])


FILE = """
system: [rpm:1000/min]
resources:
  gpt-4: [rpm:500/min, "tpm:100000/min:150000"]
  embeddings: []
entities:
  key-2:
    parent: acme
    cascade: true
    limits:
      gpt-4: [tpm:20000/min]
  acme:
    name: Acme Corp
    limits:
      "*": [rpm:200/min]
"""


def test_parse_limits_file() -> None:
    desired = parse_limits_file(FILE)
    assert [e.entity_id for e in desired.entities] == ["acme", "key-2"]  # parents first
    assert desired.entities[1] == EntitySpec("key-2", None, "acme", True)
    assert desired.levels == {
        Level("system"): (Limit.per_minute("rpm", 1000),),
        Level("resource", None, "gpt-4"): (
            Limit.per_minute("rpm", 500),
            Limit.per_minute("tpm", 100_000, 150_000),
        ),
        Level("resource", None, "embeddings"): (),
        Level("entity", "key-2", "gpt-4"): (Limit.per_minute("tpm", 20_000),),
        Level("entity_default", "acme", None): (Limit.per_minute("rpm", 200),),
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("system: [rpm:1000/min", "not valid YAML"),
        ("- a\n- b", "limits file: expected a mapping"),
        ("systems: []", "unknown key 'systems'"),
        ("system: rpm:1/min", "system: expected a list"),
        ("resources: {gpt-4: [rpm]}", "resources.gpt-4: invalid limit 'rpm'"),
        ("entities: {a: {limits: {x: [wcu:1]}}}", "entities.a.limits.x: limit name 'wcu'"),
        ("entities: {a: {cascade: maybe}}", "entities.a.cascade: expected true or false"),
        ("entities: {a: {parent: 3}}", "entities.a.parent: expected an entity id"),
        ("entities: {a: {nam: x}}", "entities.a: unknown key 'nam'"),
        ("entities: {a: {parent: b}, b: {parent: a}}", "cycle: a -> b -> a"),
    ],
)
def test_parse_limits_file_rejects(text: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        parse_limits_file(text)


def test_empty_file_manages_nothing() -> None:
    desired = parse_limits_file("")
    assert desired.entities == () and dict(desired.levels) == {}


def test_creation_order_keeps_file_order_otherwise() -> None:
    specs = [EntitySpec("c", parent_id="b"), EntitySpec("a"), EntitySpec("b", parent_id="x")]
    assert [e.entity_id for e in creation_order(specs)] == ["b", "c", "a"]


def test_plan_adds_changes_removes_and_skips_equal_levels() -> None:
    desired = parse_limits_file(FILE)
    rpm = Limit.per_minute("rpm", 1000)
    stored = {
        Level("system"): (rpm,),  # equal: no change
        Level("resource", None, "gpt-4"): (Limit.per_minute("rpm", 500),),  # change
        Level("resource", None, "embeddings"): (rpm,),  # remove
    }
    result = plan(desired, {"acme"}, stored)
    assert [e.entity_id for e in result.create] == ["key-2"]
    assert [(c.action, c.level.describe()) for c in result.changes] == [
        ("remove", "resource embeddings (resource default)"),
        ("change", "resource gpt-4 (resource default)"),
        ("add", "entity acme / all resources (entity default)"),
        ("add", "entity key-2 / resource gpt-4"),
    ]
    assert not result.empty


def test_plan_ignores_the_order_of_limits() -> None:
    desired = parse_limits_file("resources: {r: [a:1, b:2]}")
    stored = {Level("resource", None, "r"): (parse_limit("b:2"), parse_limit("a:1"))}
    assert plan(desired, set(), stored).empty


def test_entity_conflicts_only_for_what_the_file_says() -> None:
    stored = Entity("acme", "Acme", None, False)
    assert entity_conflicts(EntitySpec("acme"), stored) == []
    assert entity_conflicts(EntitySpec("acme", name="Acme"), stored) == []
    assert entity_conflicts(EntitySpec("acme", name="Other", cascade=True), stored) == [
        "entity 'acme': name is 'Acme' but the file says 'Other'",
        "entity 'acme': cascade is False but the file says True",
    ]
