"""Token reserves end to end, on both faces: memory hits, exactness at the limit, returns
(idle, age, close), a crashed client, cascade, adjustments, rollbacks and limit changes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError

from tests.conftest import Api, Clock
from zae_limiter import Limit, RateLimitExceeded, keys
from zae_limiter.flows.reserves.book import ReserveSettings

#: One token an hour: nothing refills while a test runs.
SLOW = [Limit.custom("rpm", 100, 1, 3600)]
ROOMY = [Limit.per_minute("rpm", 60_000), Limit.per_minute("tpm", 6_000_000)]


def warm(api: Api, limits: list[Limit], n: int = 5, **consume: int) -> None:
    """Enough acquires at one instant to make the bucket hot in this client."""
    for _ in range(n):
        with api.acquire("k", "gpt", consume or {"rpm": 1}, limits=limits):
            pass


def reserved(api: Api, entity: str = "k") -> int:
    return sum(s.reserved.get("rpm", 0) for s in api.get_shards(entity, "gpt"))


def tokens(api: Api, entity: str = "k") -> int:
    return sum(s.tokens["rpm"] for s in api.get_shards(entity, "gpt"))


def give_back(api: Api, everything: bool = True) -> None:
    api.run(api.repo.return_reserves(everything))


def test_a_hot_bucket_is_served_from_memory(api: Api) -> None:
    warm(api, ROOMY)
    with api.meter() as m:
        for _ in range(200):
            with api.acquire("k", "gpt", {"rpm": 1, "tpm": 50}, limits=ROOMY):
                pass
    assert len(m.calls) <= 10, m.ops  # a handful of reserve writes, not 200
    stats = api.limiter.get_reserve_stats()
    assert stats.hits >= 190 and stats.takes >= 1
    assert reserved(api) > 0


def test_reserves_off_is_one_write_per_acquire(api: Api) -> None:
    plain = api.new_client(reserve=False)
    warm(plain, ROOMY)
    with plain.meter() as m:
        for _ in range(20):
            with plain.acquire("k", "gpt", {"rpm": 1}, limits=ROOMY):
                pass
    assert m.ops == ["update_item"] * 20
    assert plain.limiter.get_reserve_stats().hits == 0 and reserved(plain) == 0


def test_exact_at_the_limit_and_conserved_after_return(api: Api) -> None:
    admitted = 0
    waits = []
    for _ in range(140):
        try:
            with api.acquire("k", "gpt", {"rpm": 1}, limits=SLOW):
                admitted += 1
        except RateLimitExceeded as error:
            waits.append(error.retry_after_seconds)
    assert admitted == 100
    assert len(waits) == 40 and all(w > 0 for w in waits)
    give_back(api)
    assert tokens(api) == 0 and reserved(api) == 0


def unknown_outcome_return(api: Api) -> None:
    """A return DynamoDB applied but whose answer never came back (outcome unknown) is
    counted as lost and never written again: a second ADD would create tokens."""
    warm(api, SLOW, n=8)
    assert reserved(api) > 0
    answered: list[str] = []

    def lose_the_answer(**kwargs: Any) -> None:
        # after-call: the write was applied; the client is told it timed out.
        answered.append("lost")
        raise ReadTimeoutError(endpoint_url="the answer was lost")

    events = api.repo.client.meta.events
    events.register("after-call.dynamodb.UpdateItem", lose_the_answer)
    give_back(api)
    events.unregister("after-call.dynamodb.UpdateItem", lose_the_answer)
    assert answered == ["lost"]
    give_back(api)
    give_back(api)
    assert api.limiter.get_reserve_stats().lost == 1
    # Applied once: the unspent tokens are back, none created, nothing still held.
    assert reserved(api) == 0
    assert tokens(api) == 100 - 8


def test_a_return_whose_outcome_is_unknown_is_never_retried(api: Api) -> None:
    unknown_outcome_return(api)


def test_unspent_tokens_go_back_after_idle_time(api: Api, clock: Clock) -> None:
    warm(api, SLOW, n=8)
    held = reserved(api)
    assert held > 0
    before = tokens(api)
    clock.advance(1.5)
    give_back(api, everything=False)  # not idle long enough yet
    assert reserved(api) == held
    clock.advance(1.0)
    give_back(api, everything=False)
    assert eventually(lambda: let_keeper_run(api) and reserved(api) == 0)
    assert tokens(api) + 8 == 100
    assert tokens(api) > before
    assert api.limiter.get_reserve_stats().returns == 1


def test_a_reserve_goes_back_at_its_maximum_age_though_in_use(api: Api, clock: Clock) -> None:
    warm(api, ROOMY, n=8)
    for _ in range(20):
        clock.advance(0.5)
        for _ in range(4):
            with api.acquire("k", "gpt", {"rpm": 1}, limits=ROOMY):
                pass
        give_back(api, everything=False)
    # The keeper (a background thread or task) may have been the one to return it.
    assert eventually(lambda: let_keeper_run(api) and api.limiter.get_reserve_stats().returns)


def test_an_aged_reserve_goes_back_with_the_next_acquires_write(api: Api) -> None:
    """A busy bucket's reserve that reaches its age is returned by the write the next
    acquire makes anyway (which takes the next reserve): one request, not a return and a
    take, and every token accounted for."""
    warm(api, SLOW, n=8)
    book = api.repo.state.reserves
    old = book.holding(("k", "gpt"))
    assert old is not None and old.left["rpm"] > 0
    # Aged now, and used just now (not idle): the repository's clock does not move, so
    # the keeper, which waits RENEW_GRACE_MS past the age for an acquire, stays out.
    old.born_ms -= book.settings.max_age_ms
    with api.meter() as m:
        with api.acquire("k", "gpt", {"rpm": 1}, limits=SLOW):
            pass
    assert m.ops == ["update_item"]
    stats = api.limiter.get_reserve_stats()
    assert (stats.returns, stats.renewed, stats.lost) == (1, 1, 0)
    new = book.holding(("k", "gpt"))
    assert new is not None and new is not old and new.taken_total() == new.left
    # What the item holds in reserves is the new reserve alone; the old one's unspent
    # tokens are back in the bucket.
    assert reserved(api) == new.left["rpm"] // 1000
    assert tokens(api) == 100 - 9 - reserved(api)
    give_back(api)
    assert tokens(api) == 100 - 9 and reserved(api) == 0


def let_keeper_run(api: Api) -> bool:
    """The async keeper is a task: it only moves while the test's loop runs."""
    if api.loop is not None:
        api.run(asyncio.sleep(0.1))
    return True


