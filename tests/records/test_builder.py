import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.records import (
    Compression,
    RecordBatch,
    RecordBatchBuilder,
    TimestampType,
    validate_batch,
    with_producer_state,
)
from samsa.records.builder import record_size

from .strategies import BASE_TS, codecs, records


def read(buf: bytes) -> RecordBatch:
    validate_batch(buf)
    return RecordBatch(buf)


@settings(max_examples=60, deadline=None)
@given(records=records, codec=codecs, transactional=st.booleans())
def test_roundtrip_every_field(records: list, codec: Compression, transactional: bool) -> None:
    builder = RecordBatchBuilder(
        compression=codec,
        batch_size_limit=1 << 30,
        producer_id=1000 if transactional else -1,
        producer_epoch=3 if transactional else -1,
        base_sequence=50 if transactional else -1,
        is_transactional=transactional,
        base_offset=500,
    )
    for i, (ts, key, value, headers) in enumerate(records):
        assert builder.append(ts, key, value, headers) == i
    assert builder.record_count == len(records)
    batch = read(builder.build())
    assert batch.compression is codec
    assert batch.is_transactional is transactional and not batch.is_control
    assert batch.records_count == len(records) and batch.last_offset_delta == len(records) - 1
    assert batch.base_timestamp == records[0][0]
    assert batch.max_timestamp == max(r[0] for r in records)
    assert batch.producer_id == (1000 if transactional else -1)
    got = list(batch)
    assert [r.offset for r in got] == list(range(500, 500 + len(records)))
    for r, (ts, key, value, headers) in zip(got, records):
        assert (r.timestamp, r.key, r.value, r.timestamp_type) == (ts, key, value, TimestampType.CREATE_TIME)
        assert r.headers == [(k, v) for k, v in headers]


@settings(max_examples=30, deadline=None)
@given(records=records, codec=codecs)
def test_log_append_time_batches_report_the_batch_time(records: list, codec: Compression) -> None:
    builder = RecordBatchBuilder(
        compression=codec,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        log_append_time_ms=BASE_TS + 10**10,
        batch_size_limit=1 << 30,
    )
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers)
    batch = read(builder.build())
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert batch.max_timestamp == BASE_TS + 10**10
    assert {(r.timestamp, r.timestamp_type) for r in batch} == {(BASE_TS + 10**10, TimestampType.LOG_APPEND_TIME)}


def test_first_record_always_fits_then_limit_is_respected() -> None:
    builder = RecordBatchBuilder(batch_size_limit=100)
    assert builder.append(BASE_TS, None, b"x" * 500) == 0  # bigger than the limit, still accepted
    assert builder.append(BASE_TS, None, b"y") is None
    builder = RecordBatchBuilder(batch_size_limit=1000)
    n = 0
    while builder.append(BASE_TS + n, b"key", b"v" * 50, [("h", b"1")]) is not None:
        n += 1
    assert builder.estimated_size == len(builder.build()) <= 1000
    assert len(builder.build()) + record_size(n, n, b"key", b"v" * 50, [("h", b"1")]) > 1000


@given(st.lists(st.tuples(st.none() | st.binary(max_size=200), st.binary(max_size=400)), min_size=1, max_size=30))
def test_has_room_for_agrees_with_append(items: list) -> None:
    builder = RecordBatchBuilder(batch_size_limit=2000)
    for i, (key, value) in enumerate(items):
        room = builder.has_room_for(BASE_TS + i, key, value)
        assert (builder.append(BASE_TS + i, key, value) is not None) == room
    batch = builder.build()
    assert builder.estimated_size == len(batch)


def test_compressed_size_estimate_follows_java() -> None:
    # Java: header + uncompressed * ratio * 1.05 + next record size <= limit
    builder = RecordBatchBuilder(compression=Compression.ZSTD, batch_size_limit=10_000)
    while builder.append(BASE_TS, None, b"a" * 100) is not None:
        pass
    uncompressed = builder.uncompressed_size - 61
    assert 61 + int(uncompressed * 1.05) <= 10_000 < 61 + int(uncompressed * 1.05) + 104
    builder = RecordBatchBuilder(compression=Compression.ZSTD, batch_size_limit=10_000)
    builder.set_estimated_compression_ratio(0.1)
    count = 0
    while builder.append(BASE_TS, None, b"a" * 100) is not None:
        count += 1
    assert count > 500  # a good observed ratio lets many more records in
    assert len(builder.build()) < 10_000


