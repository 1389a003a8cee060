"""Least-privilege IAM policies of the three roles that use a zae-limiter table.

`zae-limiter render --policy ROLE` prints one of them; `docs/deploy.md` shows all three.
Which operation belongs to which role is decided here, once, as data (`GRANTS`), and
tests/integration/test_iam_policy.py holds it against the calls the library makes: every
call a role's operations make must be granted to that role, and every action granted for
a library call must be made by one.

- client: what a service that rate-limits calls. `Repository.open`, `acquire` and its
  lease (adjust, rollback, cascade, shard doubling and creation, token reserves and their
  return), `available`, `time_until_available`, and the stored limits the acquire reads.
  Nothing that changes configuration: a leaked client credential can spend tokens, not
  raise its own limits.
- operator: configuration and inspection by name. Entities, limits at every level,
  shards, usage, the audit trail and its S3 archive (whose name it may read from the
  stack's outputs), namespaces (delete included), schema migrations, `zae-limiter top`.
  Not the deployment itself: `deploy`, `status` and `delete` drive CloudFormation, IAM,
  Lambda and S3 and need a deployer's rights, which are not rendered here.
- aggregator: the Lambda function's role, and whoever runs `zae-limiter aggregator run`
  (the local poller, which reads the stream itself). The handler's writes (usage
  snapshots, shard merges, the audit archive), the stream reads, and what AWS does for
  the function with the same role: the event source mapping lists the streams and sends
  failed batches to the dead-letter queue, the runtime writes the function's logs.

Nothing here calls AWS; a policy is built from a name, a region and an account.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zae_limiter.aggregator.archive import ARCHIVE_PREFIX
from zae_limiter.errors import ValidationError

ROLES = ("client", "operator", "aggregator")

# Resource kinds a grant names; PolicyTarget.arn turns each into an ARN.
TABLE = "table"
STREAM = "stream"
ARCHIVE_BUCKET = "archive-bucket"
ARCHIVE_OBJECTS = "archive-objects"
LOG_GROUP = "log-group"
STACK = "stack"
DEAD_LETTERS = "dead-letter-queue"


def index(name: str) -> str:
    """The resource kind of one global secondary index of the table."""
    return f"index/{name}"


@dataclass(frozen=True, slots=True)
class Grant:
    """Actions on resources, and why the role needs them.

    `by_aws` marks what AWS does with the role on the library's behalf (the Lambda
    service reading the stream, its runtime writing logs): no library call makes it, so
    the drift test cannot see it and does not ask to.
    """

    sid: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    why: str
    by_aws: bool = False


# Scan is granted on GSI4 alone: namespace listing reads that index's keys, never items.
GRANTS: Mapping[str, tuple[Grant, ...]] = {
    "client": (
        Grant(
            "Table",
            (
                "dynamodb:BatchGetItem",
                "dynamodb:DescribeTable",
                "dynamodb:GetItem",
                "dynamodb:PutItem",
                "dynamodb:UpdateItem",
            ),
            (TABLE,),
            "open (DescribeTable, the version record), stored limits and bucket shards "
            "read on a cache miss (GetItem, BatchGetItem), bucket writes of acquire, "
            "adjust, rollback, reserves and doubling (UpdateItem, PutItem)",
        ),
    ),
    "operator": (
        Grant(
            "Table",
            (
                "dynamodb:BatchGetItem",
                "dynamodb:BatchWriteItem",
                "dynamodb:DeleteItem",
                "dynamodb:DescribeTable",
                "dynamodb:GetItem",
                "dynamodb:PutItem",
                "dynamodb:Query",
                "dynamodb:Scan",
                "dynamodb:UpdateItem",
            ),
            (TABLE,),
            "entities and limits with their audit events (transactions of Put, Update "
            "and Delete parts), usage and audit queries, namespace "
            "deletion (BatchWriteItem), migrations (Scan of old items, UpdateItem)",
        ),
        Grant(
            "Indexes",
            ("dynamodb:Query",),
            (index("GSI1"), index("GSI3"), index("GSI4")),
            "children of a parent (GSI1), an entity's resources and shards (GSI3), "
            "namespaces and their items (GSI4)",
        ),
        Grant(
            "NamespaceList",
            ("dynamodb:Scan",),
            (index("GSI4"),),
            "`namespace list`: the distinct namespaces, from GSI4's keys only",
        ),
        Grant(
            "Stream",
            ("dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"),
            (STREAM,),
            "`zae-limiter top` reads the table's stream",
        ),
        Grant(
            "AuditArchiveList",
            ("s3:ListBucket",),
            (ARCHIVE_BUCKET,),
            "`audit list --archived` lists the archive's objects",
        ),
        Grant(
            "AuditArchiveRead",
            ("s3:GetObject",),
            (ARCHIVE_OBJECTS,),
            "`audit list --archived` reads them",
        ),
        Grant(
            "AuditArchiveName",
            ("cloudformation:DescribeStacks",),
            (STACK,),
            "`audit list --archived` without `--archive-bucket` finds the bucket in the "
            "stack's outputs",
        ),
    ),
    "aggregator": (
        Grant(
            "Table",
            (
                "dynamodb:BatchGetItem",
                "dynamodb:DeleteItem",
                "dynamodb:DescribeTable",
                "dynamodb:UpdateItem",
            ),
            (TABLE,),
            "usage snapshots and shard counts (UpdateItem), a merge's consistent read of "
            "the shards (BatchGetItem) and its transaction of Update parts, a raise's "
            "deletion of the shards a merge drained where it makes room (DeleteItem); the "
            "local poller (`aggregator run`) finds the stream (DescribeTable)",
        ),
        Grant(
            "AuditArchive",
            ("s3:PutObject",),
            (ARCHIVE_OBJECTS,),
            "audit events the TTL expires, written to the archive",
        ),
        Grant(
            "Stream",
            ("dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"),
            (STREAM,),
            "reading the stream: the event source mapping does it for the function, the "
            "local poller itself",
        ),
        Grant(
            "StreamList",
            ("dynamodb:ListStreams",),
            (STREAM,),
            "the event source mapping lists the table's streams",
            by_aws=True,
        ),
        Grant(
            "Logs",
            ("logs:CreateLogStream", "logs:PutLogEvents"),
            (LOG_GROUP,),
            "the Lambda runtime writes the function's logs",
            by_aws=True,
        ),
        Grant(
            "DeadLetters",
            ("sqs:SendMessage",),
            (DEAD_LETTERS,),
            "the event source mapping sends batches it gave up on",
            by_aws=True,
        ),
    ),
}

#: Audit event partitions (`{ns}/AUDIT#...`): a client may write bucket items but never
#: these, so it can neither forge nor erase the trail (the deployed acquire policy too).
AUDIT_LEADING_KEYS: tuple[str, ...] = ("*/AUDIT#*",)


def _client_writes() -> tuple[str, ...]:
    # Whatever item writes the client is granted are the ones to deny on audit keys.
    writes = {"dynamodb:PutItem", "dynamodb:UpdateItem"}
    return tuple(a for a in actions("client") if a in writes)


def granted(role: str, *, by_aws: bool | None = None) -> dict[str, frozenset[str]]:
    """Action -> the resource kinds it is granted on, for `role`.

    `by_aws=False`: only what library calls need; True: only what AWS does for the role.
    """
    found: dict[str, set[str]] = {}
    for grant in _grants(role):
        if by_aws is not None and grant.by_aws != by_aws:
            continue
        for action in grant.actions:
            found.setdefault(action, set()).update(grant.resources)
    return {action: frozenset(kinds) for action, kinds in found.items()}


def actions(role: str, service: str = "dynamodb", *, by_aws: bool | None = None) -> tuple[str, ...]:
    """The sorted actions of one service granted to `role`."""
    prefix = f"{service}:"
    return tuple(sorted(a for a in granted(role, by_aws=by_aws) if a.startswith(prefix)))


def _grants(role: str) -> tuple[Grant, ...]:
    if role not in GRANTS:
        raise ValidationError(f"unknown role {role!r}: use one of {', '.join(ROLES)}")
    return GRANTS[role]


#: The client's item writes, denied on audit partitions.
AUDIT_DENIED_TO_CLIENT: tuple[str, ...] = _client_writes()

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,47}$")
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")
_ACCOUNT = re.compile(r"^\d{12}$")
#: Stand-ins printed when no region or account is given: valid JSON, plainly not an ARN
#: to deploy as is.
REGION_PLACEHOLDER = "REGION"
ACCOUNT_PLACEHOLDER = "ACCOUNT"


@dataclass(frozen=True, slots=True)
class PolicyTarget:
    """The table a policy is for; None for region or account prints a placeholder."""

    name: str
    region: str | None = None
    account: str | None = None
    #: The audit archive bucket; by default the pattern of the name CloudFormation gives
    #: the stack's bucket (`{stack}-auditarchivebucket-{random}`, lower case).
    archive_bucket: str | None = None
    partition: str = "aws"

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValidationError(
                f"invalid name {self.name!r}: use 1-48 letters, digits or '-', "
                "starting with a letter"
            )
        if self.region is not None and not _REGION.match(self.region):
            raise ValidationError(f"--region {self.region!r} is not an AWS region")
        if self.account is not None and not _ACCOUNT.match(self.account):
            raise ValidationError(f"--account {self.account!r} is not a 12-digit account id")

    def arn(self, kind: str) -> str:
        region = self.region or REGION_PLACEHOLDER
        account = self.account or ACCOUNT_PLACEHOLDER
        table = f"arn:{self.partition}:dynamodb:{region}:{account}:table/{self.name}"
        bucket = self.archive_bucket or f"{self.name.lower()}-auditarchivebucket-*"
        function = f"{self.name}-aggregator"
        arns = {
            TABLE: table,
            STREAM: f"{table}/stream/*",
            ARCHIVE_BUCKET: f"arn:{self.partition}:s3:::{bucket}",
            ARCHIVE_OBJECTS: f"arn:{self.partition}:s3:::{bucket}/{ARCHIVE_PREFIX}*",
            LOG_GROUP: f"arn:{self.partition}:logs:{region}:{account}:log-group:"
            f"/aws/lambda/{function}:*",
            DEAD_LETTERS: f"arn:{self.partition}:sqs:{region}:{account}:{function}-dlq",
            # The stack is named after the table; the id CloudFormation appends varies.
            STACK: f"arn:{self.partition}:cloudformation:{region}:{account}:stack/{self.name}/*",
        }
        if kind.startswith("index/"):
            return f"{table}/{kind}"
        return arns[kind]


def policy_document(role: str, target: PolicyTarget) -> dict[str, Any]:
    """The IAM policy document of `role` on `target`'s table, as JSON-ready data."""
    statements: list[dict[str, Any]] = [
        {
            "Sid": grant.sid,
            "Effect": "Allow",
            "Action": sorted(grant.actions),
            "Resource": [target.arn(kind) for kind in grant.resources],
        }
        for grant in _grants(role)
    ]
    if role == "client":
        statements.append(
            {
                "Sid": "NoAuditWrites",
                "Effect": "Deny",
                "Action": list(AUDIT_DENIED_TO_CLIENT),
                "Resource": [target.arn(TABLE)],
                "Condition": {
                    "ForAnyValue:StringLike": {"dynamodb:LeadingKeys": list(AUDIT_LEADING_KEYS)}
                },
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


def policy_json(role: str, target: PolicyTarget) -> str:
    """The policy document as `zae-limiter render --policy` prints it (ends in a newline)."""
    return json.dumps(policy_document(role, target), indent=2) + "\n"
