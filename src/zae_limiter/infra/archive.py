"""Reading the stack's audit archive back (`zae-limiter audit list --archived`)."""

from __future__ import annotations

from botocore.exceptions import ClientError

from zae_limiter.aggregator.archive import S3Archive
from zae_limiter.infra.aws import Aws, error_message
from zae_limiter.infra.errors import InfraError, StackNotFoundError
from zae_limiter.infra.stack import StackClient
from zae_limiter.models import AuditEvent

#: The stack output that names the archive bucket.
ARCHIVE_OUTPUT = "AuditArchiveBucketName"


def archive_bucket(aws: Aws, stack_name: str) -> str:
    """The archive bucket of a stack, from its outputs."""
    stack = StackClient(aws.client("cloudformation")).describe(stack_name)
    if stack is None:
        raise StackNotFoundError(stack_name)
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs") or []}
    bucket = outputs.get(ARCHIVE_OUTPUT)
    if not bucket:
        raise InfraError(
            f"stack {stack_name!r} has no audit archive (deployed with --no-audit-archive "
            "or --no-aggregator); name a bucket with --archive-bucket"
        )
    return str(bucket)


def archived_events(
    aws: Aws,
    bucket: str,
    namespace: str,
    *,
    since_ms: int = 0,
    entity_id: str | None = None,
) -> list[AuditEvent]:
    """A namespace's archived audit events from `since_ms`, oldest first, each once."""
    try:
        return S3Archive(aws.client("s3"), bucket).read(
            namespace, since_ms=since_ms, entity_id=entity_id
        )
    except ClientError as error:
        reason = error_message(error)
        raise InfraError(f"reading the audit archive s3://{bucket}: {reason}") from error
