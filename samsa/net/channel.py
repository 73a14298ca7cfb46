"""One broker connection: KafkaChannel, with its outgoing NetworkSends and incoming NetworkReceives.

Framing is Kafka's: every request and response is a 4-byte big-endian size, then that many
bytes.  Reads take whatever the socket has (up to ``READ_CHUNK`` per call), cut out every
complete frame and keep the tail; a frame larger than what has arrived gets its own buffer that
the rest of it is read into directly (``recv_into``), so big fetch responses are not copied
twice.  Frames that sit entirely inside one read chunk are handed out as zero-copy memoryviews.

Writes: Kafka's Java KafkaChannel holds one in-progress Send per channel; here the channel keeps a
FIFO of sends with the partial-write offset of the head, and writes as many of them as the socket
accepts with one gather ``sendmsg`` call.  A send may itself be a list of buffers (a Produce
request and the record batches it carries, uncopied), which that call takes too.  A send is
``completed`` once its last byte has been handed to the kernel, which is what
``InFlightRequests.can_send_more`` asks about.

TLS (security.protocol SSL, SASL_SSL): an :class:`SslKafkaChannel` wraps its socket once the TCP
connect is done and runs the handshake without blocking (state HANDSHAKING, the Selector
following what OpenSSL wants next); its own ``read``/``write`` replace the plaintext ones, so the
plaintext path carries no TLS test.  An SSL socket has no ``sendmsg`` (and ``os.sendfile`` must
never see one), and OpenSSL wants a write it refused retried with the same bytes, so sends go
one at a time, a list of buffers joined first; ``recv`` returns at most one TLS record, so a
read goes on until OpenSSL wants more from the socket, which leaves nothing decrypted behind
that ``select`` could not see.
"""

from __future__ import annotations

import enum
import errno
import os
import selectors
import socket
import ssl
import struct
from collections import deque
from typing import Any

from samsa.errors import KafkaConnectionError, SslAuthenticationError

READ_CHUNK = 65536
# Linux IOV_MAX is 1024: sendmsg fails with more buffers.  At most _MAX_GATHER queued sends
# are written by one call, which keeps it cheap to build.
_MAX_IOV = 512
_MAX_GATHER = 64
_SIZE = struct.Struct(">i")


class InvalidReceiveError(KafkaConnectionError):
    """A frame's size prefix was negative or above the channel's limit: the peer is not
    speaking the Kafka protocol (an HTTP or TLS server answers with a huge 'size')."""

    name = "INVALID_RECEIVE"


class ChannelState(enum.Enum):
    CONNECTING = "connecting"
    HANDSHAKING = "handshaking"  # TLS only: TCP is up, the TLS handshake is not done
    CONNECTED = "connected"
    CLOSED = "closed"


class NetworkSend:
    """A whole size-prefixed frame to write to ``destination``: one bytes-like object, or a
    list of them written with one gather call (a Produce request's record batches are not
    copied into the frame: ``encode_request_buffers``).

    ``urgent`` asks the Selector to report the completion promptly (its poll does not block
    while such a send is waiting to be reported); requests without a response set it.
    ``request`` is the owner's handle (NetworkClient puts its ClientRequest there, and takes it
    back when the Selector reports the send completed).
    """

    __slots__ = ("completed", "data", "destination", "request", "size", "urgent")

    def __init__(self, destination: int, data: bytes | bytearray | memoryview | list[Any],
                 request: Any = None, urgent: bool = False) -> None:
        self.destination = destination
        self.data = data
        self.size = sum(map(len, data)) if type(data) is list else len(data)
        self.completed = False
        self.urgent = urgent
        self.request = request

    def __repr__(self) -> str:
        return (f"NetworkSend(to={self.destination}, size={self.size}, "
                f"completed={self.completed})")


class NetworkReceive:
    """A complete frame from ``source``; ``payload`` excludes the size prefix."""

    __slots__ = ("payload", "source")

    def __init__(self, source: int, payload: bytes | bytearray | memoryview) -> None:
        self.source = source
        self.payload = payload

    def __repr__(self) -> str:
        return f"NetworkReceive(from={self.source}, size={len(self.payload)})"


