"""MESSAGE_TOO_LARGE for a batch holding one oversized record and a small one: the split must
make progress (the small record is delivered, the large one fails with the broker's limit)
rather than rebuild the same batch until delivery.timeout.ms."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from samsa import KafkaProducer
from samsa.broker import Broker
from samsa.errors import MessageTooLargeError
from samsa.producer.arrow_batches import ArrowSendError

LIMIT = 1_000


def _topic(broker: Broker) -> str:
    topic = f"too-large-{uuid.uuid4().hex[:8]}"
    broker.log_manager.create_topic(topic, 1, {"max.message.bytes": LIMIT})
    return topic


def _producer(broker: Broker, **extra: object) -> KafkaProducer:
    return KafkaProducer({
        "bootstrap.servers": broker.bootstrap_servers,
        "linger.ms": 500,  # both records land in one batch
        "batch.size": 1_000_000,
        "compression.type": "none",
        "request.timeout.ms": 2_000,
        "delivery.timeout.ms": 2_500,  # fail fast, not hang, if the split loops
        **extra,
    })


@pytest.mark.parametrize("idempotence", [True, False])
def test_split_delivers_small_record_and_fails_oversized_one(broker: Broker, idempotence: bool) -> None:
    topic = _topic(broker)
    producer = _producer(broker, **{"enable.idempotence": idempotence})
    try:
        small = producer.send(topic, b"small", partition=0)
        large = producer.send(topic, b"x" * (LIMIT * 3), partition=0)
        small_md = small.get(timeout=10)
        assert small_md.offset == 0
        with pytest.raises(MessageTooLargeError, match=f"max.message.bytes={LIMIT}"):
            large.get(timeout=10)
        # The partition still takes records afterwards.
        assert producer.send(topic, b"after", partition=0).get(timeout=10).offset == 1
    finally:
        producer.close(timeout=5)


def test_split_of_many_small_records_and_one_large(broker: Broker) -> None:
    topic = _topic(broker)
    producer = _producer(broker)
    try:
        futures = [producer.send(topic, b"s%03d" % i, partition=0) for i in range(50)]
        large = producer.send(topic, b"x" * (LIMIT * 3), partition=0)
        futures += [producer.send(topic, b"t%03d" % i, partition=0) for i in range(50)]
        offsets = [f.get(timeout=10).offset for f in futures]
        assert offsets == list(range(100))
        with pytest.raises(MessageTooLargeError, match=f"max.message.bytes={LIMIT}"):
            large.get(timeout=10)
    finally:
        producer.close(timeout=5)


def test_send_arrow_split_delivers_small_row_and_fails_oversized_one(broker: Broker) -> None:
    topic = _topic(broker)
    producer = _producer(broker)
    try:
        table = pa.table({"value": pa.array([b"small", b"x" * (LIMIT * 3)], pa.binary())})
        with pytest.raises(ArrowSendError) as info:
            producer.send_arrow(topic, table, partition=0).get(timeout=10)
        delivery = info.value.delivery
        assert delivery.failed_rows == [1]
        assert delivery.offsets[0] == 0
        error = delivery.errors[0][1]
        assert isinstance(error, MessageTooLargeError)
        assert f"max.message.bytes={LIMIT}" in str(error)
    finally:
        producer.close(timeout=5)