def test_producer_state_assigned_late_and_restamped_after_build() -> None:
    builder = RecordBatchBuilder()
    for i in range(3):
        builder.append(BASE_TS, None, b"v")
    builder.set_producer_state(7, 0, 10)
    first = read(builder.build())
    assert (first.producer_id, first.producer_epoch, first.base_sequence, first.last_sequence) == (7, 0, 10, 12)
    builder.set_producer_state(7, 1, 0, is_transactional=True)  # retry after an epoch bump
    again = read(builder.build())
    assert (again.producer_epoch, again.base_sequence, again.is_transactional) == (1, 0, True)
    assert [r.value for r in again] == [b"v"] * 3
    copy = read(with_producer_state(builder.build(), 8, 2, 99))
    assert (copy.producer_id, copy.producer_epoch, copy.base_sequence) == (8, 2, 99)


def test_build_is_idempotent_and_closes_the_builder() -> None:
    builder = RecordBatchBuilder(compression=Compression.LZ4)
    builder.append(BASE_TS, b"k", b"v")
    assert builder.build() is builder.build()
    assert builder.is_built
    with pytest.raises(RuntimeError):
        builder.append(BASE_TS, b"k", b"v")
    assert not builder.has_room_for(BASE_TS, b"k", b"v")
    with pytest.raises(ValueError):
        RecordBatchBuilder().build()


def test_none_timestamp_means_now_and_large_fields_use_long_varints() -> None:
    builder = RecordBatchBuilder(batch_size_limit=1 << 30)
    builder.append(None, None, b"now")
    big = b"z" * 70_000  # length beyond the small-varint table
    builder.append(BASE_TS, big, big, [("k" * 300, big)])
    for i in range(20_000):  # offset deltas beyond the table
        builder.append(BASE_TS, None, None)
    batch = read(builder.build())
    records = batch.records()
    assert records[0].timestamp > BASE_TS
    assert records[1].key == records[1].value == big and records[1].headers == [("k" * 300, big)]
    assert records[-1].offset == 20_001 and records[-1].value is None


def test_levels_are_validated() -> None:
    for codec, level in ((Compression.GZIP, 0), (Compression.GZIP, 10), (Compression.LZ4, 18), (Compression.ZSTD, 23), (Compression.SNAPPY, 1)):
        with pytest.raises(ValueError):
            RecordBatchBuilder(compression=codec, compression_level=level)
    for codec, level in ((Compression.GZIP, -1), (Compression.GZIP, 1), (Compression.LZ4, 1), (Compression.LZ4, 17), (Compression.ZSTD, -5), (Compression.ZSTD, 19)):
        builder = RecordBatchBuilder(compression=codec, compression_level=level)
        builder.append(BASE_TS, None, b"abc" * 100)
        assert [r.value for r in read(builder.build())] == [b"abc" * 100]


@settings(max_examples=60, deadline=None)
@given(records=records, codec=codecs, limit=st.integers(min_value=100, max_value=20_000),
       constant_ts=st.booleans())
def test_append_many_matches_append_one_by_one(records: list, codec: Compression, limit: int,
                                               constant_ts: bool) -> None:
    """Same bytes as append() per record, and it stops at the same record when the batch fills."""
    stamps = [r[0] for r in records]
    keys = [r[1] for r in records]
    values = [r[2] for r in records]
    hdrs = [r[3] or None for r in records]
    one = RecordBatchBuilder(compression=codec, batch_size_limit=limit, estimated_compression_ratio=0.5)
    many = RecordBatchBuilder(compression=codec, batch_size_limit=limit, estimated_compression_ratio=0.5)
    taken = 0
    for i in range(len(records)):
        if one.append(BASE_TS if constant_ts else stamps[i], keys[i], values[i], hdrs[i]) is None:
            break
        taken += 1
    # Two calls: the second continues where the first stopped.
    half = len(records) // 2
    stop = many.append_many(BASE_TS if constant_ts else stamps, keys, values, hdrs, 0, half)
    if stop == half:
        stop = many.append_many(BASE_TS if constant_ts else stamps, keys, values, hdrs, half, len(records))
    assert stop == taken
    assert many.estimated_size == one.estimated_size
    assert many.build() == one.build()


def test_append_many_without_keys_headers_or_timestamps() -> None:
    builder = RecordBatchBuilder(batch_size_limit=1000)
    values = [b"v%d" % i for i in range(100)]
    assert builder.append_many(BASE_TS, None, values, None, 5, 5) == 5  # empty range
    stop = builder.append_many(BASE_TS, None, values, None, 0, len(values))
    assert 0 < stop < 100  # 1000 bytes hold only some
    batch = read(builder.build())
    got = batch.records()
    assert [r.value for r in got] == values[:stop]
    assert {r.key for r in got} == {None} and {r.timestamp for r in got} == {BASE_TS}
