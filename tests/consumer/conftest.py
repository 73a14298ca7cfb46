"""Fixtures: an in-process samsa broker and a confluent-kafka producer helper."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from samsa.broker import Broker

HOST = "127.0.0.1"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("broker"), port=0, host=HOST,
                config={"num.partitions": 3}) as b:
        b.wait_until_ready()
        yield b


@pytest.fixture
def produce(broker: Broker) -> Callable[..., None]:
    """produce(topic, records, **conf): records are dicts for confluent's Producer.produce."""

    def run(topic: str, records: list[dict[str, Any]], **conf: Any) -> None:
        p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5, **conf})
        for r in records:
            p.produce(topic, **r)
        assert p.flush(30) == 0

    return run
