"""The local global table's replicator against real engines over HTTP.

One engine serves every region here (moto's server and DynamoDB Local both keep a
separate database per region), which keeps the tests fast; `local up --regions` runs
one process per region (tests/engine/test_local_regions_cli.py). Lags are 100-150 ms.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from click.testing import CliRunner

from tests._servers import EngineEndpoint
from tests.old_layout import build_old_table, create_table, scan_all
from zae_limiter import keys, schema, table
from zae_limiter.cli import _errors, cli
from zae_limiter.local import local_env
from zae_limiter.local.replication import Control, Replicator, write_json

pytestmark = pytest.mark.engine

LAG_MS = 150


@dataclass
class Replicated:
    name: str
    clients: dict[str, Any]
    control: Path
    replicator: Replicator

    def put(self, region: str, key: str, value: str) -> None:
        self.clients[region].put_item(TableName=self.name, Item={
            "PK": {"S": key}, "SK": {"S": "#STATE"}, "v": {"S": value},
        })  # fmt: skip

    def get(self, region: str, key: str) -> str | None:
        item = self.clients[region].get_item(
            TableName=self.name, Key={"PK": {"S": key}, "SK": {"S": "#STATE"}},
            ConsistentRead=True,
        ).get("Item")  # fmt: skip
        return None if item is None else str(item["v"]["S"])

    def everywhere(self, key: str) -> dict[str, str | None]:
        return {region: self.get(region, key) for region in self.clients}

    def partition(self, *regions: str) -> None:
        write_json(self.control, Control(LAG_MS, tuple(regions)).to_dict())


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within the timeout"
        time.sleep(0.02)


def _clients(endpoint: EngineEndpoint, regions: tuple[str, ...]) -> dict[str, Any]:
    kwargs = endpoint.client_kwargs()
    kwargs["config"] = Config(account_id_endpoint_mode="disabled")
    return {r: boto3.client("dynamodb", **{**kwargs, "region_name": r}) for r in regions}


@contextlib.contextmanager
def _running(
    endpoint: EngineEndpoint, clients: dict[str, Any], name: str, tmp: Path
) -> Iterator[Replicated]:
    """A replicator for table `name` (already created in some regions), on a thread."""
    control = tmp / "control.json"
    write_json(control, Control(LAG_MS, ()).to_dict())
    # Only this test's table: the engine is shared with the session's other tests.
    replicator = Replicator(
        {r: endpoint.url for r in clients}, control, only=frozenset({name})
    )
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            replicator.step()
            time.sleep(0.01)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield Replicated(name, clients, control, replicator)
    finally:
        stop.set()
        thread.join(timeout=10)


def _replicated(
    endpoint: EngineEndpoint, regions: tuple[str, ...], tmp: Path
) -> Iterator[Replicated]:
    name = f"glob-{uuid.uuid4().hex[:8]}"
    clients = _clients(endpoint, regions)
    for client in clients.values():
        client.create_table(**table.create_table_params(name))
    with _running(endpoint, clients, name, tmp) as rep:
        eventually(lambda: name in rep.replicator.tables)
        yield rep


@pytest.fixture
def three(moto_server: EngineEndpoint, tmp_path: Path) -> Iterator[Replicated]:
    yield from _replicated(moto_server, ("us-east-1", "eu-west-1", "ap-southeast-1"), tmp_path)


@pytest.fixture
def two_on_dynamodb_local(dynamodb_local: EngineEndpoint, tmp_path: Path) -> Iterator[Replicated]:
    yield from _replicated(dynamodb_local, ("us-east-1", "eu-west-1"), tmp_path)


def _appears_after_the_lag(rep: Replicated) -> None:
    source, *others = list(rep.clients)
    written = time.monotonic()
    rep.put(source, "k", "one")
    assert all(rep.get(r, "k") is None for r in others)  # not before the lag
    eventually(lambda: all(rep.get(r, "k") == "one" for r in others))
    assert time.monotonic() - written >= LAG_MS / 1000


def _concurrent_writes_converge(rep: Replicated) -> None:
    a, b = list(rep.clients)[:2]
    # Both written within the lag: neither region has seen the other's write.
    rep.put(a, "hot", "from-a")
    rep.put(b, "hot", "from-b")
    eventually(lambda: len(set(rep.everywhere("hot").values())) == 1)
    time.sleep(3 * LAG_MS / 1000)  # nothing left in flight changes the outcome
    final = set(rep.everywhere("hot").values())
    assert len(final) == 1
    winner = final.pop()
    # One write survives everywhere, the other is lost, as on AWS.
    assert winner in ("from-a", "from-b")


def test_a_write_appears_in_every_other_region_after_the_lag(three: Replicated) -> None:
    _appears_after_the_lag(three)


def test_concurrent_writes_converge_on_the_last_writer(three: Replicated) -> None:
    _concurrent_writes_converge(three)
    # The stream times of moto are in milliseconds: the later write is the winner.
    assert set(three.everywhere("hot").values()) == {"from-b"}


def test_a_write_after_a_replicated_one_wins_everywhere(three: Replicated) -> None:
    a, b, _ = list(three.clients)
    three.put(a, "seq", "first")
    eventually(lambda: three.get(b, "seq") == "first")
    three.put(b, "seq", "second")
    eventually(lambda: set(three.everywhere("seq").values()) == {"second"})


def test_a_partitioned_region_gets_nothing_until_healed_then_converges(
    three: Replicated,
) -> None:
    a, b, c = list(three.clients)
    three.partition(b)
    time.sleep(0.1)  # the replicator reads the control file on its next pass
    three.put(a, "p", "from-a")
    three.put(b, "q", "from-b")
    eventually(lambda: three.get(c, "p") == "from-a")
    time.sleep(3 * LAG_MS / 1000)
    assert three.get(b, "p") is None  # nothing in
    assert three.get(a, "q") is None and three.get(c, "q") is None  # nothing out
    three.put(a, "p", "again-from-a")  # the backlog keeps order: this one lands last
    three.partition()
    eventually(lambda: set(three.everywhere("p").values()) == {"again-from-a"})
    eventually(lambda: set(three.everywhere("q").values()) == {"from-b"})


def test_a_delete_is_deleted_everywhere(three: Replicated) -> None:
    _a, b, c = list(three.clients)
    three.put(b, "gone", "soon")
    eventually(lambda: set(three.everywhere("gone").values()) == {"soon"})
    three.clients[c].delete_item(
        TableName=three.name, Key={"PK": {"S": "gone"}, "SK": {"S": "#STATE"}}
    )
    eventually(lambda: set(three.everywhere("gone").values()) == {None})


def test_replicated_writes_are_not_sent_again(three: Replicated) -> None:
    a = next(iter(three.clients))
    three.put(a, "once", "x")
    eventually(lambda: set(three.everywhere("once").values()) == {"x"})
    time.sleep(3 * LAG_MS / 1000)
    # One client write, two regions to copy it to: two writes, and no echo.
    assert three.replicator.applied[three.name] == 2
    assert three.replicator.links.backlog() == {}


def test_on_dynamodb_local_writes_replicate_and_conflicts_converge(
    two_on_dynamodb_local: Replicated,
) -> None:
    _appears_after_the_lag(two_on_dynamodb_local)
    _concurrent_writes_converge(two_on_dynamodb_local)
    a, b = list(two_on_dynamodb_local.clients)
    # DynamoDB Local's stream times are whole minutes: the order of writes in one
    # region still decides, through the counter.
    two_on_dynamodb_local.put(a, "seq", "first")
    eventually(lambda: two_on_dynamodb_local.get(b, "seq") == "first")
    two_on_dynamodb_local.put(b, "seq", "second")
    eventually(lambda: set(two_on_dynamodb_local.everywhere("seq").values()) == {"second"})


def test_migrate_in_one_region_converts_the_items_of_every_region(
    moto_server: EngineEndpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`migrate` writes through one region; replication carries the converted items and
    the version record to the others (docs/global.md, 'Migrations')."""
    name = f"mig-{uuid.uuid4().hex[:8]}"
    a, b = "us-east-1", "eu-west-1"
    clients = _clients(moto_server, (a, b))
    create_table(clients[b], name)
    with _running(moto_server, clients, name, tmp_path) as rep:
        old = build_old_table(clients[a], name)
        eventually(lambda: scan_all(clients[b], name) == scan_all(clients[a], name))
        for variable, value in local_env(moto_server.url, a).items():
            monkeypatch.setenv(variable, value)
        with CliRunner().isolation() as (_out, err, _):
            code = _errors.run(cli, ["migrate", "--name", name, "--yes"])
            assert code == 0, err.getvalue().decode()
        migrated = scan_all(clients[a], name)
        record = migrated[("_/SYSTEM#", "#VERSION")]
        assert record[keys.A_SCHEMA_VERSION] == {"N": str(schema.SCHEMA_VERSION)}
        assert all(keys.TTL in migrated[k] for k in old.old_buckets)
        eventually(lambda: scan_all(clients[b], name) == scan_all(clients[a], name))
        assert scan_all(clients[b], name) == migrated
        assert rep.replicator.links.backlog() == {}


def test_a_client_write_landing_just_before_a_replicated_one_wins(
    moto_server: EngineEndpoint, tmp_path: Path
) -> None:
    """Driven step by step: a client of b writes after the replicator read b's stream
    and before it applies a's older change there. The client's write is newer and must
    survive everywhere (the replicator writes it back, then replicates it)."""
    name = f"race-{uuid.uuid4().hex[:8]}"
    clients = _clients(moto_server, ("us-east-1", "eu-west-1"))
    for client in clients.values():
        client.create_table(**table.create_table_params(name))
    control = tmp_path / "control.json"
    write_json(control, Control(0, ()).to_dict())
    replicator = Replicator(
        {r: moto_server.url for r in clients}, control, only=frozenset({name})
    )
    rep = Replicated(name, clients, control, replicator)
    replicator.discover()
    rep.put("us-east-1", "k", "from-a")
    replicator.poll("us-east-1")
    replicator.poll("eu-west-1")
    rep.put("eu-west-1", "k", "from-b")  # unseen by the replicator
    replicator.deliver(Control(0, ()))
    for _ in range(5):
        replicator.step()
    assert rep.everywhere("k") == {"us-east-1": "from-b", "eu-west-1": "from-b"}
    assert replicator.book.pending == {}
