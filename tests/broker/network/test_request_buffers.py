"""A request's buffer grows with the bytes that arrived, never from its size prefix alone
(issue 14, "a size prefix allocates"): in a Connection, and in a samsa broker subprocess whose
RSS is read from /proc while 20 connections each announce a 100 MB request."""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Callable
from typing import Any

import pytest

from samsa.broker.network.connection import Connection, FrameSizeError
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
