"""Samsa's transactional producer against the embedded samsa broker (its transaction
coordinator, markers, LSO and aborted-transaction index), read back with confluent-kafka's
read_committed consumer: each committed record once, no aborted one; fencing by a second
producer with the same transactional.id; offsets committed through the transaction."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CKTopicPartition

from samsa import KafkaProducer
from samsa.broker import Broker
from samsa.consumer import OffsetAndMetadata, TopicPartition
from samsa.errors import ProducerFencedError, TransactionAbortedError
from tests.support.confluent_reads import read_raw

from .test_producer_mock import DEADLINE_S, FAST

CONFIG = {"num.partitions": 2, "transaction.state.log.num.partitions": 4, "offsets.topic.num.partitions": 4}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker(data_dir=tmp_path, port=0, config=CONFIG) as running:
        yield running


def producer_for(broker: Broker, txn_id: str, **extra: object) -> KafkaProducer:
    config: dict[str, object] = {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": txn_id,
                                 **FAST}
    config.update({k.replace("_", "."): v for k, v in extra.items()})
    return KafkaProducer(config)


def test_committed_records_are_read_once_and_aborted_ones_never(broker: Broker) -> None:
    broker.log_manager.create_topic("out", 2)
    with producer_for(broker, "samsa-tx") as producer:
        producer.init_transactions(DEADLINE_S)
        committed: list[bytes] = []
        for round_, commit in enumerate([True, False, True, False]):
            producer.begin_transaction()
            values = [b"%d-%d" % (round_, i) for i in range(50)]
            futures = [producer.send("out", v, partition=i % 2) for i, v in enumerate(values)]
            producer.flush(DEADLINE_S)  # the aborted ones are written too: the markers must hide them
            if commit:
                producer.commit_transaction(DEADLINE_S)
                committed += values
            else:
                producer.abort_transaction(DEADLINE_S)
            assert all(f.exception(0) is None for f in futures)
    got = read_raw(broker.bootstrap_servers, "out", len(committed), timeout_s=DEADLINE_S)
    assert sorted(got) == sorted(committed)
    assert broker.apis.services.transactions.describe("samsa-tx").state == "CompleteAbort"


def test_records_never_sent_fail_with_transaction_aborted(broker: Broker) -> None:
    broker.log_manager.create_topic("unsent", 2)
    with producer_for(broker, "unsent-tx", linger_ms=60_000) as producer:
        producer.init_transactions(DEADLINE_S)
        producer.begin_transaction()
        future = producer.send("unsent", b"never", partition=0)
        producer.abort_transaction(DEADLINE_S)
        assert isinstance(future.exception(DEADLINE_S), TransactionAbortedError)
        producer.begin_transaction()
        producer.send("unsent", b"kept", partition=1)
        producer.commit_transaction(DEADLINE_S)
    assert read_raw(broker.bootstrap_servers, "unsent", 1, timeout_s=DEADLINE_S) == [b"kept"]


def test_a_second_producer_with_the_same_id_fences_the_first(broker: Broker) -> None:
    broker.log_manager.create_topic("fence", 2)
    zombie = producer_for(broker, "fenced-tx")
    try:
        zombie.init_transactions(DEADLINE_S)
        zombie.begin_transaction()
        zombie.send("fence", b"zombie", partition=0).get(DEADLINE_S)
        with producer_for(broker, "fenced-tx") as successor:
            # Fences the zombie and aborts its open transaction.
            successor.init_transactions(DEADLINE_S)
            successor.begin_transaction()
            successor.send("fence", b"successor", partition=1)
            successor.commit_transaction(DEADLINE_S)
        with pytest.raises(ProducerFencedError):
            zombie.commit_transaction(DEADLINE_S)
        with pytest.raises(ProducerFencedError):
            zombie.send("fence", b"more", partition=0)
    finally:
        zombie.close(5)
    assert read_raw(broker.bootstrap_servers, "fence", 1, timeout_s=DEADLINE_S) == [b"successor"]


def test_offsets_sent_to_the_transaction_are_committed_with_it(broker: Broker) -> None:
    broker.log_manager.create_topic("src", 2)
    broker.log_manager.create_topic("dst", 2)
    with producer_for(broker, "offsets-tx") as producer:
        producer.init_transactions(DEADLINE_S)
        producer.begin_transaction()
        producer.send("dst", b"v", partition=0)
        producer.send_offsets_to_transaction({TopicPartition("src", 0): OffsetAndMetadata(7, "m")}, "grp",
                                             DEADLINE_S)
        producer.abort_transaction(DEADLINE_S)
        producer.begin_transaction()
        producer.send("dst", b"w", partition=0)
        producer.send_offsets_to_transaction({TopicPartition("src", 1): 11}, "grp", DEADLINE_S)
        producer.commit_transaction(DEADLINE_S)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "grp"})
    try:
        committed = consumer.committed([CKTopicPartition("src", 0), CKTopicPartition("src", 1)], timeout=DEADLINE_S)
    finally:
        consumer.close()
    # The aborted transaction's offset never became visible; the committed one did.
    assert [tp.offset for tp in committed] == [-1001, 11]
