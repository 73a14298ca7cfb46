"""Connections that stall are closed after connections.max.idle.ms like idle ones, as Kafka's
Selector closes any connection without activity: mid-request (a size prefix, part of a body),
and a client that stops reading its responses (its requests then wait, read and unread, in the
broker).  A samsa broker subprocess, so its descriptors can be read from /proc; the closes are
polled for with a generous deadline, never timed."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable
from typing import Any

import pytest

from samsa.protocol import ApiVersionsRequest, encode_request
from tests.broker.network.hostile import HOST, closed_by_broker, produce_confirmed
from tests.support.process_stats import accepted_sockets, wait_for

IDLE_MS = 500


@pytest.fixture
def broker(broker_process: Callable[..., Any]) -> Any:
    return broker_process({"connections.max.idle.ms": IDLE_MS}).start()


@pytest.mark.parametrize("sent", [
    pytest.param(struct.pack(">i", 1000), id="size-prefix-only"),
    pytest.param(struct.pack(">i", 1000) + b"\0\x12\0\x03", id="part-of-a-body"),
    pytest.param(struct.pack(">i", 50_000_000) + b"\1" * 300_000, id="part-of-a-large-body"),
])
def test_a_request_stalled_midway_is_closed_as_idle(broker: Any, sent: bytes) -> None:
    with socket.create_connection((HOST, broker.port), timeout=30) as sock:
        sock.sendall(sent)
        assert closed_by_broker(sock), (
            f"a connection that stopped mid-request is still open long after "
            f"connections.max.idle.ms={IDLE_MS}")
    produce_confirmed(broker.bootstrap_servers)


def test_a_client_that_stops_reading_its_responses_is_closed_as_idle(broker: Any) -> None:
    pid = broker.proc.pid
    sock = socket.create_connection((HOST, broker.port), timeout=30)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        request = b"".join(encode_request(ApiVersionsRequest(), 3, i, "never-reads")
                           for i in range(20_000))
        sent = 0
        try:
            while sent < len(request):
                sent += sock.send(request[sent:])
        except BlockingIOError:
            pass  # the broker stopped reading too: its responses fill both socket buffers
        wait_for(lambda: bool(accepted_sockets(pid, broker.port)), "the broker to accept")
        wait_for(lambda: not accepted_sockets(pid, broker.port),
                 f"the broker to close a client that stopped reading "
                 f"(connections.max.idle.ms={IDLE_MS})")
    finally:
        sock.close()
    produce_confirmed(broker.bootstrap_servers)
