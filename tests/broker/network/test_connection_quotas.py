"""max.connections (broker-wide and per listener) and max.connections.per.ip (+ overrides)
enforced as Kafka's ConnectionQuotas does (KIP-402): past the broker or listener limit the
broker stops accepting and new connections wait in the listen backlog; past an address's limit
a new connection is closed at once; counts go down as connections close.  The subprocess tests
count the sockets the broker holds from /proc."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import pytest

from samsa.broker.config import BrokerConfig
from samsa.broker.network.connection_quotas import ConnectionQuotas
from samsa.errors import ConfigError
from samsa.protocol import ApiVersionsRequest, decode_response, encode_request
from tests.broker.conftest import free_port
from tests.broker.network.hostile import HOST, produce_confirmed
from tests.support.process_stats import accepted_sockets, wait_for

# --- ConnectionQuotas ----------------------------------------------------------------------------


def test_the_broker_wide_limit_frees_a_slot_when_a_connection_closes() -> None:
    wakeups: list[int] = []
    quotas = ConnectionQuotas(2, on_release=lambda: wakeups.append(1))
    for port in (1, 2):
        assert quotas.slot_available("PLAINTEXT")
        assert quotas.inc("PLAINTEXT", f"10.0.0.{port}") is None
    assert not quotas.slot_available("PLAINTEXT")
    quotas.dec("PLAINTEXT", "10.0.0.1")
    assert wakeups == [1], "the acceptor waiting for a slot was not woken"
    assert quotas.slot_available("PLAINTEXT")
    quotas.dec("PLAINTEXT", "10.0.0.2")
    assert wakeups == [1], "woken though it was not waiting"
    assert quotas.total == 0


def test_a_listener_limit_leaves_other_listeners_alone() -> None:
    quotas = ConnectionQuotas(10, listener_max={"INTERNAL": 1})
    assert quotas.inc("INTERNAL", "10.0.0.1") is None
    assert not quotas.slot_available("INTERNAL")
    assert quotas.slot_available("PLAINTEXT")


def test_per_address_limits_and_overrides() -> None:
    quotas = ConnectionQuotas(max_per_ip=1, per_ip_overrides={"localhost": 3, "::1": 0})
    assert quotas.inc("PLAINTEXT", "10.0.0.1") is None
    assert quotas.inc("PLAINTEXT", "10.0.0.1") == 1
    assert [quotas.inc("PLAINTEXT", "127.0.0.1") for _ in range(4)] == [None, None, None, 3]
    assert quotas.inc("PLAINTEXT", "0:0:0:0:0:0:0:1") == 0  # one address, two spellings
    assert quotas.count("127.0.0.1") == 3
    quotas.dec("PLAINTEXT", "127.0.0.1")
    assert quotas.inc("PLAINTEXT", "127.0.0.1") is None


def test_an_override_host_that_does_not_resolve_names_itself() -> None:
    with pytest.raises(ConfigError, match="no-such-host.invalid"):
        ConnectionQuotas(per_ip_overrides={"no-such-host.invalid": 5})


# --- the settings ------------------------------------------------------------------------------


def test_connection_settings_have_kafkas_names_and_defaults() -> None:
    config = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
                           "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,"
                                                             "INTERNAL:PLAINTEXT",
                           "max.connections": "60",
                           "listener.name.internal.max.connections": "5",
                           "max.connections.per.ip.overrides": " hostName:100 , 127.0.0.1:200,"
                                                               "::1:7"})
    assert BrokerConfig()["max.connections.per.ip"] == 2**31 - 1
    assert config.listener_value("INTERNAL", "max.connections") == 5
    assert config.listener_value("PLAINTEXT", "max.connections") == 60
    assert config.max_connections_per_ip_overrides == {"hostName": 100, "127.0.0.1": 200,
                                                       "::1": 7}


@pytest.mark.parametrize(("settings", "message"), [
    ({"max.connections.per.ip": 0}, "only if max.connections.per.ip.overrides"),
    ({"max.connections.per.ip.overrides": "127.0.0.1"}, "not host:count"),
    ({"max.connections.per.ip.overrides": "127.0.0.1:many"}, "not a whole number"),
    ({"max.connections.per.ip.overrides": "bad/host:3"}, "invalid address"),
    ({"max.connections.per.ip.overrides": "127.0.0.1:-1"}, "negative"),
    ({"max.connections": -1}, "max.connections"),
])
def test_bad_connection_settings_are_refused(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig(settings)


def test_zero_per_address_with_overrides_is_allowed() -> None:
    BrokerConfig({"max.connections.per.ip": 0, "max.connections.per.ip.overrides": "10.1.1.1:2"})


# --- a samsa broker subprocess ----------------------------------------------------------------------


def _connect_nowait(port: int, source: str = HOST) -> socket.socket:
    sock = socket.socket()
    sock.bind((source, 0))
    sock.setblocking(False)
    sock.connect_ex((HOST, port))
    return sock


def _served(port: int, source: str = HOST) -> socket.socket | None:
    """A connection from ``source`` that the broker answers (ApiVersions), or None if the
    broker closed it."""
    sock = socket.create_connection((HOST, port), timeout=30, source_address=(source, 0))
    try:
        sock.sendall(encode_request(ApiVersionsRequest(), 0, 7, "quota-test"))
        head = sock.recv(4, socket.MSG_WAITALL)
        if len(head) < 4:
            sock.close()
            return None
        frame = sock.recv(int.from_bytes(head, "big"), socket.MSG_WAITALL)
        assert decode_response(ApiVersionsRequest.api.key, 0, frame)[0] == 7
        return sock
    except ConnectionResetError:
        sock.close()
        return None


def test_max_connections_stops_accepting_and_counts_down(
        broker_process: Callable[..., Any]) -> None:
    # A backlog that holds the 90 waiting connections: past it the kernel drops handshakes and
    # completes them by SYN-ACK retransmissions (1, 2, 4, 8, 16 s apart), which on a loaded
    # machine outlasted the final wait.
    broker = broker_process({"max.connections": 60, "socket.listen.backlog.size": 200}).start()
    pid, port = broker.proc.pid, broker.port
    clients = [_connect_nowait(port) for _ in range(150)]
    try:
        wait_for(lambda: len(accepted_sockets(pid, port)) >= 60, "60 accepted connections")
        time.sleep(0.5)  # room for the broker to (wrongly) go on accepting
        held = len(accepted_sockets(pid, port))
        assert held <= 60, f"max.connections=60, yet the broker holds {held} connections"
        for sock in clients[:120]:  # 30 stay open: the broker must make room for others
            sock.close()
        produce_confirmed(broker.bootstrap_servers)
    finally:
        for sock in clients:
            sock.close()
    wait_for(lambda: not accepted_sockets(pid, port), "the broker to close every connection")


def test_max_connections_per_ip_closes_the_connection_past_it(
        broker_process: Callable[..., Any]) -> None:
    broker = broker_process({"max.connections.per.ip": 2,
                             "max.connections.per.ip.overrides": "127.0.0.2:4"}).start()
    pid, port = broker.proc.pid, broker.port
    # 127.0.0.1 has the default of 2; 127.0.0.2 (loopback too) its override of 4.
    first = [_served(port) for _ in range(2)]
    assert all(first), "a connection under max.connections.per.ip was refused"
    refused = _served(port)
    assert refused is None, "a third connection from 127.0.0.1 was served (limit 2)"
    second = [_served(port, "127.0.0.2") for _ in range(4)]
    assert all(second), "a connection under its max.connections.per.ip.overrides was refused"
    assert _served(port, "127.0.0.2") is None, "a fifth connection from 127.0.0.2 was served"
    assert len(accepted_sockets(pid, port)) == 6
    sock = first[0]
    assert sock is not None
    sock.close()
    # Once the broker has closed its side, 127.0.0.1 has a free slot again.
    wait_for(lambda: len(accepted_sockets(pid, port)) == 5, "the closed connection to count out")
    again = _served(port)
    assert again is not None, "a slot freed by a closed connection was not given back"
    for other in [again, *first[1:], *second]:
        if other is not None:
            other.close()


def test_a_listener_limit_holds_that_listener_only(broker_process: Callable[..., Any]) -> None:
    internal = free_port()
    broker = broker_process()
    broker.config = {
        "listeners": f"PLAINTEXT://{HOST}:{broker.port},INTERNAL://{HOST}:{internal}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "listener.name.internal.max.connections": 2}
    broker.start()
    pid = broker.proc.pid
    held = [_connect_nowait(internal) for _ in range(5)]
    try:
        wait_for(lambda: len(accepted_sockets(pid, internal)) >= 2, "2 INTERNAL connections")
        time.sleep(0.5)  # room for the broker to (wrongly) go on accepting
        assert len(accepted_sockets(pid, internal)) == 2
        produce_confirmed(broker.bootstrap_servers)  # PLAINTEXT is not limited
        before = {row["inode"] for row in accepted_sockets(pid, internal)}
        held[0].close()
        wait_for(lambda: {row["inode"] for row in accepted_sockets(pid, internal)} - before != set(),
                 "a waiting INTERNAL connection to take the freed slot")
        assert len(accepted_sockets(pid, internal)) <= 2
    finally:
        for sock in held:
            sock.close()
