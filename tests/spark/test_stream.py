"""Streaming reads through format("samsa") into a parquet sink, stopped and resumed."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

LIMIT = 200


def start_query(spark: Any, options: dict[str, str], base: Path, **trigger: Any) -> Any:
    return (spark.readStream.format("samsa").options(**options).load()
            .select("partition", "offset", "value")
            .writeStream.format("parquet")
            .option("checkpointLocation", str(base / "checkpoint")).option("path", str(base / "out"))
            .trigger(**trigger).start())


def run_available_now(spark: Any, options: dict[str, str], base: Path) -> Any:
    query = start_query(spark, options, base, availableNow=True)
    query.awaitTermination()  # raises if the query failed
    return query


def written(spark: Any, base: Path) -> list[tuple[int, int]]:
    rows = spark.read.parquet(str(base / "out")).collect()
    for r in rows:
        assert r.value == f"{r.partition}:{r.offset}".encode()
    return [(r.partition, r.offset) for r in rows]


def fill(produce: Callable[..., None], topic: str, partitions: range, offsets: range) -> None:
    produce(topic, [(p, None, f"{p}:{i}".encode(), None, None) for p in partitions for i in offsets])


def test_stop_mid_stream_and_resume_delivers_each_record_once(
        spark: Any, kafka_options: dict[str, str], new_topic: Callable[..., str],
        produce: Callable[..., None], admin: Any, tmp_path: Path) -> None:
    topic = new_topic()
    fill(produce, topic, range(4), range(300))
    options = {**kafka_options, "subscribe": topic, "startingOffsets": "earliest",
               "maxOffsetsPerTrigger": str(LIMIT)}
    first = start_query(spark, options, tmp_path, processingTime="200 milliseconds")
    while not any(p["numInputRows"] for p in first.recentProgress):
        assert first.isActive, first.exception()
        time.sleep(0.2)
    first.stop()
    done_first = sum(p["numInputRows"] for p in first.recentProgress)
    assert 0 < done_first < 1200

    # More records, and a new partition: read from its earliest offset on resume.
    fill(produce, topic, range(4), range(300, 400))
    admin.create_partitions({topic: 5})
    fill(produce, topic, range(4, 5), range(50))

    second = run_available_now(spark, options, tmp_path)
    batches = [p["numInputRows"] for p in second.recentProgress]
    assert len(batches) >= 2 and max(batches) <= LIMIT + 5  # admission control held
    got = written(spark, tmp_path)
    assert len(got) == len(set(got)) == 1650
    assert set(got) == {(p, i) for p in range(4) for i in range(400)} | {(4, i) for i in range(50)}


def test_min_offsets_per_trigger_holds_micro_batches_back(
        spark: Any, kafka_options: dict[str, str], new_topic: Callable[..., str],
        produce: Callable[..., None], tmp_path: Path) -> None:
    # The first micro-batch runs at once; later ones wait until 50 new offsets are there
    # (maxTriggerDelay is far away), however often the 100 ms trigger fires meanwhile.
    topic = new_topic(1)
    fill(produce, topic, range(1), range(10))
    options = {**kafka_options, "subscribe": topic, "startingOffsets": "earliest",
               "minOffsetsPerTrigger": "50", "maxTriggerDelay": "1h", "groupIdPrefix": "min-test"}
    query = start_query(spark, options, tmp_path, processingTime="100 milliseconds")
    try:
        wait_for_rows(query, 10)
        fill(produce, topic, range(1), range(10, 30))
        time.sleep(1.5)  # several triggers see 20 new offsets, too few for a micro-batch
        fill(produce, topic, range(1), range(30, 60))
        wait_for_rows(query, 60)
        batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    finally:
        query.stop()
    assert batches == [10, 50]
    assert sorted(written(spark, tmp_path)) == [(0, i) for i in range(60)]


def wait_for_rows(query: Any, rows: int) -> None:
    for _ in range(1200):  # a guard against hanging, not a speed requirement
        if sum(p["numInputRows"] for p in query.recentProgress) >= rows:
            return
        assert query.isActive, query.exception()
        time.sleep(0.1)
    raise AssertionError(f"the query never read {rows} rows: {query.recentProgress}")


def test_streaming_data_loss_fails_then_skips(
        spark: Any, kafka_options: dict[str, str], new_topic: Callable[..., str],
        produce: Callable[..., None], admin: Any, tmp_path: Path) -> None:
    topic = new_topic()
    fill(produce, topic, range(4), range(10))
    options = {**kafka_options, "subscribe": topic, "startingOffsets": "earliest"}
    run_available_now(spark, options, tmp_path)
    assert len(written(spark, tmp_path)) == 40

    fill(produce, topic, range(4), range(10, 20))
    admin.delete_records({(topic, 0): 15})  # offsets 10..14 of partition 0 were never read
    # Executors keep their consumer (per client settings) between tasks; the first run's may
    # still get records 10..19 from a fetch parked at offset 10 before the deletion, and then
    # hand them out.  Other client settings give the next runs consumers of their own.
    options = {**options, "kafka.client.id": "after-the-deletion"}
    with pytest.raises(Exception, match="failOnDataLoss"):
        run_available_now(spark, options, tmp_path)

    run_available_now(spark, {**options, "failOnDataLoss": "false"}, tmp_path)
    got = written(spark, tmp_path)
    assert len(got) == len(set(got))
    assert set(got) == ({(0, i) for i in [*range(10), *range(15, 20)]}
                        | {(p, i) for p in (1, 2, 3) for i in range(20)})


def test_streaming_write_copies_a_topic(
        spark: Any, kafka_options: dict[str, str], new_topic: Callable[..., str],
        produce: Callable[..., None], tmp_path: Path) -> None:
    source, sink = new_topic(), new_topic()
    produce(source, [(p, f"k{p}-{i}".encode(), f"{p}:{i}".encode(), [("n", str(i).encode())], None)
                     for p in range(4) for i in range(25)])
    query = (spark.readStream.format("samsa").options(**kafka_options)
             .option("subscribe", source).option("startingOffsets", "earliest")
             .option("includeHeaders", "true").load()
             .selectExpr("key", "value", "headers", "partition")
             .writeStream.format("samsa").options(**kafka_options).option("topic", sink)
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    rows = (spark.read.format("samsa").options(**kafka_options).option("subscribe", sink)
            .option("includeHeaders", "true").load().collect())
    assert len(rows) == 100
    for r in rows:
        p, i = r.value.decode().split(":")
        assert r.partition == int(p)  # the partition column was honoured
        assert r.key == f"k{p}-{i}".encode()
        assert [(h.key, h.value) for h in r.headers] == [("n", i.encode())]
