"""The RateLimit header fields of the IETF HTTPAPI draft, serialized as RFC 9651 lists.

    RateLimit-Policy: "rpm";q=5;w=60, "tpm";q=10000;w=60
    RateLimit: "rpm";r=4;t=12, "tpm";r=9200;t=5

One list member per limit, named by the limit's name. A token bucket has no fixed
window, so `q`/`w` give its steady rate (refill amount per refill period), `r` the
whole tokens left and `t` the seconds until the bucket is full again (0 when it is).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import http_sf

from zae_limiter.limits import Limit

POLICY = b"ratelimit-policy"
RATELIMIT = b"ratelimit"
RETRY_AFTER = b"retry-after"
#: RFC 9651 integers have at most 15 digits.
_SF_INT_MAX = 999_999_999_999_999


@dataclass(frozen=True, slots=True)
class Quota:
    """One limit as the headers show it: its policy and what is left of it."""

    limit: Limit
    remaining: int
    reset_seconds: int


def quota(limit: Limit, tokens_milli: int) -> Quota:
    """The headers' view of a bucket holding `tokens_milli` (may be negative: debt)."""
    missing = max(0, limit.capacity_milli - tokens_milli)
    reset = math.ceil(missing * limit.refill_period_seconds / limit.refill_amount_milli)
    return Quota(limit, max(0, tokens_milli) // 1000, reset)


def _int(value: int) -> int:
    return min(max(0, value), _SF_INT_MAX)


def policy_value(limits: Iterable[Limit]) -> bytes:
    members: list[Any] = [
        (limit.name, {"q": _int(limit.refill_amount), "w": _int(limit.refill_period_seconds)})
        for limit in limits
    ]
    return http_sf.ser(members).encode("ascii")


def ratelimit_value(quotas: Iterable[Quota]) -> bytes:
    members: list[Any] = [
        (q.limit.name, {"r": _int(q.remaining), "t": _int(q.reset_seconds)}) for q in quotas
    ]
    return http_sf.ser(members).encode("ascii")


def header_pairs(
    quotas: Sequence[Quota], policy: Sequence[Limit] | None = None
) -> list[tuple[bytes, bytes]]:
    """ASGI header pairs: the policy of every limit (default: the quotas' limits) and the
    quotas; none when there is nothing to say."""
    limits = list(policy) if policy is not None else [q.limit for q in quotas]
    pairs = [(POLICY, policy_value(limits))] if limits else []
    if quotas:
        pairs.append((RATELIMIT, ratelimit_value(quotas)))
    return pairs
