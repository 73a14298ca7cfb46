"""A blocking ApiVersions round trip: does a broker answer on host:port?  (wait_until_ready)

The broker never imports a client (samsa/net), so this speaks the one request it needs itself.
"""

from __future__ import annotations

import socket
import ssl
import struct

from samsa.protocol import APIS, ApiKey, decode_response, encode_request

__all__ = ["api_versions_probe"]

_SIZE = struct.Struct(">i")


def api_versions_probe(host: str, port: int, timeout: float, *, tls: bool = False) -> None:
    """Send ApiVersions v0 and read its answer; raises OSError if none came within ``timeout``.

    ``tls``: the listener speaks TLS; the probe only asks whether the broker answers, so it
    checks no certificate."""
    request = APIS[ApiKey.API_VERSIONS].request_class()
    with socket.create_connection((host, port), timeout=timeout) as raw:
        sock = raw
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            sock = context.wrap_socket(raw)
        sock.sendall(encode_request(request, 0, 1, "samsa-ready-check"))
        data = b""
        size = None
        while size is None or len(data) < size + 4:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
            if size is None and len(data) >= 4:
                size = _SIZE.unpack_from(data)[0]
        decode_response(ApiKey.API_VERSIONS, 0, data[4:4 + size])
