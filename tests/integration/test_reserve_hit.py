"""The reserve hit's fast path (flows/reserves/hit.py): it serves what the full path
would serve from the same reserve, without a flow or a request, and leaves everything
else (bad input, other limits, stored limits no longer cached) to the full path."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Api
from zae_limiter import Limit, ValidationError

ROOMY = [Limit.per_minute("rpm", 60_000), Limit.per_minute("tpm", 6_000_000)]


def _hot(api: Api, limits: list[Limit] | None = ROOMY) -> None:
    for _ in range(8):
        with api.acquire("k", "gpt", {"rpm": 1}, limits=limits):
            pass


def test_a_hit_runs_no_flow_and_sends_nothing(api: Api) -> None:
    _hot(api)
    runs: list[object] = []
    runner = api.repo._runner  # the full path's flows go straight to the runner
    real_run = runner.run

    def counting(flow: Any, *a: Any, **k: Any) -> Any:
        if getattr(flow, "__name__", "") == "acquire":  # an acquire's, not the keeper's
            runs.append(flow)
        return real_run(flow, *a, **k)

    runner.run = counting
    hits = api.limiter.get_reserve_stats().hits
    for _ in range(20):
        with api.acquire("k", "gpt", {"rpm": 1, "tpm": 10}, limits=ROOMY) as lease:
            assert lease.consumed == {"rpm": 1, "tpm": 10}
    served = api.limiter.get_reserve_stats().hits - hits
    # Every acquire the reserve served ran no flow; the others (top-ups) ran one each.
    assert served >= 10 and len(runs) == 20 - served


def test_bad_input_is_still_refused_with_a_reserve_held(api: Api) -> None:
    _hot(api)
    for consume in ({"rpm": -1}, {"rpm": 1.5}, {"nope": 1}, {"rpm": 0}, {"rpm": 60_001}):
        with pytest.raises(ValidationError):
            with api.acquire("k", "gpt", consume, limits=ROOMY):
                pass


def test_other_limits_take_the_full_path(api: Api) -> None:
    _hot(api)
    other = [Limit.per_minute("rpm", 50_000)]
    with api.meter() as m, api.acquire("k", "gpt", {"rpm": 1}, limits=other):
        pass
    assert m.calls  # the reserve was taken under other limits: a write decides


def test_stored_limits_are_served_while_the_config_cache_holds_them(api: Api) -> None:
    api.set_limits("k", ROOMY, resource="gpt")
    _hot(api, None)
    hits = api.limiter.get_reserve_stats().hits
    with api.meter() as m:
        for _ in range(20):
            with api.acquire("k", "gpt", {"rpm": 1}):
                pass
    assert api.limiter.get_reserve_stats().hits - hits >= 10 and len(m.calls) < 10