def eventually(check: Callable[[], bool], seconds: float = 5.0) -> bool:
    """Wait (boundedly) for background work; not a timing assertion."""
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        time.sleep(0.05)
    return check()


def test_close_returns_every_reserve(api: Api) -> None:
    other = api.new_client()
    warm(other, SLOW, n=8)
    assert reserved(api) > 0
    api.run(other.limiter.close())
    assert reserved(api) == 0
    assert tokens(api) == 100 - 8


def test_a_crashed_client_loses_its_reserve_and_never_creates_tokens(
    api: Api, clock: Clock
) -> None:
    crashed = api.new_client()
    warm(crashed, SLOW, n=8)
    [(_key, lost)] = crashed.repo.state.reserves.drain()  # the process died: no return
    left = lost.left["rpm"] // 1000
    assert left > 0 and reserved(api) == lost.taken_total()["rpm"] // 1000
    assert tokens(api) == 100 - 8 - left
    clock.advance(2 * keys.RESERVE_EPOCH_MS / 1000)
    # Readers stop counting the held tokens; they are lost (spent), not created.
    assert reserved(api) == 0
    assert tokens(api) == 100 - 8 - left


def test_a_crashed_clients_share_of_the_capacity_comes_back(api: Api, clock: Clock) -> None:
    refilling = [Limit.per_minute("rpm", 600)]
    crashed = api.new_client()
    warm(crashed, refilling, n=8)
    held = reserved(api)
    assert held > 0
    crashed.repo.state.reserves.drain()
    clock.advance(30)  # a refill period: full, less what the live reserve holds
    assert tokens(api) == 600 - held
    clock.advance(2 * keys.RESERVE_EPOCH_MS / 1000)
    # Expired, the count is spent tokens: not created, and not back before a write
    # charges it to the bucket (the next acquire does), from where time refills it.
    assert tokens(api) == 600 - held
    other = api.new_client(reserve=False)
    with other.acquire("k", "gpt", {"rpm": 1}, limits=refilling):
        pass
    assert reserved(api) == 0 and tokens(api) == 600 - held - 1
    clock.advance(60)
    assert tokens(api) == 600


