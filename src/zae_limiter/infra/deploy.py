"""Deploy, plan, inspect and delete a stack: what the CLI commands call.

A deploy renders the template, puts the aggregator zip in S3 (unless --no-aggregator),
creates the stack or updates it through a change set, and then writes the schema
version record if the table has none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from zae_limiter.errors import ValidationError
from zae_limiter.infra import artifacts
from zae_limiter.infra.aws import Aws
from zae_limiter.infra.errors import StackError
from zae_limiter.infra.options import StackOptions
from zae_limiter.infra.render import package_version, render_regional_template, render_template
from zae_limiter.infra.replicas import RegionChange, current_regions, region_change
from zae_limiter.infra.stack import EventCallback, ResourceChange, StackClient, ignore_event
from zae_limiter.infra.table_only import describe_table, write_version_record
from zae_limiter.schema import SCHEMA_VERSION

#: CreateStack's limit for an inline TemplateBody.
MAX_TEMPLATE_BYTES = 51_200
SCHEMA_TAG = "zae-limiter:schema-version"
TABLE_TYPE = "AWS::DynamoDB::Table"
GLOBAL_TABLE_TYPE = "AWS::DynamoDB::GlobalTable"
#: Stacks in these states can only be deleted; a deploy clears them and starts again.
_DEAD_STATES = frozenset({"ROLLBACK_COMPLETE", "REVIEW_IN_PROGRESS"})

Approve = Callable[[Sequence[ResourceChange]], bool]


def _approve_all(_: Sequence[ResourceChange]) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class DeployResult:
    stack_name: str
    action: str  # "create", "update", "unchanged", "plan", "declined", "skipped"
    status: str | None
    changes: tuple[ResourceChange, ...] = ()
    outputs: dict[str, str] = field(default_factory=dict)
    version_written: bool = False
    #: A global table: the replicas added and removed, and the other regions' stacks.
    regions: RegionChange | None = None
    regional: tuple[DeployResult, ...] = ()
    #: Set on a regional stack's result: the region it lives in.
    region: str | None = None

    @property
    def pending(self) -> bool:
        """A plan that would change something: create a stack, update one, or change
        the replicas."""
        own = self.action == "plan" and (self.status is None or bool(self.changes))
        return own or bool(self.regions) or any(r.pending for r in self.regional)

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "stack": self.stack_name,
            "action": self.action,
            "status": self.status,
            "changes": [c.as_dict() for c in self.changes],
            "outputs": self.outputs,
            "version_record_written": self.version_written,
        }
        # Keys only a global table has: a single-region answer stays as it always was.
        if self.region is not None:
            body["region"] = self.region
        if self.regions is not None:
            body["regions"] = self.regions.as_dict()
            body["regional_stacks"] = [r.as_dict() for r in self.regional]
        return body


@dataclass
class Deployer:
    """One deploy target; `poll_seconds` is how often a wait asks CloudFormation."""

    aws: Aws
    poll_seconds: float = 2.0
    on_event: EventCallback = ignore_event

    @property
    def stacks(self) -> StackClient:
        return StackClient(self.aws.client("cloudformation"), poll_seconds=self.poll_seconds)

    def deploy(
        self,
        options: StackOptions,
        *,
        artifact_bucket: str | None = None,
        plan: bool = False,
        approve: Approve = _approve_all,
    ) -> DeployResult:
        """Create or update the stack; with `plan`, only report what would change.

        A global table (`options.regions`) is one stack in the first region, holding the
        GlobalTable, plus a regional stack (aggregator and alarms) in each other region.
        """
        template = render_template(options)
        if len(template.encode()) > MAX_TEMPLATE_BYTES:
            raise ValidationError(
                f"the template is {len(template.encode())} bytes, over CloudFormation's "
                f"{MAX_TEMPLATE_BYTES}; deploy fewer --namespace-policies"
            )
        existing = self._usable_stack(options.name, plan=plan)
        change = self._check_regions(options, existing)
        parameters = self._artifact_parameters(options, artifact_bucket, upload=not plan)
        outcome = self._apply(options.name, template, parameters, existing, plan, approve)
        if outcome.action in ("plan", "declined"):
            result = outcome
        else:
            status = str(outcome.status)  # set by every create, update and unchanged
            result = self._finish(options.name, outcome.action, status, outcome.changes)
        if not options.is_global:
            return result
        regional: tuple[DeployResult, ...] = ()
        if outcome.action != "declined":
            if change is not None and not plan:
                # Only once the update went through: a declined one keeps every region.
                for region in change.removed:
                    self._delete_regional(options.name, region)
            regional = tuple(
                self._deploy_regional(options, region, plan, approve)
                for region in options.other_regions
            )
        return replace(result, regions=change, regional=regional)

    def _apply(
        self,
        name: str,
        template: str,
        parameters: dict[str, str],
        existing: str | None,
        plan: bool,
        approve: Approve,
    ) -> DeployResult:
        """Create the stack or update it through a change set (or plan either)."""
        tags = {SCHEMA_TAG: str(SCHEMA_VERSION), "zae-limiter:version": package_version()}
        stacks = self.stacks
        if existing is None:
            if plan:
                return DeployResult(name, "plan", None, planned_creation(template))
            status = stacks.create(name, template, parameters, tags, self.on_event)
            return DeployResult(name, "create", status)
        change_set = stacks.plan_update(name, template, parameters, tags)
        if change_set is None:
            return DeployResult(name, "plan" if plan else "unchanged", existing)
        if plan or not approve(change_set.changes):
            stacks.discard(change_set.change_set_id)
            action = "plan" if plan else "declined"
            return DeployResult(name, action, existing, change_set.changes)
        status = stacks.execute(name, change_set.change_set_id, self.on_event)
        return DeployResult(name, "update", status, change_set.changes)

    def _check_regions(self, options: StackOptions, existing: str | None) -> RegionChange | None:
        """The replicas this deploy adds and removes; refuses what CloudFormation cannot do.

        The stack lives in the first region. A table deployed for one region cannot become
        a global table by an update (nor back): the resource type differs, and
        CloudFormation would replace the table, data and all.
        """
        if options.is_global and self.aws.region != options.primary_region:
            raise ValidationError(
                f"a global table's stack lives in the first of --regions "
                f"({options.primary_region}), but this deploy targets {self.aws.region}: "
                f"pass --region {options.primary_region}"
            )
        if existing is not None:
            deployed = self._table_type(options.name)
            wanted = GLOBAL_TABLE_TYPE if options.is_global else TABLE_TYPE
            if deployed is not None and deployed != wanted:
                raise ValidationError(
                    f"stack {options.name} holds an {deployed}; deploying it as an {wanted} "
                    "would replace the table and lose its items (see docs/global.md, "
                    "'From one region to several')"
                )
        if not options.is_global:
            return None
        current = current_regions(self.aws, options.name) or ()
        return region_change(current, options.regions)

    def _table_type(self, name: str) -> str | None:
        for resource in self.stacks.resources(name):
            if resource.get("LogicalResourceId") == "Table":
                return str(resource.get("ResourceType"))
        return None

    def _regional_aws(self, region: str) -> Aws:
        return Aws(region, self.aws.endpoint_url)

    def _deploy_regional(
        self, options: StackOptions, region: str, plan: bool, approve: Approve
    ) -> DeployResult:
        """The aggregator and alarms of one replica region other than the first."""
        regional = Deployer(self._regional_aws(region), self.poll_seconds, self.on_event)
        if not (options.aggregator or options.alarms):
            return DeployResult(options.name, "skipped", None, region=region)
        template = render_regional_template(options, region)
        existing = regional._usable_stack(options.name, plan=plan)
        parameters: dict[str, str] = {}
        if options.aggregator:
            # Lambda takes its code from a bucket in its own region: each region has one.
            parameters = regional._artifact_parameters(options, None, upload=not plan)
            stream = regional._replica_stream(options.name)
            if stream is None and not plan:
                raise StackError(
                    options.name, f"the replica in {region} has no stream yet; deploy again"
                )
            parameters["StreamArn"] = stream or "(the replica's stream, once it exists)"
        outcome = regional._apply(options.name, template, parameters, existing, plan, approve)
        return replace(outcome, region=region)

    def _replica_stream(self, name: str) -> str | None:
        described = describe_table(self.aws, name)
        stream = None if described is None else described.get("LatestStreamArn")
        return None if stream is None else str(stream)

    def _delete_regional(self, name: str, region: str) -> None:
        regional = Deployer(self._regional_aws(region), self.poll_seconds, self.on_event)
        if regional.stacks.describe(name) is not None:
            regional.delete(name)

    def _usable_stack(self, name: str, *, plan: bool) -> str | None:
        """The status of a stack that can be updated; None when it must be created.

        A stack whose creation failed can only be deleted: a deploy deletes it and
        creates it afresh, and a plan shows that creation.
        """
        stack = self.stacks.describe(name)
        if stack is None:
            return None
        status = str(stack["StackStatus"])
        if status in _DEAD_STATES:
            if not plan:
                self.stacks.delete(name, self.on_event)
            return None
        if status.endswith("_IN_PROGRESS"):
            raise StackError(name, f"is {status}; wait for it to finish and try again")
        return status

    def _artifact_parameters(
        self, options: StackOptions, bucket: str | None, *, upload: bool
    ) -> dict[str, str]:
        if not options.aggregator:
            return {}
        artifact = artifacts.locate(self.aws, bucket)
        if upload:
            # A bucket the user named is theirs to create; ours we create on first use.
            artifacts.upload(self.aws, artifact, create_bucket=bucket is None)
        return artifact.parameters

    def _finish(
        self, name: str, action: str, status: str, changes: tuple[ResourceChange, ...]
    ) -> DeployResult:
        written = write_version_record(self.aws, name, f"zae-limiter deploy {package_version()}")
        outputs = self.stacks.outputs(name)
        return DeployResult(name, action, status, changes, outputs, written)

    def delete(self, name: str) -> str:
        """Delete the stack; for a global table, the other regions' stacks first (their
        aggregators read streams that go with the replicas)."""
        for region in (current_regions(self.aws, name) or ())[1:]:
            self._delete_regional(name, region)
        return self.stacks.delete(name, self.on_event)


def planned_creation(template: str) -> tuple[ResourceChange, ...]:
    """What creating the stack would add: every resource of the template."""
    resources = (yaml.safe_load(template) or {}).get("Resources") or {}
    return tuple(
        ResourceChange("Add", logical_id, str(resource.get("Type", "")))
        for logical_id, resource in resources.items()
    )
