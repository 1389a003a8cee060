"""How the CLI reports failures: one line on stderr, a stable exit code."""

from __future__ import annotations

import sys
import traceback

import click

from zae_limiter.errors import (
    EntityExistsError,
    EntityNotFoundError,
    RateLimiterUnavailable,
    TableNotFoundError,
    ValidationError,
    ZaeLimiterError,
)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
#: `deploy --plan --detailed-exitcode` and `migrate --check`: the plan has changes.
EXIT_CHANGES = 2
#: Ctrl-C, as shells report a process ended by SIGINT (128 + 2).
EXIT_INTERRUPTED = 130
#: Flags under which exit code 2 means "changes pending", so every error exits 1.
DETAILED_FLAGS = ("--detailed-exitcode", "--check")


def _detailed(args: list[str]) -> bool:
    return any(flag in args for flag in DETAILED_FLAGS)


def exit_code_for(error: BaseException) -> int:
    if isinstance(error, ValidationError):
        return EXIT_USAGE
    if isinstance(
        error,
        (EntityNotFoundError, EntityExistsError, TableNotFoundError, RateLimiterUnavailable),
    ):
        return EXIT_FAILURE
    return EXIT_FAILURE


def _failure(code: int, args: list[str]) -> int:
    """An error's exit code; 1 where 2 would read as "changes pending"."""
    return EXIT_FAILURE if _detailed(args) and code == EXIT_CHANGES else code


def run(group: click.Group, args: list[str]) -> int:
    """Run the CLI. Under --detailed-exitcode or --check, 2 means "changes pending", so
    failures exit 1."""
    debug = "--debug" in args
    try:
        result = group.main(args=args, prog_name="zae-limiter", standalone_mode=False)
    except click.exceptions.Exit as done:
        return int(done.exit_code or 0)
    except click.Abort as aborted:
        if isinstance(aborted.__context__, KeyboardInterrupt):  # click turns Ctrl-C into Abort
            click.echo("interrupted", err=True)
            return EXIT_INTERRUPTED
        click.echo("aborted", err=True)
        return EXIT_FAILURE
    except click.ClickException as error:
        error.show()
        return _failure(int(error.exit_code), args)
    except ZaeLimiterError as error:
        if debug:
            traceback.print_exc()
        click.echo(f"error: {error}", err=True)
        return _failure(exit_code_for(error), args)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return EXIT_INTERRUPTED
    except Exception as error:  # the CLI never shows a traceback by default
        if debug:
            traceback.print_exc()
        name = type(error).__name__
        click.echo(f"error: {name}: {error} (run with --debug for details)", err=True)
        return EXIT_FAILURE
    sys.stdout.flush()
    # With standalone_mode=False, click hands back ctx.exit(code) as the return value.
    return result if isinstance(result, int) else EXIT_OK
