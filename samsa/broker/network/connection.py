"""One client connection: reading size-prefixed frames, and writing a response's chunks.

Reads happen on the owning Processor's thread only.  Small frames are carved out of a
per-connection buffer (one ``recv_into`` may bring several pipelined requests); a frame larger
than that buffer gets a bytearray of its own that the rest of it is received into, so a 1 MiB
produce request is decoded in place (records values are memoryviews of it).  Up to
``EXACT_FRAME_BYTES`` (1 MiB, the clients' default max.request.size) the bytearray has the
frame's exact size at once, as much as a connection may hold in read-ahead anyway; a bigger one
grows with the bytes that really arrived (doubling, up to the size prefix), never from the size
prefix alone: a client that sends a 100 MB size and then trickles (or nothing) holds what it
sent, not 100 MB.  Kafka sizes its NetworkReceive from the prefix and bounds the total with a
MemoryPool (queued.max.request.bytes); growing bounds each connection by its own bytes instead.
Growing costs more CPU than receiving into an exact buffer (about twice as much for a 3 MB
frame), which is why ordinary requests skip it.

Exact frame buffers are reused (``FrameBuffers``): a fresh 1 MiB bytearray costs a page fault
per 4 KiB as it is filled, more CPU than validating and appending the batch it carries, so each
network thread keeps its last few and hands out again one that nothing references any more
(its request is done, no record view of it is left).

Writes may happen on a handler thread (the fast path: a response usually fits the socket buffer
at once) or on the Processor thread (the rest of a response that did not); ``lock`` makes sure
they never race with closing the socket.
"""

from __future__ import annotations

import errno
import os
import socket
import ssl
import struct
import sys
import threading
import time
from collections import deque
from typing import Any

from samsa.broker.log.down_conversion import LazyDownConversionRecords

__all__ = ["Connection", "FrameSizeError", "Outgoing", "TlsConnection"]

READ_BUFFER_BYTES = 64 * 1024
# Frames up to this size get their exact buffer at once; bigger ones grow from
# FIRST_FRAME_BUFFER_BYTES, doubling as their bytes arrive.
EXACT_FRAME_BYTES = 1024 * 1024
FIRST_FRAME_BUFFER_BYTES = 2 * READ_BUFFER_BYTES
_ZEROS = memoryview(bytes(1024 * 1024))  # what a growing frame buffer is extended with
_SIZE = struct.Struct(">i")
_MAX_RECVS_PER_READ = 16
_MAX_IOV = 512  # buffers per sendmsg call (the OS limit, IOV_MAX, is 1024 on Linux)
_BYTES_LIKE = (bytes, bytearray, memoryview)
# sendfile errors that mean "this socket/file pair cannot use sendfile": fall back to read().
_NO_SENDFILE = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSOCK, errno.ESPIPE}
# A TLS socket that cannot go on without the peer (or the kernel) raises these, not EAGAIN.
_TLS_WOULD_BLOCK = (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError)


class FrameSizeError(Exception):
    """A size prefix outside 0..socket.request.max.bytes."""


class FrameBuffers:
    """A network thread's last few exact frame buffers, handed out again once free.

    A buffer is free when nothing but this pool references it: its frame was handled and
    every view of it (the decoded records) is gone.  CPython counts references, so that is
    exact; elsewhere (no ``sys.getrefcount``) nothing is reused.  Each buffer is allocated at a
    power of two and only ever sized between half of that and all of it, which CPython's
    bytearray does without reallocating, so a reused buffer touches no new page.  Holds at
    most ``KEEP`` buffers of at most EXACT_FRAME_BYTES each.
    """

    KEEP = 4
    # References to a free buffer while take() looks at it: its entry's, the loop variable's
    # and getrefcount's argument.
    _FREE_REFS = 3

    __slots__ = ("_buffers",)

    def __init__(self) -> None:
        self._buffers: deque[tuple[int, bytearray]] = deque(maxlen=self.KEEP)  # (capacity, buf)

    def take(self, size: int) -> bytearray:
        """A bytearray of ``size`` bytes (contents undefined) that no one else holds."""
        capacity = 1 << max(size - 1, 1).bit_length()
        if _getrefcount is not None:
            for cap, buf in self._buffers:
                if cap == capacity and _getrefcount(buf) == self._FREE_REFS:
                    if len(buf) > size:
                        del buf[size:]
                    elif len(buf) < size:
                        buf += _ZEROS[:size - len(buf)]
                    return buf
        buf = bytearray(capacity)
        del buf[size:]  # at least half the capacity: the allocation stays
        self._buffers.append((capacity, buf))
        return buf


