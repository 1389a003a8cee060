"""The parser and evaluator of condition, update and projection expressions."""

from __future__ import annotations

from typing import Any

import pytest

from zae_limiter.sim.engine import expressions as ex
from zae_limiter.sim.engine import updates  # noqa: F401  (registers "update")
from zae_limiter.sim.engine.errors import Validation

ITEM: dict[str, Any] = {
    "n": {"N": "3"},
    "s": {"S": "hello"},
    "b": {"BOOL": True},
    "ss": {"SS": ["a", "b"]},
    "l": {"L": [{"N": "1"}, {"S": "x"}]},
    "m": {"M": {"k": {"N": "7"}}},
}
VALUES: dict[str, Any] = {
    ":3": {"N": "3"},
    ":5": {"N": "5"},
    ":s": {"S": "he"},
    ":a": {"S": "a"},
    ":N": {"S": "N"},
    ":x": {"S": "x"},
}


def holds(text: str, item: dict[str, Any] | None = None) -> bool:
    compiled = ex.compiled("condition", text)
    names = {name: name[1:] for name in compiled.names}
    values = {key: VALUES[key] for key in compiled.values}
    return bool(compiled.fn(ITEM if item is None else item, names, values))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("#n = :3", True),
        ("#n <> :3", False),
        ("#n < :5", True),
        ("#n >= :5", False),
        ("#missing = :3", False),
        ("#missing < :3", False),
        ("#missing <> :3", True),
        ("#s < :3", False),
        ("#s = :3", False),
        ("#s <> :3", True),  # types differ
        ("#b < :3", False),
        ("#ss > :a", False),  # no order on these types
        ("#n BETWEEN :3 AND :5", True),
        ("#n IN (:5, :3)", True),
        ("#n IN (:5)", False),
        ("NOT #n = :3", False),
        ("NOT #n = :5 AND #n = :5", False),
        ("#n = :5 AND #n = :3 OR #n = :3", True),  # AND before OR
        ("#n = :5 AND (#n = :3 OR #n = :3)", False),
        ("NOT (#n = :5 OR #n = :5)", True),
        ("attribute_exists(#n) AND attribute_not_exists(#missing)", True),
        ("attribute_type(#n, :N)", True),
        ("begins_with(#s, :s)", True),
        ("contains(#s, :s)", True),
        ("contains(#ss, :a)", True),
        ("contains(#l, :x)", True),
        ("size(#s) = :5", True),
        ("size(#ss) < :3", True),
        ("size(#missing) = :3", False),
        ("#m.k > :5", True),
        ("#l[0] < :3", True),
        ("#l[5] = :3", False),
        ("#n=:3 and #n<>:5", True),  # keywords in any case, no spaces needed
    ],
)
def test_conditions_follow_dynamodb(text: str, expected: bool) -> None:
    assert holds(text) is expected


def test_an_absent_item_is_an_empty_one() -> None:
    assert holds("attribute_not_exists(#n)", {})
    assert not holds("#n <> :3 AND #n = :3", {})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("#n = ", 'Syntax error; token: "<EOF>", near: "="'),
        ("#n = = :3", 'Syntax error; token: "=", near: "= = :3"'),
        ("#n < :3 AND #n", 'Syntax error; token: "<EOF>", near: "#n"'),
        ("#n = :3 :5 AND", 'Syntax error; token: ":5", near: ":3 :5 AND"'),
        ("frobnicate(#n)", "Invalid function name; function: frobnicate"),
        ("size(#n)", "not allowed to be used this way"),
        ("if_not_exists(#n, :3) = :3", "not allowed to be used this way"),
        ("attribute_exists(:3)", "requires a document path"),
        ("#n = :3 $", "Invalid token"),
    ],
)
def test_malformed_conditions_are_validation_errors(text: str, message: str) -> None:
    with pytest.raises(Validation, match=message.replace("(", r"\(").replace(")", r"\)")):
        ex.compiled("condition", text)


