"""Deploy, plan, inspect and delete a stack: what the CLI commands call.

A deploy renders the template, puts the aggregator zip in S3 (unless --no-aggregator),
creates the stack or updates it through a change set, and then writes the schema
version record if the table has none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from zae_limiter.errors import ValidationError
from zae_limiter.infra import artifacts
from zae_limiter.infra.aws import Aws
from zae_limiter.infra.errors import StackError
from zae_limiter.infra.options import StackOptions
from zae_limiter.infra.render import package_version, render_template
from zae_limiter.infra.stack import EventCallback, ResourceChange, StackClient, ignore_event
from zae_limiter.infra.table_only import write_version_record
from zae_limiter.schema import SCHEMA_VERSION

#: CreateStack's limit for an inline TemplateBody.
MAX_TEMPLATE_BYTES = 51_200
SCHEMA_TAG = "zae-limiter:schema-version"
#: Stacks in these states can only be deleted; a deploy clears them and starts again.
_DEAD_STATES = frozenset({"ROLLBACK_COMPLETE", "REVIEW_IN_PROGRESS"})

Approve = Callable[[Sequence[ResourceChange]], bool]


def _approve_all(_: Sequence[ResourceChange]) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class DeployResult:
    stack_name: str
    action: str  # "create", "update", "unchanged", "plan", "declined"
    status: str | None
    changes: tuple[ResourceChange, ...] = ()
    outputs: dict[str, str] = field(default_factory=dict)
    version_written: bool = False

    @property
    def pending(self) -> bool:
        """A plan that would change something: create the stack, or update it."""
        return self.action == "plan" and (self.status is None or bool(self.changes))

    def as_dict(self) -> dict[str, Any]:
        return {
            "stack": self.stack_name,
            "action": self.action,
            "status": self.status,
            "changes": [c.as_dict() for c in self.changes],
            "outputs": self.outputs,
            "version_record_written": self.version_written,
        }


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
        """Create or update the stack; with `plan`, only report what would change."""
        template = render_template(options)
        if len(template.encode()) > MAX_TEMPLATE_BYTES:
            raise ValidationError(
                f"the template is {len(template.encode())} bytes, over CloudFormation's "
                f"{MAX_TEMPLATE_BYTES}; deploy fewer --namespace-policies"
            )
        existing = self._usable_stack(options.name, plan=plan)
        parameters = self._artifact_parameters(options, artifact_bucket, upload=not plan)
        tags = {SCHEMA_TAG: str(SCHEMA_VERSION), "zae-limiter:version": package_version()}
        stacks = self.stacks
        if existing is None:
            if plan:
                return DeployResult(options.name, "plan", None, planned_creation(template))
            status = stacks.create(options.name, template, parameters, tags, self.on_event)
            return self._finish(options.name, "create", status, ())
        change_set = stacks.plan_update(options.name, template, parameters, tags)
        if change_set is None:
            if plan:
                return DeployResult(options.name, "plan", existing)
            return self._finish(options.name, "unchanged", existing, ())
        if plan or not approve(change_set.changes):
            stacks.discard(change_set.change_set_id)
            action = "plan" if plan else "declined"
            return DeployResult(options.name, action, existing, change_set.changes)
        status = stacks.execute(options.name, change_set.change_set_id, self.on_event)
        return self._finish(options.name, "update", status, change_set.changes)

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
        return self.stacks.delete(name, self.on_event)


def planned_creation(template: str) -> tuple[ResourceChange, ...]:
    """What creating the stack would add: every resource of the template."""
    resources = (yaml.safe_load(template) or {}).get("Resources") or {}
    return tuple(
        ResourceChange("Add", logical_id, str(resource.get("Type", "")))
        for logical_id, resource in resources.items()
    )
