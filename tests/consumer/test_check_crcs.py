"""check.crcs against a batch corrupted in the broker's log file.

The embedded broker serves Fetch straight from its segment files (zero-copy, no re-validation,
as Kafka's broker does), so flipping a byte of a stored record hands the consumer a batch whose
CRC-32C no longer matches.  Kafka's consumer (CompletedFetch.maybeEnsureValid) then fails the
poll naming the partition and the batch's offset when check.crcs is true, and delivers the
records unchecked when it is false.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from samsa.broker import Broker
from samsa.consumer import KafkaConsumer, TopicPartition
from samsa.errors import CorruptRecordError

_topic_ids = itertools.count()

GOOD_0 = [f"value-a-{i}".encode() for i in range(5)]  # partition 0, offsets 0-4
CORRUPT_0 = [f"value-b-{i}".encode() for i in range(5)]  # partition 0, offsets 5-9
GOOD_1 = [f"value-c-{i}".encode() for i in range(5)]  # partition 1, offsets 0-4


def corrupt_stored_value(broker: Broker, topic: str, value: bytes, replacement: bytes) -> None:
    """Overwrite ``value`` in partition 0's segment file with ``replacement`` (same length)."""
    logs = sorted((broker.data_dir / f"{topic}-0").glob("*.log"))
    assert logs, f"no segment file for {topic}-0 under {broker.data_dir}"
    hits = []
    for path in logs:
        data = path.read_bytes()
        pos = data.find(value)
        if pos >= 0:
            hits.append((path, pos))
            assert data.find(value, pos + 1) < 0
    assert len(hits) == 1, f"{value!r} stored {len(hits)} times"
    path, pos = hits[0]
    with path.open("r+b") as f:
        f.seek(pos)
        f.write(replacement)


def produce_and_corrupt(broker: Broker, produce: Callable[..., None]) -> str:
    """Partition 0: a good batch then a corrupt one; partition 1: a good batch.

    Each produce call is flushed on its own, so each list is one uncompressed v2 batch and its
    value bytes are stored as given.
    """
    topic = f"crc-{next(_topic_ids)}"
    produce(topic, [{"value": v, "partition": 0} for v in GOOD_0])
    produce(topic, [{"value": v, "partition": 0} for v in CORRUPT_0])
    produce(topic, [{"value": v, "partition": 1} for v in GOOD_1])
    corrupt_stored_value(broker, topic, b"value-b-3", b"VALUE-b-3")
    return topic


def consumer_config(broker: Broker, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest",
            "fetch.max.wait.ms": 100, **extra}


def values(records: list[Any], partition: int) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for r in records if r.partition == partition]


def test_corrupt_batch_fails_the_poll_naming_partition_and_offset(
        broker: Broker, produce: Callable[..., None]) -> None:
    topic = produce_and_corrupt(broker, produce)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with KafkaConsumer(consumer_config(broker)) as c:  # check.crcs defaults to true
        c.assign([tp0, tp1])
        got: list[Any] = []
        with pytest.raises(CorruptRecordError) as info:
            for _ in range(100):
                got.extend(c.poll(0.2))
                if len(got) >= len(GOOD_0) + len(CORRUPT_0) + len(GOOD_1):
                    break  # every record delivered: the corrupt batch went unnoticed
        message = str(info.value)
        assert f"partition {topic}-0: batch at offset 5 " in message, message
        assert "CRC" in message, message
        # The good batch before the corrupt one was handed out first, nothing after it.
        assert values(got, 0) == list(enumerate(GOOD_0))
        assert c.position(tp0) == 5  # the position stays on the corrupt batch
        # Every later poll fails the same way until the application seeks past the batch
        # (Kafka's CompletedFetch keeps its cachedRecordException).
        with pytest.raises(CorruptRecordError, match=f"partition {topic}-0: batch at offset 5 "):
            c.poll(0.2)
        c.seek(tp0, 10)
        for _ in range(100):
            if len(values(got, 1)) >= len(GOOD_1):
                break
            got.extend(c.poll(0.2))
        assert values(got, 0) == list(enumerate(GOOD_0))
        assert values(got, 1) == list(enumerate(GOOD_1))  # none lost, none twice


def test_check_crcs_false_delivers_the_corrupt_batch(
        broker: Broker, produce: Callable[..., None]) -> None:
    topic = produce_and_corrupt(broker, produce)
    with KafkaConsumer(consumer_config(broker, **{"check.crcs": False})) as c:
        c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        got: list[Any] = []
        for _ in range(100):
            got.extend(c.poll(0.2))
            if len(got) >= len(GOOD_0) + len(CORRUPT_0) + len(GOOD_1):
                break
    damaged = list(CORRUPT_0)
    damaged[3] = b"VALUE-b-3"  # no CRC check (Kafka's consumer): the bytes come as stored
    assert values(got, 0) == list(enumerate(GOOD_0 + damaged))
    assert values(got, 1) == list(enumerate(GOOD_1))
