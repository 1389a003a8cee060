"""What every check of `zae-limiter doctor` shares: the target, its clients, the clock,
and the facts more than one check reads (each fetched once)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from zae_limiter import keys
from zae_limiter.clock_watch import wall_clock_ms
from zae_limiter.errors import ZaeLimiterError
from zae_limiter.infra.aws import Aws, error_code, error_message
from zae_limiter.infra.stack import StackClient
from zae_limiter.repository import is_local_endpoint

Clock = Callable[[], int]
Sleep = Callable[[float], None]


@dataclass(frozen=True, slots=True)
class DoctorTarget:
    """Which deployment to check, and the clock to check it with (tests pass one that is
    off on purpose; everyone else, the wall clock)."""

    name: str
    namespace: str | None = None
    region: str | None = None
    endpoint_url: str | None = None
    clock: Clock = wall_clock_ms
    sleep: Sleep = time.sleep

    @property
    def local(self) -> bool:
        """A local engine (moto server, DynamoDB Local): no Lambda, no CloudWatch, no IAM."""
        return is_local_endpoint(self.endpoint_url)


class AwsCallError(Exception):
    """An AWS call a check made failed; `code` is the service's error code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}" if code else message)
        self.code = code


def call(client: Any, method: str, **params: Any) -> Any:
    """`client.method(**params)`, its failures as one exception the checks can report."""
    try:
        return getattr(client, method)(**params)
    except ClientError as error:
        raise AwsCallError(error_code(error), error_message(error)) from error
    except BotoCoreError as error:
        raise AwsCallError(type(error).__name__, str(error)) from error


@dataclass
class Context:
    target: DoctorTarget
    aws: Aws
    #: DescribeTable's `Table` (None: no such table), once read.
    described: dict[str, Any] | None = None
    #: The stack (None: none), and its resources, once read; `stack_error` if unreadable.
    stack: dict[str, Any] | None = None
    stack_resources: list[dict[str, Any]] = field(default_factory=list)
    stack_error: str | None = None
    #: The caller's ARN from STS (AWS only).
    caller_arn: str | None = None

    @property
    def name(self) -> str:
        return self.target.name

    def client(self, service: str) -> Any:
        return self.aws.client(service)

    def read_version_item(self) -> dict[str, Any] | None:
        answer = call(
            self.client("dynamodb"), "get_item", TableName=self.name, Key=keys.version_key(),
            ConsistentRead=True,
        )  # fmt: skip
        item: dict[str, Any] | None = answer.get("Item")
        return item

    def load_stack(self) -> None:
        """Read the stack of the same name, if CloudFormation is there to ask."""
        stacks = StackClient(self.client("cloudformation"))
        try:
            self.stack = stacks.describe(self.name)
            if self.stack is not None:
                self.stack_resources = stacks.resources(self.name)
        except (ZaeLimiterError, ClientError, BotoCoreError) as error:
            self.stack_error = str(error)
