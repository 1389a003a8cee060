"""CloudFormation operations on one stack: create, update through a change set, delete.

Every wait streams the stack's new events to a callback as they arrive, so a caller can
show progress; a failed operation raises StackError naming the resource that failed.
No click, no printing: the CLI decides how events look.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from zae_limiter.infra.aws import error_code, error_message, translated
from zae_limiter.infra.errors import StackError, StackNotFoundError

CAPABILITIES = ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"]
_NO_CHANGES = ("didn't contain changes", "No updates are to be performed")
_CANCELLED = ("cancelled", "canceled")
SUCCESS = frozenset({"CREATE_COMPLETE", "UPDATE_COMPLETE", "DELETE_COMPLETE", "IMPORT_COMPLETE"})


@dataclass(frozen=True, slots=True)
class StackEvent:
    timestamp: datetime | None
    logical_id: str
    resource_type: str
    status: str
    reason: str | None

    @property
    def failed(self) -> bool:
        return self.status.endswith("_FAILED")


@dataclass(frozen=True, slots=True)
class ResourceChange:
    action: str  # Add, Modify, Remove, Import, Dynamic
    logical_id: str
    resource_type: str
    replacement: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "logical_id": self.logical_id,
            "resource_type": self.resource_type,
            "replacement": self.replacement,
        }


@dataclass(frozen=True, slots=True)
class ChangeSet:
    change_set_id: str
    changes: tuple[ResourceChange, ...]


EventCallback = Callable[[StackEvent], None]


def ignore_event(_: StackEvent) -> None:
    return None


@dataclass
class StackClient:
    """One CloudFormation client and how patiently to wait on it."""

    cfn: Any
    poll_seconds: float = 2.0
    timeout_seconds: float = 3600.0
    sleep: Callable[[float], None] = field(default=time.sleep)

    def describe(self, name: str) -> dict[str, Any] | None:
        """The stack, or None when it does not exist (or is fully deleted)."""
        with translated(f"describing stack {name}"):
            try:
                stacks = self.cfn.describe_stacks(StackName=name)["Stacks"]
            except ClientError as error:
                if "does not exist" in error_message(error):
                    return None
                raise
        stack: dict[str, Any] | None = stacks[0] if stacks else None
        if stack is None or stack["StackStatus"] == "DELETE_COMPLETE":
            return None
        return stack

    def outputs(self, name: str) -> dict[str, str]:
        stack = self.describe(name) or {}
        return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs") or []}

    def resources(self, name: str) -> list[dict[str, Any]]:
        with translated(f"listing resources of stack {name}"):
            pages = self.cfn.get_paginator("list_stack_resources").paginate(StackName=name)
            return [r for page in pages for r in page["StackResourceSummaries"]]

    def create(
        self,
        name: str,
        template: str,
        parameters: Mapping[str, str],
        tags: Mapping[str, str],
        on_event: EventCallback = ignore_event,
    ) -> str:
        seen = self._event_ids(name)
        with translated(f"creating stack {name}"):
            stack_id = self.cfn.create_stack(
                StackName=name,
                TemplateBody=template,
                Parameters=_parameters(parameters),
                Capabilities=CAPABILITIES,
                Tags=_tags(tags),
            )["StackId"]
        return self.wait(name, stack_id, seen, on_event)

    def plan_update(
        self,
        name: str,
        template: str,
        parameters: Mapping[str, str],
        tags: Mapping[str, str],
    ) -> ChangeSet | None:
        """Create a change set and describe it; None when there is nothing to change."""
        change_set_name = f"zae-limiter-{int(time.time() * 1000)}"
        with translated(f"creating a change set for stack {name}"):
            try:
                change_set_id = self.cfn.create_change_set(
                    StackName=name,
                    ChangeSetName=change_set_name,
                    ChangeSetType="UPDATE",
                    TemplateBody=template,
                    Parameters=_parameters(parameters),
                    Capabilities=CAPABILITIES,
                    Tags=_tags(tags),
                )["Id"]
            except ClientError as error:
                if any(text in error_message(error) for text in _NO_CHANGES):
                    return None  # moto refuses such a change set outright
                raise
        described = self._wait_change_set(name, change_set_id)
        if described is None:
            self.discard(change_set_id)
            return None
        return ChangeSet(change_set_id, described)

    def _wait_change_set(self, name: str, change_set_id: str) -> tuple[ResourceChange, ...] | None:
        deadline = time.monotonic() + self.timeout_seconds
        while True:
            with translated(f"describing the change set of stack {name}"):
                pages = self.cfn.get_paginator("describe_change_set").paginate(
                    ChangeSetName=change_set_id
                )
                described = list(pages)
            status = described[0]["Status"]
            if status == "CREATE_COMPLETE":
                return tuple(_change(c) for page in described for c in page.get("Changes", []))
            if status == "FAILED":
                reason = described[0].get("StatusReason") or "change set failed"
                if any(text in reason for text in _NO_CHANGES):
                    return None
                self.discard(change_set_id)
                raise StackError(name, reason)
            if time.monotonic() > deadline:
                raise StackError(name, f"change set still {status} after the timeout")
            self.sleep(self.poll_seconds)

    def execute(self, name: str, change_set_id: str, on_event: EventCallback = ignore_event) -> str:
        seen = self._event_ids(name)
        with translated(f"executing the change set of stack {name}"):
            self.cfn.execute_change_set(ChangeSetName=change_set_id)
            stack_id = self.cfn.describe_stacks(StackName=name)["Stacks"][0]["StackId"]
        return self.wait(name, stack_id, seen, on_event)

    def discard(self, change_set_id: str) -> None:
        with translated("deleting a change set"):
            self.cfn.delete_change_set(ChangeSetName=change_set_id)

    def delete(self, name: str, on_event: EventCallback = ignore_event) -> str:
        stack = self.describe(name)
        if stack is None:
            raise StackNotFoundError(name)
        seen = self._event_ids(name)
        with translated(f"deleting stack {name}"):
            self.cfn.delete_stack(StackName=stack["StackId"])
        # A deleted stack is found by id only, so wait on the id.
        return self.wait(name, stack["StackId"], seen, on_event)

    def wait(
        self, name: str, stack_id: str, seen: set[str], on_event: EventCallback = ignore_event
    ) -> str:
        """Poll until the stack leaves *_IN_PROGRESS; report new events; raise on failure."""
        deadline = time.monotonic() + self.timeout_seconds
        events: list[StackEvent] = []
        while True:
            with translated(f"waiting for stack {name}"):
                stack = self.cfn.describe_stacks(StackName=stack_id)["Stacks"][0]
                fresh = self._new_events(stack_id, seen)
            for event in fresh:
                events.append(event)
                on_event(event)
            status = str(stack["StackStatus"])
            if not status.endswith("_IN_PROGRESS"):
                if status not in SUCCESS:
                    raise StackError(name, failure_reason(status, events, stack))
                return status
            if time.monotonic() > deadline:
                raise StackError(name, f"still {status} after {self.timeout_seconds:.0f}s")
            self.sleep(self.poll_seconds)

    def _event_ids(self, name: str) -> set[str]:
        """Events that exist before an operation, so that only new ones are reported."""
        with translated(f"reading events of stack {name}"):
            try:
                page = self.cfn.describe_stack_events(StackName=name)
            except ClientError as error:
                if error_code(error) == "ValidationError":
                    return set()  # no stack yet
                raise
        return {event["EventId"] for event in page["StackEvents"]}

    def _new_events(self, stack_id: str, seen: set[str]) -> list[StackEvent]:
        # The newest events come first; one page (100) per poll keeps up with any stack.
        page = self.cfn.describe_stack_events(StackName=stack_id)["StackEvents"]
        fresh = [e for e in page if e["EventId"] not in seen]
        seen.update(e["EventId"] for e in fresh)
        return [_event(e) for e in reversed(fresh)]


def failure_reason(status: str, events: Sequence[StackEvent], stack: Mapping[str, Any]) -> str:
    """The first resource that failed for a reason of its own, else the stack's reason."""
    for event in events:
        if event.failed and event.reason and not any(c in event.reason for c in _CANCELLED):
            return f"{status}: {event.logical_id} ({event.resource_type}): {event.reason}"
    reason = stack.get("StackStatusReason") or "no reason given"
    return f"{status}: {reason}"


def _event(raw: Mapping[str, Any]) -> StackEvent:
    return StackEvent(
        timestamp=raw.get("Timestamp"),
        logical_id=raw.get("LogicalResourceId", ""),
        resource_type=raw.get("ResourceType", ""),
        status=raw.get("ResourceStatus", ""),
        reason=raw.get("ResourceStatusReason"),
    )


def _change(raw: Mapping[str, Any]) -> ResourceChange:
    change = raw.get("ResourceChange", {})
    return ResourceChange(
        action=change.get("Action", ""),
        logical_id=change.get("LogicalResourceId", ""),
        resource_type=change.get("ResourceType", ""),
        replacement=change.get("Replacement"),
    )


def _parameters(parameters: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()]


def _tags(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]

