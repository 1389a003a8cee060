"""What a client knows of an entity (flows/context.py): facts that never change in place,
and one writer for each piece of state that does."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import zae_limiter
from zae_limiter.flows import acquire as acquire_flow
from zae_limiter.flows.context import Entities

PACKAGE = Path(zae_limiter.__file__).parent
#: The owner of each subject's state (EntityState's fields): the module whose class is
#: its only writer. Inside it the class writes `self.<field>`; anywhere else a write to
#: `<entity>.<owner>.<field>` is a second writer.
OWNERS = {
    "shards": "flows/scaling/knowledge.py",
    "gate": "flows/scaling/gate.py",
    "images": "flows/write/images.py",
    "uncounted": "flows/write/images.py",
}
#: `facts` is replaced whole, and only here.
FACTS_WRITER = "flows/context.py"
MUTATING_METHODS = {"pop", "popitem", "setdefault", "update", "clear", "__setitem__"}


def test_entity_facts_never_change_in_place() -> None:
    known = Entities().learn("k1", True, "org", {"gpt": False})
    facts = known.facts
    with pytest.raises(dataclasses.FrozenInstanceError):
        facts.parent_id = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        facts.cascade_for["embed"] = True  # type: ignore[index]


def test_what_is_learned_replaces_the_facts_whole() -> None:
    entities = Entities()
    known = entities.learn("k1", True, "org", of="gpt")  # from a bucket
    from_bucket = known.facts
    entities.learn("k1", False, "org", {"embed": True})  # then its record
    assert (from_bucket.record, dict(from_bucket.cascade_for)) == (False, {"gpt": True})
    assert known.facts.record and dict(known.facts.cascade_for) == {"gpt": True, "embed": True}
    before = known.facts
    known.moved("org-2", "gpt", False)
    assert before.parent_id == "org" and known.facts.parent_id == "org-2"
    assert not known.facts.cascades("gpt")


def test_settled_facts_are_those_no_take_can_change() -> None:
    """`flows.acquire.settled`, asked by every acquire of an entity without a known parent:
    True only where nothing a take learns (a bucket of these resources, or the record read
    to make one) can name a parent, so the acquire looks for no parent taken late."""
    entities = Entities()
    known = entities.learn("k1", False, None, of="gpt")  # from a bucket: no parent there
    assert acquire_flow.settled(known.facts, ["gpt"])
    assert not acquire_flow.settled(known.facts, ["gpt", "embed"])
    entities.learn("k1", True, "org", of="gpt")  # that bucket again, now naming one
    assert known.facts.parent_id is None  # what is known stays
    entities.learn("k1", True, "org")  # the record, read to make the embed bucket
    assert known.facts.parent_id == "org"  # not settled for embed: a parent, learned late
    record = entities.learn("k2", False, None)
    assert acquire_flow.settled(record.facts, ["gpt", "embed"])  # the record read: nothing to learn
    entities.learn("k2", True, "org", of="gpt")
    assert record.facts.parent_id is None


def _sources() -> list[tuple[str, str]]:
    return [(p.relative_to(PACKAGE).as_posix(), p.read_text()) for p in PACKAGE.rglob("*.py")]


def _owned(node: ast.expr) -> str | None:
    """The owner `<x>.<owner>.<field>` names, when `node` is such an expression."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
        return node.value.attr if node.value.attr in OWNERS else None
    return None


def _written(target: ast.expr) -> str | None:
    """The owner whose state an assignment to (or deletion of) `target` changes."""
    if isinstance(target, ast.Subscript):
        return _owned(target.value)
    if isinstance(target, ast.Attribute):
        return "facts" if target.attr == "facts" else _owned(target)
    return None


def _writes(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, owner) of each write to an owner's field, and of each `.facts =`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in MUTATING_METHODS
            and (owner := _owned(node.func.value))
        ):
            found.append((node.lineno, owner))
        found.extend((node.lineno, o) for t in targets if (o := _written(t)))
    return found


def test_each_piece_of_entity_state_has_one_writer() -> None:
    strangers = [
        f"{name}:{line} writes {owner}'s state"
        for name, text in _sources()
        for line, owner in _writes(ast.parse(text))
        if name != (FACTS_WRITER if owner == "facts" else OWNERS[owner])
    ]
    assert strangers == [], "call the owner's methods instead"