_getrefcount = getattr(sys, "getrefcount", None)
_thread_buffers = threading.local()


def _frame_buffers() -> FrameBuffers:
    """This (network) thread's FrameBuffers."""
    pool: FrameBuffers | None = getattr(_thread_buffers, "pool", None)
    if pool is None:
        pool = _thread_buffers.pool = FrameBuffers()
    return pool


class Outgoing:
    """A response frame being written: bytes chunks and external chunks (file slices)."""

    __slots__ = ("chunks", "index", "offset")

    def __init__(self, chunks: list[Any]) -> None:
        self.chunks = chunks
        self.index = 0  # first chunk not completely sent
        self.offset = 0  # bytes of chunks[index] already sent

    def write_to(self, sock: socket.socket) -> bool:
        """Send as much as the socket takes; True when everything is sent.

        Raises OSError (other than EAGAIN) when the connection is broken."""
        chunks = self.chunks
        count = len(chunks)
        try:
            while self.index < count:
                chunk = chunks[self.index]
                if isinstance(chunk, _BYTES_LIKE):
                    if not self._send_bytes(sock, chunks, count):
                        return False
                elif not self._send_external(sock, chunk):
                    return False
        except BlockingIOError:
            return False
        return True

    def write_tls(self, sock: socket.socket) -> bool:
        """write_to for a TLS socket: no sendmsg, and file slices are read, never sendfile'd
        (the kernel would send them unencrypted).  An unfinished TLS write is retried with the
        same bytes, as OpenSSL requires."""
        chunks = self.chunks
        try:
            while self.index < len(chunks):
                chunk = chunks[self.index]
                if isinstance(chunk, _BYTES_LIKE):
                    data = memoryview(chunk)[self.offset:] if self.offset else chunk
                    sent = sock.send(data)
                    self._advance(sent)
                    if sent < len(data):
                        return False
                elif type(chunk) is LazyDownConversionRecords:
                    if not self._send_lazy(sock, chunk):
                        return False
                else:
                    data = chunk.read()  # a file slice, copied through user space
                    chunks[self.index] = data[self.offset:] if self.offset else data
                    self.offset = 0
        except _TLS_WOULD_BLOCK:
            return False
        return True

    def _send_bytes(self, sock: socket.socket, chunks: list[Any], count: int) -> bool:
        # Gather the run of consecutive bytes chunks into one sendmsg (writev) call.
        end = self.index + 1
        while end < count and end - self.index < _MAX_IOV and isinstance(chunks[end], _BYTES_LIKE):
            end += 1
        first = chunks[self.index]
        if self.offset:
            first = memoryview(first)[self.offset:]
        if end == self.index + 1:
            wanted = len(first)
            sent = sock.send(first)
        else:
            buffers = [first, *chunks[self.index + 1:end]]
            wanted = sum(len(b) for b in buffers)
            sent = sock.sendmsg(buffers)
        self._advance(sent)
        return sent == wanted

    def _send_external(self, sock: socket.socket, chunk: Any) -> bool:
        if type(chunk) is LazyDownConversionRecords:
            return self._send_lazy(sock, chunk)
        size = len(chunk)
        remaining = size - self.offset
        if remaining <= 0:
            self.index += 1
            self.offset = 0
            return True
        try:
            sent = os.sendfile(sock.fileno(), chunk.fileno(), chunk.position + self.offset,
                               remaining)
        except OSError as exc:
            if isinstance(exc, BlockingIOError) or exc.errno not in _NO_SENDFILE:
                raise
            # This pair cannot sendfile: send the bytes instead (one copy through user space).
            data = chunk.read()
            self.chunks[self.index] = data[self.offset:] if self.offset else data
            self.offset = 0
            return True
        if sent == 0:
            raise OSError(errno.EIO, f"{chunk!r} ended {remaining} bytes early (file truncated?)")
        self.offset += sent
        if self.offset == size:
            self.index += 1
            self.offset = 0
            return True
        return False

    def _send_lazy(self, sock: socket.socket, chunk: LazyDownConversionRecords) -> bool:
        """Fetch v0-3 records: converted a chunk at a time, each chunk sent before the next
        is made (down_conversion.py), so memory stays bounded."""
        while True:
            piece = chunk.pending()
            if not piece:
                self.index += 1
                self.offset = 0
                return True
            sent = sock.send(piece)
            chunk.consume(sent)
            if sent < len(piece):
                return False

    def _advance(self, sent: int) -> None:
        chunks = self.chunks
        while sent:
            left = len(chunks[self.index]) - self.offset
            if sent < left:
                self.offset += sent
                return
            sent -= left
            self.index += 1
            self.offset = 0
        # Skip empty chunks so that a finished response reads as finished.
        while self.index < len(chunks) and isinstance(chunks[self.index], _BYTES_LIKE) \
                and len(chunks[self.index]) == self.offset:
            self.index += 1
            self.offset = 0


