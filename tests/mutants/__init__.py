"""Mutation checks that run in the suite: a guarantee is only listed as proven in
docs/guarantees.md when its test is shown to fail on a deliberately broken product.

    from tests.mutants import mutant, must_fail

    def test_the_deadline_test_catches_an_unenforced_deadline(...) -> None:
        with mutant(transport, "deadline_left", lambda *a, **k: 3600.0):
            must_fail(the_guarantee_test_body, *fixture_values)

`mutant` swaps one attribute of a product module or class (a function, a method, a
constant) for a broken variant and always restores it, even when the body raises.
`mutant_wrapping` builds the broken variant from the original (to break one branch and
keep the rest). `must_fail` runs a guarantee's test body and returns the failure it raised;
if the body passes, the mutant survived and the check itself fails, naming the body.

A failure is an assertion (`assert`, `pytest.fail`, a `pytest.raises` that saw nothing) or
any exception listed in `also`; anything else (a TypeError from a badly written mutant)
propagates, so a mutant cannot be "caught" by crashing the test for an unrelated reason.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

#: What a failing test raises: plain asserts, and pytest.fail / pytest.raises misses.
FAILURES: tuple[type[BaseException], ...] = (AssertionError, pytest.fail.Exception)

_MISSING = object()


@contextmanager
def mutant(owner: Any, name: str, broken: Any) -> Iterator[Any]:
    """Replace `owner.name` by `broken` for the block; yields the original."""
    original = owner.__dict__.get(name, _MISSING) if hasattr(owner, "__dict__") else _MISSING
    if original is _MISSING and not hasattr(owner, name):
        raise AttributeError(f"{owner!r} has no {name!r} to mutate")
    before = getattr(owner, name)
    setattr(owner, name, broken)
    try:
        yield before
    finally:
        if original is _MISSING:
            # It was inherited (a class attribute from a base): drop the override.
            delattr(owner, name)
        else:
            setattr(owner, name, original)


@contextmanager
def mutant_wrapping(
    owner: Any, name: str, make_broken: Callable[[Any], Any]
) -> Iterator[Any]:
    """Like `mutant`, with the broken variant built from the original by `make_broken`."""
    with mutant(owner, name, make_broken(getattr(owner, name))) as before:
        yield before


def condition_rewritten(
    pattern: re.Pattern[str], replacement: str
) -> Callable[[Callable[..., tuple[str, str]]], Callable[..., tuple[str, str]]]:
    """`make_broken` for `mutant_wrapping` of an expression builder returning (update,
    condition): the condition with `pattern` replaced (the replacement must still use
    the names and values the pattern used: DynamoDB rejects unused ones)."""

    def make(original: Callable[..., tuple[str, str]]) -> Callable[..., tuple[str, str]]:
        def broken(*args: Any) -> tuple[str, str]:
            update, condition = original(*args)
            return update, pattern.sub(replacement, condition)

        return broken

    return make


def must_fail(
    body: Callable[..., Any],
    *args: Any,
    also: tuple[type[BaseException], ...] = (),
    **kwargs: Any,
) -> BaseException:
    """Run `body(*args, **kwargs)`; return what it failed with, or fail if it passed."""
    try:
        body(*args, **kwargs)
    except FAILURES + also as failure:
        return failure
    pytest.fail(f"mutant survived: {getattr(body, '__qualname__', body)!r} passed on it")
