"""Batch write then batch read through format("samsa"), and the offset-range options."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from pyspark.sql import Row
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from samsa.consumer.consumer import KafkaConsumer

HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def read(spark: Any, options: dict[str, str]) -> Any:
    return spark.read.format("samsa").options(**options).load()


def test_write_then_read_round_trips_every_row(spark: Any, kafka_options: dict[str, str],
                                               new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    schema = StructType([
        StructField("key", StringType()), StructField("value", BinaryType()),
        StructField("partition", IntegerType()), StructField("headers", HEADERS),
    ])
    rows = [(None if i % 7 == 0 else f"k{i}", f"v{i}".encode(), i % 4,
             None if i % 3 else [(f"h{i}", f"x{i}".encode()), ("empty", None)])
            for i in range(2000)]
    df = spark.createDataFrame(rows, schema).repartition(3)
    before = datetime.now(UTC)
    df.write.format("samsa").options(**kafka_options).option("topic", topic).mode("append").save()
    after = datetime.now(UTC)

    out = read(spark, {**kafka_options, "subscribe": topic, "includeHeaders": "true"}).collect()
    assert len(out) == len(rows)
    assert list(out[0].asDict()) == ["key", "value", "topic", "partition", "offset", "timestamp",
                                     "timestampType", "headers"]
    by_value = {r.value: r for r in out}
    for key, value, partition, headers in rows:
        r = by_value[value]
        assert r.key == (None if key is None else key.encode())
        assert r.partition == partition
        assert r.topic == topic
        assert r.timestampType == 0
        if headers is None:
            assert r.headers is None
        else:
            assert [(h.key, h.value) for h in r.headers] == headers
        # Spark hands timestamps back as naive local datetimes; the producer stamped them.
        ts = r.timestamp.astimezone(UTC)
        assert before.replace(microsecond=0) <= ts <= after
    # Offsets are dense per partition: 0..n-1.
    per_partition: dict[int, list[int]] = {}
    for r in out:
        per_partition.setdefault(r.partition, []).append(r.offset)
    for offsets in per_partition.values():
        assert sorted(offsets) == list(range(len(offsets)))


@pytest.fixture
def ten_per_partition(new_topic: Callable[..., str], produce: Callable[..., None]) -> str:
    """A 4-partition topic; record i of partition p has offset i, value b"p:i", timestamp T(i)."""
    topic = new_topic()
    produce(topic, [(p, None, f"{p}:{i}".encode(), None, stamp(i)) for p in range(4) for i in range(10)])
    return topic


def stamp(i: int) -> int:
    return 1_700_000_000_000 + i * 1000


def offsets_read(spark: Any, options: dict[str, str]) -> set[tuple[int, int]]:
    rows = read(spark, options).select("partition", "offset", "value").collect()
    for r in rows:
        assert r.value == f"{r.partition}:{r.offset}".encode()
    return {(r.partition, r.offset) for r in rows}


def test_starting_and_ending_offsets_json(spark: Any, kafka_options: dict[str, str],
                                          ten_per_partition: str) -> None:
    t = ten_per_partition
    got = offsets_read(spark, {
        **kafka_options, "subscribe": t,
        "startingOffsets": json.dumps({t: {"0": 2, "1": -2, "2": 5, "3": -2}}),
        "endingOffsets": json.dumps({t: {"0": 5, "1": -1, "2": 6, "3": 3}}),
    })
    want = {(0, i) for i in range(2, 5)} | {(1, i) for i in range(10)} | {(2, 5)} | {(3, i) for i in range(3)}
    assert got == want


def test_assign_and_min_partitions(spark: Any, kafka_options: dict[str, str], ten_per_partition: str) -> None:
    t = ten_per_partition
    options = {**kafka_options, "assign": json.dumps({t: [1, 3]}), "minPartitions": "6"}
    assert read(spark, options).rdd.getNumPartitions() >= 6
    assert offsets_read(spark, options) == {(p, i) for p in (1, 3) for i in range(10)}


def test_max_records_per_partition_splits_ranges(spark: Any, kafka_options: dict[str, str],
                                                ten_per_partition: str) -> None:
    # Each partition's ten offsets are read by ceil(10 / 3) = 4 Spark partitions; with
    # minPartitions above that, the pieces are split further.
    options = {**kafka_options, "subscribe": ten_per_partition, "maxRecordsPerPartition": "3",
               "kafka.group.id": "spark-batch-reader"}
    assert read(spark, options).rdd.getNumPartitions() == 16
    assert offsets_read(spark, options) == {(p, i) for p in range(4) for i in range(10)}
    assert read(spark, {**options, "minPartitions": "30"}).rdd.getNumPartitions() >= 30


def test_timestamp_options(spark: Any, kafka_options: dict[str, str], ten_per_partition: str) -> None:
    t = ten_per_partition
    got = offsets_read(spark, {**kafka_options, "subscribePattern": t.replace("-", ".") + "$",
                               "startingTimestamp": str(stamp(3)), "endingTimestamp": str(stamp(7))})
    assert got == {(p, i) for p in range(4) for i in range(3, 7)}
    got = offsets_read(spark, {
        **kafka_options, "subscribe": t,
        "startingOffsetsByTimestamp": json.dumps({t: {"0": stamp(8), "1": 0, "2": stamp(9) + 1,
                                                     "3": stamp(5) - 1}}),
        "startingOffsetsByTimestampStrategy": "latest",
    })
    assert got == {(0, 8), (0, 9)} | {(1, i) for i in range(10)} | {(3, i) for i in range(5, 10)}


def test_data_loss_fails_or_skips(spark: Any, kafka_options: dict[str, str], ten_per_partition: str,
                                  admin: Any) -> None:
    t = ten_per_partition
    admin.delete_records({(t, 0): 6})
    from_zero = {**kafka_options, "subscribe": t,
                 "startingOffsets": json.dumps({t: {str(p): 0 for p in range(4)}})}
    with pytest.raises(Exception, match="failOnDataLoss"):
        read(spark, from_zero).collect()
    got = offsets_read(spark, {**from_zero, "failOnDataLoss": "false"})
    assert got == {(0, i) for i in range(6, 10)} | {(p, i) for p in (1, 2, 3) for i in range(10)}
    # earliest starts at the new log start: nothing is lost.
    assert len(offsets_read(spark, {**kafka_options, "subscribe": t})) == 34


def test_read_offsets_match_a_plain_consumer(kafka_options: dict[str, str], ten_per_partition: str) -> None:
    # The fixture's layout, checked without Spark, so failures above point at the source.
    with KafkaConsumer({"bootstrap.servers": kafka_options["kafka.bootstrap.servers"]}) as c:
        assert len(c.partitions_for(ten_per_partition)) == 4


def test_write_topic_column_and_row_api(spark: Any, kafka_options: dict[str, str],
                                        new_topic: Callable[..., str]) -> None:
    a, b = new_topic(), new_topic()
    df = spark.createDataFrame([Row(topic=a if i % 2 else b, value=f"v{i}", key=None) for i in range(10)],
                               "topic string, value string, key string")
    df.write.format("samsa").options(**kafka_options).mode("append").save()
    assert read(spark, {**kafka_options, "subscribe": a}).count() == 5
    assert sorted(r.value for r in read(spark, {**kafka_options, "subscribe": b}).collect()) == \
        [f"v{i}".encode() for i in range(0, 10, 2)]


def test_write_timestamp_column_sets_create_time(spark: Any, kafka_options: dict[str, str],
                                                 new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    base = datetime(2024, 5, 17, 12, 30, 0, 123000, tzinfo=UTC)
    rows = [(f"v{i}".encode(), None if i == 3 else base.replace(second=i)) for i in range(6)]
    df = spark.createDataFrame(rows, "value binary, timestamp timestamp")
    before = datetime.now(UTC)
    df.write.format("samsa").options(**kafka_options).option("topic", topic).mode("append").save()
    after = datetime.now(UTC)
    out = {r.value: r for r in read(spark, {**kafka_options, "subscribe": topic}).collect()}
    assert len(out) == len(rows)
    for value, ts in rows:
        r = out[value]
        assert r.timestampType == 0  # CreateTime
        got = r.timestamp.astimezone(UTC)
        if ts is None:  # null: stamped when sent
            assert before.replace(microsecond=0) <= got <= after
        else:
            assert got == ts


def test_write_rejects_a_non_timestamp_timestamp_column(spark: Any, kafka_options: dict[str, str],
                                                         new_topic: Callable[..., str]) -> None:
    df = spark.createDataFrame([(b"v", 5)], "value binary, timestamp int")
    with pytest.raises(Exception, match="timestamp attribute type must be timestamp"):
        df.write.format("samsa").options(**kafka_options).option("topic", new_topic()).mode("append").save()
