"""The lean path and the regular client answer alike: the same calls through both, on a
moto server and on DynamoDB Local, and through the partition emulator for throttling."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from tests._servers import EngineEndpoint, unique_name
from zae_limiter.repository import client_kwargs
from zae_limiter.table import create_table_params
from zae_limiter.testing import PartitionEmulator
from zae_limiter.wire import lean_client

METERED = {"ReturnConsumedCapacity": "INDEXES"}


def regular_client(url: str) -> Any:
    make: Any = boto3.session.Session().client
    return make("dynamodb", **client_kwargs("us-east-1", url, 10.0))


@pytest.fixture(scope="module")
def table(engine_endpoint: EngineEndpoint) -> str:
    name = unique_name("zael-wire")
    client = engine_endpoint.client()
    client.create_table(**create_table_params(name))
    client.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1})
    return name


#: Metadata that differs between any two calls: when, which request, the body's checksum.
PER_CALL_HEADERS = frozenset({"date", "x-amzn-requestid", "x-amz-crc32"})
#: What both paths put in ResponseMetadata (the regular client may add retry details).
METADATA = {"HTTPStatusCode", "HTTPHeaders", "RetryAttempts"}
#: botocore leaves RequestId out of a generic error (an empty or HTML 5xx body); the lean
#: path fills it from x-amzn-requestid there too. The one field it may add.
MAY_ADD = {"RequestId"}


def comparable(response: dict[str, Any]) -> dict[str, Any]:
    """A response without what differs between any two calls (request id, date...); the
    rest of ResponseMetadata is kept: status, headers, retry attempts."""
    meta = dict(response.get("ResponseMetadata", {}))
    assert set(meta) >= METADATA, meta
    headers = meta.pop("HTTPHeaders")
    if "RequestId" in meta:
        assert meta.pop("RequestId") == headers.get("x-amzn-requestid", ""), meta
        meta["RequestId"] = "(per call)"
    meta["HTTPHeaders"] = {k: v for k, v in headers.items() if k not in PER_CALL_HEADERS}
    kept = {k: v for k, v in response.items() if k != "ResponseMetadata"}
    return {**kept, "ResponseMetadata": meta}


def common_metadata(
    ours: list[tuple[str, dict[str, Any]]], theirs: list[tuple[str, dict[str, Any]]]
) -> tuple[list[tuple[str, dict[str, Any]]], list[tuple[str, dict[str, Any]]]]:
    """Both sides with only the ResponseMetadata fields both produce; every field the lean
    path produces must be one the regular client produces too."""
    kept: tuple[list[Any], list[Any]] = ([], [])
    for (k1, a), (k2, b) in zip(ours, theirs, strict=True):
        extra = set(a["ResponseMetadata"]) - set(b["ResponseMetadata"]) - MAY_ADD
        assert not extra, f"the lean path adds {extra}"
        both = set(a["ResponseMetadata"]) & set(b["ResponseMetadata"])
        for kind, row, out in ((k1, a, kept[0]), (k2, b, kept[1])):
            meta = {f: v for f, v in row["ResponseMetadata"].items() if f in both}
            out.append((kind, {**row, "ResponseMetadata": meta}))
    return kept


def outcome(call: Callable[[], dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    try:
        return "ok", comparable(call())
    except ClientError as error:
        return type(error).__name__, comparable(dict(error.response))


def key(pk: str) -> dict[str, Any]:
    return {"PK": {"S": pk}, "SK": {"S": "#STATE"}}


def calls(table: str, pk: str) -> list[tuple[str, dict[str, Any]]]:
    """One scenario: each step is (operation, params); run in order on a fresh key."""
    add = {
        "TableName": table,
        "Key": key(pk),
        "UpdateExpression": "ADD #t :n",
        "ExpressionAttributeNames": {"#t": "tk"},
        **METERED,
    }
    return [
        (
            "put_item",
            {
                "TableName": table,
                "Item": {**key(pk), "tk": {"N": "5"}, "b": {"B": b"\x00\xff"}},
                **METERED,
            },
        ),
        (
            "update_item",
            {**add, "ExpressionAttributeValues": {":n": {"N": "-2"}}, "ReturnValues": "ALL_NEW"},
        ),
        (
            "update_item",
            {  # a failed condition returns the item as it was
                **add,
                "ExpressionAttributeValues": {":n": {"N": "-10"}, ":need": {"N": "10"}},
                "ConditionExpression": "#t >= :need",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            },
        ),
        ("get_item", {"TableName": table, "Key": key(pk), "ConsistentRead": True, **METERED}),
        (
            "batch_get_item",
            {"RequestItems": {table: {"Keys": [key(pk), key(pk + "-none")]}}, **METERED},
        ),
        (
            "update_item",
            {**add, "UpdateExpression": "ADD", "ExpressionAttributeValues": {":n": {"N": "1"}}},
        ),
        ("get_item", {"TableName": table + "-missing", "Key": key(pk)}),
    ]


def run(client: Any, steps: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    rows = []
    for op, params in steps:
        method = getattr(client, op)
        rows.append(outcome(lambda: method(**params)))  # noqa: B023 - called right here
    return rows


def test_sync_lean_answers_like_the_regular_client(
    engine_endpoint: EngineEndpoint, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in engine_endpoint.env.items():
        monkeypatch.setenv(name, value)
    client = regular_client(engine_endpoint.url)
    lean = lean_client(client, asynchronous=False)
    assert lean is not None and lean.transport is not None
    regular = run(client, calls(table, "path-r"))
    ours = run(lean, calls(table, "path-l"))
    # the keys differ (one item per path, same length); the answers must not
    ours, regular = common_metadata([(k, _swap(b, "path-l", "path-r")) for k, b in ours], regular)
    assert ours == regular
    kinds = [kind for kind, _ in regular]
    assert kinds == ["ok", "ok", "ConditionalCheckFailedException", "ok", "ok",
                     "ClientError", "ResourceNotFoundException"]  # fmt: skip
    failed = ours[2][1]
    assert failed["Item"]["tk"] == {"N": "3"} and failed["Item"]["b"] == {"B": b"\x00\xff"}
    lean.close()


def _swap(value: Any, old: str, new: str) -> Any:
    if isinstance(value, dict):
        return {k: _swap(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap(v, old, new) for v in value]
    return value.replace(old, new) if isinstance(value, str) else value


def test_async_lean_answers_like_aiobotocore(
    engine_endpoint: EngineEndpoint, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aiobotocore.session import get_session

    for name, value in engine_endpoint.env.items():
        monkeypatch.setenv(name, value)

    async def both() -> tuple[list[Any], list[Any]]:
        kwargs = client_kwargs("us-east-1", engine_endpoint.url, 10.0)
        async with get_session().create_client("dynamodb", **kwargs) as client:
            lean = lean_client(client, asynchronous=True)
            assert lean is not None and lean.transport is not None
            regular = await run_async(client, calls(table, "asyn-r"))
            ours = await run_async(lean, calls(table, "asyn-l"))
            lean.close()
            return regular, ours

    regular, ours = asyncio.run(both())
    assert [kind for kind, _ in regular][-2:] == ["ClientError", "ResourceNotFoundException"]
    # A header sent twice (moto's server sends `Server` twice): aiobotocore keeps the last
    # value, the lean path joins them with ", " as botocore's sync client does (the sync
    # test above holds it to that). Compare such a header by its last value.
    ours = [(k, _last_values(b)) for k, b in ours]
    ours, regular = common_metadata([(k, _swap(b, "asyn-l", "asyn-r")) for k, b in ours], regular)
    assert ours == regular


def _last_values(row: dict[str, Any]) -> dict[str, Any]:
    meta = row["ResponseMetadata"]
    headers = {k: v.rsplit(", ", 1)[-1] if k == "server" else v
               for k, v in meta["HTTPHeaders"].items()}  # fmt: skip
    return {**row, "ResponseMetadata": {**meta, "HTTPHeaders": headers}}


async def run_async(client: Any, steps: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    rows: list[tuple[str, dict[str, Any]]] = []
    for op, params in steps:
        try:
            rows.append(("ok", comparable(await getattr(client, op)(**params))))
        except ClientError as error:
            rows.append((type(error).__name__, comparable(dict(error.response))))
    return rows


@pytest.fixture
def emulator(engine_endpoint: EngineEndpoint) -> Iterator[PartitionEmulator]:
    with PartitionEmulator(engine_endpoint.url, writes_per_second=2) as emu:
        yield emu


def test_throttling_through_the_emulator_is_the_same_error(
    engine_endpoint: EngineEndpoint,
    table: str,
    emulator: PartitionEmulator,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in engine_endpoint.env.items():
        monkeypatch.setenv(name, value)
    client = regular_client(emulator.endpoint_url)
    lean = lean_client(client, asynchronous=False)
    assert lean is not None
    write = {"TableName": table, "Item": {**key("hot"), "tk": {"N": "1"}}}
    answers: dict[str, list[tuple[str, dict[str, Any]]]] = {"regular": [], "lean": []}
    for path, target in (("regular", client), ("lean", lean)):
        emulator.reset()
        put = target.put_item
        for _ in range(40):  # a loaded machine refills the bucket between some calls
            answers[path].append(outcome(lambda: put(**write)))  # noqa: B023
            if answers[path][-1][0] != "ok":
                break
    for rows in answers.values():
        assert rows[-1][0] == "ProvisionedThroughputExceededException"
    # The regular client adds MaxAttemptsReached (its retry handler's); the rest is the same.
    ours, regular = common_metadata([answers["lean"][-1]], [answers["regular"][-1]])
    assert ours == regular
    lean.close()


#: Raw answers a proxy, a load balancer or a broken engine may give instead of DynamoDB's.
RAW_ANSWERS = {
    "500-empty": (500, "application/x-amz-json-1.0", b""),
    "503-html": (503, "text/html", b"<html><body>down</body></html>"),
    "503-html-spaced": (503, "text/html", b"  \n<html>down</html>\n"),
    "502-html-doctype": (502, "text/html", b"<!DOCTYPE html><html>bad gateway</html>"),
    "502-text": (502, "text/plain", b"not json"),
    "504-json": (504, "application/json", b'{"__type":"x#GatewayTimeout","message":"slow"}'),
    "500-json": (500, "application/x-amz-json-1.0",
                 b'{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError",'
                 b'"message":"oops"}'),
    "400-empty-json": (400, "application/x-amz-json-1.0", b"{}"),
    "400-typed-extra": (400, "application/x-amz-json-1.0",
                        b'{"__type":"ThrottlingException:http://x","Message":"slow down"}'),
    "400-ccf-item": (400, "application/x-amz-json-1.0",
                     b'{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedExcep'
                     b'tion","message":"failed","Item":{"PK":{"S":"a"},"b":{"B":"AAE="}}}'),
    "413-html": (413, "text/html", b"<html>too large</html>"),
}  # fmt: skip


class RawServer:
    """A loopback HTTP server that answers every request with the bytes it is given."""

    def __init__(self) -> None:
        import socket
        import threading

        self.answer = b""
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def set(self, status: int, content_type: str, body: bytes) -> None:
        head = (
            f"HTTP/1.1 {status} {HTTP_REASONS.get(status, 'Error')}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            f"x-amzn-RequestId: req-{status}\r\nConnection: close\r\n\r\n"
        )
        self.answer = head.encode() + body

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with conn:
                request = b""
                while b"\r\n\r\n" not in request:
                    request += conn.recv(65536)
                head, _, body = request.partition(b"\r\n\r\n")
                length = int(
                    next(line.split(b":", 1)[1] for line in head.split(b"\r\n")
                         if line.lower().startswith(b"content-length:"))
                )  # fmt: skip
                while len(body) < length:
                    body += conn.recv(65536)
                conn.sendall(self.answer)

    def close(self) -> None:
        self._listener.close()


HTTP_REASONS = {400: "Bad Request", 413: "Payload Too Large", 500: "Internal Server Error",
                502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}  # fmt: skip


@pytest.fixture(scope="module")
def raw_server() -> Iterator[RawServer]:
    server = RawServer()
    yield server
    server.close()


def raw_outcomes(url: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """The same UpdateItem through botocore, aiobotocore and both lean clients."""
    from aiobotocore.session import get_session

    params = {"TableName": "t", "Key": key("a"), "UpdateExpression": "ADD #t :n",
              "ExpressionAttributeNames": {"#t": "tk"},
              "ExpressionAttributeValues": {":n": {"N": "1"}}}  # fmt: skip
    client = regular_client(url)
    lean = lean_client(client, asynchronous=False)
    rows = {
        "botocore": outcome(lambda: client.update_item(**params)),
        "lean-sync": outcome(lambda: lean.update_item(**params)),
    }
    lean.close()

    async def both() -> None:
        kwargs = client_kwargs("us-east-1", url, 10.0)
        async with get_session().create_client("dynamodb", **kwargs) as aio:
            alean = lean_client(aio, asynchronous=True)
            rows["aiobotocore"], rows["lean-async"] = await run_async(
                aio, [("update_item", params)]
            ) + await run_async(alean, [("update_item", params)])
            alean.close()

    asyncio.run(both())
    return rows


@pytest.mark.parametrize("answer", list(RAW_ANSWERS))
def test_error_bodies_read_as_botocores_own_parser_reads_them(
    raw_server: RawServer, answer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """5xx, HTML, non-JSON and odd JSON error bodies: the very same bytes go to botocore's
    and aiobotocore's parsers and to ours; the exception class and `response` must match."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    raw_server.set(*RAW_ANSWERS[answer])
    rows = raw_outcomes(raw_server.url)
    assert rows["botocore"][0] != "ok"
    for theirs, ours in (("botocore", "lean-sync"), ("aiobotocore", "lean-async")):
        mine, reference = common_metadata([rows[ours]], [rows[theirs]])
        assert mine == reference, (ours, theirs)
