"""The simulator's search, seeds 0..1,499 (`make check` runs the first 500): _search.py."""

from __future__ import annotations

import pytest

from tests.sim._search import search


def test_the_first_seeds_break_no_guarantee() -> None:
    search(0)


@pytest.mark.slow
@pytest.mark.parametrize("first", [500, 1000])
def test_no_schedule_breaks_a_guarantee(first: int) -> None:
    search(first)
