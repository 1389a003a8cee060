"""A lease on a regional share: its rollback and its adjustments change the share exactly
(docs/global.md, "Leases, adjustments and rollbacks"). Both faces, moto.

The share is played against an ideal bucket of the share's own numbers (exact fractions,
tests/exactness_model.py), fed the same acquires, rollbacks and adjustments at the same
times, with the share refilling between them: every admission must agree, and the
share's tokens must equal the ideal bucket's at every step (nothing created, nothing lost).
"""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from tests.conftest import Api, Clock
from tests.exactness_model import IdealBucket
from zae_limiter import Limit, RateLimitExceeded
from zae_limiter.flows import regional as core
from zae_limiter.keys import regions as rk

REGIONS = ("us-east-1", "eu-west-1")  # the test client is in us-east-1: half of it
WHOLE = Limit.per_second("gps", 20).across(*REGIONS)
SHARE = SimpleNamespace(capacity=10, refill_amount=10, refill_period_seconds=1)


class Boom(Exception):
    """What the code inside a lease raises: the lease gives everything back."""


def _share(api: Api) -> core.ShareImage:
    key = rk.share_key(api.repo.namespace, "tenant", "api", "gps", "us-east-1")
    answer = api.run(
        api.repo.client.get_item(TableName=api.repo.table_name, Key=key, ConsistentRead=True)
    )
    return core.decode(answer["Item"])


def _exact(api: Api) -> None:
    """Takes one token at a time, never into a reserve: each one the ideal bucket judges."""
    book = api.repo.state.shares
    assert book is not None
    for memory in book.memories.values():
        memory.reserve = False


def _acquire(api: Api, ideal: IdealBucket, now: int, amount: int, then: str, by: int) -> None:
    admitted = ideal.take(amount, now)
    try:
        with api.acquire("tenant", "api", {"gps": amount}, limits=[WHOLE]) as lease:
            assert admitted, f"admitted {amount} at {now}, past the ideal bucket"
            if then == "adjust":
                lease.adjust(gps=by)
                (ideal.charge if by > 0 else ideal.give_back)(abs(by), now)
            elif then == "raise":
                raise Boom
    except RateLimitExceeded:
        assert not admitted, f"refused {amount} at {now}, which the ideal bucket admits"
    except Boom:
        ideal.give_back(amount, now)


@pytest.mark.parametrize("seed", [1, 2])
def test_rollbacks_and_adjustments_neither_create_nor_lose_tokens(
    api: Api, clock: Clock, seed: int
) -> None:
    rng = random.Random(seed)
    with api.acquire("tenant", "api", {"gps": 1}, limits=[WHOLE]):
        pass
    _exact(api)
    ideal = IdealBucket(SHARE, clock())
    ideal.take(1, clock())
    for _ in range(60):
        clock.advance(rng.choice([0, 0, 0.05, 0.1, 0.3, 0.7]))  # refill between steps
        then = rng.choice(["keep", "adjust", "adjust", "raise"])
        by = rng.choice([-3, -1, 1, 2, 4])
        # One amount throughout: a refusal's retry-after is for the amount refused, and a
        # smaller one is refused locally until then (docs/global.md, "The hot path").
        _acquire(api, ideal, clock(), 2, then, by)
        ideal.refill(clock())
        assert _share(api).tokens(clock()) == ideal.tokens * 1000, f"at step {_}"


def test_a_rollback_gives_back_to_the_share_and_an_adjustment_takes_more(
    api: Api, clock: Clock
) -> None:
    with pytest.raises(Boom):
        with api.acquire("tenant", "api", {"gps": 4}, limits=[WHOLE]):
            raise Boom
    assert _share(api).tokens(api.repo.now_ms()) == 10_000  # all of it back
    assert _share(api).consumed_milli == 0
    with api.acquire("tenant", "api", {"gps": 1}, limits=[WHOLE]) as lease:
        lease.adjust(gps=14)  # past the share: debt, as a regional limit's adjustment
    share = _share(api)
    assert share.tokens(api.repo.now_ms()) == -5_000 and share.consumed_milli == 15_000
    with pytest.raises(RateLimitExceeded):
        with api.acquire("tenant", "api", {"gps": 1}, limits=[WHOLE]):
            pass
    clock.advance(0.7)  # 2 tokens again
    both = [WHOLE, Limit.per_second("r", 9)]
    with api.acquire("tenant", "api", {"gps": 1, "r": 1}, limits=both) as lease:
        lease.adjust(gps=-1, r=1)  # a global limit is a limit the lease holds
    assert lease.consumed == {"gps": 0, "r": 2}
    assert _share(api).tokens(clock()) == 2_000


def test_a_refused_global_limit_gives_back_the_global_ones_taken_before_it(api: Api) -> None:
    tight = Limit.per_minute("tight", 4).across(*REGIONS)  # 2 a minute here
    both = [WHOLE, tight]
    for _ in range(2):
        with api.acquire("tenant", "api", {"gps": 1, "tight": 1}, limits=both):
            pass
    with pytest.raises(RateLimitExceeded) as caught:
        with api.acquire("tenant", "api", {"gps": 1, "tight": 1}, limits=both):
            pass
    assert [v.limit_name for v in caught.value.violations] == ["tight"]
    share = _share(api)
    assert share.consumed_milli == 2_000  # the third acquire's gps came back
    assert share.tokens(api.repo.now_ms()) == 8_000
