"""The replicator process of the local global table: streams in, writes out.

    python -m zae_limiter.local.replication --config <state dir>/<instance>.replication.json

`zae-limiter local up --regions a,b,c` starts it; the config names each region's
endpoint and the control file, which it re-reads on every pass: `lag_ms` and the regions
`partitioned` (`zae-limiter local partition`). Every table that exists in two or more
regions is replicated; a table is read from the start of its stream when first seen.
What to apply is decided in `local/replicator.py`; this module only reads and writes.
It writes a status file (backlog per link, tables) for `zae-limiter local status`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zae_limiter.local import process
from zae_limiter.local.replicator import Change, Image, Links, ReplicaBook

log = logging.getLogger("zae_limiter.local.replication")

DEFAULT_LAG_MS = 1000
#: How often the stream shards and tables are looked for again (new tables, new shards).
DISCOVER_SECONDS = 1.0
POLL_SECONDS = 0.02
#: With nothing read and nothing waiting, passes slow down to this: an idle local
#: global table should not keep a laptop's engines busy answering GetRecords.
IDLE_POLL_SECONDS = 0.1
STATUS_SECONDS = 0.5


@dataclass(frozen=True, slots=True)
class Control:
    """What the operator can change while the replicator runs."""

    lag_ms: int = DEFAULT_LAG_MS
    partitioned: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"lag_ms": self.lag_ms, "partitioned": list(self.partitioned)}


def read_control(path: Path) -> Control:
    """The control file; the defaults when it is missing or half written."""
    try:
        raw = json.loads(path.read_text())
        return Control(int(raw.get("lag_ms", DEFAULT_LAG_MS)), tuple(raw.get("partitioned", ())))
    except (OSError, ValueError, TypeError):
        return Control()


def write_json(path: Path, body: Mapping[str, Any]) -> None:
    """Write then rename: a reader (the replicator, `local status`) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def _clients(region: str, endpoint_url: str) -> tuple[Any, Any]:
    import boto3  # deferred, as everywhere in local/: `--help` does not pay for it
    from botocore.config import Config

    config = Config(account_id_endpoint_mode="disabled", retries={"total_max_attempts": 2})
    common: dict[str, Any] = {
        "endpoint_url": endpoint_url,
        # DynamoDB Local keeps one database per access key and region: the region of the
        # engine's clients is part of which tables they see.
        "region_name": region,
        "aws_access_key_id": process.LOCAL_CREDENTIALS[0],
        "aws_secret_access_key": process.LOCAL_CREDENTIALS[1],
        "config": config,
    }
    return boto3.client("dynamodb", **common), boto3.client("dynamodbstreams", **common)


@dataclass
class _Stream:
    """One table's stream in one region: an iterator per open shard."""

    arn: str
    iterators: dict[str, str | None] = field(default_factory=dict)


def item_key(table: str, keys: Mapping[str, Any]) -> tuple[str, str]:
    return table, json.dumps(keys, sort_keys=True)


