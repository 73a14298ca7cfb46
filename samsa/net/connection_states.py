"""Per-node connection state machine with reconnect backoff and connect timeouts.

States (Java's ConnectionState): DISCONNECTED -> CONNECTING (TCP connect, and TLS handshake,
in progress) -> CHECKING_API_VERSIONS (connected, ApiVersions in flight) -> [AUTHENTICATING
(SASL exchange; a READY connection returns here to re-authenticate, KIP-368)] -> READY.  Any
failure returns to DISCONNECTED.

* Reconnect backoff: after each disconnect the node may not be connected again for
  reconnect.backoff.ms * 2**failures (+/-20% jitter), at most reconnect.backoff.max.ms; a
  successful ApiVersions exchange (READY) resets the failure count.
* Connection setup timeout: a TCP connect may take socket.connection.setup.timeout.ms, doubled
  (with jitter) after each failed connect up to socket.connection.setup.timeout.max.ms.
* Addresses: a host name may resolve to several addresses (client.dns.lookup=use_all_dns_ips);
  each new attempt moves to the next one and re-resolves after the list is used up.
"""

from __future__ import annotations

import enum
import socket
from typing import Any

from samsa.net.backoff import ExponentialBackoff


class ConnectionState(enum.Enum):
    DISCONNECTED = "DISCONNECTED"
    CONNECTING = "CONNECTING"
    CHECKING_API_VERSIONS = "CHECKING_API_VERSIONS"
    AUTHENTICATING = "AUTHENTICATING"
    READY = "READY"

    @property
    def is_connected(self) -> bool:
        return self is ConnectionState.CHECKING_API_VERSIONS or self is ConnectionState.READY \
            or self is ConnectionState.AUTHENTICATING


_DISCONNECTED = ConnectionState.DISCONNECTED
_CONNECTING = ConnectionState.CONNECTING
_CHECKING = ConnectionState.CHECKING_API_VERSIONS
_AUTHENTICATING = ConnectionState.AUTHENTICATING
_READY = ConnectionState.READY

ResolvedAddress = tuple[int, Any]  # (family, sockaddr)


class NodeConnectionState:
    __slots__ = (
        "address_index",
        "addresses",
        "connection_setup_timeout_ms",
        "failed_attempts",
        "failed_connect_attempts",
        "host",
        "last_connect_attempt_ms",
        "last_error",
        "port",
        "reconnect_backoff_ms",
        "state",
    )

    def __init__(self, state: ConnectionState, now: float, reconnect_backoff_ms: float,
                 setup_timeout_ms: float, host: str, port: int) -> None:
        self.state = state
        self.last_connect_attempt_ms = now
        self.failed_attempts = 0
        self.failed_connect_attempts = 0
        self.reconnect_backoff_ms = reconnect_backoff_ms
        self.connection_setup_timeout_ms = setup_timeout_ms
        self.host = host
        self.port = port
        self.addresses: list[ResolvedAddress] = []
        self.address_index = -1
        self.last_error: BaseException | None = None

    def __repr__(self) -> str:
        return (f"NodeConnectionState({self.state.value}, host={self.host}:{self.port}, "
                f"failed_attempts={self.failed_attempts}, "
                f"backoff={self.reconnect_backoff_ms:.0f}ms)")


