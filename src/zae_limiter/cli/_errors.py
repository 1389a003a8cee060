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


def exit_code_for(error: BaseException) -> int:
    if isinstance(error, ValidationError):
        return EXIT_USAGE
    if isinstance(
        error,
        (EntityNotFoundError, EntityExistsError, TableNotFoundError, RateLimiterUnavailable),
    ):
        return EXIT_FAILURE
    return EXIT_FAILURE


def run(group: click.Group, args: list[str]) -> int:
    debug = "--debug" in args
    try:
        result = group.main(args=args, prog_name="zae-limiter", standalone_mode=False)
    except click.exceptions.Exit as done:
        return int(done.exit_code or 0)
    except click.Abort:
        click.echo("aborted", err=True)
        return EXIT_FAILURE
    except click.ClickException as error:
        error.show()
        return int(error.exit_code)
    except ZaeLimiterError as error:
        if debug:
            traceback.print_exc()
        click.echo(f"error: {error}", err=True)
        return exit_code_for(error)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return 130
    except Exception as error:  # the CLI never shows a traceback by default
        if debug:
            traceback.print_exc()
        name = type(error).__name__
        click.echo(f"error: {name}: {error} (run with --debug for details)", err=True)
        return EXIT_FAILURE
    sys.stdout.flush()
    # With standalone_mode=False, click hands back ctx.exit(code) as the return value.
    return result if isinstance(result, int) else EXIT_OK
