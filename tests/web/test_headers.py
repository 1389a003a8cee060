"""RateLimit and RateLimit-Policy: serialized as RFC 9651 lists, read back by a parser."""

from __future__ import annotations

import subprocess
import sys

import http_sf
import pytest

from zae_limiter import Limit
from zae_limiter.asgi.headers import header_pairs, policy_value, quota, ratelimit_value

RPM = Limit.per_minute("rpm", 5)
TPM = Limit.per_minute("tpm", 10_000, burst=20_000)


def parsed(value: bytes) -> list[tuple[str, dict[str, int]]]:
    return [(name, dict(params)) for name, params in http_sf.parse(value, tltype="list")]


def test_policy_lists_every_limit_with_its_rate() -> None:
    assert parsed(policy_value([RPM, TPM])) == [
        ("rpm", {"q": 5, "w": 60}),
        ("tpm", {"q": 10_000, "w": 60}),
    ]


@pytest.mark.parametrize(
    ("limit", "tokens_milli", "r", "t"),
    [
        (RPM, 5000, 5, 0),  # full
        (RPM, 4000, 4, 12),  # one token missing, one every 12 s
        (RPM, 4500, 4, 6),  # fractions of a token are not shown, but refill counts them
        (RPM, -2000, 0, 84),  # debt: nothing left, seven tokens to refill
        (TPM, 0, 0, 120),  # burst above the rate: twice the window to fill
    ],
)
def test_quota_is_whole_tokens_left_and_seconds_until_full(
    limit: Limit, tokens_milli: int, r: int, t: int
) -> None:
    q = quota(limit, tokens_milli)
    assert (q.remaining, q.reset_seconds) == (r, t)
    assert parsed(ratelimit_value([q])) == [(limit.name, {"r": r, "t": t})]


def test_numbers_stay_inside_structured_field_integers() -> None:
    huge = Limit.per_day("tpm", 10**12)
    value = ratelimit_value([quota(huge, 0)])
    assert parsed(value)[0][1]["t"] <= 999_999_999_999_999


def test_policy_without_quotas_and_nothing_at_all() -> None:
    assert [name for name, _ in header_pairs([], [RPM])] == [b"ratelimit-policy"]
    assert header_pairs([]) == []


def test_the_core_library_does_not_import_the_web_extra() -> None:
    code = (
        "import sys, zae_limiter, zae_limiter.cli\n"
        "web = {'starlette', 'fastapi', 'http_sf', 'uvicorn', 'zae_limiter.asgi'}\n"
        "print(sorted(m for m in sys.modules if m in web))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