class ClusterConnectionStates:
    def __init__(self, reconnect_backoff_ms: float = 50, reconnect_backoff_max_ms: float = 1000,
                 connection_setup_timeout_ms: float = 10000,
                 connection_setup_timeout_max_ms: float = 30000,
                 use_all_dns_ips: bool = True) -> None:
        self._reconnect = ExponentialBackoff(reconnect_backoff_ms, 2, reconnect_backoff_max_ms)
        self._setup_timeout = ExponentialBackoff(connection_setup_timeout_ms, 2,
                                                 connection_setup_timeout_max_ms)
        self._use_all_dns_ips = use_all_dns_ips
        self._states: dict[int, NodeConnectionState] = {}
        self.connecting_nodes: set[int] = set()

    # -- queries -------------------------------------------------------------------------

    def get(self, node_id: int) -> NodeConnectionState | None:
        return self._states.get(node_id)

    def state(self, node_id: int) -> ConnectionState:
        s = self._states.get(node_id)
        return s.state if s is not None else _DISCONNECTED

    def can_connect(self, node_id: int, now: float) -> bool:
        s = self._states.get(node_id)
        if s is None:
            return True
        return s.state is _DISCONNECTED and \
            now - s.last_connect_attempt_ms >= s.reconnect_backoff_ms

    def is_blacked_out(self, node_id: int, now: float) -> bool:
        s = self._states.get(node_id)
        return s is not None and s.state is _DISCONNECTED and \
            now - s.last_connect_attempt_ms < s.reconnect_backoff_ms

    def connection_delay(self, node_id: int, now: float) -> float:
        """Ms until a connect may be attempted: the rest of the backoff when disconnected,
        0 when there is no state, infinity while connecting or connected (wait for events)."""
        s = self._states.get(node_id)
        if s is None:
            return 0.0
        if s.state is _DISCONNECTED:
            return max(s.last_connect_attempt_ms + s.reconnect_backoff_ms - now, 0.0)
        return float("inf")

    def is_connecting(self, node_id: int) -> bool:
        s = self._states.get(node_id)
        return s is not None and s.state is _CONNECTING

    def is_preparing_connection(self, node_id: int) -> bool:
        s = self._states.get(node_id)
        return s is not None and (s.state is _CONNECTING or s.state is _CHECKING
                                  or s.state is _AUTHENTICATING)

    def is_ready(self, node_id: int) -> bool:
        s = self._states.get(node_id)
        return s is not None and s.state is _READY

    def is_connected(self, node_id: int) -> bool:
        s = self._states.get(node_id)
        return s is not None and s.state.is_connected

    def is_disconnected(self, node_id: int) -> bool:
        s = self._states.get(node_id)
        return s is not None and s.state is _DISCONNECTED

    def last_connect_attempt_ms(self, node_id: int) -> float:
        s = self._states.get(node_id)
        return s.last_connect_attempt_ms if s is not None else 0.0

    def last_error(self, node_id: int) -> BaseException | None:
        s = self._states.get(node_id)
        return s.last_error if s is not None else None

    def is_connection_setup_timeout(self, node_id: int, now: float) -> bool:
        s = self._states.get(node_id)
        if s is None or s.state is not _CONNECTING:
            return False
        return now - s.last_connect_attempt_ms > s.connection_setup_timeout_ms

    def nodes_with_connection_setup_timeout(self, now: float) -> list[int]:
        return [n for n in self.connecting_nodes if self.is_connection_setup_timeout(n, now)]

    def next_setup_deadline(self) -> float:
        """The earliest time a connecting node times out (infinity if none)."""
        best = float("inf")
        for n in self.connecting_nodes:
            s = self._states[n]
            best = min(best, s.last_connect_attempt_ms + s.connection_setup_timeout_ms)
        return best

    # -- transitions ---------------------------------------------------------------------

    def connecting(self, node_id: int, now: float, host: str, port: int) -> ResolvedAddress:
        """Enter CONNECTING and return the address to try.  Raises OSError (socket.gaierror)
        if the host does not resolve; the caller then calls ``disconnected``."""
        s = self._states.get(node_id)
        if s is None or s.host != host or s.port != port:
            s = NodeConnectionState(_CONNECTING, now, self._reconnect.backoff(0),
                                    self._setup_timeout.backoff(0), host, port)
            self._states[node_id] = s
        s.state = _CONNECTING
        s.last_connect_attempt_ms = now
        self.connecting_nodes.add(node_id)
        # Next resolved address; resolve (again) when the list is used up.
        s.address_index += 1
        if s.address_index >= len(s.addresses):
            s.addresses = _resolve(host, port, self._use_all_dns_ips)
            s.address_index = 0
        return s.addresses[s.address_index]

    def disconnected(self, node_id: int, now: float, error: BaseException | None = None) -> None:
        s = self._states.get(node_id)
        if s is None:
            return
        s.last_connect_attempt_ms = now
        s.reconnect_backoff_ms = self._reconnect.backoff(s.failed_attempts)
        s.failed_attempts += 1
        if s.state is _CONNECTING:
            s.failed_connect_attempts += 1
            s.connection_setup_timeout_ms = self._setup_timeout.backoff(s.failed_connect_attempts)
        else:
            s.failed_connect_attempts = 0
            s.connection_setup_timeout_ms = self._setup_timeout.backoff(0)
            if s.state.is_connected:
                s.addresses = []  # re-resolve: the broker may have moved
                s.address_index = -1
        self.connecting_nodes.discard(node_id)
        s.state = _DISCONNECTED
        if error is not None:
            s.last_error = error

    def checking_api_versions(self, node_id: int) -> None:
        s = self._states[node_id]
        s.state = _CHECKING
        self.connecting_nodes.discard(node_id)

    def authenticating(self, node_id: int) -> None:
        """SASL (re-)authentication under way: no other request may be sent."""
        s = self._states[node_id]
        s.state = _AUTHENTICATING
        self.connecting_nodes.discard(node_id)

    def ready(self, node_id: int) -> None:
        s = self._states[node_id]
        s.state = _READY
        s.failed_attempts = 0
        s.reconnect_backoff_ms = self._reconnect.backoff(0)
        s.failed_connect_attempts = 0
        s.connection_setup_timeout_ms = self._setup_timeout.backoff(0)
        s.last_error = None
        self.connecting_nodes.discard(node_id)

    def remove(self, node_id: int) -> None:
        """Forget a node: unlike ``disconnected``, no backoff applies to the next connect."""
        self._states.pop(node_id, None)
        self.connecting_nodes.discard(node_id)


def _resolve(host: str, port: int, use_all: bool) -> list[ResolvedAddress]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    if not infos:
        raise socket.gaierror(f"{host} did not resolve to any address")
    addresses: list[ResolvedAddress] = [(int(family), sockaddr)
                                        for family, _, _, _, sockaddr in infos]
    # Deduplicate while keeping the resolver's order.
    seen: set[Any] = set()
    unique = [a for a in addresses if not (a[1] in seen or seen.add(a[1]))]  # type: ignore[func-returns-value]
    return unique if use_all else unique[:1]