class KafkaChannel:
    """A non-blocking TCP connection to one node, owned by a Selector."""

    __slots__ = (
        "_body",
        "_body_pos",
        "_body_view",
        "_tail",
        "address",
        "bytes_received",
        "bytes_sent",
        "id",
        "interest",
        "max_receive_size",
        "muted",
        "send_offset",
        "sends",
        "sock",
        "state",
    )

    def __init__(self, node_id: int, sock: socket.socket, address: Any,
                 max_receive_size: int) -> None:
        self.id = node_id
        self.sock = sock
        self.address = address
        self.state = ChannelState.CONNECTING
        self.sends: deque[NetworkSend] = deque()
        self.send_offset = 0  # bytes of sends[0] already written
        self.muted = False
        self.interest = 0  # selectors event mask currently registered
        self.max_receive_size = max_receive_size
        self._tail: bytes | bytearray = b""  # bytes of an incomplete frame shorter than 4 + size
        self._body: bytearray | None = None  # buffer of a large frame being read in place
        self._body_view: memoryview | None = None
        self._body_pos = 0
        self.bytes_sent = 0
        self.bytes_received = 0

    # -- state ---------------------------------------------------------------------------

    @property
    def is_connected(self) -> bool:
        return self.state is ChannelState.CONNECTED

    @property
    def has_send(self) -> bool:
        return bool(self.sends)

    @property
    def has_partial_receive(self) -> bool:
        return self._body is not None or bool(self._tail)

    def finish_connect(self) -> None:
        """Complete a non-blocking connect; raises OSError if it failed."""
        err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            raise ConnectionRefusedError(
                err, f"connect to {self.address} failed: {errno.errorcode.get(err, err)} "
                     f"({os.strerror(err)})")
        self.state = ChannelState.CONNECTED

    # -- writing -------------------------------------------------------------------------

    # What a non-blocking send raises when the socket takes nothing now.
    _WOULD_BLOCK: tuple[type[OSError], ...] = (BlockingIOError,)

    def write_now(self, send: NetworkSend) -> bool:
        """Try to write a send when nothing is queued; queue what does not fit.
        Returns True if the whole send went out."""
        data = send.data
        try:
            if isinstance(data, list):
                n = self.sock.sendmsg(data if len(data) <= _MAX_IOV else data[:_MAX_IOV])
            else:
                n = self.sock.send(data)
        except self._WOULD_BLOCK:
            n = 0
        self.bytes_sent += n
        if n == send.size:
            send.completed = True
            return True
        self.sends.append(send)
        self.send_offset = n
        return False

    def write(self, completed: list[NetworkSend]) -> None:
        """Write queued sends until the socket is full; append finished ones to ``completed``."""
        sends = self.sends
        sock = self.sock
        while sends:
            head = sends[0]
            offset = self.send_offset
            data = head.data
            if len(sends) == 1 and not isinstance(data, list):
                try:
                    n = sock.send(data if offset == 0 else memoryview(data)[offset:])
                except BlockingIOError:
                    return
                wanted = head.size - offset
            else:
                buffers = _unsent(data, offset)
                wanted = head.size - offset
                for i in range(1, min(len(sends), _MAX_GATHER)):
                    s = sends[i]
                    if isinstance(s.data, list):
                        buffers += s.data
                    else:
                        buffers.append(s.data)
                    wanted += s.size
                if len(buffers) > _MAX_IOV:
                    del buffers[_MAX_IOV:]
                    wanted = sum(map(len, buffers))
                try:
                    n = sock.sendmsg(buffers)
                except BlockingIOError:
                    return
            self.bytes_sent += n
            # Retire every send the kernel took completely.
            left = n + offset
            while sends and left >= sends[0].size:
                done = sends.popleft()
                left -= done.size
                done.completed = True
                completed.append(done)
            self.send_offset = left
            if n < wanted:
                return  # socket buffer full

    # -- reading -------------------------------------------------------------------------

    def read(self, out: list[NetworkReceive]) -> None:
        """Read what the socket has; append every completed frame to ``out``.

        Raises ConnectionResetError at end of stream and InvalidReceiveError on a bad size.
        """
        sock = self.sock
        while True:
            body = self._body
            if body is not None:
                view = self._body_view
                assert view is not None
                try:
                    n = sock.recv_into(view[self._body_pos:])
                except BlockingIOError:
                    return
                if n == 0:
                    raise ConnectionResetError(f"node {self.id} closed the connection")
                self.bytes_received += n
                self._body_pos += n
                if self._body_pos < len(body):
                    return  # a short read: the socket is drained
                # A view, as small frames are: the records a FetchResponse decodes from it are
                # then slices of it, not copies.
                out.append(NetworkReceive(self.id, view))
                self._body = self._body_view = None
                continue
            try:
                chunk = sock.recv(READ_CHUNK)
            except BlockingIOError:
                return
            if not chunk:
                raise ConnectionResetError(f"node {self.id} closed the connection")
            self.bytes_received += len(chunk)
            tail = self._tail
            if tail:
                data: Any = tail + chunk
                self._tail = b""
            else:
                data = chunk
            self._cut_frames(data, out)
            if len(chunk) < READ_CHUNK:
                return

    def _cut_frames(self, data: bytes | bytearray, out: list[NetworkReceive]) -> None:
        end = len(data)
        pos = 0
        view: memoryview | None = None
        unpack = _SIZE.unpack_from
        while end - pos >= 4:
            (size,) = unpack(data, pos)
            if size < 0 or size > self.max_receive_size:
                raise InvalidReceiveError(
                    f"invalid frame size {size} from node {self.id} (limit "
                    f"{self.max_receive_size}); is {self.address} a Kafka broker's plaintext "
                    f"listener?")
            start = pos + 4
            stop = start + size
            if stop > end:
                # A frame larger than what has arrived: read the rest straight into its buffer.
                body = bytearray(size)
                have = end - start
                body[:have] = data[start:end]
                self._body = body
                self._body_view = memoryview(body)
                self._body_pos = have
                return
            if view is None:
                view = memoryview(data)
            out.append(NetworkReceive(self.id, view[start:stop]))
            pos = stop
        if pos < end:
            self._tail = data[pos:]

    def close(self) -> None:
        self.state = ChannelState.CLOSED
        self.sends.clear()
        self._body = self._body_view = None
        self._tail = b""
        try:
            self.sock.close()
        except OSError:
            pass

    def __repr__(self) -> str:
        return (f"KafkaChannel(node={self.id}, {self.address}, {self.state.value}, "
                f"queued_sends={len(self.sends)}, muted={self.muted})")


