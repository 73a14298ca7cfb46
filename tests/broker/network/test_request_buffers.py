"""A request's buffer grows with the bytes that arrived, never from its size prefix alone
(issue 14, "a size prefix allocates"): in a Connection, and in a samsa broker subprocess whose
RSS is read from /proc while 20 connections each announce a 100 MB request."""

from __future__ import annotations

import os
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

import pytest

from samsa.broker.network import connection as connection_module
from samsa.broker.network.connection import Connection, FrameBuffers, FrameSizeError
from tests.broker.network.hostile import HOST, produce_confirmed, still_open
from tests.support.process_stats import accepted_sockets, rss_bytes, tcp_sockets, wait_for

MiB = 1024 * 1024
ANNOUNCED = 100_000_000  # under socket.request.max.bytes' default (104,857,600)


def _connection_pair() -> tuple[Connection, socket.socket]:
    server, client = socket.socketpair()
    server.setblocking(False)
    return Connection(server, "test-conn", "127.0.0.1", processor=None), client


def _read_all(conn: Connection, max_frame: int = ANNOUNCED) -> list[Any]:
    frames: list[Any] = []
    while True:
        got = conn.read_frames(max_frame)
        frames += got
        if not got:
            return frames


def test_a_size_prefix_alone_allocates_only_what_arrived() -> None:
    conn, client = _connection_pair()
    try:
        client.sendall(struct.pack(">i", ANNOUNCED) + b"x" * 4096)
        assert _read_all(conn) == []
        held = len(conn._big or b"")
        assert 4096 <= held <= 256 * 1024, f"a 100 MB size prefix made a {held} byte buffer"
    finally:
        conn.release()
        client.close()
        conn.sock.close()


def test_a_growing_frame_arrives_whole_and_in_order() -> None:
    # 3 MiB of distinct bytes in uneven pieces: every doubling keeps what came before.
    body = os.urandom(3 * MiB + 12345)
    conn, client = _connection_pair()
    client.setblocking(False)
    data = struct.pack(">i", len(body)) + body + struct.pack(">i", 3) + b"abc"
    frames: list[Any] = []
    try:
        sent = 0
        while sent < len(data):
            try:
                sent += client.send(data[sent:sent + 77_777])
            except BlockingIOError:
                pass
            frames += _read_all(conn)
        frames += _read_all(conn)
        assert [bytes(f) for f in frames] == [body, b"abc"]
    finally:
        client.close()
        conn.sock.close()


def _send_frames(conn: Connection, client: socket.socket, bodies: list[bytes]) -> list[Any]:
    client.setblocking(False)
    data = b"".join(struct.pack(">i", len(body)) + body for body in bodies)
    frames: list[Any] = []
    sent = 0
    while sent < len(data):
        try:
            sent += client.send(data[sent:sent + 65_536])
        except BlockingIOError:
            pass
        frames += _read_all(conn)
    return frames + _read_all(conn)


def test_a_big_frame_buffer_is_reused_only_once_nothing_holds_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Frames past the read buffer are received into buffers a network thread keeps for the
    # next ones (page faults cost more than the request); a buffer still referenced -- its
    # request in handling, or a records view of it kept -- is never handed out again.
    monkeypatch.setattr(connection_module, "_thread_buffers", threading.local())  # this test's
    first, second, third = (os.urandom(200_000 + i) for i in range(3))
    conn, client = _connection_pair()
    try:
        (a,) = _send_frames(conn, client, [first])
        view = memoryview(a)[100:200]  # as a decoded records field would be
        kept = {id(a)}  # the pool keeps it alive: its id stays its own
        del a
        (b,) = _send_frames(conn, client, [second])
        assert id(b) not in kept, "a buffer with a view left was handed out again"
        assert bytes(view) == first[100:200] and bytes(b) == second
        kept.add(id(b))
        del view, b
        (c,) = _send_frames(conn, client, [third])
        assert id(c) in kept, "a free buffer is taken again"
        assert bytes(c) == third and len(c) == len(third)
    finally:
        conn.release()
        client.close()
        conn.sock.close()


def test_frame_buffers_fit_each_size_and_keep_a_bounded_number() -> None:
    pool = FrameBuffers()
    held = [pool.take(1000 + i) for i in range(FrameBuffers.KEEP + 2)]
    assert [len(b) for b in held] == [1000 + i for i in range(FrameBuffers.KEEP + 2)]
    assert len(pool._buffers) == FrameBuffers.KEEP
    del held
    reused = {id(b) for _, b in pool._buffers}
    first, second = pool.take(1024), pool.take(600)  # both fit a kept 1 KiB buffer
    assert {id(first), id(second)} <= reused and first is not second
    assert (len(first), len(second)) == (1024, 600)
    assert id(pool.take(5000)) not in reused  # another capacity: a new buffer


def test_an_oversized_prefix_is_refused_before_any_buffer_is_made() -> None:
    conn, client = _connection_pair()
    try:
        client.sendall(struct.pack(">i", 104_857_601) + b"x" * 100)
        with pytest.raises(FrameSizeError, match="socket.request.max.bytes"):
            conn.read_frames(104_857_600)
        assert conn._big is None
    finally:
        client.close()
        conn.sock.close()


def test_twenty_announced_100mb_requests_leave_the_broker_small_and_serving(
        broker_process: Callable[..., Any]) -> None:
    broker = broker_process().start()
    pid = broker.proc.pid
    produce_confirmed(broker.bootstrap_servers)  # warm: topic, log, buffers of a real client
    before = rss_bytes(pid)
    hogs = []
    try:
        for _ in range(20):
            sock = socket.create_connection((HOST, broker.port), timeout=30)
            sock.sendall(struct.pack(">i", ANNOUNCED) + b"\1" * 4096)
            hogs.append(sock)
        hog_ports = {s.getsockname()[1] for s in hogs}

        def broker_read_every_byte() -> bool:
            # The broker's side of each hog has nothing left unread in the kernel.
            mine = {row["inode"] for row in accepted_sockets(pid, broker.port)}
            rows = [row for row in tcp_sockets(broker.port) if row["inode"] in mine]
            return len(rows) >= len(hog_ports) and all(int(r["rx_queue"], 16) == 0 for r in rows)

        wait_for(broker_read_every_byte, "the broker to read the 20 size prefixes")
        produce_confirmed(broker.bootstrap_servers)  # served while the hogs wait
        grown = rss_bytes(pid) - before
        assert all(still_open(s) for s in hogs), "the broker closed a hog: nothing was measured"
        assert grown < 32 * MiB, (f"20 connections that sent a 100 MB size and 4 KiB grew the "
                                  f"broker's RSS by {grown / MiB:.0f} MiB")
    finally:
        for sock in hogs:
            sock.close()
