"""The aggregator Lambda: `handler(event, context)` for a DynamoDB stream event source.

The event source mapping uses `ReportBatchItemFailures`: the handler returns the
sequence numbers of the records whose effect it could not write (and of malformed bucket
records), so Lambda delivers again only from the first of them, and records that keep
failing (poison) end in the dead-letter queue. Usage writes are fenced per bucket shard
on sequence numbers, so records delivered again are never counted twice. An unexpected
error is raised, never reported as success: Lambda then retries (and bisects) the batch.

Configuration (environment):
  ZAEL_NAME                   table name (default: taken from the records' stream ARN)
  ZAEL_USAGE_WINDOWS          comma-separated windows (default hourly,daily,monthly)
  ZAEL_USAGE_RETENTION_DAYS   snapshot TTL after its window ends (default 90)
  ZAEL_MERGE_QUIET_SECONDS    quiet period before shards are merged (default 600; 0: never)
  ZAEL_MAX_SHARDS             highest shard count proactive doubling goes to (default 64)
  ZAEL_AUDIT_ARCHIVE_BUCKET   S3 bucket for audit events the TTL expires (unset: none)
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from zae_limiter import keys
from zae_limiter.aggregator.apply import execute
from zae_limiter.aggregator.archive import S3Archive, plan_archive
from zae_limiter.aggregator.plan import DEFAULT_WINDOWS, AggregatorConfig
from zae_limiter.aggregator.processor import process
from zae_limiter.aggregator.share_log import share_lines
from zae_limiter.flows import Flow

T = TypeVar("T")
Run = Callable[[Flow[Any]], Any]
log = logging.getLogger("zae_limiter.aggregator")
_runners: dict[str, Any] = {}


def config_from_env(
    env: Mapping[str, str] | None = None, records: Sequence[Mapping[str, Any]] = ()
) -> AggregatorConfig:
    env = os.environ if env is None else env
    table = env.get("ZAEL_NAME") or _table_from_records(records)
    if not table:
        raise ValueError("ZAEL_NAME is not set and the records carry no stream ARN")
    windows = tuple(
        w.strip() for w in env.get("ZAEL_USAGE_WINDOWS", ",".join(DEFAULT_WINDOWS)).split(",")
    )
    return AggregatorConfig(
        table=table,
        windows=tuple(w for w in windows if w),
        retention_days=int(env.get("ZAEL_USAGE_RETENTION_DAYS", "90")),
        merge_quiet_ms=int(env.get("ZAEL_MERGE_QUIET_SECONDS", "600")) * 1000,
        max_shard_count=int(env.get("ZAEL_MAX_SHARDS", "64")),
    )


def _table_from_records(records: Sequence[Mapping[str, Any]]) -> str | None:
    for record in records:
        arn = record.get("eventSourceARN")
        if isinstance(arn, str):
            return keys.table_from_stream_arn(arn)
    return None


def process_batch(
    records: Sequence[Mapping[str, Any]],
    config: AggregatorConfig,
    run: Run,
    now_ms: int,
    archive: S3Archive | None = None,
) -> list[str]:
    """StreamPlan and perform one batch; the sequence numbers to report as failed."""
    plan = process(records, config, now_ms)
    failed: list[str] = run(execute(plan, config, now_ms))
    if archive is not None:
        failed += [seq for seq in archive.put(plan_archive(records)) if seq not in failed]
    log.info(
        "batch: %d records, %d bucket changes, %d writes, %d merges, %d failed",
        len(records), plan.changes, len(plan.writes), len(plan.merges), len(failed),
    )  # fmt: skip
    return failed


def batch_response(failed: Sequence[str]) -> dict[str, list[dict[str, str]]]:
    return {"batchItemFailures": [{"itemIdentifier": seq} for seq in failed]}


def sync_runner(table: str, endpoint_url: str | None = None, region: str | None = None) -> Any:
    """The library's boto3 driver on a DynamoDB client (kept across warm invocations)."""
    cache_key = f"{table}|{endpoint_url}|{region}"
    runner = _runners.get(cache_key)
    if runner is None:
        import boto3

        from zae_limiter.capacity import CapacityMeter
        from zae_limiter.drivers import SyncRunner
        from zae_limiter.repository import client_kwargs

        client = boto3.session.Session().client("dynamodb", **client_kwargs(region, endpoint_url))
        runner = _runners[cache_key] = SyncRunner(client, CapacityMeter(), table)
    return runner


def handler(event: Mapping[str, Any], context: object = None) -> dict[str, Any]:
    """Lambda entry point."""
    from zae_limiter.clock_watch import wall_clock_ms

    records = list(event.get("Records") or [])
    if not records:
        return batch_response([])
    config = config_from_env(records=records)
    runner = sync_runner(config.table)
    archive = archive_from_env()
    now_ms = wall_clock_ms()
    failed = process_batch(records, config, runner.run, now_ms, archive)
    for line in share_lines(records, now_ms):
        # A raw JSON line on stdout: Logs Insights finds its fields (the dashboard's query).
        print(json.dumps(line, separators=(",", ":")))
    return batch_response(failed)


def archive_from_env(
    env: Mapping[str, str] | None = None, endpoint_url: str | None = None
) -> S3Archive | None:
    """The audit archive named by ZAEL_AUDIT_ARCHIVE_BUCKET (its client kept while warm)."""
    bucket = (os.environ if env is None else env).get("ZAEL_AUDIT_ARCHIVE_BUCKET")
    if not bucket:
        return None
    cache_key = f"s3|{bucket}|{endpoint_url}"
    archive = _runners.get(cache_key)
    if archive is None:
        import boto3

        client = boto3.session.Session().client("s3", endpoint_url=endpoint_url)
        archive = _runners[cache_key] = S3Archive(client, bucket)
    return archive