class SslKafkaChannel(KafkaChannel):
    """A KafkaChannel over TLS (Java's SslTransportLayer): ``finish_connect`` leaves it
    HANDSHAKING, the Selector calls ``start_tls`` then ``handshake`` until it returns 0.

    TLS failures while handshaking, and a TLS alert before the broker sent anything (TLS 1.3
    servers check our certificate after our side of the handshake is done), raise
    SslAuthenticationError naming ``peer`` and the check that failed."""

    __slots__ = ("_context", "_server_hostname", "peer")
    _WOULD_BLOCK = (ssl.SSLWantWriteError, ssl.SSLWantReadError)

    def __init__(self, node_id: int, sock: socket.socket, address: Any, max_receive_size: int,
                 context: ssl.SSLContext, server_hostname: str | None, peer: str) -> None:
        super().__init__(node_id, sock, address, max_receive_size)
        self._context = context
        self._server_hostname = server_hostname
        self.peer = peer

    def finish_connect(self) -> None:
        super().finish_connect()
        self.state = ChannelState.HANDSHAKING

    def start_tls(self) -> None:
        """Wrap the connected socket (the Selector has unregistered it: the wrap detaches the
        plain socket object, whose descriptor the SSL socket takes over)."""
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self._server_hostname,
                                              do_handshake_on_connect=False)

    def handshake(self) -> int:
        """One step of the handshake: the selector events it waits for, 0 once done."""
        sock: Any = self.sock
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            return selectors.EVENT_READ
        except ssl.SSLWantWriteError:
            return selectors.EVENT_WRITE
        except ssl.SSLCertVerificationError as e:
            raise SslAuthenticationError(
                f"TLS handshake with {self.peer} failed: certificate verify failed: "
                f"{e.verify_message or e.reason}") from None
        except (ssl.SSLEOFError, ConnectionError) as e:
            # The broker hung up mid-handshake: a plaintext listener does that, so may a
            # restarting broker; a connection error, retried.
            raise KafkaConnectionError(
                f"TLS handshake with {self.peer} failed: the broker closed the connection ({e}); "
                "is it a TLS (SSL or SASL_SSL) listener?") from None
        except ssl.SSLError as e:
            raise SslAuthenticationError(f"TLS handshake with {self.peer} failed: {_ssl_reason(e)}") from None
        self.state = ChannelState.CONNECTED
        return 0

    def write_now(self, send: NetworkSend) -> bool:
        _flatten(send)
        return super().write_now(send)

    def write(self, completed: list[NetworkSend]) -> None:
        sends = self.sends
        sock = self.sock
        while sends:
            head = sends[0]
            offset = self.send_offset
            flat = _flatten(head)
            data = flat if offset == 0 else memoryview(flat)[offset:]
            try:
                # OpenSSL takes all of it or raises (no partial writes); a refused write is
                # retried with the same bytes next time the socket is writable.
                n = sock.send(data)
            except (ssl.SSLWantWriteError, ssl.SSLWantReadError):
                return
            self.bytes_sent += n
            if offset + n < head.size:
                self.send_offset = offset + n
                continue
            sends.popleft()
            self.send_offset = 0
            head.completed = True
            completed.append(head)

    def read(self, out: list[NetworkReceive]) -> None:
        try:
            self._read_records(out)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return
        except ssl.SSLError as e:
            if isinstance(e, ssl.SSLEOFError) or self.bytes_received:
                raise
            # An alert before any answer: the broker refused us after our side of the
            # handshake (TLS 1.3 servers check client certificates then).
            raise SslAuthenticationError(
                f"TLS connection to {self.peer} failed: {_ssl_reason(e)}; the broker refused the "
                "connection (a client certificate it does not trust, or none where it requires one?)"
            ) from None

    def _read_records(self, out: list[NetworkReceive]) -> None:
        # Until OpenSSL wants more bytes (SSLWantReadError ends the loop): a short read only
        # means one TLS record was returned, not that the socket is drained.
        sock = self.sock
        while True:
            body = self._body
            if body is not None:
                view = self._body_view
                assert view is not None
                n = sock.recv_into(view[self._body_pos:])
                if n == 0:
                    raise ConnectionResetError(f"node {self.id} closed the connection")
                self.bytes_received += n
                self._body_pos += n
                if self._body_pos == len(body):
                    out.append(NetworkReceive(self.id, view))  # a view, as KafkaChannel.read
                    self._body = self._body_view = None
                continue
            chunk = sock.recv(READ_CHUNK)
            if not chunk:
                raise ConnectionResetError(f"node {self.id} closed the connection")
            self.bytes_received += len(chunk)
            tail = self._tail
            if tail:
                data: Any = tail + chunk
                self._tail = b""
            else:
                data = chunk
            self._cut_frames(data, out)


def _flatten(send: NetworkSend) -> bytes | bytearray | memoryview:
    """One buffer for a TLS socket, which has no sendmsg."""
    data = send.data
    if isinstance(data, list):
        data = send.data = b"".join(data)
    return data


def _unsent(data: Any, offset: int) -> list[Any]:
    """The buffers of a send's data from byte ``offset`` on (a list, for a gather write)."""
    if not isinstance(data, list):
        return [memoryview(data)[offset:] if offset else data]
    if not offset:
        return list(data)
    for i, chunk in enumerate(data):
        size = len(chunk)
        if offset < size:
            return [memoryview(chunk)[offset:], *data[i + 1:]]
        offset -= size
    return []


def _ssl_reason(error: ssl.SSLError) -> str:
    """OpenSSL's reason in words: TLSV13_ALERT_CERTIFICATE_REQUIRED -> tlsv13 alert
    certificate required."""
    reason = error.reason
    return reason.lower().replace("_", " ") if reason else str(error)
