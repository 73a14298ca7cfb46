"""A TCP proxy in front of a broker that records every request a client sends on the wire.

A peer that picks its request versions by itself (sarama decides them from its configured
Kafka version and sends no ApiVersions) is tested through this proxy, so a test can say which
API versions the peer really used and which requests the broker dropped by closing the
connection instead of answering.  The broker must advertise the proxy's address
(``advertised.listeners``) so that the connections a client opens after bootstrap pass
through it too.

Only the request header's fixed prefix is read (api_key, api_version, correlation_id: the same
in every header version, per the Kafka protocol guide), and only the response's correlation
id; the bytes are forwarded unchanged.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections import Counter
from dataclasses import dataclass, field

from samsa.protocol import APIS

HOST = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class Request:
    connection: int
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None

    def __str__(self) -> str:
        return f"{api_name(self.api_key)} v{self.api_version}"


def api_name(key: int) -> str:
    api = APIS.get(key)
    return api.request_class.__name__.removesuffix("Request") if api is not None \
        else f"api{key}"


@dataclass
class _Connection:
    number: int
    pending: dict[int, Request] = field(default_factory=dict)
    client_closed: bool = False


class RecordingProxy:
    """Listens on 127.0.0.1 (``port``); forwards each connection to ``upstream_port``
    (settable after the broker starts, before clients connect).  Responses to the API keys in
    ``keep_responses`` are kept whole (frame without its size prefix) in ``responses``."""

    def __init__(self, keep_responses: frozenset[int] = frozenset()) -> None:
        self.keep_responses = keep_responses
        self.responses: list[tuple[Request, bytes]] = []
        self._listener = socket.create_server((HOST, 0))
        self.port: int = self._listener.getsockname()[1]
        self.upstream_port: int | None = None
        self._lock = threading.Lock()
        self.requests: list[Request] = []
        # Requests still unanswered when the broker closed their connection.
        self.dropped: list[Request] = []
        self._connections = 0
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept_loop, name="recording-proxy", daemon=True).start()

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    # -- what was seen ---------------------------------------------------------------------------

    def versions(self, client_id: str | None = None) -> dict[str, list[int]]:
        """API name -> sorted versions sent (by ``client_id`` only, if given)."""
        with self._lock:
            seen = {(r.api_key, r.api_version) for r in self.requests
                    if client_id is None or r.client_id == client_id}
        out: dict[str, list[int]] = {}
        for key, version in sorted(seen):
            out.setdefault(api_name(key), []).append(version)
        return out

    def dropped_summary(self, client_id: str | None = None) -> dict[str, int]:
        """'Name vN' -> how many such requests the broker closed the connection on."""
        with self._lock:
            return dict(Counter(str(r) for r in self.dropped
                                if client_id is None or r.client_id == client_id))

    # -- forwarding ------------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            assert self.upstream_port is not None, "set upstream_port before clients connect"
            try:
                upstream = socket.create_connection((HOST, self.upstream_port), timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._connections += 1
                conn = _Connection(self._connections)
                self._sockets += [client, upstream]
            threading.Thread(target=self._client_to_broker, args=(conn, client, upstream),
                             daemon=True).start()
            threading.Thread(target=self._broker_to_client, args=(conn, upstream, client),
                             daemon=True).start()

    def _client_to_broker(self, conn: _Connection, client: socket.socket,
                          upstream: socket.socket) -> None:
        try:
            while (frame := _read_frame(client)) is not None:
                key, version, correlation_id = struct.unpack_from(">hhi", frame, 4)
                (id_len,) = struct.unpack_from(">h", frame, 12)
                client_id = None if id_len < 0 else \
                    frame[14:14 + id_len].decode("utf-8", "replace")
                request = Request(conn.number, key, version, correlation_id, client_id)
                with self._lock:
                    self.requests.append(request)
                    conn.pending[correlation_id] = request
                upstream.sendall(frame)
        except OSError:
            pass
        with self._lock:
            conn.client_closed = True
        _shutdown(upstream)

    def _broker_to_client(self, conn: _Connection, upstream: socket.socket,
                          client: socket.socket) -> None:
        try:
            while (frame := _read_frame(upstream)) is not None:
                (correlation_id,) = struct.unpack_from(">i", frame, 4)
                with self._lock:
                    request = conn.pending.pop(correlation_id, None)
                    if request is not None and request.api_key in self.keep_responses:
                        self.responses.append((request, frame[4:]))
                client.sendall(frame)
        except OSError:
            pass
        with self._lock:
            # The broker closed first: whatever it had not answered was dropped.  (A Produce
            # with acks=0 is never answered and would count too: the peers here use acks=all.)
            if not conn.client_closed:
                self.dropped.extend(conn.pending.values())
            conn.pending.clear()
        _shutdown(client)

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for s in sockets:
            _shutdown(s)
            s.close()


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _read_frame(sock: socket.socket) -> bytes | None:
    """One size-prefixed frame, prefix included; None at EOF."""
    head = _read_exact(sock, 4)
    if head is None:
        return None
    body = _read_exact(sock, struct.unpack(">i", head)[0])
    return None if body is None else head + body


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
