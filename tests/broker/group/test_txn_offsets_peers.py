"""confluent-kafka's consume-transform-produce loop against the samsa broker: the input group's
committed offsets move with committed transactions only (send_offsets_to_transaction is
AddOffsetsToTxn + TxnOffsetCommit; EndTxn's marker lands in ``__consumer_offsets``), and the
output topic read with read_committed holds every input record once."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.broker import Broker

IN, OUT, GROUP = "ctp-in", "ctp-out", "ctp-group"
TIMEOUT = 30.0


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"group.initial.rebalance.delay.ms": 0}


def _consume(consumer: Any, count: int) -> list[Any]:
    got: list[Any] = []
    while len(got) < count:
        msgs = consumer.consume(count - len(got), timeout=TIMEOUT)
        assert msgs, f"only {len(got)} of {count} records arrived"
        for m in msgs:
            assert m.error() is None, m.error()
            got.append(m)
    return got


def _committed(broker: Broker) -> int:
    """The input group's committed offset, as a read_committed consumer of the group sees it
    (OffsetFetch require_stable: librdkafka retries while the marker is not written yet)."""
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": GROUP,
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        (tp,) = c.committed([TopicPartition(IN, 0)], timeout=TIMEOUT)
        assert tp.error is None, tp.error
        return int(tp.offset)
    finally:
        c.close()


def test_send_offsets_to_transaction_commits_with_the_transaction_only(broker: Broker) -> None:
    servers = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": servers})
    for future in admin.create_topics([NewTopic(IN, 1), NewTopic(OUT, 1)]).values():
        future.result(TIMEOUT)
    plain = Producer({"bootstrap.servers": servers})
    for i in range(30):
        plain.produce(IN, value=str(i).encode())
    assert plain.flush(TIMEOUT) == 0

    consumer = Consumer({"bootstrap.servers": servers, "group.id": GROUP,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": servers, "transactional.id": "ctp-tx"})
    try:
        consumer.subscribe([IN])
        producer.init_transactions(TIMEOUT)

        def transform(count: int, commit: bool) -> None:
            records = _consume(consumer, count)
            producer.begin_transaction()
            for m in records:
                producer.produce(OUT, value=b"out-" + m.value())
            producer.send_offsets_to_transaction(
                [TopicPartition(IN, 0, records[-1].offset() + 1)],
                consumer.consumer_group_metadata(), TIMEOUT)
            if commit:
                producer.commit_transaction(TIMEOUT)
            else:
                producer.abort_transaction(TIMEOUT)

        transform(10, commit=True)
        assert _committed(broker) == 10
        transform(10, commit=False)  # records 10..19 consumed, their offsets aborted
        assert _committed(broker) == 10
        # Back to the committed position, as an application does after an abort.
        consumer.seek(TopicPartition(IN, 0, 10))
        transform(20, commit=True)
        assert _committed(broker) == 30
    finally:
        consumer.close()

    reader = Consumer({"bootstrap.servers": servers, "group.id": "ctp-reader",
                       "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    try:
        reader.subscribe([OUT])
        values = [m.value() for m in _consume(reader, 30)]
        assert values == [f"out-{i}".encode() for i in range(30)]
        # Nothing else: the aborted transaction's copies of 10..19 are never delivered.
        assert reader.consume(10, timeout=1.0) == []
    finally:
        reader.close()


def test_a_fenced_producers_offsets_are_refused(broker: Broker) -> None:
    servers = broker.bootstrap_servers
    zombie = Producer({"bootstrap.servers": servers, "transactional.id": "ctp-zombie"})
    zombie.init_transactions(TIMEOUT)
    zombie.begin_transaction()
    successor = Producer({"bootstrap.servers": servers, "transactional.id": "ctp-zombie"})
    successor.init_transactions(TIMEOUT)  # bumps the epoch: the zombie is fenced
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "ctp-fenced"})
    try:
        with pytest.raises(KafkaException) as raised:
            zombie.send_offsets_to_transaction([TopicPartition(IN, 0, 5)],
                                               consumer.consumer_group_metadata(), TIMEOUT)
        assert raised.value.args[0].fatal(), raised.value
    finally:
        consumer.close()
