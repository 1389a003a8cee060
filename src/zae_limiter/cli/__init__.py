"""The `zae-limiter` command line: a thin shell over the library.

Each command group lives in its own module and registers itself on the root group.
Errors become one line on stderr and an exit code; `--debug` shows the traceback.
"""

from __future__ import annotations

import sys

import click

from zae_limiter.cli import _errors
from zae_limiter.cli import aggregator as _aggregator
from zae_limiter.cli import audit as _audit
from zae_limiter.cli import deploy as _deploy
from zae_limiter.cli import doctor as _doctor
from zae_limiter.cli import entity as _entity
from zae_limiter.cli import limits as _limits
from zae_limiter.cli import local as _local
from zae_limiter.cli import migrate as _migrate
from zae_limiter.cli import namespace as _namespace
from zae_limiter.cli import top as _top


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="zae-limiter", prog_name="zae-limiter")
@click.option("--debug", is_flag=True, help="Show full tracebacks on errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """zae-limiter: distributed rate limiting on DynamoDB.

    Deploy the table and its aggregator, run a local engine, manage entities,
    limits and shards, and migrate the schema.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


_COMMANDS = (
    _deploy, _doctor, _local, _migrate, _entity, _limits, _aggregator, _audit, _namespace, _top,
)  # fmt: skip
for _module in _COMMANDS:
    _module.register(cli)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the CLI, turning library errors into exit codes."""
    args = sys.argv[1:] if argv is None else argv
    sys.exit(_errors.run(cli, args))
