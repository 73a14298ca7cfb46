"""What a handler sees: the request context from the network layer, and this broker's identity.

``RequestContext`` is the seam with samsa/broker/request_channel.py; it is declared here as a
Protocol so that handlers (and tests, with a fake) depend only on what they use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class RequestHeaderLike(Protocol):
    request_api_key: int
    request_api_version: int
    correlation_id: int
    client_id: str | None


class RequestContext(Protocol):
    """One decoded request and the way back to its connection.

    ``respond`` may be called later and from another thread (parked fetches); exactly one of
    ``respond``, ``no_response`` or ``close_connection`` is called per request.
    """

    header: RequestHeaderLike
    body: Any
    connection_id: str
    client_host: str
    # When the request was read, in time.monotonic() milliseconds (a Fetch's wait counts from
    # here); fakes may omit it.
    received_ms: float

    def respond(self, response: Any) -> None: ...

    def no_response(self) -> None: ...

    def close_connection(self, reason: str = ...) -> None: ...


@dataclass(slots=True)
class BrokerNode:
    """The one node of this cluster as clients must see it (the *advertised* address).

    Mutable because the port is known only after the listener binds (port 0 in tests).
    """

    node_id: int = 0
    host: str = "127.0.0.1"
    port: int = 9092
    rack: str | None = None
