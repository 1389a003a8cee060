"""Table-level throttling through the partition emulator: short waits, no doubling.

The emulator limits the whole table below what one partition takes; one client acquires
on one entity as fast as it can. A throttled acquire waits a few jittered backoffs within
its budget (flows/scaling/throttled.py), so most get through; a refusal reaches the caller as a
throttled `RateLimiterUnavailable`; no acquire sends more than a handful of writes, none
is a doubling write, and the shard count stays 1.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests._servers import EngineEndpoint, unique_name
from zae_limiter import Limit, RateLimiterUnavailable, SyncRateLimiter, SyncRepository
from zae_limiter.flows.scaling.throttled import MAX_THROTTLED_WAITS
from zae_limiter.testing import PartitionEmulator

pytestmark = pytest.mark.engine

PARTITION = 50
TABLE = 2  # writes/s for the whole table: far below one partition's 50
#: At least this many acquires, and more until the table refused REFUSALS writes (at
#: most MAX_ACQUIRES): with reserves, a client writes a few times a second whatever its
#: acquire rate, and on a loaded machine 24 acquires at 4 writes/s met one refusal or
#: none (measured: 1-6), and the test then proved nothing of what a refusal does.
ACQUIRES, REFUSALS, MAX_ACQUIRES = 24, 3, 400
ROOMY = [Limit.per_second("rps", 100_000)]


@pytest.fixture(params=[True, False], ids=["with-reasons", "no-reasons"])
def limiter(
    engine_env: EngineEndpoint, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[tuple[SyncRateLimiter, PartitionEmulator]]:
    """With DynamoDB's throttling reasons (the refusal names the table) and without (an
    older endpoint: the client judges from the shard's window, which shows it quiet)."""
    reasons = bool(request.param)
    with PartitionEmulator(
        engine_env.url, PARTITION, shape="smooth", throttling_reasons=reasons
    ) as emu:
        monkeypatch.setenv("AWS_ENDPOINT_URL", emu.endpoint_url)
        name = unique_name()
        SyncRepository.open(name=name, create_table=True).close()
        repo = SyncRepository.open(name=name, partition_wcu=PARTITION)
        rl = SyncRateLimiter(repo)
        with rl.acquire("tenant", "api", {"rps": 1}, limits=ROOMY):
            pass  # the bucket exists and the client knows the entity
        emu.table_writes_per_second = TABLE
        emu.reset()
        yield rl, emu
        repo.close()


def test_table_level_throttles_wait_briefly_and_never_double(
    limiter: tuple[SyncRateLimiter, PartitionEmulator],
) -> None:
    rl, emu = limiter
    admitted = refused = 0
    with rl.repository.meter.measure() as measured:
        while admitted + refused < ACQUIRES or (
            emu.stats().throttled_writes < REFUSALS and admitted + refused < MAX_ACQUIRES
        ):
            try:
                with rl.acquire("tenant", "api", {"rps": 1}, limits=ROOMY):
                    admitted += 1
            except RateLimiterUnavailable as error:
                assert error.throttled, error
                refused += 1
    assert admitted > 0
    stats = emu.stats()
    assert stats.throttled_writes >= REFUSALS  # the table did refuse writes
    # one write and at most MAX_THROTTLED_WAITS more per acquire: never a retry storm
    assert stats.throttled_writes <= (admitted + refused) * (1 + MAX_THROTTLED_WAITS)
    assert set(stats.by_partition) == {"default/BUCKET#tenant#api#0"}
    # No doubling tried: its confirming read of shard 0 is a BatchGetItem. A refusal that
    # names the table reads nothing at all; without reasons, a client whose last view of
    # the window is older than EVIDENCE_READ_MS reads it (a GetItem), and sees it quiet.
    assert "batch_get_item" not in measured.ops
    if emu.throttling_reasons:
        assert "get_item" not in measured.ops
    emu.table_writes_per_second = None
    shards = rl.get_shards("tenant", "api")
    assert [s.shard_count for s in shards] == [1]
