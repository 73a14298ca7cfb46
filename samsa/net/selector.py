"""Selector: all of the client's connections, driven by one non-blocking ``poll``.

As in Kafka's Java ``Selector`` (org.apache.kafka.common.network), nothing touches a socket outside ``connect``, ``send`` and
``poll``.  ``poll(timeout_ms)`` clears the previous round's results, waits for socket events
(or a ``wakeup()`` from another thread), finishes connects, reads complete frames, writes
queued sends, and leaves the round's results in four attributes:

* ``connected``: node ids whose TCP connect (and, over TLS, handshake) finished;
* ``completed_sends``: NetworkSends whose last byte went to the kernel;
* ``completed_receives``: NetworkReceives (whole response frames), in arrival order per node;
* ``disconnected``: node id -> the exception that closed it (remote close, I/O error, bad
  frame, failed connect, or ``IdleConnectionClosed`` for the LRU idle close).

One deviation from Java, for speed: ``send()`` writes at once when the channel has nothing
queued, instead of waiting for the next poll's writable event; the completion is reported by
the next ``poll``.  Connections idle longer than connections.max.idle.ms are closed, oldest
first (an LRU of last activity).
"""

from __future__ import annotations

import errno
import logging
import os
import selectors
import socket
import ssl
import sys
from collections import OrderedDict
from typing import Any

from samsa.errors import AuthenticationError, IllegalStateError, KafkaConnectionError
from samsa.net.channel import (
    ChannelState,
    KafkaChannel,
    NetworkReceive,
    NetworkSend,
    SslKafkaChannel,
)
from samsa.net.clock import Clock, monotonic_ms

log = logging.getLogger(__name__)

_READ = selectors.EVENT_READ
_WRITE = selectors.EVENT_WRITE
DEFAULT_MAX_RECEIVE_SIZE = 512 * 1024 * 1024
USE_DEFAULT_BUFFER_SIZE = -1
_MAX_WAIT_MS = 2**31 - 1
# A free-threaded CPython running without its GIL (PEP 703; sys._is_gil_enabled from 3.13).
_NO_GIL = not getattr(sys, "_is_gil_enabled", lambda: True)()


class IdleConnectionClosed(KafkaConnectionError):
    """The Selector closed a connection idle longer than connections.max.idle.ms."""

    name = "IDLE_CONNECTION_CLOSED"


