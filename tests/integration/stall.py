"""A real stall on loopback: a TCP proxy in front of an engine that relays until told to
stall, then accepts connections and reads requests but never answers them (all of them,
or those whose bytes contain a marker). The client's own sockets, timeouts and deadline
face it exactly as they would a DynamoDB that stopped answering."""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import urlsplit

CHUNK = 65536


class StallProxy:
    def __init__(self, upstream_url: str) -> None:
        parts = urlsplit(upstream_url)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._stall: bytes | None = None
        #: Requests (chunks) swallowed since the stall began.
        self.swallowed = 0
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def stall(self, marker: bytes = b"") -> None:
        """From now on, swallow every request chunk containing `marker` (b"": every one)."""
        self._stall = marker

    def relay(self) -> None:
        self._stall = None

    def close(self) -> None:
        self._closed = True
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in [self._listener, *sockets]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._track(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            while data := client.recv(CHUNK):
                marker = self._stall
                if marker is not None and marker in data:
                    self.swallowed += 1  # read, never forwarded: no answer will come
                    continue
                if upstream is None:
                    upstream = socket.create_connection(self.upstream)
                    self._track(upstream)
                    threading.Thread(
                        target=self._back, args=(upstream, client), daemon=True
                    ).start()
                upstream.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                if sock is not None:
                    sock.close()

    @staticmethod
    def _back(upstream: socket.socket, client: socket.socket) -> None:
        try:
            while data := upstream.recv(CHUNK):
                client.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)