def test_between_with_bounds_the_wrong_way_round_is_an_error() -> None:
    with pytest.raises(Validation, match="upper bound to be greater"):
        holds("#n BETWEEN :5 AND :3")


def test_compiled_expressions_are_cached_by_text() -> None:
    assert ex.compiled("condition", "#a = :b") is ex.compiled("condition", "#a = :b")
    compiled = ex.compiled("update", "SET #a = :b ADD #c :d REMOVE #e")
    assert compiled.names == {"#a", "#c", "#e"} and compiled.values == {":b", ":d"}


def apply(text: str, item: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    compiled = ex.compiled("update", text)
    names = {name: name[1:] for name in compiled.names}
    new, _targets, _size = compiled.fn.apply(item, names, values, ("PK", "SK"), 0)
    return new


def test_updates_read_the_item_as_it_was() -> None:
    new = apply("SET #a = #b, #b = #a", {"a": {"N": "1"}, "b": {"N": "2"}}, {})
    assert new == {"a": {"N": "2"}, "b": {"N": "1"}}


def test_add_set_remove_delete() -> None:
    item = {"n": {"N": "1"}, "ss": {"SS": ["a", "b"]}, "ts": {"SS": ["a"]}, "gone": {"S": "x"}}
    new = apply(
        "SET #m = if_not_exists(#m, :z) - :one, #l = list_append(:l, :l) "
        "ADD #n :one, #fresh :one, #ss :more DELETE #ss2 :less, #ts :less REMOVE #gone",
        item,
        {
            ":z": {"N": "10"},
            ":one": {"N": "1"},
            ":l": {"L": [{"S": "x"}]},
            ":more": {"SS": ["c"]},
            ":less": {"SS": ["a"]},
        },
    )
    assert new == {
        "n": {"N": "2"},
        "fresh": {"N": "1"},
        "m": {"N": "9"},
        "l": {"L": [{"S": "x"}, {"S": "x"}]},
        "ss": {"SS": ["a", "b", "c"]},
    }
    # DELETE from an absent set does nothing; emptying a set removes the attribute
    assert item["n"] == {"N": "1"}  # the old item is untouched


def test_nested_paths_are_set_and_removed_on_copies() -> None:
    item = {"m": {"M": {"k": {"N": "1"}, "l": {"L": [{"N": "1"}, {"N": "2"}]}}}}
    new = apply("SET #m.#k = :two, #m.#l[5] = :two REMOVE #m.#l[0]", item, {":two": {"N": "2"}})
    assert new["m"]["M"] == {"k": {"N": "2"}, "l": {"L": [{"N": "2"}, {"N": "2"}]}}
    assert item["m"]["M"]["k"] == {"N": "1"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SET #a = #missing + :one", "refers to an attribute that does not exist"),
        ("SET #a = :one, #a = :one", "Two document paths overlap"),
        ("SET #a = :one ADD #a :one", "Two document paths overlap"),
        ("SET #PK = :one", "Cannot update attribute PK"),
        ("ADD #s :one", "incorrect data type"),
        ("ADD #a :str", "operator: ADD, operand type: STRING"),
        ("SET #a = :one SET #b = :one", 'The "SET" section can only be used once'),
        ("SET #a = list_append(#a, :one)", "incorrect data type"),
    ],
)
def test_update_errors(text: str, message: str) -> None:
    values = {":one": {"N": "1"}, ":str": {"S": "x"}}
    with pytest.raises(Validation, match=message):
        apply(text, {"a": {"N": "1"}, "s": {"S": "x"}}, values)


def test_projection_of_top_level_and_nested_paths() -> None:
    compiled = ex.compiled("projection", "#n, #m.k, #l[1], #nothing")
    names = {"#n": "n", "#m": "m", "#l": "l", "#nothing": "nothing"}
    assert ex.project(ITEM, compiled.fn, names) == {
        "n": {"N": "3"},
        "m": {"M": {"k": {"N": "7"}}},
        "l": {"L": [{"S": "x"}]},
    }
