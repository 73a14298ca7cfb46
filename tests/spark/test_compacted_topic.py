"""The Spark source reads a compacted topic (issue 16): offset gaps left by the log cleaner are
not lost data.

A two-partition topic gets 3,000 updates per partition over 100 keys in a pseudo-random order
(every tenth key ends in tombstones) with 4 KiB segments; once the cleaner's checkpoint of each partition reaches its
active segment, a batch read and an availableNow streaming query (maxOffsetsPerTrigger small, so
micro-batch ranges start and end inside gaps), both with the default failOnDataLoss=true, return
exactly the records the cleaner kept -- the latest value of every key, tombstones as null
values -- in offset order.  With log.cleaner.enable=false the test fails waiting for the cleaner.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.admin.client import AdminClient
from samsa.admin.types import ConfigResource, NewTopic
from samsa.broker import Broker
from samsa.producer.producer import KafkaProducer

PARTITIONS = 2
KEYS = 100
UPDATES = 3_000  # per partition
TOPIC = "compacted-changelog"

Row = tuple[int, int, bytes, bytes | None]  # partition, offset, key, value


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"num.partitions": 4, "log.cleaner.backoff.ms": 50}


def produce(bootstrap: str) -> list[Row]:
    written: list[Row] = []
    with KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                        "enable.idempotence": True, "batch.size": 4096}) as producer:
        futures = []
        pick = random.Random(16)  # keys in a fixed pseudo-random order: gaps everywhere
        for i in range(UPDATES):
            for p in range(PARTITIONS):
                k = pick.randrange(KEYS)
                key = b"key-%03d" % k
                deleted = k % 10 == 7 and i >= UPDATES * 6 // 10
                value = None if deleted else b"v-%d-%d" % (p, i)
                futures.append((p, key, value, producer.send(TOPIC, value, key, partition=p)))
        producer.flush()
        for p, key, value, future in futures:
            written.append((p, future.get(30).offset, key, value))
    return sorted(written)


def cleaned_view(written: list[Row], cleaned_to: dict[int, int]) -> list[Row]:
    """The latest record of each key below each partition's checkpoint, all records above."""
    last: dict[tuple[int, bytes], int] = {}
    for p, offset, key, _ in written:
        if offset < cleaned_to[p]:
            last[(p, key)] = offset
    return [(p, offset, key, value) for p, offset, key, value in written
            if offset >= cleaned_to[p] or last[(p, key)] == offset]


@pytest.fixture(scope="module")
def compacted(broker: Broker) -> Iterator[list[Row]]:
    """The topic written and cleaned; yields what a reader must see."""
    configs = {"cleanup.policy": "compact", "segment.bytes": "4096",
               "min.cleanable.dirty.ratio": "1.0"}  # nothing cleaned while writing
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, configs)])
        written = produce(broker.bootstrap_servers)
        logs = broker.log_manager.logs()
        active = {p: logs[(TOPIC, p)].segments_snapshot()[-1].base_offset
                  for p in range(PARTITIONS)}
        admin.alter_configs({ConfigResource.topic(TOPIC):
                             {**configs, "min.cleanable.dirty.ratio": "0.01"}})
    cleaner = broker.log_manager.cleaner
    deadline = time.monotonic() + 120
    for p in range(PARTITIONS):
        while (cleaner.checkpoint_of((TOPIC, p)) or -1) < active[p]:
            assert time.monotonic() < deadline, (
                f"the cleaner's checkpoint of {TOPIC}-{p} is at "
                f"{cleaner.checkpoint_of((TOPIC, p))}, not at the active segment {active[p]}, "
                "after 120 s (is log.cleaner.enable true?)")
            time.sleep(0.05)
    expected = cleaned_view(written, {p: cleaner.checkpoint_of((TOPIC, p)) or 0
                                      for p in range(PARTITIONS)})
    assert len(expected) < len(written) // 5, "the cleaner kept too much"
    yield expected


def check(rows: list[Row], expected: list[Row]) -> None:
    rows = sorted(rows)
    for p in range(PARTITIONS):
        offsets = [offset for q, offset, _, _ in rows if q == p]
        assert len(offsets) == len(set(offsets)), f"partition {p}: an offset read twice"
        assert offsets[-1] - offsets[0] + 1 > len(offsets), f"partition {p}: no gaps"
    assert rows == expected
    latest = {(p, key): value for p, _, key, value in expected}
    assert {(p, key): value for p, _, key, value in rows} == latest


def test_batch_read_of_a_compacted_topic(spark: Any, broker: Broker,
                                         compacted: list[Row]) -> None:
    df = (spark.read.format("samsa").option("kafka.bootstrap.servers", broker.bootstrap_servers)
          .option("subscribe", TOPIC).option("startingOffsets", "earliest")
          .option("endingOffsets", "latest").load())
    rows = [(r.partition, r.offset, bytes(r.key), None if r.value is None else bytes(r.value))
            for r in df.select("partition", "offset", "key", "value").collect()]
    # In each partition, the order Spark delivered is the log's.
    for p in range(PARTITIONS):
        offsets = [offset for q, offset, _, _ in rows if q == p]
        assert offsets == sorted(offsets)
    check(rows, compacted)


def test_streaming_read_of_a_compacted_topic(spark: Any, broker: Broker, compacted: list[Row],
                                             tmp_path: Path) -> None:
    query = (spark.readStream.format("samsa")
             .option("kafka.bootstrap.servers", broker.bootstrap_servers)
             .option("subscribe", TOPIC).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "700").load()
             .select("partition", "offset", "key", "value")
             .writeStream.format("parquet")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .option("path", str(tmp_path / "out"))
             .trigger(availableNow=True).start())
    query.awaitTermination()  # raises if the query failed (a failOnDataLoss error among others)
    assert len([p for p in query.recentProgress if p["numInputRows"]]) > 1
    rows = [(r.partition, r.offset, bytes(r.key), None if r.value is None else bytes(r.value))
            for r in spark.read.parquet(str(tmp_path / "out")).collect()]
    check(rows, compacted)  # (parquet files come back in no particular order)
