"""DynamoDB's JSON protocol and HTTP/1.1 framing of the lean path, read as botocore reads them."""

from __future__ import annotations

import json

import pytest

from zae_limiter.wire import http, protocol


def no_members(code: str) -> tuple[str, ...]:
    return ()


def ccf_members(code: str) -> tuple[str, ...]:
    return ("message", "Item") if code == "ConditionalCheckFailedException" else ()


def test_request_body_is_compact_json_with_binary_as_base64() -> None:
    body = protocol.encode({"Key": {"PK": {"S": "a"}, "D": {"B": b"\x00\x01"}}})
    assert json.loads(body) == {"Key": {"PK": {"S": "a"}, "D": {"B": "AAE="}}}
    assert b" " not in body
    with pytest.raises(TypeError, match="set is not a DynamoDB JSON value"):
        protocol.encode({"x": {1}})


def test_success_carries_response_metadata_and_bytes() -> None:
    body = b'{"Attributes":{"d":{"B":"AAE="},"s":{"BS":["AA=="]},"n":{"N":"1"}}}'
    parsed = protocol.parse(200, protocol.lowered({"X-Amzn-RequestId": "r1"}), body, no_members)
    assert parsed["Attributes"] == {
        "d": {"B": b"\x00\x01"},
        "s": {"BS": [b"\x00"]},
        "n": {"N": "1"},
    }
    assert parsed["ResponseMetadata"] == {
        "RequestId": "r1",
        "HTTPStatusCode": 200,
        "HTTPHeaders": {"x-amzn-requestid": "r1"},
        "RetryAttempts": 0,
    }


def test_failed_condition_keeps_the_old_item() -> None:
    body = (
        b'{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException",'
        b'"message":"The conditional request failed","Item":{"PK":{"S":"a"}}}'
    )
    parsed = protocol.parse(400, {}, body, ccf_members)
    assert parsed["Error"] == {
        "Code": "ConditionalCheckFailedException",
        "Message": "The conditional request failed",
    }
    assert parsed["Item"] == {"PK": {"S": "a"}}
    assert parsed["message"] == "The conditional request failed"


@pytest.mark.parametrize(
    ("status", "body", "code", "message"),
    [
        (400, b'{"__type":"x#ValidationException","Message":"bad"}', "ValidationException", "bad"),
        (
            400,
            b'{"__type":"ThrottlingException:extra","message":"slow"}',
            "ThrottlingException",
            "slow",
        ),
        (500, b"", "500", "Internal Server Error"),
        (503, b"<html>down</html>", "503", "Service Unavailable"),
        (502, b"not json", "502", "not json"),
        (400, b"{}", "400", ""),
    ],
)
def test_errors_read_like_botocore(status: int, body: bytes, code: str, message: str) -> None:
    parsed = protocol.parse(status, {}, body, no_members)
    assert parsed["Error"] == {"Code": code, "Message": message}
    assert parsed["ResponseMetadata"]["HTTPStatusCode"] == status


def test_request_bytes_and_response_head() -> None:
    raw = http.request_bytes("h:1", {"X-A": "1"}, b"{}")
    assert raw == b"POST / HTTP/1.1\r\nHost: h:1\r\nContent-Length: 2\r\nX-A: 1\r\n\r\n{}"
    head = http.parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nSet-X: a\r\nset-x: b\r\n")
    assert (head.status, head.length, head.keep_alive, head.chunked) == (200, 5, True, False)
    assert head.headers["set-x"] == "a, b"
    closing = http.parse_head(b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n")
    assert not closing.keep_alive and closing.chunked
    assert not http.parse_head(b"HTTP/1.1 200 OK\r\nConnection: close\r\n").keep_alive
    with pytest.raises(http.ProtocolError):
        http.parse_head(b"SSH-2.0-OpenSSH\r\n")
    assert http.chunk_size(b"1a;ext=1\r\n") == 26


def test_a_response_read_in_pieces_is_parsed_once_whole() -> None:
    """The head is parsed once; the body is waited for by its length, its chunks or the
    end of the connection; bytes past the response are left for the caller."""
    raw = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
    assert http.split_head(raw[:20], False) is None
    with pytest.raises(http.ProtocolError):
        http.split_head(raw[:20], True)
    buffer = bytearray(raw[:-2])
    split = http.split_head(buffer, False)
    assert split is not None
    head, start = split
    assert http.body_of(head, buffer, start, False) is None
    with pytest.raises(http.ProtocolError):
        http.body_of(head, buffer, start, True)
    buffer += raw[-2:] + b"HTTP"
    assert http.body_of(head, buffer, start, False) == (b"hello", len(raw))
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhe\r\n0\r\n\r\n"
    head, start = http.split_head(chunked, False) or (None, 0)
    assert head is not None and http.body_of(head, chunked, start, False) == (b"he", len(chunked))
    with pytest.raises(http.ProtocolError):
        http.body_of(head, chunked[:-4], start, True)
    unsized = b"HTTP/1.0 200 OK\r\n\r\nrest"
    head, start = http.split_head(unsized, False) or (None, 0)
    assert head is not None and http.body_of(head, unsized, start, False) is None
    assert http.body_of(head, unsized, start, True) == (b"rest", len(unsized))
    assert not head.keep_alive