class Connection:
    """State of one accepted socket.

    Fields under ``lock`` (touched by the Processor and by handler threads): ``busy`` (a request
    is being handled or its response written), ``pending`` (frames read but not yet handled),
    ``pending_bytes``, ``closed``, ``eof``, ``read_paused``, ``outgoing`` (the rest of a
    response the Processor must write), ``outgoing_answered`` (``outgoing`` holds only
    responses of requests already finished: held ones, see below), ``held`` (responses of
    requests answered inline during a burst of pipelined requests, written together when it
    ends; ``corked`` says whether any are, ``take_held`` takes them) and ``last_active``.
    The read buffer and ``interest`` belong to the Processor thread.
    """

    __slots__ = (
        "_big",
        "_big_have",
        "_big_size",
        "_big_view",
        "_peer_closed",
        "_rbuf",
        "_rend",
        "_rstart",
        "_rview",
        "authenticator",
        "busy",
        "client_host",
        "close_reason",
        "closed",
        "eof",
        "handshake_want",
        "held",
        "id",
        "interest",
        "last_active",
        "listener",
        "lock",
        "outgoing",
        "outgoing_answered",
        "pending",
        "pending_bytes",
        "principal",
        "processor",
        "read_paused",
        "sock",
    )

    tls = False  # TlsConnection: reads and writes go through OpenSSL
    _WOULD_BLOCK: tuple[type[Exception], ...] = (BlockingIOError,)

    def __init__(self, sock: socket.socket, connection_id: str, client_host: str,
                 processor: Any, listener: str = "PLAINTEXT", authenticator: Any = None) -> None:
        self.sock = sock
        self.id = connection_id
        self.client_host = client_host
        self.processor = processor
        self.listener = listener
        # The connection's SASL state (authenticator.py), None on PLAINTEXT and SSL listeners.
        self.authenticator = authenticator
        self.principal = "User:ANONYMOUS"
        self.handshake_want = 0  # TLS handshake under way: the selector events it waits for
        self.lock = threading.Lock()
        self._rbuf = bytearray(READ_BUFFER_BYTES)
        self._rview = memoryview(self._rbuf)
        self._rstart = 0
        self._rend = 0
        self._big: bytearray | None = None
        self._big_view: memoryview | None = None
        self._big_have = 0
        self._big_size = 0  # the size prefix of the frame being received into _big
        self.busy = False
        self.pending: deque[Any] = deque()
        self.pending_bytes = 0
        self.closed = False
        self.eof = False
        self.read_paused = False
        self.outgoing: Outgoing | None = None
        self.last_active = time.monotonic()
        self.interest = 0
        self.close_reason = ""
        self.outgoing_answered = False
        self.held: list[bytes] = []  # processor.py: response batching
        self._peer_closed = False

    def read_frames(self, max_frame_bytes: int) -> list[Any]:
        """Receive what the socket has; return the complete frames (without size prefixes).

        Raises FrameSizeError or OSError; sets peer_closed() when the client closed its side.
        Frames are bytearrays of their own (small ones copied out of the read buffer, large ones
        received in place), so decoded records are views of them, not further copies."""
        frames: list[Any] = []
        sock = self.sock
        # Bounded, so that one busy client cannot starve the processor's other connections.
        for _ in range(_MAX_RECVS_PER_READ):
            big = self._big_view
            if big is not None:
                if self._big_have == len(big):
                    big = self._grow_big()
                want = len(big) - self._big_have
                try:
                    n = sock.recv_into(big[self._big_have:], want)
                except self._WOULD_BLOCK:
                    return frames
                if n == 0:
                    self._peer_closed = True
                    return frames
                self._big_have += n
                if n < want:
                    return frames  # the socket is drained (or nearly); wait for readiness
                if self._big_have < self._big_size:
                    continue  # the buffer is full, the frame is not: grow it on the next turn
                frames.append(self._big)
                big.release()
                self._big = self._big_view = None
                continue
            if self._rstart == self._rend:
                self._rstart = self._rend = 0
            elif len(self._rbuf) - self._rend < READ_BUFFER_BYTES // 4:
                # Move the partial frame to the front to make room.
                length = self._rend - self._rstart
                self._rbuf[:length] = self._rview[self._rstart:self._rend]
                self._rstart, self._rend = 0, length
            want = len(self._rbuf) - self._rend
            try:
                n = sock.recv_into(self._rview[self._rend:], want)
            except self._WOULD_BLOCK:
                return frames
            if n == 0:
                self._peer_closed = True
                return frames
            self._rend += n
            self._carve(frames, max_frame_bytes)
            if n < want:
                return frames
        return frames

    def _carve(self, frames: list[Any], max_frame_bytes: int) -> None:
        rbuf, rview = self._rbuf, self._rview
        start, end = self._rstart, self._rend
        while end - start >= 4:
            size = _SIZE.unpack_from(rbuf, start)[0]
            if size < 0 or size > max_frame_bytes:
                raise FrameSizeError(
                    f"request size {size} is outside 0..{max_frame_bytes} "
                    "(socket.request.max.bytes)")
            body = start + 4
            if body + size <= end:
                frames.append(rbuf[body:body + size])  # its own bytearray: one copy
                start = body + size
                continue
            if size + 4 > len(rbuf):
                # Too big for the buffer: give it its own, received into directly from now on;
                # past EXACT_FRAME_BYTES sized by what arrived, not by the prefix.
                have = end - body
                if size <= EXACT_FRAME_BYTES:
                    big = _frame_buffers().take(size)
                else:
                    big = bytearray(max(FIRST_FRAME_BUFFER_BYTES, 2 * have))
                big[:have] = rview[body:end]
                self._big, self._big_view, self._big_have = big, memoryview(big), have
                self._big_size = size
                start = end = 0
            break
        self._rstart, self._rend = start, end

    def _grow_big(self) -> memoryview:
        """Double the frame's buffer (up to its size prefix): its bytes so far are all there.

        Resized in place (bytearray += zeros is a realloc, which the allocator can do by
        remapping pages) rather than copied into a new bytearray: a fresh buffer per doubling
        costs a page fault per 4 KiB each time, five times the CPU of receiving the frame."""
        assert self._big is not None and self._big_view is not None
        big = self._big
        self._big_view.release()  # a bytearray with a view on it cannot be resized
        more = min(self._big_size, 2 * len(big)) - len(big)
        while more > 0:
            step = min(more, len(_ZEROS))
            big += _ZEROS[:step]
            more -= step
        self._big_view = memoryview(big)
        return self._big_view

    @property
    def corked(self) -> bool:
        """Responses are held, to be written together (processor.py: response batching)."""
        return bool(self.held)

    def take_held(self) -> bytes:
        """The held responses as one write; none are held after."""
        data = b"".join(self.held)
        self.held.clear()
        return data

    def peer_closed(self) -> bool:
        """The client closed its side of the connection (recv returned no bytes)."""
        return self._peer_closed

    def release(self) -> None:
        """Drop buffers (after close)."""
        self.pending.clear()
        self.pending_bytes = 0
        if self._big_view is not None:
            self._big_view.release()
            self._big = self._big_view = None

    def __repr__(self) -> str:
        return f"Connection({self.id})"


class TlsConnection(Connection):
    """A connection of an SSL or SASL_SSL listener: ``sock`` is an ``ssl.SSLSocket``.

    OpenSSL's state is not safe to use from two threads at once, and responses may be written by
    handler threads: reads take ``lock`` too, as writers do.  One recv returns at most one TLS
    record, and OpenSSL may hold decrypted bytes the selector cannot see: reading goes on while
    ``sock.pending()`` says so."""

    __slots__ = ()
    tls = True
    _WOULD_BLOCK = _TLS_WOULD_BLOCK

    def read_frames(self, max_frame_bytes: int) -> list[Any]:
        frames: list[Any] = []
        sock: Any = self.sock
        with self.lock:
            while True:
                frames += Connection.read_frames(self, max_frame_bytes)
                if self._peer_closed or self.closed or not sock.pending():
                    return frames
