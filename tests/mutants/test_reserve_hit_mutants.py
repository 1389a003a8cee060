"""Mutants of the reserve hit's fast path (flows/reserves/hit.py): it must refuse what the
full path refuses, and serve only a reserve taken under the call's limits."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.conftest import Api
from tests.integration import test_reserve_hit as hit_tests
from tests.mutants import must_fail, mutant, mutant_wrapping
from zae_limiter.flows.reserves import hit


def _unchecked(consume: Mapping[str, Any], _limits: Any) -> dict[str, int]:
    return {name: int(value * 1000) for name, value in consume.items()}


def test_the_input_test_catches_a_fast_path_that_does_not_validate(api: Api) -> None:
    with mutant(hit, "_amounts", _unchecked):
        must_fail(hit_tests.test_bad_input_is_still_refused_with_a_reserve_held, api)


def test_the_limits_test_catches_a_fast_path_that_ignores_the_limits(api: Api) -> None:
    def make(original: Any) -> Any:
        def broken(state: Any, entity_id: str, resource: str, consume: Any, *rest: Any) -> Any:
            held = None if state.reserves is None else state.reserves.holding((entity_id, resource))
            limits = list(held.limits) if held is not None else rest[0]
            return original(state, entity_id, resource, consume, limits, rest[1])

        return broken

    with mutant_wrapping(hit, "serve", make):
        must_fail(hit_tests.test_other_limits_take_the_full_path, api)
