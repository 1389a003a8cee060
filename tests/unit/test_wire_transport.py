"""The lean transports against a small HTTP server on loopback: keep-alive reuse, a
connection the server closed while idle, chunked bodies, read timeouts; and the proxy
hand-off to the regular client's session."""

from __future__ import annotations

import asyncio
import inspect
import json
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ConnectionClosedError, EndpointConnectionError, ReadTimeoutError

from zae_limiter.wire import lean_client
from zae_limiter.wire.async_transport import AsyncTransport
from zae_limiter.wire.transport import Endpoint, SyncTransport

Answer = Callable[[socket.socket, int], bool]  # (connection, request number) -> keep open


def read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return b""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += conn.recv(65536)
    return head


class Server:
    """Answers each request with `answer`; counts connections and requests."""

    def __init__(self, answer: Answer, tls: ssl.SSLContext | None = None) -> None:
        self.answer = answer
        self.tls = tls
        self.connections = 0
        self.requests = 0
        #: Set each time the server has closed a connection.
        self.closed = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        if self.tls is not None:
            try:
                conn = self.tls.wrap_socket(conn, server_side=True)
            except OSError:  # the client refused the certificate
                conn.close()
                return
        with conn:
            while read_request(conn):
                self.requests += 1
                if not self.answer(conn, self.requests):
                    break
        self.closed.set()

    def endpoint(self, read_timeout: float = 2.0) -> Endpoint:
        url = f"http://127.0.0.1:{self.port}"
        return Endpoint(url, f"127.0.0.1:{self.port}", ("127.0.0.1", self.port), None,
                        1.0, read_timeout, True)  # fmt: skip


def ok(body: bytes = b'{"ok":1}', extra: str = "") -> bytes:
    return f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    made = Server(request.param)
    yield made
    made.sock.close()


def keep(conn: socket.socket, n: int) -> bool:
    conn.sendall(ok())
    return True


def close_after_first(conn: socket.socket, n: int) -> bool:
    conn.sendall(ok())
    return False  # the server closes the connection while the client keeps it idle


def chunked(conn: socket.socket, n: int) -> bool:
    conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                 b"3\r\n{\"a\r\n4;x=y\r\n\":1}\r\n0\r\nTrailer: t\r\n\r\n")  # fmt: skip
    return True


def stall(conn: socket.socket, n: int) -> bool:
    threading.Event().wait(1.0)
    return False