def test_cascade_takes_reserves_on_child_and_parent(api: Api) -> None:
    api.create_entity("org")
    api.create_entity("k", parent_id="org", cascade=True)
    api.set_limits("k", SLOW, resource="gpt")
    api.set_limits("org", [Limit.custom("rpm", 1000, 1, 3600)], resource="gpt")
    for _ in range(30):
        with api.acquire("k", "gpt", {"rpm": 1}):
            pass
    assert reserved(api, "k") > 0 and reserved(api, "org") > 0
    give_back(api)
    assert tokens(api, "k") == 70 and tokens(api, "org") == 970


def test_adjustments_and_rollbacks_stay_in_the_reserve(api: Api) -> None:
    limits = [Limit.custom("rpm", 1000, 1, 3600), Limit.custom("tpm", 100_000, 1, 3600)]
    for _ in range(40):
        with api.acquire("k", "gpt", {"rpm": 1, "tpm": 500}, limits=limits) as lease:
            lease.adjust(tpm=-300)
    held = api.repo.state.reserves.holding(("k", "gpt"))
    assert held is not None and held.left["rpm"] >= 2000 and held.left["tpm"] >= 1_000_000
    with api.meter() as m:
        with api.acquire("k", "gpt", {"rpm": 1, "tpm": 500}, limits=limits) as lease:
            lease.adjust(tpm=-100)  # credited to the reserve
        with (
            pytest.raises(RuntimeError),
            api.acquire("k", "gpt", {"rpm": 1, "tpm": 500}, limits=limits),
        ):
            raise RuntimeError("rolled back into the reserve")
    assert m.calls == []
    with api.meter() as m:
        with api.acquire("k", "gpt", {"rpm": 1, "tpm": 100}, limits=limits) as lease:
            lease.adjust(tpm=50_000)  # more than the reserve holds: written
    assert m.ops == ["update_item"]
    give_back(api)
    used = {"rpm": 40 + 1 + 1, "tpm": 40 * 200 + 400 + 100 + 50_000}
    assert api.available("k", "gpt", limits=limits) == {
        "rpm": 1000 - used["rpm"],
        "tpm": 100_000 - used["tpm"],
    }


def test_a_lowered_limit_reaches_a_reserve_holder_within_the_cache_ttl(
    api: Api, clock: Clock
) -> None:
    # A patient deadline: in-process moto on a busy machine can take over the default
    # second to create the bucket, and this test is about limits, not deadlines.
    holder = api.new_client(config_cache_ttl=1, timeout=10)
    api.set_limits("k", [Limit.custom("rpm", 1000, 1, 3600)], resource="gpt")
    for _ in range(20):
        with holder.acquire("k", "gpt", {"rpm": 1}):
            pass
    assert reserved(api) > 0
    api.set_limits("k", [Limit.custom("rpm", 30, 1, 3600)], resource="gpt")
    clock.advance(1.5)
    admitted = 0
    for _ in range(40):
        try:
            with holder.acquire("k", "gpt", {"rpm": 1}):
                admitted += 1
        except RateLimitExceeded:
            pass
    give_back(holder)
    # From the change on, the bucket holds at most the new capacity: the old reserve was
    # returned into it, not spent.
    assert 0 < admitted <= 30
    assert tokens(api) + admitted <= 30


def test_settings_shape_the_reserve(api: Api) -> None:
    small = api.new_client(reserve=ReserveSettings(writes_per_second=10, max_share=0.02))
    warm(small, SLOW, n=8)
    assert 0 < reserved(api) <= 2  # 2% of 100


def test_reserved_tokens_are_not_available_to_others(api: Api) -> None:
    holder = api.new_client()
    warm(holder, SLOW, n=8)
    held = holder.repo.state.reserves.holding(("k", "gpt"))
    assert held is not None and held.left["rpm"] > 0
    left = held.left["rpm"] // 1000
    assert api.available("k", "gpt", limits=SLOW) == {"rpm": 100 - 8 - left}


def test_the_keeper_returns_idle_reserves_by_itself(api: Api, clock: Clock) -> None:
    warm(api, SLOW, n=8)
    assert reserved(api) > 0
    clock.advance(3)  # idle past idle_ms on the repository's clock
    assert eventually(lambda: let_keeper_run(api) and reserved(api) == 0, seconds=10)
    assert tokens(api) == 100 - 8


def keeper_ended(api: Api) -> bool:
    """Whether the keeper's thread or task has finished its round (nothing held)."""
    keeper = api.repo._keeper
    let_keeper_run(api)
    if api.loop is None:
        return keeper._thread is not None and not keeper._thread.is_alive()
    return keeper._task is not None and keeper._task.done()


