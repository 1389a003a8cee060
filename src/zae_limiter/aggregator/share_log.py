"""The shares of global limits a batch showed, as one JSON line per share item: what the
stack's dashboard reads with CloudWatch Logs Insights (docs/global.md, "Usage snapshots
and top"). Pure: records in, lines out; the Lambda handler prints them.

Logs, not custom metrics: a metric per (entity, resource, limit, region) would cost
$0.30 a month each in every region whose aggregator emits it; a log line costs its bytes,
and only while shares change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from zae_limiter import keys
from zae_limiter.flows import regional as core
from zae_limiter.keys import regions as rk

#: The field that marks a share line (the dashboard's query filters on it).
MARK = "zael"
KIND = "share"


def share_lines(records: Iterable[Mapping[str, Any]], now_ms: int) -> list[dict[str, Any]]:
    """The latest image of each share item in `records`, one line each (malformed and
    other items are left to the processor, which reports them)."""
    latest: dict[tuple[str, str], Mapping[str, Any]] = {}
    for record in records:
        body = record.get("dynamodb")
        image = body.get("NewImage") if isinstance(body, Mapping) else None
        if not isinstance(image, Mapping):
            continue
        try:
            pk, sk = keys.key_id(image)
        except (KeyError, TypeError):
            continue
        if rk.is_share_key(pk, sk):
            latest[(pk, sk)] = image
    lines = []
    for (pk, _sk), image in latest.items():
        try:
            ns, entity, resource, limit = rk.parse_share_pk(pk)
            share = core.decode(image)
        except (KeyError, TypeError, ValueError):
            continue
        lines.append({
            MARK: KIND, "namespace": ns, "entity": entity, "resource": resource,
            "limit": limit, "region": share.region,
            "percent": round(100 * share.parts / core.PARTS, 2),
            "capacity": share.capacity_milli / 1000, "tokens": share.tokens(now_ms) / 1000,
        })  # fmt: skip
    return lines


__all__ = ["KIND", "MARK", "share_lines"]
