"""The demo's calls into sibling parts (deploy, CLI, aggregator), each with a fallback.

The demo must run even while one of those parts is missing or half-built, so every
call here is guarded and says which path it took.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from zae_limiter.repository import SyncRepository

UPDATED_BY = "zae-limiter demo"


def create_table(endpoint_url: str, name: str) -> str:
    """Create table `name`; returns a sentence saying how it was done."""
    try:
        from zae_limiter.infra import Aws, deploy_table_only
    except ImportError:
        reason = "zae_limiter.infra has no deploy_table_only yet"
    else:
        try:
            result = deploy_table_only(
                Aws(endpoint_url=endpoint_url), name, UPDATED_BY, poll_seconds=0.2
            )
        except Exception as error:
            reason = f"table-only deploy failed ({type(error).__name__}: {error})"
        else:
            how = "created" if result.created else "found"
            return f"deploy (table only): {how} table {name!r}, status {result.status}"
    SyncRepository.open(name=name, endpoint_url=endpoint_url, create_table=True).close()
    return f"SyncRepository.open(create_table=True), because {reason}"


def find_command(path: Sequence[str]) -> click.Command | None:
    """The CLI command at `path` (e.g. entity shards show), or None if it is not there."""
    try:
        from zae_limiter.cli import cli
    except Exception:
        return None
    command: click.Command = cli
    for part in path:
        if not isinstance(command, click.Group):
            return None
        found = command.get_command(click.Context(command), part)
        if found is None:
            return None
        command = found
    return command


def run_cli(args: list[str]) -> int:
    """Run the CLI in-process; errors become one line on stderr and an exit code."""
    try:
        from zae_limiter.cli import _errors, cli
    except Exception:
        return 1
    return _errors.run(cli, args)


def flags(command: click.Command) -> set[str]:
    """Every option string the command accepts, e.g. {"--entity", "-e", "--once"}."""
    return {flag for param in command.params for flag in param.opts if flag.startswith("-")}


def target_args(endpoint_url: str, name: str) -> list[str]:
    return ["--name", name, "--endpoint-url", endpoint_url]


def shards_show(endpoint_url: str, name: str, entity_id: str, resource: str) -> bool:
    """`zae-limiter entity shards show` in-process; False when the command is missing."""
    command = find_command(["entity", "shards", "show"])
    if command is None:
        return False
    args = ["entity", "shards", "show", entity_id, *target_args(endpoint_url, name)]
    if "--resource" in flags(command):
        args += ["--resource", resource]
    return run_cli(args) == 0


def drain_stream(endpoint_url: str, name: str) -> bool | None:
    """`aggregator run --once`: True if it ran, False if it failed, None if it is missing."""
    run = find_command(["aggregator", "run"])
    if run is None or "--once" not in flags(run) or find_command(["usage", "summary"]) is None:
        return None
    return run_cli(["aggregator", "run", *target_args(endpoint_url, name), "--once"]) == 0


def usage_summary(endpoint_url: str, name: str, entity_id: str, resource: str) -> bool:
    """`usage summary` narrowed to one entity and resource; False when it cannot run."""
    command = find_command(["usage", "summary"])
    extra = None if command is None else _summary_args(command, entity_id, resource)
    if extra is None:
        return False
    return run_cli(["usage", "summary", *target_args(endpoint_url, name), *extra]) == 0


def _summary_args(command: click.Command, entity_id: str, resource: str) -> list[str] | None:
    """Arguments for `usage summary` that narrow it to one entity and resource."""
    names = flags(command)
    args = ["--entity", entity_id] if "--entity" in names else []
    if "--resource" in names:
        args += ["--resource", resource]
    for param in command.params:
        if isinstance(param, click.Argument) and param.required:
            if "entity" not in (param.name or ""):
                return None
            args.append(entity_id)
    return args
