"""A poisoned batch (its CRC right, one record lying about its key length) sent between good
records: the broker refuses it with INVALID_RECORD naming the record (Produce v8+
record_errors), appends nothing of it, and confluent-kafka, kafka-python and kcat each read
every good record produced before and after it, none missing.

Before the broker parsed every record (Kafka's LogValidator), such a batch was acknowledged
and stored; confluent-kafka then silently stopped delivering the partition at it and samsa's
consumer failed every poll there.
"""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from samsa.broker import Broker
from samsa.records import Compression
from tests.broker.conftest import RawClient
from tests.broker.handmade_batches import handmade_record, wrap_records

INVALID_RECORD = 87
BEFORE, AFTER = 300, 300


def value_of(i: int) -> bytes:
    return b"good-%05d" % i  # no kcat separators


def poisoned_batch(codec: Compression) -> bytes:
    """Ten records of one size, the fourth claiming a 60-byte key with 25 bytes left in it."""
    now = int(time.time() * 1000)
    records = b"".join(handmade_record(i, b"x" * 20, key=b"key",
                                       key_length=60 if i == 3 else None)
                       for i in range(10))
    return wrap_records(records, 10, codec=codec, base_timestamp=now, max_timestamp=now)


def confluent_produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                         "enable.idempotence": True})
    errors: list[object] = []
    for i in range(first, first + count):
        producer.produce(topic, value_of(i), partition=0,
                         on_delivery=lambda err, _msg: err and errors.append(err))
    assert producer.flush(30) == 0
    assert not errors, errors[:3]


def confluent_read(bootstrap: str, topic: str, count: int) -> list[tuple[int, bytes]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "poisoned-reader",
                         "enable.auto.commit": False, "check.crcs": True})
    read: list[tuple[int, bytes]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 60
        while len(read) < count and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                assert msg.error() is None, msg.error()
                read.append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    return read


def kafka_python_read(bootstrap: str, topic: str, count: int) -> list[tuple[int, bytes]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             check_crcs=True)
    read: list[tuple[int, bytes]] = []
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + 60
        while len(read) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                read += [(r.offset, r.value) for r in records]
    finally:
        consumer.close()
    return read


def kcat_read(bootstrap: str, topic: str) -> list[tuple[int, bytes]]:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed (apt-get install kcat)"
    done = subprocess.run([kcat, "-b", bootstrap, "-C", "-t", topic, "-p", "0", "-o",
                           "beginning", "-e", "-X", "check.crcs=true", "-f", "%o|%s\\n"],
                          check=False, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return [(int(offset), value) for offset, value in
            (line.split(b"|", 1) for line in done.stdout.splitlines())]


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.ZSTD], ids=["none", "zstd"])
def test_a_poisoned_batch_is_refused_and_every_good_record_around_it_is_read(
        broker: Broker, codec: Compression) -> None:
    bootstrap, topic = broker.bootstrap_servers, f"poisoned-{codec.name.lower()}"
    client = RawClient(broker.port)
    try:
        assert client.create_topic(topic, 1) == 0
        confluent_produce(bootstrap, topic, 0, BEFORE)
        answer = client.produce(topic, 0, poisoned_batch(codec), version=9)
        problem = "record 3: key length 60 runs past the end of the record (25 bytes left)"
        assert answer.error_code == INVALID_RECORD, answer
        assert [(e.batch_index, e.batch_index_error_message)
                for e in answer.record_errors] == [(3, problem)]
        assert answer.error_message == f"batch at byte 0 of {topic}-0: {problem}"
        assert client.list_offset(topic, 0) == BEFORE  # nothing of it appended
        confluent_produce(bootstrap, topic, BEFORE, AFTER)
    finally:
        client.close()
    expected = [(i, value_of(i)) for i in range(BEFORE + AFTER)]
    assert confluent_read(bootstrap, topic, len(expected)) == expected
    assert kafka_python_read(bootstrap, topic, len(expected)) == expected
    assert kcat_read(bootstrap, topic) == expected
