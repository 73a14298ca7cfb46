"""A zombie producer learns of its fencing on produce, not only at its commit: after a second
producer with the same transactional.id initialised, the first one's next records -- to a
partition already in its transaction (Produce, the broker's verification) and to a new one
(AddPartitionsToTxn) -- fail with the fatal fencing error, its commit too, and nothing of its
transaction ever reaches read_committed readers.  confluent-kafka's producer and samsa's, against
a samsa broker process."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from tests.broker.conftest import BrokerProcess
from tests.broker.txn.exactly_once import TIMEOUT, create_topics
from tests.broker.txn.test_crash_mid_transaction import CONFIG, read_committed


@pytest.fixture
def servers(broker_process: Callable[..., BrokerProcess]) -> str:
    servers = broker_process(CONFIG).start().bootstrap_servers
    create_topics(servers, "zombie")
    return servers


def test_confluent_kafka_zombie_is_fenced_on_produce(servers: str) -> None:
    conf = {"bootstrap.servers": servers, "transactional.id": "ck-zombie", "linger.ms": 1}
    zombie = Producer(conf)
    zombie.init_transactions(TIMEOUT)
    zombie.begin_transaction()
    zombie.produce("zombie", b"before-fencing", partition=0)
    assert zombie.flush(TIMEOUT) == 0
    successor = Producer(conf)
    successor.init_transactions(TIMEOUT)  # fences the zombie, aborts its transaction
    zombie.produce("zombie", b"same-partition", partition=0)
    zombie.produce("zombie", b"new-partition", partition=1)
    # librdkafka raises its fatal error from the next poll/flush.
    with pytest.raises(KafkaException) as raised:
        zombie.flush(TIMEOUT)
    error = raised.value.args[0]
    assert error.fatal() and error.code() == KafkaError._FENCED, error
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(TIMEOUT)
    assert raised.value.args[0].fatal(), raised.value
    successor.begin_transaction()
    successor.produce("zombie", b"from-successor", partition=2)
    successor.commit_transaction(TIMEOUT)
    assert read_committed(servers, "zombie", 1) == ["from-successor"]


def test_samsa_zombie_is_fenced_on_produce(servers: str) -> None:
    from samsa import KafkaProducer
    from samsa.errors import InvalidProducerEpochError, ProducerFencedError

    conf = {"bootstrap.servers": servers, "transactional.id": "samsa-zombie", "linger.ms": 1}
    zombie = KafkaProducer(conf)
    try:
        zombie.init_transactions(TIMEOUT)
        zombie.begin_transaction()
        zombie.send("zombie", b"before-fencing", partition=0).get(TIMEOUT)
        with KafkaProducer(conf) as successor:
            successor.init_transactions(TIMEOUT)  # fences the zombie, aborts its transaction
            same = zombie.send("zombie", b"same-partition", partition=0)
            # Produce answers a fenced epoch INVALID_PRODUCER_EPOCH (Kafka's
            # AddPartitionsToTxnManager): abortable, as in Java's TransactionManager; the abort's
            # EndTxn then finds the fencing, which is fatal.
            assert isinstance(same.exception(TIMEOUT), InvalidProducerEpochError), \
                same.exception(0)
            with pytest.raises(InvalidProducerEpochError):
                zombie.commit_transaction(TIMEOUT)
            with pytest.raises(ProducerFencedError):
                zombie.abort_transaction(TIMEOUT)
            with pytest.raises(ProducerFencedError):
                zombie.send("zombie", b"after-fencing", partition=0)
            successor.begin_transaction()
            successor.send("zombie", b"from-successor", partition=2)
            successor.commit_transaction(TIMEOUT)
    finally:
        zombie.close(5)
    assert read_committed(servers, "zombie", 1) == ["from-successor"]


def test_samsa_zombie_is_fenced_adding_a_partition(servers: str) -> None:
    from samsa import KafkaProducer
    from samsa.errors import ProducerFencedError

    conf = {"bootstrap.servers": servers, "transactional.id": "samsa-zombie-2", "linger.ms": 1}
    zombie = KafkaProducer(conf)
    try:
        zombie.init_transactions(TIMEOUT)
        zombie.begin_transaction()
        zombie.send("zombie", b"before-fencing", partition=0).get(TIMEOUT)
        with KafkaProducer(conf) as successor:
            successor.init_transactions(TIMEOUT)
            added = zombie.send("zombie", b"new-partition", partition=1)
            assert isinstance(added.exception(TIMEOUT), ProducerFencedError), added.exception(0)
            with pytest.raises(ProducerFencedError):
                zombie.commit_transaction(TIMEOUT)
    finally:
        zombie.close(5)
    assert read_committed(servers, "zombie", 0) == []
