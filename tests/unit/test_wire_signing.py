"""The lean signer signs exactly as botocore's SigV4Auth does."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials

from zae_limiter.wire.protocol import Credentials, Signer, amz_date, host_of

WHEN = datetime.datetime(2026, 11, 26, 3, 4, 5, tzinfo=datetime.UTC)
BODY = b'{"TableName":"t","Key":{"PK":{"S":"ns/BUCKET#a#r#0"},"SK":{"S":"#STATE"}}}'


def botocore_authorization(
    url: str, headers: dict[str, str], token: str | None, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    monkeypatch.setattr("botocore.auth.get_current_datetime", lambda: WHEN.replace(tzinfo=None))
    request = AWSRequest("POST", url, headers=dict(headers), data=BODY)
    SigV4Auth(BotoCredentials("AKID", "secret/key", token), "dynamodb", "eu-west-1").add_auth(
        request
    )
    return dict(request.headers)


@pytest.mark.parametrize(
    "extra", [{}, {"X-Amzn-Trace-Id": "Root=1-not-signed"}, {"X-Custom": "a  b "}]
)
@pytest.mark.parametrize("token", [None, "session-token"])
@pytest.mark.parametrize(
    "url",
    [
        "https://dynamodb.eu-west-1.amazonaws.com",
        "http://127.0.0.1:8000",
        "https://dynamodb.eu-west-1.amazonaws.com:443",
        "http://[::1]:4566",
    ],
)
def test_same_signature_as_botocore(
    url: str, token: str | None, extra: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without `extra`: the usual header set (its own fast canonicalisation); with an
    unsigned or an added header: the general one."""
    headers = {
        "X-Amz-Target": "DynamoDB_20120810.UpdateItem",
        "Content-Type": "application/x-amz-json-1.0",
        "User-Agent": "not signed",
        **extra,
    }
    expected = botocore_authorization(url, headers, token, monkeypatch)
    ours = dict(headers)
    Signer(url, "eu-west-1").sign(
        ours, BODY, Credentials("AKID", "secret/key", token), amz_date(WHEN.timestamp())
    )
    assert ours["Authorization"] == expected["Authorization"]
    assert ours["X-Amz-Date"] == expected["X-Amz-Date"]
    assert ours.get("X-Amz-Security-Token") == expected.get("X-Amz-Security-Token")


def test_signing_key_follows_the_day_and_the_secret() -> None:
    signer = Signer("http://127.0.0.1:8000", "us-east-1")
    first: dict[str, str] = {}
    second: dict[str, str] = {}
    other: dict[str, str] = {}
    creds = Credentials("AKID", "s1", None)
    signer.sign(first, BODY, creds, "20261126T000000Z")
    signer.sign(second, BODY, creds, "20261127T000000Z")
    signer.sign(other, BODY, Credentials("AKID", "s2", None), "20261127T000000Z")
    signatures = {h["Authorization"].rsplit("=", 1)[1] for h in (first, second, other)}
    assert len(signatures) == 3


def test_host_drops_default_ports_only() -> None:
    assert host_of("https://Dynamodb.us-east-1.amazonaws.com:443") == (
        "dynamodb.us-east-1.amazonaws.com"
    )
    assert host_of("http://localhost:8000") == "localhost:8000"
    assert host_of("http://[::1]:80") == "[::1]"


def test_whitespace_in_the_usual_headers_is_signed_as_botocore_signs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = "http://127.0.0.1:8000"
    headers = {
        "X-Amz-Target": " DynamoDB_20120810.GetItem  ",
        "Content-Type": "application/x-amz-json-1.0",
        "User-Agent": "u",
    }
    expected = botocore_authorization(url, headers, "a  token", monkeypatch)
    ours = dict(headers)
    Signer(url, "eu-west-1").sign(
        ours, BODY, Credentials("AKID", "secret/key", "a  token"), amz_date(WHEN.timestamp())
    )
    assert ours["Authorization"] == expected["Authorization"]


def test_request_time_changes_with_the_second() -> None:
    start = WHEN.timestamp()
    assert amz_date(start) == amz_date(start + 0.999) == "20261126T030405Z"
    assert amz_date(start + 1) == "20261126T030406Z"
    assert amz_date(start) == "20261126T030405Z"
