"""The seam between the network layer and the API handlers: RequestContext and RequestChannel.

The network threads (samsa/broker/network) read a frame, decode its header and body and put a
:class:`RequestContext` on the :class:`RequestChannel` (or run it themselves: inline dispatch).
A request-handler thread (samsa/broker/handler_pool.py, ``num.io.threads`` of them) takes it
and calls the *dispatcher*, ``Callable[[RequestContext], None]`` (the broker's
``KafkaApis.handle``).  This one RequestContext type goes from the network layer to the API
handlers (samsa/broker/apis/context.py re-exports it); both sides import this module, never
each other: the network package knows nothing of the handler pool, server.py wires them.

The handler side must end every context with exactly one of:

* ``ctx.respond(response_message)``: encode the response for the request's version and
  correlation id and send it.  Thread-safe; may be called later from any thread (a parked Fetch
  completed by a timer or by an append).  File slices (``FileSlice``) in records fields are
  sent zero-copy with sendfile.
* ``ctx.no_response()``: nothing is sent (Produce with acks=0).
* ``ctx.close_connection()``: close this connection (an unsupported version, acks=0 produce
  whose append failed, a request the handler refuses).

Until then the connection is *muted* for handling: its later requests wait, so requests of one
connection are handled one at a time and answered in request order (clients pair each response
with their oldest in-flight request).  If the dispatcher raises, the error is logged and the
connection is closed, as Kafka does with an unexpected error; the handler thread carries on.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, Protocol

from samsa.protocol import encode_response

__all__ = ["Dispatcher", "RequestChannel", "RequestContext", "ResponseSink",
           "UnknownApiVersionsContext", "handler_failed"]

log = logging.getLogger("samsa.broker.handler")


class ResponseSink(Protocol):
    """What the network layer offers a context (implemented by the Processor)."""

    def send_response(self, conn: Any, chunks: list[Any]) -> None: ...

    def finish_request(self, conn: Any) -> None: ...

    def close_connection(self, conn: Any, reason: str) -> None: ...


class RequestContext:
    """One decoded request and the way back to its connection.

    ``header``: RequestHeader (``request_api_key``, ``request_api_version``,
    ``correlation_id``, ``client_id``); ``api_key`` and ``api_version`` are the header's, read
    once here for the dispatcher and the handlers; ``body``: the decoded request message;
    ``connection_id``: ``"localhost:port-clienthost:port-n"`` as Kafka names connections;
    ``client_host``: the peer's address; ``listener``: the listener's name (``"PLAINTEXT"``,
    ``"SASL_SSL"`` ...); ``principal``: who the client authenticated as (``"User:alice"``,
    ``"User:CN=client,O=..."``; ``"User:ANONYMOUS"`` when it did not); ``received_ms``:
    when the frame was complete, ``time.monotonic()`` in milliseconds (deadlines such as a
    Fetch's MaxWaitMs count from here); ``size``: the request's bytes (without the size prefix).
    """

    __slots__ = (
        "_conn",
        "_done",
        "_sink",
        "api_key",
        "api_version",
        "body",
        "client_host",
        "connection_id",
        "header",
        "listener",
        "principal",
        "received_ms",
        "size",
    )

    def __init__(self, header: Any, body: Any, connection_id: str, client_host: str,
                 listener: str, received_ms: float, size: int, sink: ResponseSink,
                 conn: Any, principal: str = "User:ANONYMOUS") -> None:
        self.header = header
        self.api_key: int = header.request_api_key
        self.api_version: int = header.request_api_version
        self.body = body
        self.connection_id = connection_id
        self.client_host = client_host
        self.listener = listener
        self.principal = principal
        self.received_ms = received_ms
        self.size = size
        self._sink = sink
        self._conn = conn
        self._done = False

    @property
    def correlation_id(self) -> int:
        return int(self.header.correlation_id)

    @property
    def client_id(self) -> str | None:
        return self.header.client_id  # type: ignore[no-any-return]

    @property
    def completed(self) -> bool:
        """True once respond, no_response or close_connection was called."""
        return self._done

    def _complete(self, how: str) -> None:
        if self._done:
            raise RuntimeError(f"{self!r}: {how}() after the request was already completed")
        self._done = True

    def respond(self, response: Any) -> None:
        """Send ``response`` (the response message for this request's API) to the client."""
        # Encode first: if the handler built an invalid response the request stays open and the
        # handler pool closes the connection when the error propagates.
        chunks = encode_response(response, self.api_version, self.header.correlation_id)
        self._complete("respond")
        self._sink.send_response(self._conn, chunks)

    def respond_frame(self, chunks: list[Any]) -> None:
        """Send a response already encoded as a size-prefixed frame (chunks as encode_response
        gives them), for handlers that build their usual answer from a template."""
        if self._done:  # (_complete's check inline: once per produced batch)
            self._complete("respond")
        self._done = True
        self._sink.send_response(self._conn, chunks)

    def no_response(self) -> None:
        """Send nothing (acks=0 produce); the connection's next request is handled."""
        self._complete("no_response")
        self._sink.finish_request(self._conn)

    def close_connection(self, reason: str = "closed by the request handler") -> None:
        """Close this connection without answering."""
        self._complete("close_connection")
        self._sink.close_connection(self._conn, reason)

    def __repr__(self) -> str:
        return (f"RequestContext(api_key={self.api_key}, version={self.api_version}, "
                f"correlation_id={self.header.correlation_id}, connection={self.connection_id})")


class UnknownApiVersionsContext(RequestContext):
    """An ApiVersions request of a version this broker does not know (KIP-511).

    Its body cannot be decoded (``body`` is an empty ApiVersionsRequest); the handler answers
    UNSUPPORTED_VERSION with the ApiVersions range it serves, and that answer is written in the
    v0 layout, which every client can read (Kafka's ``RequestContext.apiVersion()`` does the
    same).  A subclass so that the usual ``respond`` carries no check for this rare case.
    """

    __slots__ = ()

    def respond(self, response: Any) -> None:
        chunks = encode_response(response, 0, self.header.correlation_id)
        self._complete("respond")
        self._sink.send_response(self._conn, chunks)


Dispatcher = Callable[[RequestContext], None]


def handler_failed(ctx: RequestContext, exc: Exception) -> None:
    """A dispatcher raised (on a handler thread or inline on a network thread): log it and
    close the connection unless the request was answered.  The last resort: KafkaApis answers
    its handlers' exceptions with the request's error response, as Kafka does."""
    log.error("error handling %r from %s; closing the connection", ctx, ctx.client_host,
              exc_info=exc)
    if not ctx.completed:
        try:
            ctx.close_connection(f"handler error: {exc!r}")
        except Exception:
            log.exception("closing %s after a handler error failed", ctx.connection_id)


class HandlerThreadState(threading.local):
    """Per handler thread: ``in_pool`` once the thread serves the channel; ``next``: a request
    kept to run on this thread after the current dispatch (run_next_on_this_thread)."""

    in_pool = False
    next: RequestContext | None = None


class RequestChannel:
    """The bounded queue (``queued.max.requests``) from network threads to handler threads."""

    def __init__(self, max_queued: int) -> None:
        self._queue: queue.Queue[RequestContext | None] = queue.Queue(max_queued)
        # Read by the handler threads' loop (handler_pool.py) once per thread, not per request.
        self.handler_state = HandlerThreadState()

    def run_next_on_this_thread(self, ctx: RequestContext) -> bool:
        """Called on a handler thread that just finished a request whose connection has another
        one waiting: keep it on this thread, to run when the current dispatch returns, instead
        of a round trip through the queue and a wakeup of another thread.  False when not on a
        handler thread (or one continuation is already held); the caller queues it then."""
        state = self.handler_state
        if not state.in_pool or state.next is not None:
            return False
        state.next = ctx
        return True

    def put(self, ctx: RequestContext | None, timeout: float | None = None) -> None:
        """Queue a request (None asks one handler thread to stop); raises queue.Full on timeout."""
        self._queue.put(ctx, timeout=timeout)

    def put_nowait(self, ctx: RequestContext) -> None:
        self._queue.put_nowait(ctx)

    def empty(self) -> bool:
        """True if no request waits for a handler thread (a lock-free look: it may change at once)."""
        return not self._queue.queue

    def get(self) -> RequestContext | None:
        return self._queue.get()

    def drain(self) -> list[RequestContext]:
        """Remove and return everything queued (at shutdown)."""
        items: list[RequestContext] = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return items
            if item is not None:
                items.append(item)

    def __len__(self) -> int:
        return self._queue.qsize()
