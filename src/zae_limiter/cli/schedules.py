"""Scheduled limits in the CLI: the limits file's mapping form, and what `limits show`
says of a schedule (its overrides and the next change: when, and to what).

Pure but for `now_ms()`, the one clock read, which the commands pass in.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from zae_limiter.errors import ValidationError
from zae_limiter.limits import Limit, next_change

#: The keys of one override in a limits file.
OVERRIDE_KEYS = frozenset({"from", "to", "tz", "limit"})


def now_ms() -> int:
    return int(time.time() * 1000)


def parse_scheduled(where: str, value: Mapping[str, Any], parse_limit: Any) -> Limit:
    """`{limit: SPEC, schedule: [{from: CRON, to: CRON, limit: SPEC, tz: ZONE}, ...]}`."""
    unknown = sorted(set(value) - {"limit", "schedule"})
    if unknown or not isinstance(value.get("limit"), str):
        raise ValidationError(
            f"{where}: a scheduled limit is a mapping with 'limit' (a spec like "
            f"'rpm:100/min') and 'schedule' (a list of {{from, to, limit, tz}})"
            + (f"; unknown key {unknown[0]!r}" if unknown else "")
        )
    limit: Limit = parse_limit(value["limit"])
    overrides = value.get("schedule") or []
    if not isinstance(overrides, list):
        raise ValidationError(f"{where}.schedule: expected a list of {{from, to, limit, tz}}")
    for i, entry in enumerate(overrides):
        here = f"{where}.schedule[{i}]"
        if not isinstance(entry, dict) or set(entry) - OVERRIDE_KEYS:
            raise ValidationError(
                f"{here}: expected a mapping with 'from' and 'to' (cron expressions, e.g. "
                "'0 22 * * *'), 'limit' (a spec) and optionally 'tz' (an IANA zone)"
            )
        missing = sorted({"from", "to", "limit"} - set(entry))
        if missing:
            raise ValidationError(f"{here}: {missing[0]!r} is missing")
        try:
            other = parse_limit(str(entry["limit"]))
            limit = limit.during(entry["from"], entry["to"], other, tz=entry.get("tz", "UTC"))
        except ValidationError as error:
            raise ValidationError(f"{here}: {error}") from None
    return limit


def scheduled_json(limit: Limit, at_ms: int, format_limit: Any) -> dict[str, Any]:
    """The schedule and the next change of a limit, for `--json` (empty without one)."""
    if not limit.schedule:
        return {}
    body: dict[str, Any] = {
        "schedule": [
            {
                "from": o.start,
                "to": o.end,
                "tz": o.tz,
                "limit": format_limit(
                    Limit(limit.name, o.capacity, o.refill_amount, o.refill_period_seconds)
                ),
            }
            for o in limit.schedule
        ]
    }
    change = next_change(limit, at_ms)
    if change is not None:
        when, then = change
        body["next_change"] = {"at_ms": when, "at": _utc(when), "limit": format_limit(then)}
    return body


def next_change_text(limit: Limit, at_ms: int) -> str:
    change = next_change(limit, at_ms)
    if change is None:
        return "" if not limit.schedule else "none soon"
    when, then = change
    return f"{_utc(when)}: {then.describe()}"


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
