"""Processor: one network thread with its own selector over its share of the connections.

It reads size-prefixed frames, decodes each request's header and body, and hands a
RequestContext to the RequestChannel; it writes whatever part of a response a handler thread
could not write at once, and closes connections (protocol errors, idle, client gone).

Order and muting.  A connection has at most one request *in handling* at a time (``busy``);
frames read meanwhile wait in the connection's ``pending`` queue, and the connection stops
reading (``read_paused``) once that queue is full, until it has drained to half.  Kafka mutes a connection as soon as one
request is read; reading a little ahead (``max_pending_frames``, 0 = Kafka's strict muting)
keeps the same ordering and saves a trip through this thread per request: when a handler's
response is fully written, the handler thread itself starts the connection's next request.

Inline dispatch.  Kafka's processors never run handlers: a request always crosses to a
handler thread and its response crosses back.  In CPython each crossing is a condition-variable
wakeup plus a GIL handoff (a woken thread may wait up to ``sys.getswitchinterval()`` for the
GIL), which costs more than handling a small Produce.  So when the handler queue is empty and
``inline`` says a request never blocks (ApiVersions, Metadata, ListOffsets, Fetch, Produce to
logs that do not fsync per append: KafkaApis.runs_inline), the processor runs the dispatcher
itself and goes on with the connection's next frame.  Anything else, or any request arriving
while handlers are busy, goes through the RequestChannel as in Kafka.  Ordering is unchanged:
a connection still has one request in handling at a time.  ``samsa.inline.dispatch.enable``
turns it off.

Response batching.  When the processor answers a request inline and the connection's next
request is already read, the response is held (``Connection.held``) and written with the next
one, so a burst of pipelined requests (librdkafka keeps a dozen Produce requests in flight) is
answered with one send: one system call, one TCP segment and one wakeup of the client instead
of one each per response (held in the kernel with MSG_MORE instead, each response still cost a
send: about three times the CPU per response for bursts of four).  A held response's request is
finished (the next one starts), as if written: the bytes go before anything the connection
sends later.  Whenever the processor stops answering that connection (it ran out of frames, or
a request parked or went to a handler thread), ``_push`` writes what is held; a send from any
other thread writes it first too.  What the socket does not take then waits in ``outgoing``
(marked ``outgoing_answered``: finishing it starts no request), and a response sent meanwhile
joins it.

Security.  Connections of SSL and SASL_SSL listeners are TlsConnections: the processor runs
their TLS handshake (non-blocking) before reading requests, and their responses never use
MSG_MORE, sendmsg or sendfile.  Connections of SASL listeners carry an authenticator
(authenticator.py) that takes every request until the client has authenticated.

Other threads talk to the processor through ``_post`` (a command deque plus a wakeup byte on a
socketpair); everything that touches the selector runs on the processor thread.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import selectors
import socket
import ssl
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from samsa.broker.network.authenticator import SaslAuthenticator
from samsa.broker.network.connection import Connection, FrameSizeError, Outgoing, TlsConnection
from samsa.broker.network.connection_quotas import ConnectionQuotas
from samsa.broker.network.endpoint import Endpoint, tls_principal
from samsa.broker.request_channel import (
    Dispatcher,
    RequestChannel,
    RequestContext,
    UnknownApiVersionsContext,
    handler_failed,
)
from samsa.broker.unsupported_versions import log_unsupported_version
from samsa.errors import UnsupportedVersionError
from samsa.protocol import (
    APIS,
    ApiKey,
    ProtocolDecodeError,
    decode_request_body,
    decode_request_header,
    encode_response,
)

__all__ = ["Processor"]

log = logging.getLogger("samsa.broker.network")

_API_VERSIONS = int(ApiKey.API_VERSIONS)  # compared per request: a plain int
_READ = selectors.EVENT_READ
_WRITE = selectors.EVENT_WRITE
_NEW, _WRITABLE, _CLOSE, _RESUME, _DISPATCH, _NEXT = range(6)
_ApiVersionsRequest: Any = APIS[_API_VERSIONS].request_class
_SASL_HANDSHAKE = int(ApiKey.SASL_HANDSHAKE)
_SIZE = struct.Struct(">i")
_get_ident = threading.get_ident  # (_on_thread inlined on the per-request paths)
_PLAINTEXT = Endpoint.plaintext()


class Processor:
    def __init__(self, index: int, channel: RequestChannel, *, max_request_bytes: int,
                 idle_ms: int, max_pending_frames: int, max_pending_bytes: int,
                 node_id: int = 0,
                 dispatcher: Dispatcher | None = None,
                 inline: Callable[[RequestContext], bool] | None = None,
                 answer: Callable[[Any], list[Any] | None] | None = None,
                 quotas: ConnectionQuotas | None = None) -> None:
        self.index = index
        self._channel = channel
        # Counted in by the Acceptor; every accepted socket this processor closes counts out.
        self._quotas = quotas or ConnectionQuotas()
        # Inline dispatch (module docstring): both or neither.
        self._dispatcher = dispatcher if inline is not None else None
        self._inline = inline if dispatcher is not None else None
        # Requests answered from their frame (the size prefix off), before any decoding (the
        # usual Produce: KafkaApis.answer_frame), where inline dispatch would run them; on a
        # SASL connection only once it has authenticated.
        self._answer = answer if self._inline is not None else None
        self._inline_conn: Connection | None = None  # whose request runs inline right now
        self._inline_done = False  # it was answered at once: go on with its next frame
        self._frames_left = 0  # frames of the current read not yet delivered (response batching)
        self._max_request_bytes = max_request_bytes
        self._idle_s = idle_ms / 1000.0
        self._idle_check_s = min(max(self._idle_s / 4, 0.005), 1.0)
        self._max_pending_frames = max_pending_frames
        self._max_pending_bytes = max_pending_bytes
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, _READ, None)
        self._wake_pending = False
        # Connections to close at a time (failed authentication): (deadline, n, connection, why).
        self._timed_closes: list[tuple[float, int, Connection, str]] = []
        self._close_seq = itertools.count()
        self._commands: deque[tuple[Any, ...]] = deque()
        self._connections: set[Connection] = set()
        self._running = True
        self._ident: int | None = None
        self._thread = threading.Thread(target=self._run, name=f"samsa-network-{node_id}-{index}",
                                        daemon=True)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._running = False
        self._wake()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def accept(self, sock: socket.socket, connection_id: str, client_host: str,
               endpoint: Endpoint = _PLAINTEXT) -> None:
        """Take over a newly accepted socket (called on the Acceptor thread)."""
        self._post((_NEW, sock, connection_id, client_host, endpoint))

    # -- cross-thread plumbing ------------------------------------------------------------------

    def _on_thread(self) -> bool:
        return threading.get_ident() == self._ident

    def _post(self, command: tuple[Any, ...]) -> None:
        self._commands.append(command)
        self._wake()

    def _wake(self) -> None:
        if self._wake_pending:
            return
        self._wake_pending = True
        try:
            self._wake_w.send(b"\0")
        except (BlockingIOError, OSError):
            pass  # already full of wakeups, or closed at shutdown

    def _drain_wakeups(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass
        # Only now: a post that found the flag set appended its command before looking, and
        # commands are run after this; clearing before draining could swallow a later post's
        # byte and leave the flag set with nothing left to wake us.
        self._wake_pending = False

    # -- the loop -------------------------------------------------------------------------------

    def _run(self) -> None:
        self._ident = threading.get_ident()
        next_idle_check = time.monotonic() + self._idle_check_s
        try:
            while self._running:
                wake_at = next_idle_check
                if self._timed_closes:
                    wake_at = min(wake_at, self._timed_closes[0][0])
                timeout = max(0.0, wake_at - time.monotonic())
                for key, mask in self._selector.select(timeout):
                    conn = key.data
                    if conn is None:
                        self._drain_wakeups()
                        continue
                    if conn.closed:
                        self._close_now(conn)
                        continue
                    if conn.handshake_want:
                        self._continue_tls_handshake(conn)
                        continue
                    if mask & _WRITE:
                        self._on_writable(conn)
                    if mask & _READ and not conn.closed:
                        self._on_readable(conn)
                if self._commands:
                    self._run_commands()
                now = time.monotonic()
                if self._timed_closes and self._timed_closes[0][0] <= now:
                    self._run_timed_closes(now)
                if now >= next_idle_check:
                    self._close_idle(now)
                    next_idle_check = now + self._idle_check_s
        except Exception:  # a bug here must be loud, not a silent dead thread
            log.exception("network thread %d failed; closing its connections", self.index)
        finally:
            self._shutdown()

    def _run_commands(self) -> None:
        commands = self._commands
        while commands:
            command = commands.popleft()
            kind = command[0]
            if kind == _NEW:
                self._register_new(*command[1:])
            elif kind == _DISPATCH:
                self._enqueue(command[1])
            elif kind == _NEXT:
                self._run_requests(command[1], self._next_frame(command[1]))
            else:
                conn = command[1]
                if conn.closed:
                    self._close_now(conn)
                elif kind == _WRITABLE or kind == _RESUME:
                    self._update_interest(conn)

    def _register_new(self, sock: socket.socket, connection_id: str, client_host: str,
                      endpoint: Endpoint) -> None:
        if not self._running:
            sock.close()
            self._quotas.dec(endpoint.listener.name, client_host)
            return
        authenticator = (SaslAuthenticator(endpoint.sasl, client_host, connection_id)
                         if endpoint.sasl is not None else None)
        listener = endpoint.listener.name
        if endpoint.ssl_context is None:
            conn = Connection(sock, connection_id, client_host, self, listener, authenticator)
        else:
            try:
                tls_sock = endpoint.ssl_context.wrap_socket(
                    sock, server_side=True, do_handshake_on_connect=False)
            except (OSError, ValueError) as exc:
                log.info("TLS setup of %s failed: %s", connection_id, exc)
                sock.close()
                self._quotas.dec(listener, client_host)
                return
            conn = TlsConnection(tls_sock, connection_id, client_host, self, listener,
                                 authenticator)
            conn.handshake_want = _READ
        self._connections.add(conn)
        self._update_interest(conn)
        log.debug("new connection %s on network thread %d", connection_id, self.index)

    def _continue_tls_handshake(self, conn: Connection) -> None:
        sock: Any = conn.sock
        conn.last_active = time.monotonic()
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            want = _READ
        except ssl.SSLWantWriteError:
            want = _READ | _WRITE
        except (OSError, ValueError) as exc:
            # A client that does not trust our certificate, speaks plaintext, or sent no
            # certificate where one is required: its problem, logged for the operator.
            log.info("TLS handshake with %s (%s) failed: %s", conn.client_host, conn.id,
                     getattr(exc, "reason", None) or exc)
            self.close_connection(conn, f"TLS handshake failed: {exc}")
            return
        else:
            conn.handshake_want = 0
            conn.principal = tls_principal(sock.getpeercert())
            conn.last_active = time.monotonic()
            self._update_interest(conn)
            if sock.pending():
                self._on_readable(conn)  # the client's first request came with the handshake
            return
        if want != conn.handshake_want:
            conn.handshake_want = want
            self._update_interest(conn)

    def _update_interest(self, conn: Connection) -> None:
        """Register the events this connection needs now (processor thread only)."""
        if conn.closed or conn not in self._connections:
            return
        want = conn.handshake_want
        if want:
            pass  # the TLS handshake decides
        elif not conn.read_paused and not conn.eof:
            want = _READ
        if conn.outgoing is not None:
            want |= _WRITE
        if want == conn.interest:
            return
        if conn.interest == 0:
            self._selector.register(conn.sock, want, conn)
        elif want == 0:
            self._selector.unregister(conn.sock)
        else:
            self._selector.modify(conn.sock, want, conn)
        conn.interest = want

    def _shutdown(self) -> None:
        self._running = False
        for conn in list(self._connections):
            with conn.lock:
                conn.closed = True
                conn.close_reason = "broker shutting down"
            self._close_now(conn)
        while self._commands:
            command = self._commands.popleft()
            if command[0] == _NEW:
                command[1].close()
                self._quotas.dec(command[4].listener.name, command[3])
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    # -- reading ----------------------------------------------------------------------------------

    def _on_readable(self, conn: Connection) -> None:
        limit = self._max_request_bytes
        auth = conn.authenticator
        if auth is not None and auth.max_frame_bytes is not None:
            limit = min(limit, auth.max_frame_bytes)  # before authentication: sasl.server.max.receive.size
        try:
            frames = conn.read_frames(limit)
        except FrameSizeError as exc:
            log.warning("closing %s: %s", conn.id, exc)
            self.close_connection(conn, str(exc))
            return
        except OSError as exc:
            self.close_connection(conn, f"read failed: {exc}")
            return
        now = time.monotonic()
        conn.last_active = now
        left = len(frames)
        for frame in frames:
            left -= 1
            self._frames_left = left
            self._deliver(conn, frame, now)
        if conn.held:
            self._push(conn)
        peer_closed = conn.peer_closed()
        with conn.lock:
            if conn.closed:
                return
            if peer_closed:
                conn.eof = True
                close = not conn.busy and conn.outgoing is None  # (held responses written)
            else:
                close = False
                if conn.busy and self._over_cap(conn):
                    conn.read_paused = True
        if close:
            self.close_connection(conn, "client closed the connection")
        else:
            self._update_interest(conn)

    def _over_cap(self, conn: Connection) -> bool:
        return (len(conn.pending) >= self._max_pending_frames
                or conn.pending_bytes >= self._max_pending_bytes)

    def _above_resume_mark(self, conn: Connection) -> bool:
        # Hysteresis: a paused connection resumes reading once its queue has drained to half
        # the cap, not as soon as one frame left it, so that a client pipelining faster than
        # we handle costs one processor wakeup per half-queue rather than one per request.
        # Strict muting (cap 0) resumes only when the connection is idle.
        if self._max_pending_frames <= 0:
            return True
        return (len(conn.pending) > self._max_pending_frames // 2
                or conn.pending_bytes > self._max_pending_bytes // 2)

    def _deliver(self, conn: Connection, frame: Any, now: float) -> None:
        with conn.lock:
            if conn.closed:
                return
            if conn.busy:
                conn.pending.append((frame, now))
                conn.pending_bytes += len(frame)
                return
            conn.busy = True
        self._run_requests(conn, (frame, now))

    def _run_requests(self, conn: Connection, item: tuple[Any, float] | None) -> None:
        # Iterative, not recursive: requests answered at once (an ApiVersions error) continue
        # with the connection's next pending frame.
        while item is not None:
            if not self._start(conn, item[0], item[1]):
                break
            item = self._next_frame(conn)
        if conn.held and not self._frames_left and self._on_thread():
            self._push(conn)  # the request that would have followed is not answered yet

    def _start(self, conn: Connection, frame: Any, received: float) -> bool:
        """Decode one request and queue it; True if it was answered here and is done."""
        payload = memoryview(frame) if type(frame) is bytearray else frame
        auth = conn.authenticator
        if auth is not None and auth.raw_tokens:
            return self._answer_auth(conn, auth.on_raw_token(bytes(payload)), None)
        answer = self._answer
        if answer is not None and auth is None and self._channel.empty() \
                and _get_ident() == self._ident:
            done = self._answer_inline(conn, answer, payload)
            if done is not None:
                return done
        try:
            header, pos = decode_request_header(payload)
        except ProtocolDecodeError as exc:
            self._protocol_error(conn, f"malformed request header: {exc}")
            return False
        key, version = header.request_api_key, header.request_api_version
        if auth is not None and (not auth.authenticated or key == _SASL_HANDSHAKE
                                 or auth.session_expires_at is not None):
            if auth.authenticated and key != _SASL_HANDSHAKE:
                if auth.session_expired(time.monotonic()):
                    self.close_connection(conn, "SASL session expired "
                                          "(connections.max.reauth.ms): the client did not "
                                          "re-authenticate in time")
                    return False
            elif not auth.allows_before_auth(key):
                return self._authenticate(conn, auth, header, payload, pos)
        if answer is not None and auth is not None and self._channel.empty() \
                and _get_ident() == self._ident:
            done = self._answer_inline(conn, answer, payload)  # (authenticated by now)
            if done is not None:
                return done
        if key == _API_VERSIONS and not APIS[_API_VERSIONS].supports(version):
            # KIP-511: not decoded, handled as Kafka's RequestContext.parseRequest does: the
            # handler answers UNSUPPORTED_VERSION with its range, in the v0 layout, so the
            # client can retry with a version we know.
            ctx: RequestContext = UnknownApiVersionsContext(
                header, _ApiVersionsRequest(), conn.id, conn.client_host, conn.listener,
                received * 1000.0, len(frame), self, conn, conn.principal)
        else:
            try:
                body = decode_request_body(header, payload, pos)
            except UnsupportedVersionError as exc:
                log_unsupported_version(log, conn.client_host, header.client_id, key, version,
                                        conn.id)
                self.close_connection(conn, str(exc))
                return False
            except ProtocolDecodeError as exc:
                api = APIS.get(key)
                self._protocol_error(
                    conn, f"malformed {api.name if api else key} v{version} request: {exc}")
                return False
            except Exception as exc:  # noqa: BLE001 - any decode failure is the client's garbage
                self._protocol_error(conn, f"cannot decode API key {key} v{version}: {exc!r}")
                return False
            ctx = RequestContext(header, body, conn.id, conn.client_host, conn.listener,
                                 received * 1000.0, len(frame), self, conn, conn.principal)
        inline = self._inline
        if inline is not None and self._channel.empty() and _get_ident() == self._ident \
                and inline(ctx):
            return self._run_inline(conn, ctx)
        self._enqueue(ctx)
        return False

    def _authenticate(self, conn: Connection, auth: SaslAuthenticator, header: Any,
                      payload: Any, pos: int) -> bool:
        """A request the authenticator takes (SaslHandshake, SaslAuthenticate, or one that is
        not allowed yet); True if it was answered and the next frame may go on."""
        key, version = header.request_api_key, header.request_api_version
        body = None
        if key in (_SASL_HANDSHAKE, int(ApiKey.SASL_AUTHENTICATE)):
            try:
                body = decode_request_body(header, payload, pos)
            except (ProtocolDecodeError, UnsupportedVersionError) as exc:
                self._protocol_error(conn, f"bad {APIS[key].name} v{version} request: {exc}")
                return False
        return self._answer_auth(conn, auth.on_request(key, version, body), header)

    def _answer_auth(self, conn: Connection, outcome: Any, header: Any) -> bool:
        if outcome.close is not None and outcome.response is None and outcome.raw is None:
            self._protocol_error(conn, outcome.close)
            return False
        if outcome.raw is not None:
            chunks: list[Any] = [_SIZE.pack(len(outcome.raw)) + outcome.raw]
        elif outcome.response is not None:
            chunks = encode_response(outcome.response, header.request_api_version,
                                     header.correlation_id)
        else:
            chunks = []
        auth = conn.authenticator
        if auth is not None:
            conn.principal = auth.principal
        if outcome.close is not None:
            # Kafka answers, then closes after connection.failed.authentication.delay.ms so
            # that a client retrying in a loop is slowed down; until then, nothing else is read.
            self._send(conn, chunks)
            with conn.lock:
                conn.read_paused = True
            self._update_interest(conn)
            delay = auth._settings.failed_delay_ms if auth is not None else 0
            heapq.heappush(self._timed_closes, (time.monotonic() + delay / 1000.0,
                                                next(self._close_seq), conn, outcome.close))
            return False
        return self._send(conn, chunks)

    def _run_timed_closes(self, now: float) -> None:
        while self._timed_closes and self._timed_closes[0][0] <= now:
            _, _, conn, reason = heapq.heappop(self._timed_closes)
            self.close_connection(conn, f"authentication failed: {reason}")

    def _run_inline(self, conn: Connection, ctx: RequestContext) -> bool:
        """Handle ``ctx`` on this thread; True if its response is fully written (or it needed
        none), so the caller goes on with the connection's next frame."""
        assert self._dispatcher is not None
        outer = self._inline_conn, self._inline_done  # a dispatch may answer other requests
        self._inline_conn, self._inline_done = conn, False
        try:
            self._dispatcher(ctx)
        except Exception as exc:  # noqa: BLE001 - a handler bug must not kill the network thread
            handler_failed(ctx, exc)
        finally:
            done = self._inline_done
            self._inline_conn, self._inline_done = outer
        return done

    def _answer_inline(self, conn: Connection, answer: Callable[[Any], list[Any] | None],
                       payload: Any) -> bool | None:
        """Inline dispatch of a request answered from its frame: None if ``answer`` declined
        it (nothing was done), else as _run_inline."""
        outer = self._inline_conn, self._inline_done  # as _run_inline: appends wake fetches
        self._inline_conn, self._inline_done = conn, False
        try:
            chunks = answer(payload)
            # Sent while _inline_conn is this connection, so that MSG_MORE batching applies.
            return None if chunks is None else self._send(conn, chunks)
        except Exception as exc:  # as handler_failed: never kill the network thread
            log.error("error answering a request from %s; closing the connection",
                      conn.client_host, exc_info=exc)
            self.close_connection(conn, f"handler error: {exc!r}")
            return False
        finally:
            self._inline_conn, self._inline_done = outer

    def _request_finished(self, conn: Connection) -> None:
        """A request's response is written (or none was due): start the connection's next."""
        if self._inline_conn is not None and _get_ident() == self._ident:
            if conn is self._inline_conn:
                self._inline_done = True  # _run_requests' loop takes the next frame
            else:
                # Another connection's parked request answered by an inline dispatch: start its
                # next request after this one instead of nesting dispatches.
                self._commands.append((_NEXT, conn))
            return
        self._run_requests(conn, self._next_frame(conn))

    def _protocol_error(self, conn: Connection, reason: str) -> None:
        log.warning("closing %s (client %s): %s", conn.id, conn.client_host, reason)
        self.close_connection(conn, reason)

    def _enqueue(self, ctx: RequestContext) -> None:
        if not self._on_thread():
            # A handler thread starting a connection's next request runs it itself when it
            # can; it must never block on a full queue (all handlers could end up waiting on
            # each other): the processor does the blocking put instead.
            if self._channel.run_next_on_this_thread(ctx):
                return
            try:
                self._channel.put_nowait(ctx)
            except queue.Full:
                self._post((_DISPATCH, ctx))
            return
        while self._running:
            try:
                self._channel.put(ctx, timeout=0.1)
                return
            except queue.Full:
                continue
        self.close_connection(ctx._conn, "broker shutting down")

    # -- finishing requests (any thread) ----------------------------------------------------------

    def send_response(self, conn: Connection, chunks: list[Any]) -> None:
        if self._send(conn, chunks):
            self._request_finished(conn)

    def finish_request(self, conn: Connection) -> None:
        self._request_finished(conn)

    def close_connection(self, conn: Connection, reason: str) -> None:
        with conn.lock:
            if conn.closed:
                return
            conn.closed = True
            conn.close_reason = reason
        if self._on_thread():
            self._close_now(conn)
        else:
            self._post((_CLOSE, conn))

    def _send(self, conn: Connection, chunks: list[Any]) -> bool:
        """Write a response; True if it was written completely (or is held, to be written
        with the next: module docstring), False if the processor will finish it (or the
        connection is gone)."""
        out = None
        failed = None
        with conn.lock:
            if conn.closed:
                return False
            try:
                if conn.outgoing is not None:
                    # Held responses the socket did not take (_push): this one goes after them,
                    # and finishing them now finishes this request.
                    conn.outgoing.chunks.extend(chunks)
                    conn.outgoing_answered = False
                    done = False
                elif conn.tls:
                    out = Outgoing(chunks)
                    done = out.write_tls(conn.sock)
                elif len(chunks) == 1 and type(chunks[0]) is bytes:
                    # The usual response: one bytes chunk.  If this thread is about to answer
                    # the connection's next request too (pipelined frames already read), it
                    # is held and written with the next one (module docstring).
                    data = chunks[0]
                    if (self._inline_conn is conn and (self._frames_left or conn.pending)
                            and _get_ident() == self._ident):
                        conn.held.append(data)
                        return True
                    if conn.held:
                        conn.held.append(data)
                        data = conn.take_held()
                    try:
                        sent = conn.sock.send(data)
                    except BlockingIOError:
                        sent = 0
                    done = sent == len(data)
                    if not done:
                        out = Outgoing([data])
                        out._advance(sent)
                else:
                    if conn.held:
                        chunks = [*conn.held, *chunks]
                        conn.held.clear()
                    out = Outgoing(chunks)
                    done = out.write_to(conn.sock)
            except (OSError, ValueError) as exc:  # ValueError: a FileSlice's file was closed
                done = False
                failed = f"write failed: {exc}"
                conn.closed = True
                conn.close_reason = failed
            else:
                if done:
                    conn.last_active = time.monotonic()
                elif out is not None:
                    conn.outgoing = out
                    conn.outgoing_answered = False
        if failed is not None:
            if self._on_thread():
                self._close_now(conn)
            else:
                self._post((_CLOSE, conn))
        elif not done:
            if self._on_thread():
                self._update_interest(conn)
            else:
                self._post((_WRITABLE, conn))
        return done

    def _push(self, conn: Connection) -> None:
        """Write the held responses (their requests are finished: what the socket does not
        take waits in ``outgoing``, which the processor finishes)."""
        failed = None
        with conn.lock:
            if not conn.held or conn.closed:
                return
            data = conn.take_held()
            try:
                try:
                    sent = conn.sock.send(data)
                except BlockingIOError:
                    sent = 0
            except OSError as exc:
                failed = f"write failed: {exc}"
                conn.closed = True
                conn.close_reason = failed
            else:
                if sent == len(data):
                    conn.last_active = time.monotonic()
                    return
                out = Outgoing([data])
                out._advance(sent)
                conn.outgoing = out
                conn.outgoing_answered = True
        if failed is not None:
            self._close_now(conn)
        else:
            self._update_interest(conn)

    def _on_writable(self, conn: Connection) -> None:
        failed = None
        close = False
        with conn.lock:
            # Any readiness is activity (Kafka's Selector updates its idle-expiry clock on every
            # selected key): a client that reads its responses slowly is not idle.
            conn.last_active = time.monotonic()
            out = conn.outgoing
            answered = conn.outgoing_answered
            if out is None or conn.closed:
                done = False
            else:
                try:
                    done = out.write_tls(conn.sock) if conn.tls else out.write_to(conn.sock)
                except (OSError, ValueError) as exc:  # as above: only this connection fails
                    done = False
                    failed = f"write failed: {exc}"
                    conn.closed = True
                    conn.close_reason = failed
                if done:
                    conn.outgoing = None
                    conn.outgoing_answered = False
                    # The client closed its side while held responses were being written.
                    close = answered and conn.eof and not conn.busy
        if failed is not None:
            self._close_now(conn)
            return
        if close:
            self.close_connection(conn, "client closed the connection")
            return
        self._update_interest(conn)
        if done and not answered:
            self._run_requests(conn, self._next_frame(conn))

    def _next_frame(self, conn: Connection) -> tuple[Any, float] | None:
        """The request after the one just finished: the next pending frame, or None (idle)."""
        resume = close = False
        with conn.lock:
            if conn.closed:
                return None
            if conn.pending:
                item = conn.pending.popleft()
                conn.pending_bytes -= len(item[0])
            else:
                item = None
                conn.busy = False
                # (Held responses still being written: _on_writable closes once they are.)
                close = conn.eof and conn.outgoing is None and not conn.held
            if conn.read_paused and not (conn.busy and self._above_resume_mark(conn)):
                conn.read_paused = False
                resume = True
        if close:
            self.close_connection(conn, "client closed the connection")
        elif resume:
            if self._on_thread():
                self._update_interest(conn)
            else:
                self._post((_RESUME, conn))
        return item

    # -- closing --------------------------------------------------------------------------------

    def _close_now(self, conn: Connection) -> None:
        """Unregister and close the socket (processor thread; ``conn.closed`` is already set)."""
        if conn not in self._connections:
            return
        self._connections.discard(conn)
        if conn.interest:
            try:
                self._selector.unregister(conn.sock)
            except (KeyError, ValueError):
                pass
            conn.interest = 0
        with conn.lock:
            conn.closed = True
            try:
                if conn.held:  # answered before the close: sent if the socket takes them
                    conn.sock.send(conn.take_held())
            except OSError:
                pass
            try:
                conn.sock.close()
            except OSError:
                pass
            conn.release()
        self._quotas.dec(conn.listener, conn.client_host)  # after close: the slot is free now
        log.debug("closed %s: %s", conn.id, conn.close_reason)

    def _close_idle(self, now: float) -> None:
        """Close connections without activity for connections.max.idle.ms, as Kafka's Selector
        does: idle ones, ones that stalled mid-request (a size prefix or part of a body, then
        nothing), ones whose client stopped reading its responses, and ones whose request is
        parked (a Fetch with a huge max_wait_ms whose client went away): Kafka's idle expiry
        does not look at requests in flight either, and a response that comes later for a
        closed connection is dropped."""
        limit = now - self._idle_s
        for conn in list(self._connections):
            if conn.last_active < limit:
                with conn.lock:
                    if conn.closed or conn.last_active >= limit:
                        continue
                    conn.closed = True
                    conn.close_reason = (f"idle for more than {self._idle_s * 1000:.0f} ms "
                                         "(connections.max.idle.ms)")
                self._close_now(conn)
