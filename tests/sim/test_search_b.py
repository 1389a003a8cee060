"""The simulator's search, seeds 1,500..2,999: tests/sim/_search.py."""

from __future__ import annotations

import pytest

from tests.sim._search import search


@pytest.mark.slow
@pytest.mark.parametrize("first", [1500, 2000, 2500])
def test_no_schedule_breaks_a_guarantee(first: int) -> None:
    search(first)
