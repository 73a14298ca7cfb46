"""SocketServer: the listening sockets (one per listener), the Acceptor thread, the Processors and
the RequestChannel they feed, started and stopped together (Kafka's SocketServer).  The threads
that serve the channel (KafkaRequestHandlerPool, samsa/broker/handler_pool.py) are built and
started by server.py: dependencies point down, the network layer never imports the handlers."""

from __future__ import annotations

import itertools
import logging
import selectors
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from samsa.broker.listeners import Listener
from samsa.broker.network.connection_quotas import ConnectionQuotas
from samsa.broker.network.endpoint import Endpoint
from samsa.broker.network.processor import Processor
from samsa.broker.request_channel import Dispatcher, RequestChannel, RequestContext

__all__ = ["Acceptor", "SocketServer"]

log = logging.getLogger("samsa.broker.network")

# Read-ahead per connection while one of its requests is being handled (see processor.py).
# The frame cap is high enough that a pipelining producer of small batches rarely pauses (each
# resume costs a processor wakeup); the byte cap bounds the memory.
DEFAULT_MAX_PENDING_FRAMES = 128
DEFAULT_MAX_PENDING_BYTES = 4 * 1024 * 1024


class Acceptor:
    """Accepts connections on every listener and deals them out to the processors round-robin
    (the processors serve every listener: each connection carries its listener's endpoint).

    ``quotas`` (connection_quotas.py): a listener without a free slot is left out of the
    selector, so its new connections wait in the listen backlog (KIP-402); a closing
    connection wakes the acceptor to take them.  A connection past its address's limit is
    closed at once."""

    def __init__(self, server_sockets: list[tuple[socket.socket, Endpoint]],
                 processors: list[Processor], *,
                 send_buffer: int, receive_buffer: int, node_id: int = 0,
                 quotas: ConnectionQuotas | None = None) -> None:
        self._socks = server_sockets
        self._processors = processors
        self._send_buffer = send_buffer
        self._receive_buffer = receive_buffer
        self._quotas = quotas or ConnectionQuotas()
        self._quotas.on_release = self._wakeup
        self._next = itertools.cycle(processors)
        self._ids = itertools.count()
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        for sock, endpoint in server_sockets:
            self._selector.register(sock, selectors.EVENT_READ, (sock, endpoint))
        self._paused: list[tuple[socket.socket, Endpoint]] = []  # listeners without a slot
        self._limit_logged: set[str] = set()
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._running = True
        self._thread = threading.Thread(target=self._run, name=f"samsa-acceptor-{node_id}",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        self._running = False
        self._wakeup()
        self._thread.join(timeout)

    def _wakeup(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except OSError:
            pass  # already full of wakeups, or closed at shutdown

    def _run(self) -> None:
        try:
            while self._running:
                for key, _ in self._selector.select():
                    if key.data is None:
                        self._drain_wakeups()
                    elif self._running:
                        self._accept_all(*key.data)
                if self._paused:
                    self._resume_listeners()
        except Exception:
            log.exception("acceptor failed; no new connections will be accepted")
        finally:
            self._selector.close()
            for sock, _ in self._socks:
                sock.close()
            self._wake_r.close()
            self._wake_w.close()

    def _drain_wakeups(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:
            pass  # drained (BlockingIOError), or closed at shutdown

    def _resume_listeners(self) -> None:
        """Take back the listeners that have a free slot again (a connection closed)."""
        paused, self._paused = self._paused, []
        for server_socket, endpoint in paused:
            if self._quotas.slot_available(endpoint.listener.name):
                self._selector.register(server_socket, selectors.EVENT_READ,
                                        (server_socket, endpoint))
                self._accept_all(server_socket, endpoint)
            else:
                self._paused.append((server_socket, endpoint))

    def _pause(self, server_socket: socket.socket, endpoint: Endpoint) -> None:
        self._selector.unregister(server_socket)
        self._paused.append((server_socket, endpoint))
        name = endpoint.listener.name
        # Once per listener at INFO: a broker kept at its limit pauses at every close.
        level = logging.DEBUG if name in self._limit_logged else logging.INFO
        self._limit_logged.add(name)
        log.log(level, "listener %s is at its connection limit (max.connections, %d open "
                "in all): new connections wait in the listen backlog until others close",
                name, self._quotas.total)

    def _accept_all(self, server_socket: socket.socket, endpoint: Endpoint) -> None:
        listener = endpoint.listener.name
        quotas = self._quotas
        while True:
            if not quotas.slot_available(listener):
                self._pause(server_socket, endpoint)
                return
            try:
                sock, peer = server_socket.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                # Out of file descriptors and the like: log, and try again on the next event.
                log.warning("accept failed: %s", exc)
                return
            limit = quotas.inc(listener, peer[0])
            if limit is not None:
                log.info("refused a connection from %s on %s: that address already has its "
                         "maximum of %d connections (max.connections.per.ip%s)", peer[0],
                         listener, limit, ".overrides" if limit != quotas.max_per_ip else "")
                sock.close()
                continue
            try:
                self._configure(sock)
                local = sock.getsockname()
            except OSError as exc:
                log.debug("connection from %s failed during setup: %s", peer, exc)
                sock.close()
                quotas.dec(listener, peer[0])
                continue
            connection_id = f"{local[0]}:{local[1]}-{peer[0]}:{peer[1]}-{next(self._ids)}"
            next(self._next).accept(sock, connection_id, peer[0], endpoint)

    def _configure(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._send_buffer != -1:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer)
        if self._receive_buffer != -1:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer)


class SocketServer:
    """Listen on ``host:port`` (or on each of ``endpoints``) and put decoded requests on
    ``request_channel``.

    ``bind()`` opens the listening sockets (``port`` is then the first one's bound port, so port 0
    works; ``bound_listeners`` has them all);
    ``start()`` binds if needed and starts the acceptor and processors; ``stop()`` closes the
    listener and all connections, drops queued requests and joins the threads.  Whoever serves
    ``request_channel`` (a RequestHandlerPool) is started before and stopped after.
    ``inline``: which requests the network threads may handle themselves with ``dispatcher``
    when the handler queue is empty (processor.py); None sends every request to the channel, as
    Kafka does.  ``answer``: where a network thread would run a request inline, first offered
    the raw request (the frame without its size prefix) and its response chunks sent if it
    returns them (KafkaApis.answer_frame); only with ``inline``.
    """

    def __init__(self, dispatcher: Dispatcher, host: str = "127.0.0.1", port: int = 0, *,
                 num_network_threads: int = 3,
                 max_request_bytes: int = 104_857_600, queued_max_requests: int = 500,
                 connections_max_idle_ms: int = 600_000, send_buffer_bytes: int = 102_400,
                 receive_buffer_bytes: int = 102_400, listen_backlog: int = 50,
                 max_pending_frames: int = DEFAULT_MAX_PENDING_FRAMES,
                 max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
                 node_id: int = 0,
                 inline: Callable[[RequestContext], bool] | None = None,
                 answer: Callable[[Any], list[Any] | None] | None = None,
                 endpoints: list[Endpoint] | None = None,
                 connection_quotas: ConnectionQuotas | None = None) -> None:
        self.endpoints = endpoints or [Endpoint.plaintext(host, port)]
        self.connection_quotas = connection_quotas or ConnectionQuotas()
        self.host = self.endpoints[0].listener.host
        self._bound: list[tuple[socket.socket, Endpoint]] = []
        self._listen_backlog = listen_backlog
        self._send_buffer = send_buffer_bytes
        self._receive_buffer = receive_buffer_bytes
        self._node_id = node_id
        self.request_channel = RequestChannel(queued_max_requests)
        self.processors = [
            Processor(i, self.request_channel, max_request_bytes=max_request_bytes,
                      idle_ms=connections_max_idle_ms, max_pending_frames=max_pending_frames,
                      max_pending_bytes=max_pending_bytes, node_id=node_id,
                      dispatcher=dispatcher, inline=inline, answer=answer,
                      quotas=self.connection_quotas)
            for i in range(num_network_threads)
        ]
        self._acceptor: Acceptor | None = None
        self._state_lock = threading.Lock()
        self._started = False
        self._stopped = False

    @classmethod
    def from_config(cls, config: Mapping[str, Any], dispatcher: Dispatcher,
                    endpoints: list[Endpoint], **extra: Any) -> SocketServer:
        """Build from broker settings (Kafka's names, as BrokerConfig holds them)."""
        return cls(
            dispatcher, endpoints=endpoints,
            connection_quotas=ConnectionQuotas.from_config(
                config, [endpoint.listener.name for endpoint in endpoints]),
            num_network_threads=int(config["num.network.threads"]),
            max_request_bytes=int(config["socket.request.max.bytes"]),
            queued_max_requests=int(config["queued.max.requests"]),
            connections_max_idle_ms=int(config["connections.max.idle.ms"]),
            send_buffer_bytes=int(config["socket.send.buffer.bytes"]),
            receive_buffer_bytes=int(config["socket.receive.buffer.bytes"]),
            listen_backlog=int(config["socket.listen.backlog.size"]),
            node_id=int(config["node.id"]),
            **extra,
        )

    @property
    def port(self) -> int:
        """The first listener's bound port (after bind/start)."""
        return self.bound_listeners[0].port

    @property
    def bound_listeners(self) -> list[Listener]:
        """Every listener with its bound port (after bind/start), in the order given."""
        if not self._bound:
            raise RuntimeError("the socket server is not bound yet: call bind() or start()")
        return [endpoint.listener for _, endpoint in self._bound]

    @property
    def connection_count(self) -> int:
        return sum(p.connection_count for p in self.processors)

    def bind(self) -> int:
        """Open the listening sockets; returns the first one's bound port."""
        if self._bound:
            return self.port
        bound: list[tuple[socket.socket, Endpoint]] = []
        try:
            for endpoint in self.endpoints:
                sock = self._listen(endpoint.listener)
                listener = replace(endpoint.listener, port=sock.getsockname()[1])
                bound.append((sock, replace(endpoint, listener=listener)))
        except OSError:
            for sock, _ in bound:
                sock.close()
            raise
        self._bound = bound
        return self.port

    def _listen(self, listener: Listener) -> socket.socket:
        host = listener.host
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, listener.port))
            sock.listen(self._listen_backlog)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            raise OSError(exc.errno, f"cannot listen on {host}:{listener.port} "
                                     f"({listener.name}): {exc.strerror}") from None
        return sock

    def start(self) -> None:
        with self._state_lock:
            if self._started:
                return
            if self._stopped:
                raise RuntimeError("a stopped socket server cannot be restarted")
            self.bind()
            for processor in self.processors:
                processor.start()
            self._acceptor = Acceptor(self._bound, self.processors,
                                      send_buffer=self._send_buffer,
                                      receive_buffer=self._receive_buffer, node_id=self._node_id,
                                      quotas=self.connection_quotas)
            self._acceptor.start()
            self._started = True
        for listener in self.bound_listeners:
            log.info("listening on %s (%s, %s)", listener.address, listener.name,
                     listener.security_protocol)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop accepting, close every connection, drop the requests still queued."""
        with self._state_lock:
            if self._stopped:
                return
            self._stopped = True
            started = self._started
        if not started:
            for sock, _ in self._bound:
                sock.close()
            return
        if self._acceptor is not None:
            self._acceptor.stop(timeout)
        for processor in self.processors:
            processor.stop()
        for processor in self.processors:
            processor.join(timeout)
        # Requests still queued belong to closed connections: drop them.
        self.request_channel.drain()
