"""A tiny scriptable Kafka-protocol server for network-layer tests (127.0.0.1 only).

It answers ApiVersions and Metadata itself (naming itself node ``node_id``) and calls
``handler(header, body) -> response | None`` for everything else (None: no response).  Knobs
for misbehaviour: ``dribble`` writes each response a few bytes at a time, ``read_delay_s``
reads requests slowly in small pieces (to fill the client's send buffer), ``coalesce`` holds
responses back and writes several in one ``sendall``, ``corrupt_correlation`` answers with
a wrong correlation id, ``api_versions_reply`` overrides the ApiVersions answer bytes.
``ssl_context`` (a server context) makes it a TLS listener; ``handshake_errors`` collects the
TLS failures it saw.
"""

from __future__ import annotations

import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable
from typing import Any, Self

import samsa.protocol as p
from samsa.protocol import (
    APIS,
    ApiKey,
    decode_request_body,
    decode_request_header,
    encode_response_bytes,
)

Handler = Callable[[Any, Any], Any]


class FakeBroker:
    def __init__(self, node_id: int = 0, handler: Handler | None = None, *,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.node_id = node_id
        self.ssl_context = ssl_context
        self.handshake_errors: list[BaseException] = []
        self.handler = handler
        self.dribble = False
        self.read_delay_s = 0.0
        self.coalesce = 1
        self.corrupt_correlation = False
        self.api_versions_reply: Callable[[Any], bytes | None] | None = None
        self.topics: dict[str, int] = {}
        self.received: list[Any] = []  # request headers, in arrival order
        self.connections = 0
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(16)
        self.port = self._server.getsockname()[1]
        self._conns: list[socket.socket] = []
        self._stop = False
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)
        self._thread.start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self._stop = True
        try:
            self._server.close()
        except OSError:
            pass
        self.drop_connections()

    def drop_connections(self) -> None:
        for c in list(self._conns):
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
        self._conns.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- serving -----------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self._stop:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.read_delay_s:  # a slow reader with a small window fills the client's buffer
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            self.connections += 1
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _recv_exact(self, conn: socket.socket, n: int) -> bytes | None:
        out = bytearray()
        while len(out) < n:
            want = n - len(out)
            if self.read_delay_s:
                want = min(want, 4096)
                time.sleep(self.read_delay_s)
            chunk = conn.recv(want)
            if not chunk:
                return None
            out += chunk
        return bytes(out)

    def _serve(self, conn: socket.socket) -> None:
        pending: list[bytes] = []
        if self.ssl_context is not None:
            try:
                conn = self.ssl_context.wrap_socket(conn, server_side=True)
            except (ssl.SSLError, OSError) as e:
                self.handshake_errors.append(e)
                _close_after_the_alert(conn)
                return
            self._conns.append(conn)
        try:
            while not self._stop:
                head = self._recv_exact(conn, 4)
                if head is None:
                    return
                (size,) = struct.unpack(">i", head)
                payload = self._recv_exact(conn, size)
                if payload is None:
                    return
                header, pos = decode_request_header(payload)
                self.received.append(header)
                frame = self._answer(header, payload, pos)
                if frame is None:
                    continue
                pending.append(frame)
                if len(pending) < self.coalesce:
                    continue
                data = b"".join(pending)
                pending.clear()
                if self.dribble:
                    for i in range(0, len(data), 3):
                        conn.sendall(data[i:i + 3])
                        time.sleep(0.0005)
                else:
                    conn.sendall(data)
        except OSError:
            return
        finally:
            conn.close()

    def _answer(self, header: Any, payload: bytes, pos: int) -> bytes | None:
        key, version = header.request_api_key, header.request_api_version
        corr = header.correlation_id + (1000 if self.corrupt_correlation else 0)
        if key == ApiKey.API_VERSIONS:
            if self.api_versions_reply is not None:
                raw = self.api_versions_reply(header)
                if raw is not None:
                    return struct.pack(">ii", len(raw) + 4, corr) + raw
            return encode_response_bytes(self.api_versions_response(), min(version, 4), corr)
        body = decode_request_body(header, payload, pos)
        if key == ApiKey.METADATA:
            answer = self.metadata_response(body)
            return None if answer is None else encode_response_bytes(answer, version, corr)
        if self.handler is None:
            return None
        response = self.handler(header, body)
        if response is None:
            return None
        if isinstance(response, bytes):
            return response
        return encode_response_bytes(response, version, corr)

    def api_versions_response(self) -> Any:
        keys = [p.ApiVersionsResponse.ApiVersion(api_key=a.key, min_version=a.min_version,
                                                 max_version=a.max_version)
                for a in APIS.values()]
        return p.ApiVersionsResponse(error_code=0, api_keys=keys)

    def metadata_response(self, request: Any) -> Any:
        R = p.MetadataResponse
        brokers = [R.MetadataResponseBroker(node_id=self.node_id, host="127.0.0.1",
                                            port=self.port)]
        names = list(self.topics) if request.topics is None else \
            [t.name for t in request.topics]
        topics = []
        for name in names:
            if name not in self.topics:
                topics.append(R.MetadataResponseTopic(error_code=3, name=name, partitions=[]))
                continue
            parts = [R.MetadataResponsePartition(
                error_code=0, partition_index=i, leader_id=self.node_id, leader_epoch=0,
                replica_nodes=[self.node_id], isr_nodes=[self.node_id])
                for i in range(self.topics[name])]
            topics.append(R.MetadataResponseTopic(error_code=0, name=name, partitions=parts))
        return R(brokers=brokers, cluster_id="fake", controller_id=self.node_id, topics=topics)


def _close_after_the_alert(conn: socket.socket) -> None:
    """Close a connection whose handshake failed without resetting it: the client may already
    have sent its first request (TLS 1.3 completes the client's side first), and closing with
    that unread would send an RST that discards the alert we just sent.  Read until the client
    goes (it does once it reads the alert), for a few seconds at most."""
    try:
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(5)
        while conn.recv(65536):
            pass
    except OSError:
        pass
    finally:
        conn.close()
