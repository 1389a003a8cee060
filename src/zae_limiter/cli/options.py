"""Options shared by every command that talks to a table."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class Target:
    """Which table (and stack) a command works on, and how to print results."""

    name: str
    namespace: str | None
    region: str | None
    endpoint_url: str | None
    output: str
    #: Who audit events name (None: the caller's identity from STS).
    principal: str | None = None

    @property
    def json(self) -> bool:
        return self.output == "json"


def target_options(func: F) -> F:
    """Adds --name/-n, --namespace/-N, --region, --endpoint-url, --output and --principal."""

    @click.option(
        "--name",
        "-n",
        envvar="ZAEL_NAME",
        default="zae-limiter",
        show_default=True,
        help="Table and stack name (env ZAEL_NAME).",
    )
    @click.option(
        "--namespace",
        "-N",
        envvar="ZAEL_NAMESPACE",
        default=None,
        help="Namespace inside the table (env ZAEL_NAMESPACE; default 'default').",
    )
    @click.option("--region", envvar="AWS_REGION", default=None, help="AWS region.")
    @click.option(
        "--endpoint-url",
        envvar="AWS_ENDPOINT_URL",
        default=None,
        help="DynamoDB endpoint (env AWS_ENDPOINT_URL), e.g. a local engine.",
    )
    @click.option(
        "--output",
        "-o",
        type=click.Choice(["table", "json"]),
        default="table",
        show_default=True,
        help="Output format.",
    )
    @click.option(
        "--principal",
        envvar="ZAEL_PRINCIPAL",
        default=None,
        metavar="WHO",
        help="Who audit events name for changes made by this command (env ZAEL_PRINCIPAL; "
        "default: the caller's identity from STS).",
    )
    @functools.wraps(func)
    def wrapper(
        *args: Any,
        name: str,
        namespace: str | None,
        region: str | None,
        endpoint_url: str | None,
        output: str,
        principal: str | None,
        **kwargs: Any,
    ) -> Any:
        target = Target(name, namespace, region, endpoint_url, output, principal)
        return func(*args, target=target, **kwargs)

    return wrapper  # type: ignore[return-value]
