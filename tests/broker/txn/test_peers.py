"""Real transactional producers against the samsa broker (in-process): confluent-kafka
(librdkafka), kafka-python and aiokafka commit and abort; a second producer with the same
transactional.id fences the first.  Everything is read back with confluent-kafka's
read_committed consumer: each committed record once, no aborted one."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from samsa.broker import Broker
from tests.support.confluent_reads import read_values

CONFIG = {"num.partitions": 2, "transaction.state.log.num.partitions": 4,
          "offsets.topic.num.partitions": 4}


@pytest.fixture
def broker(make_broker: Callable[..., Broker]) -> Broker:
    return make_broker(CONFIG)


# Three transactions -- committed, aborted, committed -- alternating over two partitions.
TRANSACTIONS = [([f"c1-{i}" for i in range(20)], True),
                ([f"a-{i}" for i in range(20)], False),
                ([f"c2-{i}" for i in range(20)], True)]


def check_read_back(bootstrap: str, topic: str) -> None:
    committed = [v for values, commit in TRANSACTIONS if commit for v in values]
    got = read_values(bootstrap, topic, len(committed), timeout_s=30)
    assert sorted(got) == sorted(committed)  # each committed record once, no aborted one


def test_confluent_kafka_transactions_commit_and_abort(broker: Broker) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                         "transactional.id": "ck-tx", "linger.ms": 5})
    producer.init_transactions(30)

    def produce(topic: str, values: list[str], commit: bool) -> None:
        producer.begin_transaction()
        for i, value in enumerate(values):
            producer.produce(topic, value.encode(), partition=i % 2)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)

    broker.log_manager.create_topic("ck", 2)
    for values, commit in TRANSACTIONS:
        produce("ck", values, commit)
    check_read_back(broker.bootstrap_servers, "ck")
    described = broker.apis.services.transactions.describe("ck-tx")
    assert described.state == "CompleteCommit"


def test_confluent_kafka_second_producer_fences_the_first(broker: Broker) -> None:
    from confluent_kafka import KafkaException, Producer

    broker.log_manager.create_topic("fence", 2)
    conf = {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "zombie",
            "linger.ms": 5}
    zombie = Producer(conf)
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce("fence", b"from-zombie", partition=0)
    zombie.flush(30)
    successor = Producer(conf)
    successor.init_transactions(30)  # aborts the zombie's open transaction
    successor.begin_transaction()
    successor.produce("fence", b"from-successor", partition=1)
    successor.flush(30)
    successor.commit_transaction(30)
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(30)
    error = raised.value.args[0]
    assert error.fatal(), error  # the fencing error is fatal for the zombie
    assert "fenced" in error.str().lower(), error
    assert read_values(broker.bootstrap_servers, "fence", 1, timeout_s=30) == ["from-successor"]


def test_kafka_python_transactions_commit_and_abort(broker: Broker) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers,
                             transactional_id="kp-tx", linger_ms=5)
    try:
        producer.init_transactions()

        def produce(topic: str, values: list[str], commit: bool) -> None:
            producer.begin_transaction()
            for i, value in enumerate(values):
                producer.send(topic, value.encode(), partition=i % 2)
            producer.flush()
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()

        broker.log_manager.create_topic("kp", 2)
        for values, commit in TRANSACTIONS:
            produce("kp", values, commit)
        check_read_back(broker.bootstrap_servers, "kp")
    finally:
        producer.close(timeout=5)


def test_aiokafka_transactions_commit_and_abort(broker: Broker) -> None:
    from aiokafka import AIOKafkaProducer

    broker.log_manager.create_topic("aio", 2)

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers,
                                    transactional_id="aio-tx", linger_ms=5)
        await producer.start()
        try:
            for values, commit in TRANSACTIONS:
                await producer.begin_transaction()
                for i, value in enumerate(values):
                    await producer.send("aio", value.encode(), partition=i % 2)
                await producer.flush()
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(run())
    check_read_back(broker.bootstrap_servers, "aio")
