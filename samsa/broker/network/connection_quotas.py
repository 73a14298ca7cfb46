"""ConnectionQuotas: how many connections the broker holds, per listener and per client address
(Kafka's SocketServer.ConnectionQuotas; KIP-402 for the broker-wide and per-listener limits).

* ``max.connections`` (broker-wide) and ``listener.name.<listener>.max.connections``: when a
  listener has no slot left, the acceptor stops accepting on it; new connections wait in the
  listen backlog (socket.listen.backlog.size) and are accepted as others close.  Kafka's
  acceptor blocks in ``inc`` instead; leaving the listening socket out of the acceptor's
  selector has the same effect without blocking the other listeners.
* ``max.connections.per.ip`` and ``max.connections.per.ip.overrides``: a connection from an
  address that already has its maximum is accepted and closed at once (the client sees the
  connection closed before any answer).

Counts go up on the acceptor thread and down on the processor threads when a connection
closes; ``dec`` wakes a waiting acceptor through ``on_release``.  Kafka's protected
inter-broker listener and connection creation rates have no counterpart: this is one node.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from samsa.errors import ConfigError

__all__ = ["ConnectionQuotas", "normalized_ip"]

_UNLIMITED = 2**31 - 1


def normalized_ip(host: str) -> str:
    """One spelling per address (``::ffff:127.0.0.1`` and ``127.0.0.1`` stay distinct, as
    Java's InetAddress keeps them)."""
    try:
        return str(ipaddress.ip_address(host.split("%", 1)[0]))
    except ValueError:
        return host


def _resolve(setting: str, host: str) -> list[str]:
    """The addresses of an override's host, as Kafka's InetAddress.getByName (every address a
    name has: a client may come from any of them)."""
    try:
        return [normalized_ip(host)] if _is_ip(host) else sorted(
            {normalized_ip(str(info[4][0])) for info in socket.getaddrinfo(host, None)})
    except OSError as exc:
        raise ConfigError(setting, f"cannot resolve host {host!r}: {exc}; give an IP address "
                          "or a name this machine resolves") from None


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


class ConnectionQuotas:
    """The broker's connection counts and limits.  Thread-safe."""

    def __init__(self, max_connections: int = _UNLIMITED, *,
                 listener_max: Mapping[str, int] | None = None,
                 max_per_ip: int = _UNLIMITED,
                 per_ip_overrides: Mapping[str, int] | None = None,
                 on_release: Callable[[], None] | None = None) -> None:
        self.max_connections = max_connections
        self._listener_max = {name.upper(): count for name, count in (listener_max or {}).items()}
        self.max_per_ip = max_per_ip
        self._ip_max: dict[str, int] = {}
        for host, count in (per_ip_overrides or {}).items():
            for address in _resolve("max.connections.per.ip.overrides", host):
                self._ip_max[address] = count
        self.on_release = on_release
        self._lock = threading.Lock()
        self._total = 0
        self._per_listener: dict[str, int] = {}
        self._per_ip: dict[str, int] = {}
        self._waiting = False  # the acceptor found no slot and waits for a close

    @classmethod
    def from_config(cls, config: Any, listeners: Iterable[str]) -> ConnectionQuotas:
        """From broker settings; ``config.listener_value`` (a BrokerConfig) gives each
        listener's listener.name.<listener>.max.connections, else max.connections."""
        listener_value = getattr(config, "listener_value", None)
        listener_max = {}
        for name in listeners:
            value = (listener_value(name, "max.connections") if listener_value is not None
                     else config["max.connections"])
            listener_max[name] = int(value)
        overrides = getattr(config, "max_connections_per_ip_overrides", None)
        return cls(int(config["max.connections"]), listener_max=listener_max,
                   max_per_ip=int(config["max.connections.per.ip"]),
                   per_ip_overrides=overrides)

    @property
    def total(self) -> int:
        return self._total

    def count(self, ip: str) -> int:
        """Connections counted for one client address."""
        with self._lock:
            return self._per_ip.get(normalized_ip(ip), 0)

    def _listener_limit(self, listener: str) -> int:
        return self._listener_max.get(listener.upper(), self.max_connections)

    def slot_available(self, listener: str) -> bool:
        """May the acceptor take one more connection on ``listener``?  If not, the next ``dec``
        calls ``on_release`` (the check and that promise are made under one lock, so a close
        that happens right after cannot be missed)."""
        with self._lock:
            if (self._total < self.max_connections
                    and self._per_listener.get(listener.upper(), 0)
                    < self._listener_limit(listener)):
                return True
            self._waiting = True
            return False

    def inc(self, listener: str, ip: str) -> int | None:
        """Count a new connection; returns None, or the per-address limit it would pass (the
        connection is then not counted and must be closed)."""
        address = normalized_ip(ip)
        with self._lock:
            count = self._per_ip.get(address, 0)
            limit = self._ip_max.get(address, self.max_per_ip)
            if count >= limit:
                return limit
            self._per_ip[address] = count + 1
            key = listener.upper()
            self._per_listener[key] = self._per_listener.get(key, 0) + 1
            self._total += 1
            return None

    def dec(self, listener: str, ip: str) -> None:
        """A counted connection closed."""
        address = normalized_ip(ip)
        with self._lock:
            count = self._per_ip.get(address, 0)
            if count <= 1:
                self._per_ip.pop(address, None)
            else:
                self._per_ip[address] = count - 1
            key = listener.upper()
            self._per_listener[key] = max(0, self._per_listener.get(key, 0) - 1)
            self._total = max(0, self._total - 1)
            wake, self._waiting = self._waiting, False
        if wake and self.on_release is not None:
            self.on_release()
