"""Cross-checks with kafka-python's record code (an independent implementation of the format)."""

from __future__ import annotations

import pytest
from kafka.record.default_records import (
    ControlRecord,
    DefaultRecordBatch,
    DefaultRecordBatchBuilder,
)
from kafka.record.memory_records import MemoryRecords as KPMemoryRecords
from kafka.record.memory_records import MemoryRecordsBuilder as KPMemoryRecordsBuilder

from samsa.records import (
    Compression,
    ControlRecordType,
    MemoryRecords,
    RecordBatchBuilder,
    TimestampType,
    build_control_batch,
    iter_batches,
)

TS = 1_700_000_000_000
CODECS = list(Compression)


def sample(n: int = 200) -> list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    out = []
    for i in range(n):
        key = None if i % 4 == 0 else b"key-%d" % i
        value = None if i % 7 == 3 else (b"value-%d-" % i) * (1 + i % 40)
        headers = [] if i % 3 else [("trace", b"%d" % i), ("empty", b""), ("ünïcode", None)][: 1 + i % 3]
        out.append((TS + (i * 37) % 1000 - 200, key, value, headers))
    return out


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_samsa_batches_read_by_kafka_python(codec: Compression) -> None:
    records = sample()
    builder = RecordBatchBuilder(
        compression=codec, producer_id=123, producer_epoch=4, base_sequence=9, base_offset=1000, batch_size_limit=1 << 20
    )
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers)
    kp = DefaultRecordBatch(builder.build())
    assert kp.validate_crc()
    assert (kp.base_offset, kp.compression_type, kp.producer_id, kp.producer_epoch, kp.base_sequence) == (
        1000, int(codec), 123, 4, 9
    )
    assert kp.last_offset_delta == len(records) - 1 and kp.records_count == len(records)
    assert kp.max_timestamp == max(r[0] for r in records)
    got = list(kp)
    assert [r.offset for r in got] == list(range(1000, 1000 + len(records)))
    for r, (ts, key, value, headers) in zip(got, records):
        assert (r.timestamp, r.key, r.value) == (ts, key, value)
        assert [(k, v) for k, v in r.headers] == headers


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_kafka_python_batches_read_by_samsa(codec: Compression) -> None:
    records = sample()
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=int(codec), is_transactional=True, producer_id=77, producer_epoch=1, base_sequence=5, batch_size=1 << 20
    )
    for i, (ts, key, value, headers) in enumerate(records):
        assert builder.append(i, ts, key, value, headers) is not None
    buf = bytes(builder.build())
    (batch,) = list(iter_batches(buf))  # CRC checked
    assert batch.compression is codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.is_transactional) == (77, 1, 5, True)
    got = list(batch)
    assert [r.offset for r in got] == list(range(len(records)))
    for r, (ts, key, value, headers) in zip(got, records):
        assert (r.timestamp, r.key, r.value, r.headers) == (ts, key, value, headers)
        assert r.timestamp_type is TimestampType.CREATE_TIME


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_kafka_python_memory_records_builder_stream(codec: Compression) -> None:
    """Several batches written by kafka-python's producer-side builder, read as one buffer."""
    buf = b""
    offset = 0
    for _ in range(3):
        mrb = KPMemoryRecordsBuilder(magic=2, compression_type=int(codec), batch_size=4096, offset=offset)
        while mrb.append(TS + offset, b"k", b"x" * 64 + b"%d" % offset) is not None:
            offset += 1
        mrb.close()
        buf += bytes(mrb.buffer())
    values = [r.value for r in MemoryRecords(buf).records()]
    assert values == [b"x" * 64 + b"%d" % i for i in range(offset)]


def test_many_samsa_batches_read_by_kafka_python_memory_records() -> None:
    buf = b""
    for base, codec in enumerate(CODECS):
        builder = RecordBatchBuilder(compression=codec, base_offset=base * 10)
        for i in range(10):
            builder.append(TS + i, None, b"%d" % (base * 10 + i))
        buf += builder.build()
    kp = KPMemoryRecords(buf)
    values = []
    while kp.has_next():
        batch = kp.next_batch()
        assert batch.validate_crc()
        values += [(r.offset, r.value) for r in batch]
    assert values == [(i, b"%d" % i) for i in range(10 * len(CODECS))]


def test_log_append_time_batch_read_by_kafka_python() -> None:
    builder = RecordBatchBuilder(timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time_ms=TS + 50)
    builder.append(TS, None, b"a")
    builder.append(TS + 1, None, b"b")
    kp = DefaultRecordBatch(builder.build())
    assert kp.validate_crc() and kp.timestamp_type == 1
    assert [r.timestamp for r in kp] == [TS + 50, TS + 50]


@pytest.mark.parametrize("kind", [ControlRecordType.ABORT, ControlRecordType.COMMIT])
def test_control_batch_read_by_kafka_python(kind: ControlRecordType) -> None:
    kp = DefaultRecordBatch(build_control_batch(kind, 55, 3, 12, TS, base_offset=40))
    assert kp.validate_crc() and kp.is_control_batch and kp.is_transactional
    (record,) = list(kp)
    assert isinstance(record, ControlRecord)
    assert (record.offset, record.version, record.type) == (40, 0, int(kind))
    assert record.commit is (kind == ControlRecordType.COMMIT)
