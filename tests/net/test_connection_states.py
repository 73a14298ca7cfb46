"""ClusterConnectionStates and ExponentialBackoff, with explicit clocks."""

from __future__ import annotations

import socket

import pytest

from samsa.net.backoff import ExponentialBackoff
from samsa.net.connection_states import ClusterConnectionStates, ConnectionState


def test_backoff_grows_exponentially_within_jitter_and_caps():
    b = ExponentialBackoff(50, 2, 1000, jitter=0.2)
    for attempts, base in [(0, 50), (1, 100), (2, 200), (3, 400), (4, 800)]:
        for _ in range(50):
            assert base * 0.8 <= b.backoff(attempts) <= base * 1.2
    for _ in range(50):
        assert b.backoff(10) <= 1000
        assert b.backoff(10) >= 800


def test_backoff_without_room_to_grow_is_constant():
    assert ExponentialBackoff(100, 2, 100).backoff(5) == 100
    assert ExponentialBackoff(500, 2, 100).backoff(0) == 100  # max below initial wins


def test_reconnect_backoff_after_failures_and_reset_on_ready():
    states = ClusterConnectionStates(reconnect_backoff_ms=100, reconnect_backoff_max_ms=10_000)
    now = 1_000_000.0
    assert states.can_connect(1, now)
    assert states.connection_delay(1, now) == 0
    states.connecting(1, now, "127.0.0.1", 9092)
    assert states.is_connecting(1) and not states.can_connect(1, now)
    assert states.connection_delay(1, now) == float("inf")
    backoffs = []
    for _ in range(4):
        states.disconnected(1, now)
        s = states.get(1)
        assert s is not None and s.state is ConnectionState.DISCONNECTED
        backoffs.append(s.reconnect_backoff_ms)
        assert states.is_blacked_out(1, now)
        assert not states.can_connect(1, now + s.reconnect_backoff_ms - 1)
        assert states.can_connect(1, now + s.reconnect_backoff_ms)
        assert 0 < states.connection_delay(1, now + 1) <= s.reconnect_backoff_ms
        now += s.reconnect_backoff_ms
        states.connecting(1, now, "127.0.0.1", 9092)
    for i, got in enumerate(backoffs):
        assert 100 * 2**i * 0.8 <= got <= 100 * 2**i * 1.2
    states.checking_api_versions(1)
    assert states.is_connected(1) and not states.is_ready(1)
    states.ready(1)
    assert states.is_ready(1)
    states.disconnected(1, now)
    s = states.get(1)
    assert s is not None and s.reconnect_backoff_ms <= 120  # failures were reset by ready()


def test_connection_setup_timeout_grows_after_failed_connects():
    states = ClusterConnectionStates(connection_setup_timeout_ms=1000,
                                     connection_setup_timeout_max_ms=8000)
    now = 5000.0
    states.connecting(1, now, "127.0.0.1", 1)
    assert states.nodes_with_connection_setup_timeout(now + 1000 * 1.2 + 1) == [1]
    assert not states.is_connection_setup_timeout(1, now + 1000 * 0.8 - 1)
    timeouts = []
    for _ in range(5):
        states.disconnected(1, now)
        s = states.get(1)
        assert s is not None
        timeouts.append(s.connection_setup_timeout_ms)
        states.connecting(1, now, "127.0.0.1", 1)
    assert 1600 <= timeouts[0] <= 2400
    assert all(t <= 8000 for t in timeouts)
    assert timeouts[-1] >= 8000 * 0.8


def test_addresses_rotate_and_unresolvable_host_raises():
    states = ClusterConnectionStates()
    family, addr = states.connecting(1, 0.0, "localhost", 9092)
    assert addr[1] == 9092 and family in (socket.AF_INET, socket.AF_INET6)
    with pytest.raises(OSError):
        states.connecting(2, 0.0, "no-such-host.invalid", 9092)


def test_remove_forgets_backoff():
    states = ClusterConnectionStates(reconnect_backoff_ms=1000)
    states.connecting(1, 0.0, "127.0.0.1", 1)
    states.disconnected(1, 0.0)
    assert not states.can_connect(1, 1.0)
    states.remove(1)
    assert states.can_connect(1, 1.0)
