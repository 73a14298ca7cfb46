"""BrokerNode: this broker as clients must see it (its advertised address)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BrokerNode"]


@dataclass(slots=True)
class BrokerNode:
    """The one node of this cluster as clients must see it (the *advertised* address).

    Mutable because the port is known only after the listener binds (port 0 in tests).
    """

    node_id: int = 0
    host: str = "127.0.0.1"
    port: int = 9092
    rack: str | None = None
