"""Deploy just the table, without CloudFormation, and keep the schema version record.

For local engines (DynamoDB Local has no CloudFormation) and for people who manage the
rest themselves. The table comes from `table.create_table_params`, like the template's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from zae_limiter import keys, schema, table
from zae_limiter.errors import CONDITION_FAILED, INVALID_REQUEST, NOT_FOUND
from zae_limiter.infra.aws import Aws, error_code, translated
from zae_limiter.infra.errors import InfraError

_TTL_UNSUPPORTED = frozenset({"UnknownOperationException", "UnrecognizedClientException"})


@dataclass(frozen=True, slots=True)
class TableResult:
    table_name: str
    created: bool
    status: str
    ttl_enabled: bool
    version_written: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "table": self.table_name,
            "created": self.created,
            "status": self.status,
            "ttl_enabled": self.ttl_enabled,
            "version_record_written": self.version_written,
        }


def describe_table(aws: Aws, name: str) -> dict[str, Any] | None:
    ddb = aws.client("dynamodb")
    with translated(f"describing table {name}"):
        try:
            described: dict[str, Any] = ddb.describe_table(TableName=name)["Table"]
        except ClientError as error:
            if error_code(error) == NOT_FOUND:
                return None
            raise
    return described


def deploy_table_only(
    aws: Aws, name: str, updated_by: str, *, poll_seconds: float = 1.0
) -> TableResult:
    """Create the table if it is missing, wait for ACTIVE, enable TTL, write the version."""
    ddb = aws.client("dynamodb")
    created = describe_table(aws, name) is None
    if created:
        with translated(f"creating table {name}", table_name=name):
            ddb.create_table(**table.create_table_params(name))
    status = wait_for_table(aws, name, poll_seconds=poll_seconds)
    ttl = enable_ttl(aws, name)
    written = write_version_record(aws, name, updated_by)
    return TableResult(name, created, status, ttl, written)


def wait_for_table(aws: Aws, name: str, *, poll_seconds: float = 1.0, timeout: float = 600) -> str:
    deadline = time.monotonic() + timeout
    while True:
        described = describe_table(aws, name)
        status = "MISSING" if described is None else str(described["TableStatus"])
        indexes = [] if described is None else described.get("GlobalSecondaryIndexes", [])
        if status == "ACTIVE" and all(i.get("IndexStatus", "ACTIVE") == "ACTIVE" for i in indexes):
            return status
        if time.monotonic() > deadline:
            raise InfraError(f"table {name!r} is still {status} after {timeout:.0f}s")
        time.sleep(poll_seconds)


def enable_ttl(aws: Aws, name: str) -> bool:
    """Turn on TTL; False where the engine lacks it (TTL only deletes expired items)."""
    ddb = aws.client("dynamodb")
    spec = {"Enabled": True, "AttributeName": table.TTL_ATTRIBUTE}
    with translated(f"enabling TTL on table {name}"):
        try:
            ddb.update_time_to_live(TableName=name, TimeToLiveSpecification=spec)
        except ClientError as error:
            code = error_code(error)
            if code in _TTL_UNSUPPORTED:
                return False
            if code == INVALID_REQUEST and "already enabled" in str(error):
                return True
            raise
    return True


def write_version_record(aws: Aws, name: str, updated_by: str) -> bool:
    """Write the schema version record unless one exists; True if this call wrote it.

    A record that exists was written by an earlier deploy or a migration, and a
    migration's record must never be put back to this deploy's version.
    """
    ddb = aws.client("dynamodb")
    item = schema.version_item(int(time.time() * 1000), updated_by)
    with translated(f"writing the version record to table {name}", table_name=name):
        try:
            ddb.put_item(**keys.put_new(name, item))
        except ClientError as error:
            if error_code(error) == CONDITION_FAILED:
                return False
            raise
    return True


def read_version_record(aws: Aws, name: str) -> dict[str, Any] | None:
    ddb = aws.client("dynamodb")
    with translated(f"reading the version record of table {name}", table_name=name):
        item: dict[str, Any] | None = ddb.get_item(
            TableName=name, Key=keys.version_key(), ConsistentRead=True
        ).get("Item")
    return item


def delete_table(aws: Aws, name: str, *, poll_seconds: float = 1.0, timeout: float = 600) -> None:
    ddb = aws.client("dynamodb")
    with translated(f"deleting table {name}", table_name=name):
        ddb.delete_table(TableName=name)
    deadline = time.monotonic() + timeout
    while describe_table(aws, name) is not None:
        if time.monotonic() > deadline:
            raise InfraError(f"table {name!r} is still being deleted after {timeout:.0f}s")
        time.sleep(poll_seconds)
