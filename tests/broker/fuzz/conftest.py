"""A broker subprocess to attack: default settings except a rebalance delay of 0 (JoinGroup
seeds would otherwise wait for it) and producer ids forgotten after 10 s rather than a day
(mutated batches carry a new producer id every few inputs; Kafka keeps each for
producer.id.expiration.ms, so a long run's memory would be theirs), with the topics the seeds
address."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from tests.broker.conftest import BrokerProcess, RawClient
from tests.broker.fuzz.seeds import DOOMED_TOPIC, PARTITIONS, TOPIC
from tests.broker.fuzz.target import FuzzTarget

FUZZ_BROKER_CONFIG = {"group.initial.rebalance.delay.ms": 0, "producer.id.expiration.ms": 10000,
                      "producer.id.expiration.check.interval.ms": 2000}


def prepare_topics(port: int) -> None:
    client = RawClient(port)
    try:
        for name in (TOPIC, DOOMED_TOPIC):
            assert client.create_topic(name, PARTITIONS) in (0, 36)  # 36: already exists
    finally:
        client.close()


def start_fuzz_target(broker_process: Callable[..., BrokerProcess],
                      monkeypatch: pytest.MonkeyPatch, config: Mapping[str, Any]
                      ) -> Iterator[FuzzTarget]:
    # Inherited by the broker: SIGABRT then dumps every thread's stack (FuzzTarget.dump_stacks).
    monkeypatch.setenv("PYTHONFAULTHANDLER", "1")
    process = broker_process(config).start()
    prepare_topics(process.port)
    target = FuzzTarget(process)
    yield target
    if process.is_running():
        try:
            process.stop()
        except subprocess.TimeoutExpired:
            pytest.fail("the broker did not stop within 30 s of SIGTERM; its threads:\n"
                        + target.dump_stacks())


@pytest.fixture
def fuzz_target(broker_process: Callable[..., BrokerProcess],
                monkeypatch: pytest.MonkeyPatch) -> Iterator[FuzzTarget]:
    yield from start_fuzz_target(broker_process, monkeypatch, FUZZ_BROKER_CONFIG)
