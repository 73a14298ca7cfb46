"""to_record_batch: ConsumerRecords -> Arrow in the source's exact schema, without Spark."""

from __future__ import annotations

from samsa.consumer.records import ConsumerRecord
from samsa.records import TimestampType
from samsa.spark.fetch import to_record_batch
from samsa.spark.schema import arrow_schema


def record(offset: int, ts_type: TimestampType = TimestampType.CREATE_TIME,
           headers: list[tuple[str, bytes | None]] | None = None) -> ConsumerRecord:
    key = None if offset % 2 else f"k{offset}".encode()
    return ConsumerRecord("t", 3, offset, 1_700_000_000_000 + offset, ts_type, key, f"v{offset}".encode(),
                          headers or [], -1, 2, None)


def test_dense_offsets_and_constant_columns() -> None:
    rows = [record(o) for o in range(5, 9)]
    batch = to_record_batch("t", 3, rows, include_headers=False)
    assert batch.schema == arrow_schema(False)
    d = batch.to_pydict()
    assert d["offset"] == [5, 6, 7, 8]
    assert d["topic"] == ["t"] * 4 and d["partition"] == [3] * 4 and d["timestampType"] == [0] * 4
    assert d["key"] == [None if o % 2 else f"k{o}".encode() for o in range(5, 9)]
    assert [int(t.timestamp() * 1000) for t in d["timestamp"]] == [1_700_000_000_000 + o for o in range(5, 9)]


def test_offset_gaps_mixed_timestamp_types_and_headers() -> None:
    rows = [record(0), record(3, TimestampType.LOG_APPEND_TIME, [("h", b"x"), ("n", None)]), record(4)]
    batch = to_record_batch("t", 3, rows, include_headers=True)
    assert batch.schema == arrow_schema(True)
    d = batch.to_pydict()
    assert d["offset"] == [0, 3, 4]
    assert d["timestampType"] == [0, 1, 0]
    assert d["headers"] == [None, [{"key": "h", "value": b"x"}, {"key": "n", "value": None}], None]
