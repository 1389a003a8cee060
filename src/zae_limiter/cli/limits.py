"""`zae-limiter limits` commands."""

from __future__ import annotations

import click


def register(root: click.Group) -> None:
    """Not built yet."""
