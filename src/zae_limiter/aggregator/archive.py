"""Expired audit events, archived to S3 as gzipped JSON lines.

When the table's TTL removes an audit event, the stream carries a REMOVE by the DynamoDB
service with the event in its old image. The aggregator groups a batch's expired events
by namespace and by the day they happened, and writes one object per group:

    audit/namespace={ns}/date={YYYY-MM-DD}/{digest of the event ids}.jsonl.gz

The key and the bytes depend on the events alone (gzip without a timestamp), so a batch
delivered again writes the same object again: nothing changes. A redelivery can group
records differently (Lambda resends from the first failed record on); the reader
drops an event it has already seen (by event id), so each event is listed once.

`plan_archive` is pure; `S3Archive` performs the calls, on a boto3 S3 client.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from zae_limiter import keys
from zae_limiter.aggregator.records import sequence_number
from zae_limiter.models import AuditEvent

log = logging.getLogger("zae_limiter.aggregator")

#: Everything the archive writes is under this prefix (the lifecycle rule's filter).
ARCHIVE_PREFIX = "audit/"
_SUFFIX = ".jsonl.gz"


@dataclass(frozen=True, slots=True)
class ArchiveObject:
    """One object to write, and the stream records it carries."""

    key: str
    events: tuple[AuditEvent, ...]
    sequence_numbers: tuple[str, ...]

    @property
    def body(self) -> bytes:
        return encode(self.events)


@dataclass(slots=True)
class ArchivePlan:
    objects: list[ArchiveObject] = field(default_factory=list)
    #: Expired audit records that could not be read: reported failed, so never lost.
    failed: list[str] = field(default_factory=list)


def day(at_ms: int) -> str:
    return datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%d")


def partition(namespace: str, date: str) -> str:
    return f"{ARCHIVE_PREFIX}namespace={namespace}/date={date}/"


def encode(events: Iterable[AuditEvent]) -> bytes:
    """JSON lines in time order, gzipped with mtime 0: the same events, the same bytes."""
    ordered = sorted(events, key=lambda e: (e.at_ms, e.event_id))
    text = "".join(json.dumps(e.to_dict(), sort_keys=True) + "\n" for e in ordered)
    return gzip.compress(text.encode(), mtime=0)


def decode(body: bytes) -> list[AuditEvent]:
    lines = gzip.decompress(body).decode().splitlines()
    return [AuditEvent(**json.loads(line)) for line in lines if line.strip()]


def _expired(record: Mapping[str, Any], plan: ArchivePlan) -> tuple[str, AuditEvent] | None:
    image = keys.expired_audit_image(record)
    seq = sequence_number(record)
    if image is None or seq is None:
        return None
    try:
        return seq, keys.decode_audit(image)
    except (KeyError, TypeError, ValueError) as error:
        log.error("expired audit record %s cannot be read: %s", seq, error)
        plan.failed.append(seq)
        return None


def plan_archive(records: Iterable[Mapping[str, Any]]) -> ArchivePlan:
    """The objects a batch's expired audit events go to. Pure."""
    plan = ArchivePlan()
    groups: dict[tuple[str, str], list[tuple[str, AuditEvent]]] = {}
    for record in records:
        found = _expired(record, plan)
        if found is not None:
            event = found[1]
            groups.setdefault((event.namespace, day(event.at_ms)), []).append(found)
    for (namespace, date), members in sorted(groups.items()):
        ids = sorted(e.event_id for _, e in members)
        digest = hashlib.sha256("\n".join(ids).encode()).hexdigest()[:32]
        plan.objects.append(
            ArchiveObject(
                key=f"{partition(namespace, date)}{digest}{_SUFFIX}",
                events=tuple(e for _, e in members),
                sequence_numbers=tuple(seq for seq, _ in members),
            )
        )
    return plan


def _wanted(
    event: AuditEvent, since_ms: int, until_ms: int | None, entity_id: str | None
) -> bool:
    if event.at_ms < since_ms or (until_ms is not None and event.at_ms >= until_ms):
        return False
    return entity_id is None or event.entity_id == entity_id


class S3Archive:
    """The archive bucket: writes a plan's objects, reads events back."""

    def __init__(self, client: Any, bucket: str) -> None:
        self.client = client
        self.bucket = bucket

    def put(self, plan: ArchivePlan) -> list[str]:
        """Write every object; the sequence numbers of those that failed (and of records
        that could not be read), for the batch item failures response."""
        from botocore.exceptions import BotoCoreError, ClientError

        failed = list(plan.failed)
        for obj in plan.objects:
            try:
                self.client.put_object(
                    Bucket=self.bucket,
                    Key=obj.key,
                    Body=obj.body,
                    ContentType="application/x-ndjson",
                    ContentEncoding="gzip",
                )
            except (ClientError, BotoCoreError) as error:
                log.error("archiving %d audit events to %s failed: %s",
                          len(obj.events), obj.key, error)  # fmt: skip
                failed.extend(obj.sequence_numbers)
        return failed

    def _keys(self, namespace: str, since_ms: int) -> Iterator[str]:
        prefix = f"{ARCHIVE_PREFIX}namespace={namespace}/"
        params = {"Bucket": self.bucket, "Prefix": prefix,
                  "StartAfter": f"{prefix}date={day(max(0, since_ms))}"}  # fmt: skip
        for page in self.client.get_paginator("list_objects_v2").paginate(**params):
            for entry in page.get("Contents") or []:
                yield str(entry["Key"])

    def read(
        self,
        namespace: str,
        *,
        since_ms: int = 0,
        until_ms: int | None = None,
        entity_id: str | None = None,
    ) -> list[AuditEvent]:
        """Archived events of a namespace, oldest first, each once."""
        seen: dict[str, AuditEvent] = {}
        for key in self._keys(namespace, since_ms):
            body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            for event in decode(body):
                if _wanted(event, since_ms, until_ms, entity_id):
                    seen.setdefault(event.event_id, event)
        return sorted(seen.values(), key=lambda e: (e.at_ms, e.event_id))
