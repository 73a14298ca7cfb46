"""Batch write then batch read through format("samsa"), and the offset-range options."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from pyspark.sql import Row
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructField, StructType

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