def test_a_keeper_that_went_idle_starts_again_for_the_next_reserve(
    api: Api, clock: Clock
) -> None:
    """An acquire pokes the keeper only when it is not watching the book (a reserve hit
    reads a flag, no call): one that ended with nothing held must start again."""
    warm(api, SLOW, n=8)
    clock.advance(3)
    assert eventually(lambda: let_keeper_run(api) and reserved(api) == 0, seconds=10)
    assert eventually(lambda: keeper_ended(api), seconds=10)
    warm(api, SLOW, n=8)  # a new reserve: the acquire that took it pokes the keeper
    assert reserved(api) > 0
    clock.advance(3)
    assert eventually(lambda: let_keeper_run(api) and reserved(api) == 0, seconds=10)
    assert tokens(api) == 100 - 16


def test_a_sharded_bucket_lends_from_one_shard_and_gets_it_back(api: Api, clock: Clock) -> None:
    limits = [Limit.custom("rpm", 6000, 1, 3600)]
    heater = api.new_client(partition_wcu=10, reserve=False)
    admitted = 0
    for _ in range(60):  # 20 writes a second on a 10-write partition: the count doubles
        clock.advance(0.05)
        with heater.acquire("k", "gpt", {"rpm": 1}, limits=limits):
            admitted += 1
    assert len(api.get_shards("k", "gpt")) >= 2
    holder = api.new_client(partition_wcu=10)
    for _ in range(40):
        with holder.acquire("k", "gpt", {"rpm": 1}, limits=limits):
            admitted += 1
    held = holder.repo.state.reserves.holding(("k", "gpt"))
    assert held is not None
    shards = api.get_shards("k", "gpt")
    assert [s.shard_id for s in shards if s.reserved] == [held.shard_id]
    before = {s.shard_id: s.tokens["rpm"] for s in shards}
    left = held.left["rpm"] // 1000
    assert left > 0
    # Exact leftovers: what the reserve holds is out of the bucket, then all of it is back.
    assert api.available("k", "gpt", limits=limits) == {"rpm": 6000 - admitted - left}
    give_back(holder)
    assert api.available("k", "gpt", limits=limits) == {"rpm": 6000 - admitted}
    after = {s.shard_id: s.tokens["rpm"] for s in api.get_shards("k", "gpt")}
    assert sum(s.reserved.get("rpm", 0) for s in api.get_shards("k", "gpt")) == 0
    # The unspent tokens went back to the shard they came from, and to no other. Per shard
    # at least before + left, not exactly: `get_shards` shows a shard's tokens clamped to its
    # share minus what reserves hold, so if the count doubled while the reserve was out (a
    # smaller share), "before" can read lower than the item holds (seen once in CI: 9).
    assert after[held.shard_id] >= before[held.shard_id] + left
    assert all(after[i] == before[i] for i in after if i != held.shard_id)


#: Fourteen tokens that do not refill within a test (one a year).
FOURTEEN = [Limit.custom("rpm", 14, 1, 365 * 24 * 3600)]


def test_a_give_back_past_what_the_reserve_spent_loses_no_token(api: Api) -> None:
    """The fault simulator's seed 12166, with no fault: a lease served from the reserve
    gives back more than it took (here 1 taken, adjusted by -5, back to a full bucket).
    The token the reserve spent settles back into it and only 4 go to the bucket. Written
    whole, the give-back reached the bucket's full-at time before that spent token was
    charged there (with the reserve's next write): the bucket, at its top, dropped one,
    and after 7 more acquires 6 were left where 7 should be."""
    for _ in range(4):  # hot: the fourth write also takes a reserve of one token
        with api.acquire("k", "gpt", {"rpm": 1}, limits=FOURTEEN):
            pass
    held = api.repo.state.reserves.holding(("k", "gpt"))
    assert held is not None and held.left == {"rpm": 1000}, "a reserve of one token"
    with api.acquire("k", "gpt", {"rpm": 1}, limits=FOURTEEN) as lease:
        lease.adjust(rpm=-5)  # served from the reserve; 4 more than it took go back
    assert held.left == {"rpm": 1000}, "the spent token settled back into the reserve"
    for _ in range(7):
        with api.acquire("k", "gpt", {"rpm": 1}, limits=FOURTEEN):
            pass
    give_back(api)
    # 4 + (1 - 5) + 7 consumed; the bucket never passed its top on the way.
    assert reserved(api) == 0 and tokens(api) == 14 - 7
