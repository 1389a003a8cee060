"""What is deployed under a name: stack, table, indexes, schema version, aggregator."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zae_limiter.flows.records.version import decode_version
from zae_limiter.infra.aws import Aws, translated
from zae_limiter.infra.deploy import SCHEMA_TAG
from zae_limiter.infra.errors import InfraError, StackNotFoundError
from zae_limiter.infra.replicas import Replica, replicas_of
from zae_limiter.infra.stack import StackClient
from zae_limiter.infra.table_only import describe_table, read_version_record
from zae_limiter.schema import SCHEMA_VERSION


@dataclass(frozen=True, slots=True)
class StatusReport:
    name: str
    stack_status: str | None = None
    stack_reason: str | None = None
    table_status: str | None = None
    indexes: dict[str, str] = field(default_factory=dict)
    stream_arn: str | None = None
    schema_version: int | None = None
    stack_schema_version: int | None = None
    min_client_version: str | None = None
    aggregator_function: str | None = None
    aggregator_mapping_state: str | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    #: A global table's replicas, the asked region's first; () for a one-region table.
    replicas: tuple[Replica, ...] = ()

    @property
    def schema_mismatch(self) -> str | None:
        """Why the versions disagree (stack, table record, this client), or None."""
        stack, record = self.stack_schema_version, self.schema_version
        if stack is not None and record is not None and stack != record:
            return (
                f"the stack was deployed for schema {stack} but the table's record says "
                f"{record}: run `zae-limiter deploy` or `zae-limiter migrate`"
            )
        if self.schema_version is not None and self.schema_version != SCHEMA_VERSION:
            return (
                f"the table is at schema {self.schema_version}, this client uses "
                f"{SCHEMA_VERSION}: run `zae-limiter migrate --name {self.name}`"
            )
        return None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "stack": {"status": self.stack_status, "reason": self.stack_reason},
            "table": {
                "status": self.table_status,
                "indexes": self.indexes,
                "stream_arn": self.stream_arn,
            },
            "schema_version": self.schema_version,
            "stack_schema_version": self.stack_schema_version,
            "schema_mismatch": self.schema_mismatch,
            "min_client_version": self.min_client_version,
            "aggregator": {
                "function": self.aggregator_function,
                "event_source_mapping": self.aggregator_mapping_state,
            },
            "outputs": self.outputs,
            **({"replicas": [r.as_dict() for r in self.replicas]} if self.replicas else {}),
        }


def status(aws: Aws, name: str) -> StatusReport:
    """Everything `zae-limiter status` shows; StackNotFoundError if nothing is there."""
    stacks = StackClient(aws.client("cloudformation"))
    stack = stacks.describe(name)
    described = describe_table(aws, name)
    if stack is None and described is None:
        raise StackNotFoundError(name)
    report: dict[str, Any] = {"name": name}
    if stack is not None:
        report["stack_status"] = stack["StackStatus"]
        report["stack_reason"] = stack.get("StackStatusReason")
        report["outputs"] = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs") or []}
        tags = {t["Key"]: t["Value"] for t in stack.get("Tags") or []}
        declared = report["outputs"].get("SchemaVersion") or tags.get(SCHEMA_TAG)
        if declared and str(declared).isdigit():
            report["stack_schema_version"] = int(declared)
        report.update(_aggregator(aws, stacks, name))
    if described is not None:
        report["table_status"] = described["TableStatus"]
        report["stream_arn"] = described.get("LatestStreamArn")
        report["indexes"] = {
            index["IndexName"]: index.get("IndexStatus", "ACTIVE")
            for index in described.get("GlobalSecondaryIndexes", [])
        }
        report["replicas"] = replicas_of(described, aws.region)
        item = read_version_record(aws, name)
        if item is not None:
            record = decode_version(item)
            report["schema_version"] = record.schema_version
            report["min_client_version"] = record.min_client_version
    return StatusReport(**report)


def _aggregator(aws: Aws, stacks: StackClient, name: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for resource in stacks.resources(name):
        rtype = resource.get("ResourceType")
        if rtype == "AWS::Lambda::Function":
            found["aggregator_function"] = resource.get("PhysicalResourceId")
        elif rtype == "AWS::Lambda::EventSourceMapping":
            found["aggregator_mapping_state"] = _mapping_state(
                aws, resource.get("PhysicalResourceId")
            )
    return found


def _mapping_state(aws: Aws, uuid: str | None) -> str:
    """The mapping's State (Enabled, Disabled ...); 'present' if it cannot be read."""
    if not uuid:
        return "present"
    try:
        with translated("reading the event source mapping"):
            state = aws.client("lambda").get_event_source_mapping(UUID=uuid).get("State")
    except InfraError:  # the stack already says the mapping exists; its state is extra
        return "present"
    return str(state or "present")
