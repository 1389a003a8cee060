"""Mutants as tests: a guarantee's test must fail when the code it guards is broken.

`mutant(owner, name, make)` replaces the attribute `name` of `owner` (a module or a
class) by `make(original)` for the duration of a `with` block. `assert_killed(check, ...)`
first runs `check` on the real code (it must pass: a check that fails anyway proves
nothing), then under the mutant, where it must raise AssertionError. A mutant that
survives fails the suite. Attributes are patched where the product looks them up, so a
rename in the product makes the mutant fail loudly (`AttributeError`), never pass quietly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest


@contextmanager
def mutant(owner: Any, name: str, make: Callable[[Any], Any]) -> Iterator[None]:
    original = getattr(owner, name)  # AttributeError: the mutant's target moved
    setattr(owner, name, make(original))
    try:
        yield
    finally:
        setattr(owner, name, original)


def assert_killed(
    check: Callable[[], object], owner: Any, name: str, make: Callable[[Any], Any]
) -> str:
    """The message with which `check` failed under the mutant."""
    check()  # the control: the guarantee holds on the real code
    with mutant(owner, name, make):
        try:
            check()
        except AssertionError as killed:
            return str(killed)
    pytest.fail(f"mutant of {getattr(owner, '__name__', owner)}.{name} survived")
