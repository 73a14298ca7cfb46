"""Fixtures: the shared broker's settings here, and a confluent-kafka producer helper."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer

from samsa.broker import Broker


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"num.partitions": 3}


@pytest.fixture
def produce(broker: Broker) -> Callable[..., None]:
    """produce(topic, records, **conf): records are dicts for confluent's Producer.produce."""

    def run(topic: str, records: list[dict[str, Any]], **conf: Any) -> None:
        p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5, **conf})
        for r in records:
            p.produce(topic, **r)
        assert p.flush(30) == 0

    return run
