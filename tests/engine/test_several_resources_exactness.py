"""Several resources in one acquire, exact on DynamoDB Local (docs/controls.md,
"Several resources in one acquire"): 8 client threads, each its own repository, take
from a model's bucket and a shared "all models" budget in one acquire. Half of them use
gpt-4, half claude; the shared budget is smaller than the two models' together, so it
binds. No resource ever admits more than an ideal token bucket fed its admissions over
the run's span, with limits that do not refill within the run and limits that do.

`run_two_resources` is the body the mutant check must see fail (tests/mutants)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest

from tests._servers import EngineEndpoint, unique_name
from zae_limiter import Limit, RateLimitExceeded, SyncRateLimiter, SyncRepository

pytestmark = pytest.mark.engine

THREADS = 8
ATTEMPTS = 50
MODELS = ("gpt-4", "claude")
SHARED = "all-models"


@dataclass
class Tally:
    admitted: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, resources: tuple[str, ...]) -> None:
        with self.lock:
            for r in resources:
                self.admitted[r] = self.admitted.get(r, 0) + 1


def ideal_bound(limit: Limit, span_ms: float) -> int:
    """The most an ideal bucket, full at the start, admits over `span_ms` in whole
    tokens: its capacity and what it refills meanwhile."""
    refill = limit.refill_amount * span_ms / (limit.refill_period_seconds * 1000)
    return min(limit.capacity + int(refill), 10**9)


def run_two_resources(
    url: str, model_limit: Limit, shared_limit: Limit, *, reserve: bool = False
) -> tuple[dict[str, int], dict[str, int]]:
    """(admitted per resource, ideal bound per resource) of one run."""
    name = unique_name()
    setup = SyncRepository.open(name=name, endpoint_url=url, create_table=True, reserve=False)
    admin = SyncRateLimiter(setup)
    for model in MODELS:
        admin.set_resource_defaults(model, [model_limit])
    admin.set_resource_defaults(SHARED, [shared_limit])
    repos = [
        SyncRepository.open(name=name, endpoint_url=url, reserve=reserve) for _ in range(THREADS)
    ]
    tally = Tally()
    gate = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def client(i: int) -> None:
        limiter = SyncRateLimiter(repos[i])
        resources = (MODELS[i % 2], SHARED)
        gate.wait()
        for _ in range(ATTEMPTS):
            try:
                with limiter.acquire("key-1", list(resources), {"tok": 1}):
                    pass
                tally.add(resources)
            except RateLimitExceeded:
                pass
            except BaseException as error:
                errors.append(error)
                return

    threads = [threading.Thread(target=client, args=(i,)) for i in range(THREADS)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    span_ms = (time.monotonic() - started) * 1000
    for repo in (*repos, setup):
        repo.close()
    assert not errors, errors
    bounds = {m: ideal_bound(model_limit, span_ms) for m in MODELS}
    bounds[SHARED] = ideal_bound(shared_limit, span_ms)
    return tally.admitted, bounds


def check_within(admitted: dict[str, int], bounds: dict[str, int]) -> None:
    for resource, bound in bounds.items():
        assert admitted.get(resource, 0) <= bound, (resource, admitted, bounds)
    # All or nothing: every shared admission is one model's.
    assert admitted.get(SHARED, 0) == sum(admitted.get(m, 0) for m in MODELS), admitted


#: Not refilling within the run (a day's worth), and refilling several times over.
STILL = (Limit.per_day("tok", 80), Limit.per_day("tok", 120))
DRIPPING = (Limit.per_second("tok", 10, burst=40), Limit.per_second("tok", 15, burst=60))


@pytest.mark.parametrize("limits", [STILL, DRIPPING], ids=["still", "refilling"])
def test_concurrent_clients_never_pass_either_resources_ideal_bucket(
    dynamodb_local: EngineEndpoint, limits: tuple[Limit, Limit]
) -> None:
    admitted, bounds = run_two_resources(dynamodb_local.url, *limits)
    print(f"\nadmitted {admitted}, ideal bounds {bounds}")
    check_within(admitted, bounds)
    # The shared budget binds: it is used up, not left idle by the give-backs.
    assert admitted[SHARED] >= 0.9 * limits[1].capacity, admitted


def test_with_reserves_too(dynamodb_local: EngineEndpoint) -> None:
    admitted, bounds = run_two_resources(dynamodb_local.url, *STILL, reserve=True)
    print(f"\nadmitted {admitted}, ideal bounds {bounds}")
    check_within(admitted, bounds)
