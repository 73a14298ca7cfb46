"""to_spark_batch: poll_arrow's columns -> Arrow in the source's exact schema, without Spark."""

from __future__ import annotations

import pyarrow as pa

from samsa.consumer.arrow_records import rows_to_piece, with_partition
from samsa.records import Record, TimestampType
from samsa.spark.fetch import to_spark_batch
from samsa.spark.schema import arrow_schema


def record(offset: int, ts_type: TimestampType = TimestampType.CREATE_TIME,
           headers: list[tuple[str, bytes | None]] | None = None) -> Record:
    key = None if offset % 2 else f"k{offset}".encode()
    return Record(offset, 1_700_000_000_000 + offset, key, f"v{offset}".encode(), headers or [], ts_type)


def polled(records: list[Record]) -> pa.RecordBatch:
    """What KafkaConsumer.poll_arrow hands out for these records of partition ("t", 3)."""
    return with_partition("t", 3, [rows_to_piece(records)])


def test_dense_offsets_and_constant_columns() -> None:
    batch = to_spark_batch(polled([record(o) for o in range(5, 9)]), include_headers=False)
    assert batch.schema == arrow_schema(False)
    d = batch.to_pydict()
    assert d["offset"] == [5, 6, 7, 8]
    assert d["topic"] == ["t"] * 4 and d["partition"] == [3] * 4 and d["timestampType"] == [0] * 4
    assert d["key"] == [None if o % 2 else f"k{o}".encode() for o in range(5, 9)]
    assert [int(t.timestamp() * 1000) for t in d["timestamp"]] == [1_700_000_000_000 + o for o in range(5, 9)]


def test_offset_gaps_mixed_timestamp_types_and_headers() -> None:
    rows = [record(0), record(3, TimestampType.LOG_APPEND_TIME, [("h", b"x"), ("n", None)]), record(4)]
    batch = to_spark_batch(polled(rows), include_headers=True)
    assert batch.schema == arrow_schema(True)
    d = batch.to_pydict()
    assert d["offset"] == [0, 3, 4]
    assert d["timestampType"] == [0, 1, 0]
    assert d["headers"] == [None, [{"key": "h", "value": b"x"}, {"key": "n", "value": None}], None]


def test_a_slice_keeps_its_own_headers() -> None:
    rows = [record(i, headers=[("i", str(i).encode())] if i % 3 else None) for i in range(9)]
    batch = to_spark_batch(polled(rows).slice(4, 4), include_headers=True)
    assert batch.to_pydict()["headers"] == [
        [{"key": "i", "value": str(i).encode()}] if i % 3 else None for i in range(4, 8)]


def test_the_executor_consumer_has_the_broker_answer_at_once() -> None:
    """A fetch past the end of a range (the consumer's prefetch) must not hold up the next
    range's: the executor's consumer asks the broker not to wait for data (an executor reads
    only offsets that exist) unless kafka.fetch.max.wait.ms says otherwise."""
    from samsa.spark import fetch

    servers = {"bootstrap.servers": "127.0.0.1:1"}
    for client, wait in ((servers, 10), ({**servers, "fetch.max.wait.ms": "300"}, 300)):
        consumer = fetch._consumer(client, None)
        try:
            assert consumer.config["fetch.max.wait.ms"] == wait
        finally:
            consumer.close()
