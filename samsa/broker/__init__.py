"""The embedded single-node Kafka-compatible broker.

``Broker`` (server.py) wires the network layer (network/), the request handlers (apis/) and
the log storage (log/).  Names are imported lazily so that ``import samsa.broker.log`` does
not pull in the network layer.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Broker", "BrokerConfig", "RequestContext"]


def __getattr__(name: str) -> Any:
    if name == "Broker":
        from samsa.broker.server import Broker

        return Broker
    if name == "BrokerConfig":
        from samsa.broker.config import BrokerConfig

        return BrokerConfig
    if name == "RequestContext":
        from samsa.broker.request_channel import RequestContext

        return RequestContext
    raise AttributeError(f"module 'samsa.broker' has no attribute {name!r}")