class Selector:
    def __init__(self, *, connections_max_idle_ms: float | None = 540000,
                 max_receive_size: int = DEFAULT_MAX_RECEIVE_SIZE,
                 clock: Clock = monotonic_ms) -> None:
        self._sel = selectors.DefaultSelector()
        self._channels: dict[int, KafkaChannel] = {}
        self._clock = clock
        self._max_receive_size = max_receive_size
        self._idle_ms = connections_max_idle_ms if connections_max_idle_ms and \
            connections_max_idle_ms > 0 else None
        self._lru: OrderedDict[int, float] = OrderedDict()
        self._next_idle_check = clock() + (self._idle_ms or 0)

        self.completed_sends: list[NetworkSend] = []
        self.completed_receives: list[NetworkReceive] = []
        self.connected: list[int] = []
        self.disconnected: dict[int, BaseException] = {}
        # Results produced between polls (immediate writes, failures in send/connect), handed
        # out by the next poll.
        self._early_sends: list[NetworkSend] = []
        self._early_connected: list[int] = []
        self._early_disconnected: dict[int, BaseException] = {}
        self._urgent = False

        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._wakeup_pending = False  # a byte is in the pair, not yet read
        self._woken = False  # wakeup() was called since the last poll
        self._blocking = False  # poll() waits in epoll with a timeout
        self._sel.register(self._wake_r, _READ, None)
        self._closed = False

    # -- connections ---------------------------------------------------------------------

    def connect(self, node_id: int, address: Any, family: int = socket.AF_INET, *,
                send_buffer_bytes: int = USE_DEFAULT_BUFFER_SIZE,
                receive_buffer_bytes: int = USE_DEFAULT_BUFFER_SIZE,
                ssl_context: ssl.SSLContext | None = None, server_hostname: str | None = None,
                peer: str | None = None) -> None:
        """Start a non-blocking connect to a resolved ``address``.  Raises OSError if the
        connect fails at once (the caller marks the node disconnected).  With ``ssl_context``
        the connection is reported connected once its TLS handshake is done (``server_hostname``
        for SNI and the host name check; ``peer`` names the broker in errors)."""
        if node_id in self._channels:
            raise IllegalStateError(f"there is already a connection for node {node_id}")
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            if family in (socket.AF_INET, socket.AF_INET6):
                # Batching happens above us (record batches); Nagle would only add latency.
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if send_buffer_bytes != USE_DEFAULT_BUFFER_SIZE:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer_bytes)
            if receive_buffer_bytes != USE_DEFAULT_BUFFER_SIZE:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_bytes)
            err = sock.connect_ex(address)
        except BaseException:
            sock.close()
            raise
        channel: KafkaChannel
        if ssl_context is not None:
            channel = SslKafkaChannel(node_id, sock, address, self._max_receive_size, ssl_context,
                                      server_hostname, peer or str(address))
            if err == 0:
                err = errno.EINPROGRESS  # the writable event starts the handshake
        else:
            channel = KafkaChannel(node_id, sock, address, self._max_receive_size)
        if err == 0:
            channel.state = ChannelState.CONNECTED
            self._early_connected.append(node_id)
            self._set_interest(channel, _READ)
        elif err in _IN_PROGRESS:
            self._set_interest(channel, _WRITE)  # writable = the connect finished (or failed)
        else:
            sock.close()
            raise ConnectionRefusedError(err, f"connect to {address} failed: "
                                              f"{_errno_name(err)}")
        self._channels[node_id] = channel
        self._lru[node_id] = self._clock()

    def send(self, send: NetworkSend) -> None:
        """Queue a send on its destination's channel (writing at once if nothing is queued)."""
        channel = self._channels.get(send.destination)
        if channel is None:
            raise IllegalStateError(
                f"no connection to node {send.destination}: connect (NetworkClient.ready) "
                "before sending")
        if channel.state is ChannelState.CONNECTED and not channel.sends:
            try:
                done = channel.write_now(send)
            except OSError as e:
                self._close_channel(channel)
                self._early_disconnected[channel.id] = e
                return
            if done:
                self._early_sends.append(send)
                if send.urgent:
                    self._urgent = True
                return
            self._set_interest(channel, channel.interest | _WRITE)
            return
        channel.sends.append(send)
        if channel.state is ChannelState.CONNECTED:
            self._set_interest(channel, channel.interest | _WRITE)

    def close(self, node_id: int | None = None) -> None:
        """Close one connection (not reported as disconnected), or with no id, everything."""
        if node_id is not None:
            channel = self._channels.get(node_id)
            if channel is not None:
                self._close_channel(channel)
            self._early_disconnected.pop(node_id, None)
            return
        if self._closed:
            return
        self._closed = True
        for channel in list(self._channels.values()):
            self._close_channel(channel)
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()

    def wakeup(self) -> None:
        """Interrupt a blocked ``poll`` from any thread."""
        self._woken = True
        if self._wakeup_pending or not (self._blocking or _NO_GIL):
            # poll() is not blocked: it sees the flag before it waits (it sets _blocking,
            # then reads _woken; this sets _woken, then reads _blocking: one of them sees the
            # other).  A byte through the pair costs both threads a system call, which gives
            # up the GIL: a Sender that loses it waits for the appending thread to give it
            # back.  Without a GIL this order is not assured: always write.
            return
        self._wakeup_pending = True
        try:
            self._wake_w.send(b"\0")
        except (BlockingIOError, OSError):
            pass  # the pipe is full (a wakeup is already pending) or we are closed

    def mute(self, node_id: int) -> None:
        """Stop reading from a node (responses stay in the socket)."""
        channel = self._channel_or_fail(node_id)
        channel.muted = True
        if channel.state is ChannelState.CONNECTED:
            self._set_interest(channel, channel.interest & ~_READ)

    def unmute(self, node_id: int) -> None:
        channel = self._channel_or_fail(node_id)
        channel.muted = False
        if channel.state is ChannelState.CONNECTED:
            self._set_interest(channel, channel.interest | _READ)

    # -- queries -------------------------------------------------------------------------

    def channel(self, node_id: int) -> KafkaChannel | None:
        return self._channels.get(node_id)

    def is_channel_ready(self, node_id: int) -> bool:
        channel = self._channels.get(node_id)
        return channel is not None and channel.state is ChannelState.CONNECTED

    @property
    def channels(self) -> list[KafkaChannel]:
        return list(self._channels.values())

    # -- the poll --------------------------------------------------------------------------

    def poll(self, timeout_ms: float) -> None:
        if timeout_ms < 0:
            raise ValueError(f"timeout must be >= 0, got {timeout_ms}")
        completed_sends = self.completed_sends = self._early_sends
        completed_receives: list[NetworkReceive] = []
        self.completed_receives = completed_receives
        connected = self.connected = self._early_connected
        disconnected = self.disconnected = self._early_disconnected
        self._early_sends = []
        self._early_connected = []
        self._early_disconnected = {}
        if self._urgent or connected or disconnected:
            timeout_ms = 0
        elif timeout_ms > _MAX_WAIT_MS:
            timeout_ms = _MAX_WAIT_MS  # "forever" (epoll takes no infinity)
        self._urgent = False

        if timeout_ms:
            self._blocking = True
            if self._woken:
                timeout_ms = 0
        events = self._sel.select(timeout_ms / 1000.0)
        self._blocking = False
        self._woken = False  # a later wakeup() is for work the caller looks at after this poll
        now = self._clock()
        lru = self._lru
        for key, mask in events:
            channel = key.data
            if channel is None:
                self._drain_wakeup()
                continue
            node_id = channel.id
            try:
                if channel.state is ChannelState.CONNECTING:
                    channel.finish_connect()
                    if channel.state is ChannelState.HANDSHAKING:
                        assert isinstance(channel, SslKafkaChannel)
                        self._set_interest(channel, 0)  # the SSL socket replaces the plain one
                        channel.start_tls()
                        self._handshake(channel, connected, completed_sends)
                    else:
                        self._connected(channel, connected, completed_sends)
                elif channel.state is ChannelState.HANDSHAKING:
                    assert isinstance(channel, SslKafkaChannel)
                    self._handshake(channel, connected, completed_sends)
                else:
                    if mask & _READ:
                        channel.read(completed_receives)
                    if mask & _WRITE and channel.sends:
                        channel.write(completed_sends)
                        if not channel.sends:
                            self._set_interest(channel, channel.interest & ~_WRITE)
            except Exception as e:  # noqa: BLE001 -- any I/O or framing error ends the connection
                if not isinstance(e, (OSError, AuthenticationError)):
                    log.warning("Unexpected error on connection to node %s; closing it: %r",
                                node_id, e)
                else:
                    log.debug("Connection to node %s lost: %r", node_id, e)
                self._close_channel(channel)
                disconnected[node_id] = e
                continue
            lru[node_id] = now
            lru.move_to_end(node_id)

        if self._idle_ms is not None and now >= self._next_idle_check:
            self._maybe_close_oldest(now)

    def _connected(self, channel: KafkaChannel, connected: list[int],
                   completed_sends: list[NetworkSend]) -> None:
        connected.append(channel.id)
        interest = 0 if channel.muted else _READ
        self._set_interest(channel, interest | (_WRITE if channel.sends else 0))
        if channel.sends:
            channel.write(completed_sends)
            if not channel.sends:
                self._set_interest(channel, interest)

    def _handshake(self, channel: SslKafkaChannel, connected: list[int],
                   completed_sends: list[NetworkSend]) -> None:
        wanted = channel.handshake()
        if wanted:
            self._set_interest(channel, wanted)
        else:
            self._connected(channel, connected, completed_sends)

    def _maybe_close_oldest(self, now: float) -> None:
        assert self._idle_ms is not None
        for node_id, last in self._lru.items():
            if now - last < self._idle_ms:
                self._next_idle_check = last + self._idle_ms
                return
            channel = self._channels[node_id]
            if channel.sends:
                continue  # busy writing; not idle
            log.debug("Closing connection to node %s idle for %.0f ms", node_id, now - last)
            self._close_channel(channel)
            self.disconnected[node_id] = IdleConnectionClosed(
                f"connection to node {node_id} was idle for more than {self._idle_ms:g} ms "
                "(connections.max.idle.ms)")
            break  # one per poll, as Kafka; the next poll checks again
        else:
            self._next_idle_check = now + self._idle_ms

    # -- internals -------------------------------------------------------------------------

    def _drain_wakeup(self) -> None:
        try:
            # wakeup() writes one byte until this runs (its pending flag): one read empties the
            # pair, without a second read that fails with EAGAIN.
            while len(self._wake_r.recv(1024)) == 1024:
                pass
        except (BlockingIOError, OSError):
            pass
        self._wakeup_pending = False

    def _set_interest(self, channel: KafkaChannel, mask: int) -> None:
        if mask == channel.interest:
            return
        if channel.interest == 0:
            self._sel.register(channel.sock, mask, channel)
        elif mask == 0:
            self._sel.unregister(channel.sock)
        else:
            self._sel.modify(channel.sock, mask, channel)
        channel.interest = mask

    def _close_channel(self, channel: KafkaChannel) -> None:
        if channel.interest:
            try:
                self._sel.unregister(channel.sock)
            except (KeyError, ValueError):
                pass
            channel.interest = 0
        channel.close()
        self._channels.pop(channel.id, None)
        self._lru.pop(channel.id, None)

    def _channel_or_fail(self, node_id: int) -> KafkaChannel:
        channel = self._channels.get(node_id)
        if channel is None:
            raise IllegalStateError(f"no connection to node {node_id}")
        return channel

    def __repr__(self) -> str:
        return f"Selector({len(self._channels)} channels)"


def _errno_name(err: int) -> str:
    return f"{errno.errorcode.get(err, err)} ({os.strerror(err)})"


_IN_PROGRESS = frozenset((errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN))
