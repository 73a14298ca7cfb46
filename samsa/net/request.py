"""ClientRequest and ClientResponse: what NetworkClient sends and what it hands back.

Their own module so that InFlightRequests (which queues them) and NetworkClient (which makes
and completes them) both import them from below, as Java's ClientRequest/ClientResponse sit
beside NetworkClient and InFlightRequests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from samsa.errors import KafkaError, UnsupportedVersionError
from samsa.net.channel import NetworkSend
from samsa.net.clock import monotonic_ms
from samsa.net.cluster import Node
from samsa.protocol import APIS, Message

ResponseCallback = Callable[["ClientResponse"], None]


class ClientRequest:
    """A request for one node.  The version is picked at send time from what the node
    supports within ``min_version``..``max_version`` (None: the codec's bounds)."""

    __slots__ = (
        "api_key",
        "api_version",
        "callback",
        "context",
        "correlation_id",
        "created_ms",
        "destination",
        "done",
        "expect_response",
        "internal",
        "max_version",
        "min_version",
        "request",
        "request_timeout_ms",
        "send",
        "send_time_ms",
    )

    def __init__(self, destination: int | Node, request: Message, *,
                 expect_response: bool = True, callback: ResponseCallback | None = None,
                 created_ms: float | None = None, min_version: int | None = None,
                 max_version: int | None = None, request_timeout_ms: float | None = None,
                 context: Any = None) -> None:
        api = request.api
        if api is None or type(request) is not api.request_class:
            raise TypeError(f"{type(request).__name__} is not a request message")
        self.destination: int = destination.id if isinstance(destination, Node) else destination
        self.request = request
        self.api_key: int = api.key
        self.min_version = min_version
        self.max_version = max_version
        self.api_version = -1
        self.expect_response = expect_response
        self.callback = callback
        self.created_ms = monotonic_ms() if created_ms is None else created_ms
        self.correlation_id = -1
        self.send_time_ms = 0.0
        self.request_timeout_ms = request_timeout_ms
        self.send: NetworkSend | None = None
        self.internal = False
        self.done = False
        self.context = context  # free for the caller (e.g. the batches of a produce request)

    @property
    def api_name(self) -> str:
        return APIS[self.api_key].name

    def __repr__(self) -> str:
        return (f"ClientRequest({self.api_name} v{self.api_version}, to={self.destination}, "
                f"correlation_id={self.correlation_id}, expect_response={self.expect_response})")


class ClientResponse:
    """The outcome of a ClientRequest.  Exactly one of: ``body`` (a response, or None for a
    request that expects none), ``disconnected`` (``timed_out`` if by request timeout),
    ``version_mismatch`` (no version both sides support; nothing was sent).  ``error`` says why
    a request failed, in words fit for a log or an exception."""

    __slots__ = (
        "body",
        "disconnected",
        "error",
        "received_ms",
        "request",
        "timed_out",
        "version_mismatch",
    )

    def __init__(self, request: ClientRequest, body: Any = None, *, received_ms: float,
                 disconnected: bool = False, timed_out: bool = False,
                 version_mismatch: UnsupportedVersionError | None = None,
                 error: KafkaError | None = None) -> None:
        self.request = request
        self.body = body
        self.received_ms = received_ms
        self.disconnected = disconnected
        self.timed_out = timed_out
        self.version_mismatch = version_mismatch
        self.error = error if error is not None else version_mismatch

    @property
    def destination(self) -> int:
        return self.request.destination

    @property
    def api_key(self) -> int:
        return self.request.api_key

    @property
    def api_version(self) -> int:
        return self.request.api_version

    @property
    def correlation_id(self) -> int:
        return self.request.correlation_id

    @property
    def has_response(self) -> bool:
        return self.body is not None

    @property
    def latency_ms(self) -> float:
        return self.received_ms - self.request.created_ms

    def __repr__(self) -> str:
        r = self.request
        state = ("version mismatch" if self.version_mismatch else
                 "timed out" if self.timed_out else
                 "disconnected" if self.disconnected else "ok")
        return (f"ClientResponse({r.api_name} v{r.api_version} from {r.destination}, "
                f"correlation_id={r.correlation_id}, {state})")
