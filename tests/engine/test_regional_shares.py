"""One global limit across three regions of the local global table (moto's server, one
database per region, and the replicator on a thread with a lag of 300 ms).

The load shifts from us-east-1 to ap-southeast-1 a third of the way through, and
eu-west-1 is partitioned for a while: every admission anywhere must fit one ideal bucket
of the whole limit, and every region's own item must show parts = initial - given +
taken, with nothing taken in that its giver's item does not show as given.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.regional import ENTITY, RESOURCE, Scenario, analyse, run_scenario
from tests._servers import EngineEndpoint
from zae_limiter import Limit, SyncGlobalShares, SyncRateLimiter, SyncRepository
from zae_limiter.flows import regional as core
from zae_limiter.keys import regions as rk
from zae_limiter.local.replication import Control, Replicator, write_json

pytestmark = pytest.mark.engine

REGIONS = ("us-east-1", "eu-west-1", "ap-southeast-1")
LAG_MS = 300


class Replicating:
    def __init__(self, url: str, table: str, control: Path) -> None:
        self.control = control
        self.partitioned: tuple[str, ...] = ()
        write_json(control, Control(LAG_MS, ()).to_dict())
        self.replicator = Replicator({r: url for r in REGIONS}, control, only=frozenset({table}))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self) -> None:
        while not self.stop.is_set():
            self.replicator.step()
            time.sleep(0.01)

    def partition(self, region: str, on: bool) -> None:
        cut = [r for r in self.partitioned if r != region] + ([region] if on else [])
        self.partitioned = tuple(cut)
        write_json(self.control, Control(LAG_MS, self.partitioned).to_dict())


@pytest.fixture
def global_table(
    moto_server: EngineEndpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, Replicating]]:
    for name, value in moto_server.env.items():
        monkeypatch.setenv(name, value)
    table = f"shares-{uuid.uuid4().hex[:8]}"
    for region in REGIONS:
        SyncRepository.open(
            name=table, endpoint_url=moto_server.url, region=region, create_table=True
        ).close()
    replicating = Replicating(moto_server.url, table, tmp_path / "control.json")
    replicating.thread.start()
    try:
        yield table, replicating
    finally:
        replicating.stop.set()
        replicating.thread.join(timeout=10)


def _own_items(url: str, table: str) -> dict[str, core.ShareImage]:
    out = {}
    for region in REGIONS:
        with SyncRepository.open(name=table, endpoint_url=url, region=region) as repo:
            key = rk.share_key(repo.namespace, ENTITY, RESOURCE, "rps", region)
            found = repo.client.get_item(TableName=table, Key=key, ConsistentRead=True)
            out[region] = core.decode(found["Item"])
    return out


def _check_counters(url: str, table: str) -> None:
    """Read each region's own item, then all again: whatever a receiver took in, its
    giver's item (read later, so showing at least as much) has given."""
    first = _own_items(url, table)
    later = _own_items(url, table)
    for region, image in first.items():
        initial = core.initial_parts(REGIONS, region)
        assert image.parts == initial - sum(image.given.values()) + sum(image.taken.values())
        for giver, taken in image.taken.items():
            assert taken <= later[giver].given.get(region, 0), (region, giver)
    assert sum(i.parts for i in later.values()) <= core.PARTS


def test_one_global_limit_across_three_regions(
    moto_server: EngineEndpoint, global_table: tuple[str, Replicating]
) -> None:
    table, replicating = global_table
    scenario = Scenario(
        regions=REGIONS,
        limit_per_second=40,
        seconds=12,
        schedule=((0.0, (0.8, 0.1, 0.1)), (4.0, (0.1, 0.1, 0.8))),
        partition=("eu-west-1", 6.0, 9.0),
        threads_per_region=1,
        lag_ms=LAG_MS,
    )
    endpoints = {r: moto_server.url for r in REGIONS}
    run = run_scenario(scenario, "shares", endpoints, table, replicating.partition)
    analysis = analyse(run)
    assert not run.errors, run.errors[:3]
    assert analysis.admitted > 0
    assert analysis.over_admitted <= 1.0, f"admitted {analysis.over_admitted} past the ideal bucket"
    time.sleep(3 * LAG_MS / 1000)
    _check_counters(moto_server.url, table)
    after = _own_items(moto_server.url, table)
    moved = sum(sum(i.given.values()) for i in after.values())
    assert moved > 0, "no transfer happened: the test shows nothing"


def test_a_table_without_a_global_limit_makes_no_extra_request(
    moto_server: EngineEndpoint, global_table: tuple[str, Replicating]
) -> None:
    table, _ = global_table
    limit = Limit.per_second("rps", 100)
    with SyncRepository.open(
        name=table, endpoint_url=moto_server.url, region="us-east-1", reserve=False
    ) as repo:
        limiter = SyncRateLimiter(repository=repo)
        with limiter.acquire("plain", RESOURCE, {"rps": 1}, limits=[limit]):
            pass
        before = repo.get_capacity_stats().calls
        with limiter.acquire("plain", RESOURCE, {"rps": 1}, limits=[limit]):
            pass
        assert repo.get_capacity_stats().calls - before == 1  # one write, as ever
        items = repo.client.scan(TableName=table)["Items"]
        assert not [i for i in items if rk.ShareAttr.SHARE_PREFIX in i["PK"]["S"]]


def test_a_keeper_pass_and_the_shares_view(
    moto_server: EngineEndpoint, global_table: tuple[str, Replicating]
) -> None:
    table, _ = global_table
    limit = Limit.per_second("rps", 30)
    with SyncRepository.open(name=table, endpoint_url=moto_server.url, region="eu-west-1") as repo:
        shares = SyncGlobalShares(repo, REGIONS)
        assert shares.region == "eu-west-1"  # from the client's region
        taken = shares.acquire(ENTITY, "view", limit)
        assert taken.admitted and taken.requests == 2  # the item read, then one write
        again = shares.acquire(ENTITY, "view", limit)
        assert again.requests == 1  # one write
        seen = shares.shares(ENTITY, "view", limit)
        assert [s.region for s in seen] == ["eu-west-1"]
        assert seen[0].capacity == pytest.approx(10.0, abs=0.01)
        assert shares.keep_once(ENTITY, "view", limit).requests >= 1


def test_entity_shares_show(
    moto_server: EngineEndpoint, global_table: tuple[str, Replicating]
) -> None:
    from click.testing import CliRunner

    from zae_limiter.cli import cli

    table, _ = global_table
    limit = Limit.per_second("rps", 30)
    for region in REGIONS[:2]:
        with SyncRepository.open(name=table, endpoint_url=moto_server.url, region=region) as repo:
            SyncGlobalShares(repo, REGIONS).acquire(ENTITY, "cli", limit)
    base = ["--name", table, "--endpoint-url", moto_server.url, "--region", "us-east-1"]
    show = ["entity", "shares", "show", ENTITY, "--resource", "cli", "--limit", "rps"]
    result = CliRunner().invoke(cli, [*show, *base])
    assert result.exit_code == 0, result.output
    assert "us-east-1" in result.output and "33.3%" in result.output
    assert "sum of shares" in result.output
    as_json = CliRunner().invoke(cli, [*show, *base, "--output", "json"])
    assert as_json.exit_code == 0, as_json.output
    assert '"in_flight_to": 0' in as_json.output
    missing = CliRunner().invoke(cli, [*show[:3], "nobody", "-r", "cli", "-l", "rps", *base])
    assert missing.exit_code == 0 and "no regional shares yet" in missing.output
