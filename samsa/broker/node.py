"""BrokerNode: this broker as clients must see it (its advertised address)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["BrokerNode"]


@dataclass(slots=True)
class BrokerNode:
    """The one node of this cluster as clients must see it (the *advertised* address).

    Mutable because the port is known only after the listener binds (port 0 in tests).
    ``host``/``port`` are the first listener's; ``endpoints`` holds every listener's, since a
    client is told the address of the listener it came in through (Kafka's Metadata answers
    with the endpoints of the request's listener).
    """

    node_id: int = 0
    host: str = "127.0.0.1"
    port: int = 9092
    rack: str | None = None
    endpoints: dict[str, tuple[str, int]] = field(default_factory=dict)

    def address(self, listener: str) -> tuple[str, int]:
        """(host, port) advertised to clients of ``listener``."""
        return self.endpoints.get(listener, (self.host, self.port))