class Replicator:
    """Replicates every table found in two or more of `endpoints` (region -> URL)."""

    def __init__(
        self,
        endpoints: Mapping[str, str],
        control_path: Path,
        status_path: Path | None = None,
        clock: Callable[[], float] = time.time,
        only: frozenset[str] | None = None,
    ) -> None:
        self.regions = tuple(endpoints)
        self.control_path = control_path
        self.status_path = status_path
        self.clock = clock
        self.book = ReplicaBook()
        self.links = Links(self.regions)
        self.clients = {r: _clients(r, url) for r, url in endpoints.items()}
        self.streams: dict[tuple[str, str], _Stream] = {}
        self.tables: dict[str, set[str]] = {}
        #: Writes made per table (each a change copied to one region).
        self.applied: Counter[str] = Counter()
        #: Replicate these tables only (None: every table in two or more regions).
        self.only = only
        self.records_read = 0
        self._discovered_at = 0.0
        self._status_at = 0.0

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def discover(self) -> None:
        """Find tables (in two or more regions) and their streams' shards."""
        found: dict[str, set[str]] = {}
        for region, (ddb, _) in self.clients.items():
            for name in _list_tables(ddb):
                found.setdefault(name, set()).add(region)
        self.tables = {
            t: regions
            for t, regions in found.items()
            if len(regions) > 1 and (self.only is None or t in self.only)
        }
        for table, regions in self.tables.items():
            for region in regions:
                self._discover_shards(region, table)

    def _discover_shards(self, region: str, table: str) -> None:
        ddb, streams = self.clients[region]
        stream = self.streams.get((region, table))
        if stream is None:
            arn = ddb.describe_table(TableName=table)["Table"].get("LatestStreamArn")
            if not arn:
                log.warning("table %s in %s has no stream: not replicated", table, region)
                return
            stream = self.streams[(region, table)] = _Stream(arn)
        shards = streams.describe_stream(StreamArn=stream.arn)["StreamDescription"]["Shards"]
        for shard in shards:
            if shard["ShardId"] not in stream.iterators:
                # From the start: what was written before the replicator saw the table
                # replicates too.
                stream.iterators[shard["ShardId"]] = streams.get_shard_iterator(
                    StreamArn=stream.arn, ShardId=shard["ShardId"],
                    ShardIteratorType="TRIM_HORIZON",
                )["ShardIterator"]  # fmt: skip

    def poll(self, region: str) -> None:
        """Read `region`'s streams; queue each client write for the other regions."""
        _, streams = self.clients[region]
        for (stream_region, table), stream in self.streams.items():
            if stream_region != region:
                continue
            for shard_id, iterator in list(stream.iterators.items()):
                if iterator is None:
                    continue  # a closed shard, read to its end
                answer = streams.get_records(ShardIterator=iterator)
                stream.iterators[shard_id] = answer.get("NextShardIterator")
                for record in answer["Records"]:
                    self.records_read += 1
                    self._observe(region, table, record)

    def _observe(self, region: str, table: str, record: Mapping[str, Any]) -> None:
        body = record["dynamodb"]
        item = item_key(table, body["Keys"])
        created = body.get("ApproximateCreationDateTime")
        stream_ms = int(created.timestamp() * 1000) if created is not None else self._now_ms()
        image = None if record["eventName"] == "REMOVE" else body.get("NewImage")
        version = self.book.observe(region, item, stream_ms, image)
        if version is None:
            return  # our own write come back, or a write that changed nothing
        self.links.send(Change(item, body["Keys"], version, image), self._now_ms())

    def deliver(self, control: Control) -> int:
        """Apply every change that is due; the number applied."""
        applied = 0
        for destination, change in self.links.due(
            self._now_ms(), control.lag_ms, control.partitioned
        ):
            table = change.item[0]
            if destination not in self.tables.get(table, ()):
                continue  # no such table there (yet): nothing to replicate into
            if not self.book.offer(destination, change):
                continue  # the replica holds a newer write: this one loses
            ddb = self.clients[destination][0]
            try:
                replaced = _write(ddb, table, change.keys, change.image)
                restore = self.book.applied(destination, change, replaced)
                if restore is not False:
                    _write(ddb, table, change.keys, restore)
            except Exception:  # one bad write must not stop replication of the rest
                log.exception("replicating %s to %s failed", change.item, destination)
                continue
            applied += 1
            self.applied[table] += 1
        return applied

    def step(self) -> int:
        """One pass: (re)discover when due, read every stream, deliver what is due.

        Streams are read right before delivering, so a client write a region made a
        moment ago is known before an older change from elsewhere is written over it.
        """
        control = read_control(self.control_path)
        if self.clock() - self._discovered_at >= DISCOVER_SECONDS:
            self.discover()
            self._discovered_at = self.clock()
        for region in self.regions:
            self.poll(region)
        applied = self.deliver(control)
        if self.status_path is not None and self.clock() - self._status_at >= STATUS_SECONDS:
            self.write_status(control)
            self._status_at = self.clock()
        return applied

    def write_status(self, control: Control) -> None:
        assert self.status_path is not None
        write_json(
            self.status_path,
            {
                "pid": os.getpid(),
                "at": self.clock(),
                "control": control.to_dict(),
                "backlog": self.links.backlog(),
                "tables": {t: sorted(r) for t, r in sorted(self.tables.items())},
                "applied": dict(self.applied),
            },
        )

    def idle(self) -> bool:
        """No change waits on any link (run() also asks whether the pass read anything)."""
        return not self.links.backlog()

    def run(self) -> None:  # pragma: no cover - the process's loop
        while True:
            read_before = self.records_read
            try:
                self.step()
            except Exception:  # an engine restarting: keep going, say why
                log.exception("replication pass failed; retrying")
                time.sleep(0.5)
            quiet = self.records_read == read_before and self.idle()
            time.sleep(IDLE_POLL_SECONDS if quiet else POLL_SECONDS)


def _list_tables(ddb: Any) -> list[str]:
    names: list[str] = []
    for page in ddb.get_paginator("list_tables").paginate():
        names.extend(page.get("TableNames", []))
    return names


def _write(ddb: Any, table: str, keys: Mapping[str, Any], image: Image) -> Image:
    """Put `image` (None: delete the item); the item it replaced (None: there was none)."""
    if image is None:
        answer = ddb.delete_item(TableName=table, Key=dict(keys), ReturnValues="ALL_OLD")
    else:
        answer = ddb.put_item(TableName=table, Item=dict(image), ReturnValues="ALL_OLD")
    replaced: Image = answer.get("Attributes")
    return replaced


def main(argv: list[str] | None = None) -> None:  # pragma: no cover - the process entry
    parser = argparse.ArgumentParser(prog="python -m zae_limiter.local.replication")
    parser.add_argument("--config", required=True, type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config = json.loads(args.config.read_text())
    Replicator(
        config["endpoints"], Path(config["control"]), Path(config["status"])
    ).run()


if __name__ == "__main__":  # pragma: no cover
    main()
