"""kafka.isolation.level through format("samsa"): a topic holding a committed, an aborted and
a still-open transaction, read in batch and streaming queries.

The first tests write the transactions straight into the broker's log (transactional batches
and the COMMIT/ABORT markers a coordinator writes, through Log.append_as_leader and
Log.append_control_marker); the last one uses confluent-kafka's transactional producer and the
broker's transaction coordinator.  Offsets per partition in the first ones: 0-2 committed (producer 100), 3 its COMMIT marker; 4-6 aborted (producer 200),
7 its ABORT marker; 8-9 plain records; 10-11 an open transaction (producer 300).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from samsa.broker import Broker
from samsa.broker.log import Log
from samsa.records import RecordBatchBuilder

PARTITIONS = 2
COMMITTED, ABORTED, OPEN = 100, 200, 300


def batch(values: list[bytes], producer_id: int = -1, transactional: bool = False) -> bytes:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                 base_sequence=0 if producer_id >= 0 else -1,
                                 is_transactional=transactional)
    for value in values:
        builder.append(1_700_000_000_000, None, value)
    return builder.build()


def end_txn(log: Log, producer_id: int, commit: bool) -> None:
    log.append_control_marker(producer_id=producer_id, producer_epoch=0, commit=commit,
                              coordinator_epoch=0, leader_epoch=log.latest_epoch)


@pytest.fixture
def txn_topic(broker: Broker, new_topic: Callable[..., str]) -> tuple[str, dict[int, Log]]:
    topic = new_topic(PARTITIONS)
    logs = {p: broker.log_manager.logs()[(topic, p)] for p in range(PARTITIONS)}
    for p, log in logs.items():
        def append(data: bytes, log: Log = log) -> None:
            log.append_as_leader(data, leader_epoch=log.latest_epoch)
        append(batch([b"c%d-%d" % (p, i) for i in range(3)], COMMITTED, transactional=True))
        end_txn(log, COMMITTED, commit=True)
        append(batch([b"a%d-%d" % (p, i) for i in range(3)], ABORTED, transactional=True))
        end_txn(log, ABORTED, commit=False)
        append(batch([b"p%d-%d" % (p, i) for i in range(2)]))
        append(batch([b"o%d-%d" % (p, i) for i in range(2)], OPEN, transactional=True))
        assert log.last_stable_offset == 10 and log.high_watermark == 12
    return topic, logs


def rows(df: Any) -> set[tuple[int, int, bytes]]:
    return {(r.partition, r.offset, bytes(r.value)) for r in df.select("partition", "offset", "value").collect()}


def expected(offsets: list[int], prefix: dict[range, bytes]) -> set[tuple[int, int, bytes]]:
    out = set()
    for p in range(PARTITIONS):
        for o in offsets:
            for span, tag in prefix.items():
                if o in span:
                    out.add((p, o, tag + b"%d-%d" % (p, o - span.start)))
    return out


LAYOUT = {range(3): b"c", range(4, 7): b"a", range(8, 10): b"p", range(10, 12): b"o"}


def test_batch_read_committed_skips_aborted_and_open_transactions(
        spark: Any, kafka_options: dict[str, str], txn_topic: tuple[str, dict[int, Log]]) -> None:
    topic, _ = txn_topic
    read = spark.read.format("samsa").options(**kafka_options).option("subscribe", topic)
    # failOnDataLoss stays on: the markers' and aborted records' offsets are no lost data.
    committed = rows(read.option("kafka.isolation.level", "read_committed").load())
    assert committed == expected([0, 1, 2, 8, 9], LAYOUT)
    everything = rows(read.option("kafka.isolation.level", "read_uncommitted").load())
    assert everything == expected([0, 1, 2, 4, 5, 6, 8, 9, 10, 11], LAYOUT)


def test_streaming_read_committed_waits_for_the_open_transaction(
        spark: Any, kafka_options: dict[str, str], txn_topic: tuple[str, dict[int, Log]],
        tmp_path: Path) -> None:
    topic, logs = txn_topic
    options = {**kafka_options, "subscribe": topic, "startingOffsets": "earliest",
               "kafka.isolation.level": "read_committed", "maxRecordsPerPartition": "4"}

    def run() -> set[tuple[int, int, bytes]]:
        query = (spark.readStream.format("samsa").options(**options).load()
                 .select("partition", "offset", "value")
                 .writeStream.format("parquet")
                 .option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .option("path", str(tmp_path / "out")).trigger(availableNow=True).start())
        query.awaitTermination()
        return rows(spark.read.parquet(str(tmp_path / "out")))

    assert run() == expected([0, 1, 2, 8, 9], LAYOUT)
    for log in logs.values():
        end_txn(log, OPEN, commit=True)
    assert run() == expected([0, 1, 2, 8, 9, 10, 11], LAYOUT)


def test_batch_read_committed_of_confluent_kafka_transactions(
        spark: Any, broker: Broker, kafka_options: dict[str, str], new_topic: Callable[..., str]) -> None:
    # The same through the broker's transaction coordinator: librdkafka's transactional
    # producer aborts one transaction, commits one and leaves one open while Spark reads.
    from confluent_kafka import Producer

    topic = new_topic(PARTITIONS)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                         "transactional.id": f"spark-{topic}", "linger.ms": 5})
    producer.init_transactions(30)

    def transaction(tag: bytes) -> None:
        producer.begin_transaction()
        for i in range(10):
            producer.produce(topic, value=tag + b"%d" % i, partition=i % PARTITIONS)
        assert producer.flush(30) == 0  # in the log before the transaction ends

    transaction(b"aborted-")
    producer.abort_transaction(30)
    transaction(b"committed-")
    producer.commit_transaction(30)
    logs = [broker.log_manager.logs()[(topic, p)] for p in range(PARTITIONS)]
    for _ in range(300):  # markers are written after EndTxn is answered
        if all(log.last_stable_offset == log.high_watermark for log in logs):
            break
        time.sleep(0.02)
    transaction(b"open-")
    try:
        got = (spark.read.format("samsa").options(**kafka_options).option("subscribe", topic)
               .option("kafka.isolation.level", "read_committed").load().collect())
        assert sorted(bytes(r.value) for r in got) == sorted(b"committed-%d" % i for i in range(10))
    finally:
        producer.abort_transaction(30)
