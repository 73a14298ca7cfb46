"""Listeners: where the broker listens, with which security protocol, and what it advertises.

As Kafka: ``listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093`` names each listener
and its address; ``listener.security.protocol.map`` gives each listener name its security
protocol (by default a listener named for a protocol uses it); ``advertised.listeners`` says,
per listener name, what Metadata tells the clients that came in through it.  Listener names
are case-insensitive and kept upper-case.  Listeners named in ``controller.listener.names``
(Kafka's KRaft sample has a CONTROLLER one) are not served: this one node has no separate
controller endpoint, so a Kafka ``server.properties`` loads as it is.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from samsa.errors import ConfigError

__all__ = [
    "SECURITY_PROTOCOLS",
    "Listener",
    "advertised_listeners",
    "parse_listeners",
    "parse_protocol_map",
    "served_listeners",
]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]")

_LISTENER_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)://(\[[^\]]*\]|[^:/\[\]]*):(\d+)$")


@dataclass(frozen=True, slots=True)
class Listener:
    name: str  # the listener name, upper-case (PLAINTEXT, SASL_SSL, INTERNAL ...)
    host: str  # "" = all interfaces
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def address(self) -> str:
        """``host:port`` with IPv6 hosts bracketed."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_protocol_map(value: str | None) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` -> {NAME: PROTOCOL}; every protocol name maps to itself unless
    the map says otherwise (Kafka's default map lists exactly those)."""
    protocols = {p: p for p in SECURITY_PROTOCOLS}
    for item in (value or "").split(","):
        if not item.strip():
            continue
        name, sep, protocol = item.strip().partition(":")
        if not sep or not name.strip():
            raise ConfigError("listener.security.protocol.map",
                              f"{item.strip()!r} is not of the form LISTENER_NAME:PROTOCOL")
        protocol = protocol.strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError("listener.security.protocol.map",
                              f"{protocol!r} is not a security protocol; use one of "
                              f"{', '.join(SECURITY_PROTOCOLS)}")
        protocols[name.strip().upper()] = protocol
    return protocols


def parse_listeners(setting: str, value: str,
                    protocol_map: Mapping[str, str] | None = None) -> list[Listener]:
    """``NAME://host:port,...`` -> Listeners; ConfigError naming ``setting`` otherwise."""
    protocols = protocol_map if protocol_map is not None else parse_protocol_map(None)
    listeners: list[Listener] = []
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        match = _LISTENER_RE.match(part)
        if match is None:
            raise ConfigError(setting, f"{part!r} is not of the form NAME://host:port")
        name, host, port_text = match.groups()
        name = name.upper()
        port = int(port_text)
        if port > 65535:
            raise ConfigError(setting, f"port {port} is out of range (0-65535)")
        if any(existing.name == name for existing in listeners):
            raise ConfigError(setting, f"listener name {name} is given twice")
        protocol = protocols.get(name)
        if protocol is None:
            raise ConfigError(setting, f"listener {name} has no security protocol: add "
                              f"{name}:<PROTOCOL> to listener.security.protocol.map")
        if host.startswith("["):
            host = host[1:-1]
        listeners.append(Listener(name, host, port, protocol))
    if not listeners:
        raise ConfigError(setting, f"{value!r} names no listener")
    return listeners


def _controller_names(config: Mapping[str, Any]) -> set[str]:
    value = config.get("controller.listener.names") or ""
    return {n.strip().upper() for n in value.split(",") if n.strip()}


def served_listeners(config: Mapping[str, Any], host: str | None = None,
                     port: int | None = None, default_host: str = "127.0.0.1") -> list[Listener]:
    """The listeners to bind: ``listeners`` (else one PLAINTEXT listener on ``default_host``,
    ephemeral port) without the controller ones; ``host``/``port`` given to the Broker replace
    the first listener's."""
    if port is not None and not 0 <= port <= 65535:
        raise ConfigError("port", f"{port} is out of range (0-65535)")
    protocols = parse_protocol_map(config.get("listener.security.protocol.map"))
    value = config.get("listeners")
    if value is None:
        listeners = [Listener("PLAINTEXT", default_host, 0)]
    else:
        controllers = _controller_names(config)
        listeners = [lst for lst in parse_listeners("listeners", value, protocols)
                     if lst.name not in controllers]
        if not listeners:
            raise ConfigError("listeners", f"{value!r} names only controller listeners "
                              "(controller.listener.names); add one for clients")
    first = listeners[0]
    listeners[0] = replace(first, host=first.host if host is None else host,
                           port=first.port if port is None else port)
    return listeners


def advertised_listeners(config: Mapping[str, Any],
                         bound: list[Listener]) -> dict[str, Listener]:
    """Listener name -> the address Metadata advertises to clients of that listener.

    ``bound`` are the served listeners with their bound ports.  A listener absent from
    ``advertised.listeners`` advertises its bound address; a wildcard host becomes this
    machine's host name (as Kafka advertises an empty host); port 0 becomes the bound port."""
    given: dict[str, Listener] = {}
    value = config.get("advertised.listeners")
    if value:
        protocols = parse_protocol_map(config.get("listener.security.protocol.map"))
        given = {lst.name: lst for lst in parse_listeners("advertised.listeners", value, protocols)}
    advertised: dict[str, Listener] = {}
    for listener in bound:
        chosen = given.get(listener.name, listener)
        host = chosen.host
        if host in WILDCARD_HOSTS:
            host = socket.gethostname()
        advertised[listener.name] = replace(listener, host=host,
                                            port=chosen.port or listener.port)
    return advertised
