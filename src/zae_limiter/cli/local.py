"""`zae-limiter local` commands: run a DynamoDB-compatible engine on 127.0.0.1.

    zae-limiter local up [--engine moto|dynamodb-local] [--port P] [--instance NAME]
    eval "$(zae-limiter local env)"
    zae-limiter local status
    zae-limiter local down
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

from zae_limiter import local as engine_api

F = TypeVar("F", bound=Callable[..., Any])

EXIT_NOT_RUNNING = 1


def _instance_option(func: F) -> F:
    return click.option(
        "--instance", "-i", default=engine_api.DEFAULT_INSTANCE, show_default=True,
        help="Name of the local engine, to run several side by side.",
    )(func)


def _output_option(func: F) -> F:
    return click.option(
        "--output", "-o", type=click.Choice(["table", "json"]), default="table",
        show_default=True, help="Output format.",
    )(func)


def _echo_json(body: dict[str, Any]) -> None:
    click.echo(json.dumps(body, indent=2, sort_keys=True))


@click.group("local")
def local_group() -> None:
    """Run a local DynamoDB-compatible engine (moto or DynamoDB Local) on 127.0.0.1.

    State lives in ~/.zae-limiter/local (env ZAEL_LOCAL_STATE_DIR).
    """


@local_group.command("up")
@click.option(
    "--engine", "-e", type=click.Choice(list(engine_api.ENGINES)), default=engine_api.MOTO,
    show_default=True, help="moto's server (pure Python) or AWS DynamoDB Local (Java 17).",
)
@click.option("--port", "-p", type=click.IntRange(1, 65535), default=None,
              help="Port on 127.0.0.1 (default: a free one).")
@_instance_option
@_output_option
def up_command(engine: str, port: int | None, instance: str, output: str) -> None:
    """Start the engine in the background and wait until it answers."""
    result = engine_api.up(engine, port, instance)
    state = result.state
    if output == "json":
        _echo_json({**state.to_dict(), "already_running": result.already_running})
        return
    verb = "already running" if result.already_running else "started"
    click.echo(
        f"{state.engine} {verb} at {state.endpoint_url} "
        f"(instance {state.instance}, pid {state.pid}, log {state.log})"
    )
    flag = "" if instance == engine_api.DEFAULT_INSTANCE else f" --instance {instance}"
    click.echo(f'use it: eval "$(zae-limiter local env{flag})"')


@local_group.command("down")
@_instance_option
@_output_option
def down_command(instance: str, output: str) -> None:
    """Stop the engine started by `up` (only that process)."""
    result = engine_api.down(instance)
    if output == "json":
        _echo_json({"instance": result.instance, "stopped": result.stopped,
                    "detail": result.detail})
        return
    click.echo(f"{result.instance}: {result.detail}")


@local_group.command("status")
@_instance_option
@_output_option
@click.pass_context
def status_command(ctx: click.Context, instance: str, output: str) -> None:
    """Say whether the engine runs and answers; exit code 1 when it does not."""
    current = engine_api.status(instance)
    if output == "json":
        _echo_json(current.to_dict())
    elif current.running and current.state is not None:
        click.echo(
            f"{instance}: running {current.state.engine} at {current.state.endpoint_url} "
            f"(pid {current.state.pid})"
        )
    else:
        click.echo(f"{instance}: not running ({current.detail})")
    if not current.running:
        ctx.exit(EXIT_NOT_RUNNING)


@local_group.command("env")
@_instance_option
@_output_option
def env_command(instance: str, output: str) -> None:
    """Print the environment for the engine: eval "$(zae-limiter local env)"."""
    if output == "json":
        _echo_json(engine_api.env(instance))
        return
    for line in engine_api.env_lines(instance):
        click.echo(line)


def register(root: click.Group) -> None:
    """Adds the `local` group to the root command."""
    root.add_command(local_group)
