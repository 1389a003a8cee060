"""What a deploy can be asked for, validated once, before anything is rendered or called.

The IAM action lists live here and in `infra.policy`, as data, so that tests can hold them
against the calls the library actually makes. The roles' lists (the acquire policy, the
aggregator's) are the policy table's own: `zae-limiter render --policy` and the stack
cannot grant different actions.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from zae_limiter import keys
from zae_limiter.errors import ValidationError
from zae_limiter.infra import policy

#: Every DynamoDB action of the hot and slow acquire paths, on the table and its indexes.
ACQUIRE_ACTIONS: tuple[str, ...] = policy.actions("client")
READ_ONLY_ACTIONS: tuple[str, ...] = (
    "dynamodb:BatchGetItem",
    "dynamodb:DescribeTable",
    "dynamodb:DescribeTimeToLive",
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:Scan",
)
#: Managing entities and limits, migrations and the local aggregator poller; not the table.
FULL_ACCESS_ACTIONS: tuple[str, ...] = tuple(
    sorted(
        {
            *ACQUIRE_ACTIONS,
            *READ_ONLY_ACTIONS,
            "dynamodb:BatchWriteItem",
            "dynamodb:ConditionCheckItem",
            "dynamodb:DeleteItem",
        }
    )
)
#: Partition keys of audit events (`{ns}/AUDIT#...`): the acquire policies are denied
#: writing them, so a client that may only acquire can neither forge nor erase the trail.
AUDIT_LEADING_KEYS: tuple[str, ...] = policy.AUDIT_LEADING_KEYS
AUDIT_DENIED_TO_ACQUIRE: tuple[str, ...] = policy.AUDIT_DENIED_TO_CLIENT
#: On the table's stream ARN (the aggregator, and `full access` for the local poller).
STREAM_READ_ACTIONS: tuple[str, ...] = tuple(
    sorted(a for a, kinds in policy.granted("aggregator").items() if policy.STREAM in kinds)
)
#: The aggregator's role on the table (no index: it queries none).
AGGREGATOR_TABLE_ACTIONS: tuple[str, ...] = tuple(
    sorted(a for a, kinds in policy.granted("aggregator").items() if policy.TABLE in kinds)
)
#: A request without keys (Scan) carries no dynamodb:LeadingKeys, and ForAllValues over
#: an empty set is true: such actions would escape a namespace condition, so scoped
#: policies leave them out.
UNSCOPABLE_ACTIONS = frozenset({"dynamodb:Scan"})

AGGREGATOR_HANDLER = "zae_limiter.aggregator.handler.handler"
LAMBDA_RUNTIME = "python3.12"
LOG_RETENTION_DAYS = (
    1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192,
    2557, 2922, 3288, 3653,
)  # fmt: skip

# The stack name is the strictest of the names derived from it (stack, table, function,
# role, policies): letters, digits and '-', starting with a letter. 48 characters leave
# room for the suffixes within Lambda's 64-character function-name limit.
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,47}$")
_ROLE_NAME = re.compile(r"^[\w+=,.@-]{1,64}$")
_POLICY_ARN = re.compile(r"^arn:aws[a-z-]*:iam::(\d{12}|aws):policy/[\w+=,.@/-]+$")
#: An AWS region name: us-east-1, eu-west-1, ap-southeast-1, us-gov-west-1 ...
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d{1,2}$")
#: Alarm when replication to a region averages this far behind over five minutes; in the
#: default (eventual) mode a global table replicates within about a second.
REPLICATION_LATENCY_ALARM_MS = 10_000
_TOPIC_ARN = re.compile(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$")


@dataclass(frozen=True, slots=True)
class NamespacePolicy:
    """A namespace that gets its own scoped policies, and the names they go by."""

    namespace: str
    logical_id: str
    policy_name: str


#: The usage snapshot windows the aggregator knows (see aggregator/records.py).
USAGE_WINDOWS = ("hourly", "daily", "monthly")


@dataclass(frozen=True, slots=True)
class StackOptions:
    """Everything a rendered stack depends on. Invalid values raise ValidationError."""

    name: str
    aggregator: bool = True
    alarms: bool = True
    alarm_sns_topic: str | None = None
    permission_boundary: str | None = None
    role_name_format: str | None = None
    log_retention_days: int = 30
    lambda_memory_mb: int = 256
    lambda_timeout_seconds: int = 60
    batch_size: int = 100
    batching_window_seconds: int = 1
    max_retry_attempts: int = 3
    deletion_protection: bool = False
    pitr_recovery_days: int | None = None
    namespace_policies: tuple[str, ...] = ()
    usage_windows: tuple[str, ...] = ("hourly", "daily", "monthly")
    usage_retention_days: int = 90
    dashboard: bool = True
    contributor_insights: bool = True
    #: Expired audit events go to an S3 bucket of the stack (needs the aggregator).
    audit_archive: bool = True
    audit_archive_glacier_days: int = 90
    #: Replica regions of a global table, the stack's region first; empty: one region,
    #: an ordinary table (the template is then exactly the single-region one).
    regions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValidationError(
                f"invalid name {self.name!r}: use 1-48 letters, digits or '-', "
                "starting with a letter (it names the stack and the table)"
            )
        self._check_ranges()
        self._check_arns()
        if self.role_name_format is not None:
            self._check_role_name()
        for namespace in self.namespace_policies:
            keys.validate_namespace(namespace)
        if len(set(self.namespace_policies)) != len(self.namespace_policies):
            raise ValidationError("--namespace-policies lists a namespace twice")
        self._check_regions()

    def _check_regions(self) -> None:
        for region in self.regions:
            if not _REGION.match(region):
                raise ValidationError(f"--regions: {region!r} is not an AWS region name")
        if len(set(self.regions)) != len(self.regions):
            raise ValidationError("--regions lists a region twice")
        if self.role_name_format is not None:
            # IAM is global: each region's aggregator role needs a name of its own.
            for region in self.regions[1:]:
                if not _ROLE_NAME.match(self.regional_role_name(region) or ""):
                    raise ValidationError(
                        f"--role-name-format gives {self.regional_role_name(region)!r} in "
                        f"{region}, not a valid IAM role name (at most 64 characters)"
                    )

    def _check_ranges(self) -> None:
        _in_range("--lambda-memory", self.lambda_memory_mb, 128, 10240)
        _in_range("--lambda-timeout", self.lambda_timeout_seconds, 1, 900)
        _in_range("--batch-size", self.batch_size, 1, 10000)
        _in_range("--batching-window", self.batching_window_seconds, 0, 300)
        _in_range("--max-retry-attempts", self.max_retry_attempts, 0, 10000)
        if self.pitr_recovery_days is not None:
            _in_range("--pitr-recovery-days", self.pitr_recovery_days, 1, 35)
        _in_range("--usage-retention-days", self.usage_retention_days, 1, 3650)
        _in_range("--audit-archive-glacier-days", self.audit_archive_glacier_days, 0, 36500)
        unknown = sorted(set(self.usage_windows) - set(USAGE_WINDOWS))
        if unknown or not self.usage_windows:
            raise ValidationError(
                f"--usage-windows must name one or more of {', '.join(USAGE_WINDOWS)}"
                + (f" (unknown: {', '.join(unknown)})" if unknown else "")
            )
        if self.log_retention_days not in LOG_RETENTION_DAYS:
            allowed = ", ".join(map(str, LOG_RETENTION_DAYS))
            raise ValidationError(f"--log-retention-days must be one of {allowed}")

    def _check_arns(self) -> None:
        if self.permission_boundary is not None and not _POLICY_ARN.match(
            self.permission_boundary
        ):
            raise ValidationError(
                f"--permission-boundary {self.permission_boundary!r} is not an IAM policy ARN"
            )
        if self.alarm_sns_topic is not None and not _TOPIC_ARN.match(self.alarm_sns_topic):
            raise ValidationError(
                f"--alarm-sns-topic {self.alarm_sns_topic!r} is not an SNS topic ARN"
            )

    def _check_role_name(self) -> None:
        fmt = self.role_name_format or ""
        if fmt.count("{}") != 1 or "{" in fmt.replace("{}", ""):
            raise ValidationError(
                f"--role-name-format {fmt!r} must contain '{{}}' exactly once, "
                "e.g. '{}-aggregator-role'"
            )
        if not _ROLE_NAME.match(fmt.format(self.name)):
            raise ValidationError(
                f"--role-name-format gives {fmt.format(self.name)!r}, not a valid "
                "IAM role name (1-64 of letters, digits and +=,.@_-)"
            )

    @property
    def function_name(self) -> str:
        return f"{self.name}-aggregator"

    @property
    def log_group_name(self) -> str:
        # Lambda writes to /aws/lambda/<function>; owning that group sets its retention.
        return f"/aws/lambda/{self.function_name}"

    @property
    def role_name(self) -> str | None:
        return None if self.role_name_format is None else self.role_name_format.format(self.name)

    def regional_role_name(self, region: str) -> str | None:
        """The aggregator role's name in a replica region other than the stack's."""
        if self.role_name_format is None:
            return None
        return self.role_name_format.format(f"{self.name}-{region}")

    @property
    def is_global(self) -> bool:
        """A global table (AWS::DynamoDB::GlobalTable) with one replica per region."""
        return bool(self.regions)

    @property
    def primary_region(self) -> str | None:
        """Where the stack and the GlobalTable resource live: the first region listed."""
        return self.regions[0] if self.regions else None

    @property
    def other_regions(self) -> tuple[str, ...]:
        """Replica regions that get a regional aggregator stack of their own."""
        return self.regions[1:]

    @property
    def duration_alarm_ms(self) -> int:
        """Alarm when an invocation takes 80% of the timeout: it is about to time out."""
        return self.lambda_timeout_seconds * 800

    @property
    def archives_audit(self) -> bool:
        """The archive is written by the aggregator: without it there is nothing to write."""
        return self.audit_archive and self.aggregator

    @property
    def scoped_policies(self) -> tuple[NamespacePolicy, ...]:
        return tuple(_namespace_policy(self.name, ns) for ns in self.namespace_policies)


def region_logical_id(region: str) -> str:
    """eu-west-1 -> EuWest1: a region inside a CloudFormation logical id."""
    return "".join(part.capitalize() for part in region.split("-"))


def _in_range(option: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValidationError(f"{option} must be between {low} and {high}, got {value}")


def _namespace_policy(name: str, namespace: str) -> NamespacePolicy:
    # Logical ids allow only [A-Za-z0-9]; a short digest keeps 'a-b' and 'a.b' apart.
    digest = hashlib.sha256(namespace.encode()).hexdigest()[:8]
    alnum = re.sub(r"[^A-Za-z0-9]", "", namespace)
    return NamespacePolicy(
        namespace=namespace,
        logical_id=f"Ns{alnum}{digest}",
        policy_name=f"{name}-ns-{namespace}",
    )


def scoped(actions: tuple[str, ...]) -> tuple[str, ...]:
    """The actions of a namespace-scoped policy: those a key condition can restrict."""
    return tuple(action for action in actions if action not in UNSCOPABLE_ACTIONS)