def half(conn: socket.socket, n: int) -> bool:
    conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{"a"')
    return False


def both(
    endpoint: Endpoint, times: int = 3, between: Callable[[], Any] = lambda: None
) -> list[Any]:
    """The same requests through the sync and the async transport."""
    sync = SyncTransport(endpoint)
    results = []
    for _ in range(times):
        results.append(sync.send({"X": "1"}, b"{}"))
        between()
    sync.close()

    async def run() -> list[Any]:
        transport = AsyncTransport(endpoint)
        got = []
        for _ in range(times):
            got.append(await transport.send({"X": "1"}, b"{}"))
            between()
            for _ in range(3):  # let the loop see a close the peer made meanwhile
                await asyncio.sleep(0)
        transport.close()
        return got

    return results + asyncio.run(run())


@pytest.mark.parametrize("server", [keep], indirect=True)
def test_one_connection_carries_every_request(server: Server) -> None:
    results = both(server.endpoint())
    assert {r[2] for r in results} == {b'{"ok":1}'}
    assert server.requests == 6 and server.connections == 2  # one per transport


@pytest.mark.parametrize("server", [close_after_first], indirect=True)
def test_a_connection_closed_while_idle_is_replaced_not_retried(server: Server) -> None:
    def server_has_closed() -> None:
        assert server.closed.wait(5)
        server.closed.clear()

    results = both(server.endpoint(), between=server_has_closed)
    assert [r[0] for r in results] == [200] * 6
    assert server.requests == 6  # each request written once


@pytest.mark.parametrize("server", [chunked], indirect=True)
def test_chunked_bodies(server: Server) -> None:
    assert {r[2] for r in both(server.endpoint(), times=2)} == {b'{"a":1}'}


@pytest.mark.parametrize("server", [stall], indirect=True)
def test_read_timeout_is_botocores(server: Server) -> None:
    with pytest.raises(ReadTimeoutError):
        SyncTransport(server.endpoint(read_timeout=0.2)).send({}, b"{}")
    with pytest.raises(ReadTimeoutError):
        asyncio.run(AsyncTransport(server.endpoint(read_timeout=0.2)).send({}, b"{}"))


@pytest.mark.parametrize("server", [half], indirect=True)
def test_a_cut_response_is_a_closed_connection(server: Server) -> None:
    with pytest.raises(ConnectionClosedError):
        SyncTransport(server.endpoint()).send({}, b"{}")
    with pytest.raises(ConnectionClosedError):
        asyncio.run(AsyncTransport(server.endpoint()).send({}, b"{}"))


def test_a_proxied_endpoint_goes_through_the_regular_session() -> None:
    make: Any = boto3.session.Session().client
    proxied = make("dynamodb", region_name="us-east-1", endpoint_url="http://10.1.2.3:8000",
                   config=Config(proxies={"http": "http://127.0.0.1:9"}))  # fmt: skip
    direct = make("dynamodb", region_name="us-east-1", endpoint_url="http://10.1.2.3:8000")
    assert lean_client(proxied, asynchronous=False).transport is None
    assert lean_client(direct, asynchronous=False).transport is not None


def test_only_real_clients_are_borrowed() -> None:
    class Wrapper:
        def __init__(self, client: Any) -> None:
            self._client = client

        def __getattr__(self, name: str) -> Any:
            return getattr(self._client, name)

    make: Any = boto3.session.Session().client
    client = make("dynamodb", region_name="us-east-1", endpoint_url="http://10.1.2.3:8000")
    assert lean_client(Wrapper(client), asynchronous=False) is None


@pytest.mark.parametrize("server", [stall], indirect=True)
def test_the_callers_deadline_is_a_builtin_timeout_and_the_connection_goes(
    server: Server,
) -> None:
    """The deadline (sooner than the read timeout) cuts the exchange; the connection it
    used is closed, so a late answer can never be read as the next call's."""

    async def run() -> None:
        transport = AsyncTransport(server.endpoint(read_timeout=5.0))
        loop = asyncio.get_running_loop()
        with pytest.raises(TimeoutError) as cut:
            await transport.send({}, b"{}", deadline=loop.time() + 0.2)
        assert not isinstance(cut.value, ReadTimeoutError)
        assert transport._idle == []
        assert server.closed.wait(5)  # the server saw the close

    asyncio.run(run())


def first_then_stall(conn: socket.socket, n: int) -> bool:
    if n == 1:
        conn.sendall(ok())
        return True
    threading.Event().wait(3.0)  # then closes: an exchange not cut by then fails otherwise
    return False


@pytest.mark.parametrize("server", [first_then_stall], indirect=True)
def test_one_alarm_cuts_each_exchange_at_its_own_deadline(server: Server) -> None:
    """The transport's one timer outlives an exchange that ended in time: a later
    exchange with a later deadline is not cut early by it, and exchanges in flight
    together are each cut at their own deadline."""

    async def cut_after(transport: AsyncTransport, seconds: float) -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(TimeoutError):
            await transport.send({}, b"{}", deadline=start + seconds)
        return loop.time() - start

    async def run() -> None:
        transport = AsyncTransport(server.endpoint(read_timeout=5.0))
        loop = asyncio.get_running_loop()
        status, _, _ = await transport.send({}, b"{}", deadline=loop.time() + 0.2)
        assert status == 200  # the alarm stays armed for this one's deadline
        assert await cut_after(transport, 0.5) >= 0.5  # not by the first one's alarm
        late, early = await asyncio.gather(cut_after(transport, 0.7), cut_after(transport, 0.2))
        assert early >= 0.2
        assert late >= 0.7  # the alarm re-armed for it after cutting the early one

    asyncio.run(run())


@pytest.mark.parametrize("server", [stall], indirect=True)
def test_a_read_timeout_sooner_than_the_deadline_is_botocores(server: Server) -> None:
    async def run() -> None:
        transport = AsyncTransport(server.endpoint(read_timeout=0.2))
        with pytest.raises(ReadTimeoutError):
            await transport.send({}, b"{}", deadline=asyncio.get_running_loop().time() + 30)

    asyncio.run(run())


def test_a_refused_connection_is_botocores_endpoint_error() -> None:
    free = socket.create_server(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    url = f"http://127.0.0.1:{port}"
    endpoint = Endpoint(url, f"127.0.0.1:{port}", ("127.0.0.1", port), None, 1.0, 1.0, True)
    with pytest.raises(EndpointConnectionError):
        SyncTransport(endpoint).send({}, b"{}")
    with pytest.raises(EndpointConnectionError):
        asyncio.run(AsyncTransport(endpoint).send({}, b"{}"))


def unasked(conn: socket.socket, n: int) -> bool:
    conn.sendall(ok() + (b"HTTP/1.1 200 OK\r\n" if n % 2 else b""))  # junk after odd ones
    return True


@pytest.mark.parametrize("server", [unasked], indirect=True)
def test_a_connection_with_unasked_bytes_is_not_reused(server: Server) -> None:
    results = both(server.endpoint(), times=2)
    assert [r[0] for r in results] == [200] * 4
    assert server.connections == 4  # each transport opened a second connection


@pytest.mark.parametrize("server", [keep], indirect=True)
def test_hooks_registered_after_calls_fire_from_the_next_call(server: Server) -> None:
    """The lean client skips events nobody listens to; one registered later is seen."""
    make: Any = boto3.session.Session().client
    client = make("dynamodb", region_name="us-east-1", endpoint_url=server.endpoint().url,
                  aws_access_key_id="a", aws_secret_access_key="b")  # fmt: skip
    lean = lean_client(client, asynchronous=False)
    seen: list[str] = []

    def record(event_name: str, **kwargs: Any) -> None:
        seen.append(event_name.split(".")[0])

    params = {"TableName": "t", "Key": {}}
    lean.get_item(**params)
    lean.get_item(**params)
    for event in ("before-call", "before-send", "after-call"):
        client.meta.events.register(f"{event}.dynamodb.GetItem", record)
    lean.get_item(**params)
    assert seen == ["before-call", "before-send", "after-call"]

    def answer(**kwargs: Any) -> Any:
        http = type("R", (), {"status_code": 200, "headers": {}, "content": b'{"Item":{}}'})
        return http

    client.meta.events.register_first("before-send.dynamodb", answer)
    assert lean.get_item(**params)["Item"] == {}
    requests = server.requests
    client.meta.events.unregister("before-send.dynamodb", answer)
    for event in ("before-call", "before-send", "after-call"):
        client.meta.events.unregister(f"{event}.dynamodb.GetItem", record)
    seen.clear()
    lean.get_item(**params)
    assert seen == [] and server.requests == requests + 1
    lean.close()


@pytest.mark.parametrize("server", [keep], indirect=True)
def test_async_hooks_registered_after_calls_fire_from_the_next_call(server: Server) -> None:
    from aiobotocore.session import get_session

    seen: list[str] = []

    async def record(event_name: str, **kwargs: Any) -> None:
        seen.append(event_name.split(".")[0])

    async def run() -> None:
        async with get_session().create_client(
            "dynamodb", region_name="us-east-1", endpoint_url=server.endpoint().url,
            aws_access_key_id="a", aws_secret_access_key="b",
        ) as client:  # fmt: skip
            lean = lean_client(client, asynchronous=True)
            params = {"TableName": "t", "Key": {}}
            await lean.get_item(**params)
            await lean.get_item(**params)
            for event in ("before-call", "before-send", "after-call"):
                client.meta.events.register(f"{event}.dynamodb.GetItem", record)
            await lean.call("GetItem", params, deadline=5.0)
            assert seen == ["before-call", "before-send", "after-call"]
            lean.close()

    asyncio.run(run())


ITEM = b'{"Item":{"PK":{"S":"a"},"n":{"N":"1"}}}'


def item(conn: socket.socket, n: int) -> bool:
    conn.sendall(ok(ITEM, "x-amzn-RequestId: r-1\r\nContent-Type: application/x-amz-json-1.0\r\n"))
    return True


def _text(value: str | bytes) -> str:
    # botocore's prepared request holds header values as bytes, the lean one as str: a
    # known difference (docs/lean-path.md), compared by content here.
    return value.decode() if isinstance(value, bytes) else value


def hook_view(event_name: str, content: bytes | None = None, **kwargs: Any) -> dict[str, Any]:
    """What a handler of `event_name` can rely on: argument names and their contents (not
    object identities, request ids or signatures, which differ between any two calls).
    `content`: the after-call response body, when the caller had to await it."""
    view: dict[str, Any] = {"event": event_name, "arguments": sorted(kwargs)}
    if "model" in kwargs:
        view["model"] = kwargs["model"].name
    if "params" in kwargs:  # before-call: the request dict
        p = kwargs["params"]
        view["params"] = {
            "keys": sorted(p), "method": p["method"], "url": p["url"],
            "url_path": p["url_path"], "query_string": p["query_string"],
            "body": json.loads(p["body"]), "target": p["headers"]["X-Amz-Target"],
            "content_type": p["headers"]["Content-Type"],
        }  # fmt: skip
    if "request" in kwargs:  # before-send: the prepared, signed request
        r = kwargs["request"]
        view["request"] = {
            "method": r.method, "url": r.url, "body": json.loads(r.body),
            "target": _text(r.headers["X-Amz-Target"]),
            "signed": _text(r.headers["Authorization"]).startswith("AWS4-HMAC-SHA256 "),
        }  # fmt: skip
    if "http_response" in kwargs:  # after-call: the raw response and what it parsed to
        h = kwargs["http_response"]
        view["http_response"] = (h.status_code, h.content if content is None else content)
        parsed = dict(kwargs["parsed"])
        meta = parsed.pop("ResponseMetadata")
        view["parsed"] = (parsed, meta["HTTPStatusCode"], meta["RequestId"])
    return view


HOOKED = ("before-call", "before-send", "after-call")
GET = {"TableName": "t", "Key": {"PK": {"S": "a"}}, "ConsistentRead": True}


@pytest.mark.parametrize("server", [item], indirect=True)
def test_hooks_get_the_arguments_the_regular_client_passes(server: Server) -> None:
    make: Any = boto3.session.Session().client
    client = make("dynamodb", region_name="us-east-1", endpoint_url=server.endpoint().url,
                  aws_access_key_id="a", aws_secret_access_key="b")  # fmt: skip
    lean = lean_client(client, asynchronous=False)
    seen: list[dict[str, Any]] = []
    for event in HOOKED:
        client.meta.events.register(
            f"{event}.dynamodb.GetItem", lambda **kw: seen.append(hook_view(**kw))
        )
    client.get_item(**GET)
    regular, seen[:] = list(seen), []
    lean.get_item(**GET)
    assert [v["event"] for v in regular] == [f"{e}.dynamodb.GetItem" for e in HOOKED]
    assert seen == regular
    lean.close()


@pytest.mark.parametrize("server", [item], indirect=True)
def test_async_hooks_get_the_arguments_aiobotocore_passes(server: Server) -> None:
    from aiobotocore.session import get_session

    seen: list[dict[str, Any]] = []

    async def record(**kwargs: Any) -> None:
        response = kwargs.get("http_response")
        body = None
        if response is not None:
            # aiobotocore's response gives its body to await; the lean one gives bytes (a
            # known difference, docs/lean-path.md): compared by content.
            body = response.content
            body = await body if inspect.isawaitable(body) else body
        seen.append(hook_view(content=body, **kwargs))

    async def run() -> tuple[list[Any], list[Any]]:
        async with get_session().create_client(
            "dynamodb", region_name="us-east-1", endpoint_url=server.endpoint().url,
            aws_access_key_id="a", aws_secret_access_key="b",
        ) as client:  # fmt: skip
            lean = lean_client(client, asynchronous=True)
            for event in HOOKED:
                client.meta.events.register(f"{event}.dynamodb.GetItem", record)
            await client.get_item(**GET)
            regular = list(seen)
            seen.clear()
            await lean.get_item(**GET)
            lean.close()
            return regular, list(seen)

    regular, ours = asyncio.run(run())
    assert [v["event"] for v in regular] == [f"{e}.dynamodb.GetItem" for e in HOOKED]
    assert ours == regular


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (cert file, key file)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    ip = ipaddress.ip_address("127.0.0.1")
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ip)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    folder = tmp_path_factory.mktemp("tls")
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_file), str(key_file)


