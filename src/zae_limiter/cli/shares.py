"""`zae-limiter entity shares show ID --resource R --limit NAME`: a global limit's shares.

What this region's replica shows of every region's share item (docs/global.md): each
region's parts and share, tokens now, demand counted, and transfers in flight (parts a
giver has released that the receiver's item, as replicated here, has not taken in yet).
"""

from __future__ import annotations

from typing import Any

import click

from zae_limiter.cli import render
from zae_limiter.cli.options import Target, target_options
from zae_limiter.regional import RegionShare, shares_flow


def share_report(shares: list[RegionShare]) -> list[dict[str, Any]]:
    return [
        {
            "region": s.region,
            "parts": s.parts,
            "percent": round(s.percent, 2),
            "capacity": s.capacity,
            "rate_per_second": s.rate_per_second,
            "tokens": s.tokens,
            "demand_tokens": s.demand_milli / 1000,
            "given": s.given,
            "taken": s.taken,
            "in_flight_to": s.in_flight,
        }
        for s in shares
    ]


def _table(title: str, rows: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    table = Table(title=title)
    for column in ("region", "share", "capacity", "rate/s", "tokens", "demand (ever)",
                   "in flight to it"):  # fmt: skip
        table.add_column(column, justify="left" if column == "region" else "right")
    for r in rows:
        table.add_row(
            r["region"], f"{r['percent']:.1f}%", f"{r['capacity']:g}",
            f"{r['rate_per_second']:g}", f"{r['tokens']:.1f}", f"{r['demand_tokens']:g}",
            f"{100 * r['in_flight_to'] / 1_000_000:.1f}%",
        )  # fmt: skip
    return table


@click.group("shares")
def shares_group() -> None:
    """Regional shares of a global limit (docs/global.md)."""


@shares_group.command("show")
@click.argument("entity_id", metavar="ID")
@click.option("--resource", "-r", required=True, metavar="R", help="The resource.")
@click.option("--limit", "-l", "limit_name", required=True, metavar="NAME", help="The limit.")
@target_options
def shares_show_command(entity_id: str, resource: str, limit_name: str, target: Target) -> None:
    """Show each region's share of global limit NAME: parts, capacity, rate, tokens,
    demand and the transfers in flight, as this region's replica shows them."""
    with render.open_limiter(target) as limiter:
        shares = limiter.repository.run(shares_flow(limiter.repository, entity_id, resource,
                                                    limit_name))  # fmt: skip
    rows = share_report(shares)
    if target.json:
        render.echo_json({"entity_id": entity_id, "resource": resource, "limit": limit_name,
                          "regions": rows})  # fmt: skip
        return
    if not rows:
        render.echo(f"{entity_id} / {resource} / {limit_name}: no regional shares yet")
        return
    total = sum(r["parts"] for r in rows)
    render.print_table(_table(f"{entity_id} / {resource} / {limit_name}", rows))
    render.echo(f"sum of shares: {100 * total / 1_000_000:.1f}% of the limit (never above 100%)")


def register(group: click.Group) -> None:
    group.add_command(shares_group)
