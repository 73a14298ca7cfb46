"""Parsing bootstrap.servers: "host:port,host:port" (IPv6 as "[::1]:9092") into addresses."""

from __future__ import annotations

from collections.abc import Iterable

from samsa.errors import ConfigError

SETTING = "bootstrap.servers"


def parse_bootstrap_servers(servers: str | Iterable[str]) -> list[tuple[str, int]]:
    """``[(host, port), ...]`` in the given order, duplicates removed.

    Raises ConfigError naming bootstrap.servers for an empty list or a malformed entry.
    Names are not resolved here; each connect attempt resolves them (client.dns.lookup).
    """
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out: list[tuple[str, int]] = []
    for raw in items:
        entry = raw.strip()
        if not entry:
            continue
        out.append(_parse_one(entry))
    if not out:
        raise ConfigError(SETTING, "no servers given; expected 'host:port[,host:port...]'")
    return list(dict.fromkeys(out))


def _parse_one(entry: str) -> tuple[str, int]:
    # Java's ClientUtils accepts "host:port" and "[ipv6]:port"; so do we.
    if entry.startswith("["):
        host, sep, rest = entry[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ConfigError(SETTING, f"invalid address {entry!r}; expected '[ipv6]:port'")
        port_text = rest[1:]
    else:
        host, sep, port_text = entry.rpartition(":")
        if not sep or not host:
            raise ConfigError(SETTING, f"invalid address {entry!r}; expected 'host:port'")
        if ":" in host:
            raise ConfigError(SETTING, f"invalid address {entry!r}; write IPv6 addresses "
                                       "as '[addr]:port'")
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(SETTING, f"invalid port in {entry!r}") from None
    if not 0 < port < 65536:
        raise ConfigError(SETTING, f"port {port} in {entry!r} is out of range 1-65535")
    return host, port