def test_tls_endpoints_keep_verified_keep_alive_connections(certificate: tuple[str, str]) -> None:
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(*certificate)
    server = Server(keep, server_tls)
    url = f"https://127.0.0.1:{server.port}"
    trusting = ssl.create_default_context(cafile=certificate[0])
    endpoint = Endpoint(url, f"127.0.0.1:{server.port}", ("127.0.0.1", server.port), trusting,
                        1.0, 2.0, True)  # fmt: skip
    results = both(endpoint)
    assert {r[2] for r in results} == {b'{"ok":1}'}
    assert server.requests == 6 and server.connections == 2
    untrusting = Endpoint(url, endpoint.host, endpoint.address, ssl.create_default_context(),
                          1.0, 2.0, True)  # fmt: skip
    with pytest.raises(EndpointConnectionError):
        SyncTransport(untrusting).send({}, b"{}")
    with pytest.raises(EndpointConnectionError):
        asyncio.run(AsyncTransport(untrusting).send({}, b"{}"))
    server.sock.close()


@pytest.mark.parametrize("server", [keep], indirect=True)
def test_the_retry_quota_comes_back_after_a_lean_call_as_after_a_regular_one(
    server: Server,
) -> None:
    """botocore's `after-call` handler (the retry quota) is called directly, not through
    the emitter: it still gives quota back after a success."""
    from botocore.retries.standard import RetryQuotaChecker

    make: Any = boto3.session.Session().client
    client = make("dynamodb", region_name="us-east-1", endpoint_url=server.endpoint().url,
                  aws_access_key_id="a", aws_secret_access_key="b",
                  config=Config(retries={"mode": "standard"}))  # fmt: skip
    lean = lean_client(client, asynchronous=False)
    params = {"TableName": "t", "Key": {}}
    lean.get_item(**params)  # the emitter looks the handlers up
    name = "after-call.dynamodb.GetItem"
    assert lean.hooks.direct(name) is not None  # the direct path is taken
    handlers = client.meta.events._emitter._handlers.prefix_search(name)
    checker = next(
        h.__self__ for h in handlers if isinstance(getattr(h, "__self__", None), RetryQuotaChecker)
    )
    quota = checker._quota
    for call in (client.get_item, lean.get_item):
        quota._available_capacity = quota._max_capacity - 5
        call(**params)
        assert quota.available_capacity == quota._max_capacity - 4, call
    lean.close()
