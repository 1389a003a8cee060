"""`zae-limiter local` commands: run a DynamoDB-compatible engine on 127.0.0.1.

    zae-limiter local up [--engine moto|dynamodb-local] [--port P] [--instance NAME]
    eval "$(zae-limiter local env)"
    zae-limiter local status
    zae-limiter local down

A local global table (docs/global.md): one engine per region and a replicator.

    zae-limiter local up --regions us-east-1,eu-west-1 [--lag-ms 1000]
    eval "$(zae-limiter local env --region eu-west-1)"
    zae-limiter local partition --region eu-west-1 on|off
    zae-limiter local lag 250
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

from zae_limiter import local as engine_api
from zae_limiter.local import regions as regions_api
from zae_limiter.local.replication import DEFAULT_LAG_MS

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
@click.option("--regions", metavar="LIST", default=None,
              help="A local global table: one engine per region (each on a free port) and "
                   "a replicator between them, e.g. us-east-1,eu-west-1.")
@click.option("--lag-ms", type=click.IntRange(0, None), default=DEFAULT_LAG_MS,
              show_default=True, help="With --regions: replication lag in milliseconds.")
@_instance_option
@_output_option
def up_command(
    engine: str, port: int | None, regions: str | None, lag_ms: int, instance: str, output: str
) -> None:
    """Start the engine in the background and wait until it answers."""
    if regions is not None:
        if port is not None:
            raise click.UsageError("--port goes with one engine; --regions picks free ports")
        names = tuple(r.strip() for r in regions.split(",") if r.strip())
        regions_api.up_regions(engine, names, instance, lag_ms)
        _show_group(regions_api.wait_replicating(instance), output)
        if output != "json":
            flag = "" if instance == engine_api.DEFAULT_INSTANCE else f" --instance {instance}"
            click.echo(f'use a region: eval "$(zae-limiter local env --region {names[0]}{flag})"')
        return
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
    """Stop the engine started by `up` (only that process), or every region's engine and
    the replicator."""
    if regions_api.read_group(instance) is not None:
        done = regions_api.down_regions(instance)
        if output == "json":
            _echo_json({"instance": instance, "stopped": True, "detail": done})
        else:
            for line in done:
                click.echo(f"{instance}: {line}")
        return
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
    """Say whether the engine runs and answers; exit code 1 when it does not.

    For a local global table: each region's endpoint, the replicator, lag, partitions
    and the changes waiting on each link."""
    if regions_api.read_group(instance) is not None:
        group = regions_api.group_status(instance)
        _show_group(group, output)
        if not group.running:
            ctx.exit(EXIT_NOT_RUNNING)
        return
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
@click.option("--region", default=None,
              help="For a local global table: the region whose engine to use.")
@_instance_option
@_output_option
def env_command(region: str | None, instance: str, output: str) -> None:
    """Print the environment for the engine: eval "$(zae-limiter local env)"."""
    if region is None and regions_api.read_group(instance) is not None:
        raise click.UsageError("these local engines run several regions: pass --region")
    if region is not None:
        env = regions_api.region_env(region, instance)
        if output == "json":
            _echo_json(env)
        else:
            for name, value in env.items():
                click.echo(f"export {name}={value}")
        return
    if output == "json":
        _echo_json(engine_api.env(instance))
        return
    for line in engine_api.env_lines(instance):
        click.echo(line)


@local_group.command("partition")
@click.option("--region", required=True, help="The region to cut off or heal.")
@click.argument("state", type=click.Choice(["on", "off"]))
@_instance_option
@_output_option
def partition_command(region: str, state: str, instance: str, output: str) -> None:
    """Partition a region of a local global table (on: nothing flows in or out of it)
    or heal it (off: what waited flows, in order)."""
    control = regions_api.partition(region, state == "on", instance)
    if output == "json":
        _echo_json(control.to_dict())
        return
    cut = ", ".join(control.partitioned) or "none"
    click.echo(f"{region}: partition {state} (partitioned now: {cut})")


@local_group.command("lag")
@click.argument("lag_ms", type=click.IntRange(0, None), metavar="MS")
@_instance_option
@_output_option
def lag_command(lag_ms: int, instance: str, output: str) -> None:
    """Set the replication lag of a local global table, in milliseconds."""
    control = regions_api.set_lag(lag_ms, instance)
    if output == "json":
        _echo_json(control.to_dict())
        return
    click.echo(f"replication lag: {control.lag_ms} ms")


def _show_group(group: regions_api.GroupStatus, output: str) -> None:
    if output == "json":
        _echo_json(group.to_dict())
        return
    for region, current in group.regions.items():
        where = current.state.endpoint_url if current.state is not None else "-"
        state = "running" if current.running else f"not running ({current.detail})"
        cut = " PARTITIONED" if region in group.control.partitioned else ""
        click.echo(f"{region}: {where} {state}{cut}")
    replicator = "running" if group.replicator_running else "not running"
    pid = "" if group.state is None else f" (pid {group.state.replicator_pid})"
    click.echo(f"replicator: {replicator}{pid}, lag {group.control.lag_ms} ms, "
               f"partitioned: {', '.join(group.control.partitioned) or 'none'}")
    tables = group.replication.get("tables") or {}
    if tables:
        click.echo("replicated: " + ", ".join(
            f"{name} ({', '.join(regions)})" for name, regions in sorted(tables.items())
        ))  # fmt: skip
    backlog = group.replication.get("backlog") or {}
    if backlog:
        click.echo("waiting: " + ", ".join(f"{link} {n}" for link, n in sorted(backlog.items())))


def register(root: click.Group) -> None:
    """Adds the `local` group to the root command."""
    root.add_command(local_group)
