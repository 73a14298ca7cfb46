"""RecordBatchBuilder and its helpers.

Every test runs against the installed module (compiled by setup.py where it can be) and its
pure-Python source, loaded under another name, as tests/broker/log/test_validator.py does."""

import time
from collections.abc import Iterator
from itertools import pairwise
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from samsa.records import (
    Compression,
    RecordBatch,
    RecordBatchBuilder,
    TimestampType,
    builder,
    validate_batch,
    with_producer_state,
)
from samsa.records.batch_header import RECORD_BATCH_OVERHEAD
from samsa.records.builder import encode_headers, plan_batches, producer_batch_builder, record_size
from samsa.records.compression import compress
from samsa.records.varint import SMALL_VARINT_LIMIT, encode_varint
from tests.support.compiled_modules import both_builds, check_compiled_in_use

from .strategies import BASE_TS, codecs, records
from .strategies import headers as header_lists

# The names these tests call, taken from the implementation under test by the fixture below.
_API = ("RecordBatchBuilder", "encode_headers", "plan_batches", "producer_batch_builder", "record_size",
        "with_producer_state")


@pytest.fixture(scope="module", autouse=True, params=["installed", "source"])
def implementation(request: pytest.FixtureRequest) -> Iterator[ModuleType]:
    with both_builds(request, builder) as module, pytest.MonkeyPatch.context() as patch:
        for name in _API:
            patch.setitem(globals(), name, getattr(module, name))
        yield module


def test_the_compiled_builder_is_in_use_where_it_can_be_built() -> None:
    check_compiled_in_use(builder)


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


def test_misuse_errors_say_what_is_wrong() -> None:
    builder = RecordBatchBuilder()
    builder.append(BASE_TS, None, b"v")
    builder.build()
    with pytest.raises(RuntimeError, match="^cannot append to a batch that has been built$"):
        builder.append(BASE_TS, None, b"v")
    with pytest.raises(RuntimeError, match="^cannot append to a batch that has been built$"):
        builder.append_many(BASE_TS, None, [b"v"], None, 0, 1)
    with pytest.raises(ValueError, match="^cannot build a record batch without records$"):
        RecordBatchBuilder().build()
    with pytest.raises(ValueError, match="^a v2 batch needs CREATE_TIME or LOG_APPEND_TIME$"):
        RecordBatchBuilder(timestamp_type=TimestampType.NO_TIMESTAMP_TYPE)


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


def appended_one_by_one(records: list, codec: Compression, limit: int, constant_ts: bool
                        ) -> tuple[RecordBatchBuilder, int]:
    """The reference the bulk appends are held to: append() per record until one does not
    fit; the builder and how many records it took."""
    one = RecordBatchBuilder(compression=codec, batch_size_limit=limit, estimated_compression_ratio=0.5)
    taken = 0
    for ts, key, value, hdrs in records:
        if one.append(BASE_TS if constant_ts else ts, key, value, hdrs or None) is None:
            break
        taken += 1
    return one, taken


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
    one, taken = appended_one_by_one(records, codec, limit, constant_ts)
    many = RecordBatchBuilder(compression=codec, batch_size_limit=limit, estimated_compression_ratio=0.5)
    # Two calls: the second continues where the first stopped.
    half = len(records) // 2
    stop = many.append_many(BASE_TS if constant_ts else stamps, keys, values, hdrs, 0, half)
    if stop == half:
        stop = many.append_many(BASE_TS if constant_ts else stamps, keys, values, hdrs, half, len(records))
    assert stop == taken
    assert many.estimated_size == one.estimated_size
    assert many.build() == one.build()


def tails_of(records: list) -> tuple[bytes, list[int]]:
    """Each record's key, value and headers as append() encodes them (what send_arrow's
    columns give append_tails), concatenated, and where each starts."""
    tails, offsets = b"", [0]
    for _ts, key, value, hdrs in records:
        for field in (key, value):
            tails += encode_varint(-1) if field is None else encode_varint(len(field)) + field
        tails += encode_headers(hdrs or [])
        offsets.append(len(tails))
    return b"\x7f" + tails, [o + 1 for o in offsets]  # not at 0: offsets are positions


@settings(max_examples=60, deadline=None)
@given(records=records, codec=codecs, limit=st.integers(min_value=100, max_value=20_000),
       constant_ts=st.booleans())
def test_append_tails_matches_append_one_by_one(records: list, codec: Compression, limit: int,
                                               constant_ts: bool) -> None:
    """send_arrow's path: the same bytes and the same stopping record as append()."""
    stamps = [r[0] for r in records]
    one, taken = appended_one_by_one(records, codec, limit, constant_ts)
    tailed = RecordBatchBuilder(compression=codec, batch_size_limit=limit, estimated_compression_ratio=0.5)
    tails, offsets = tails_of(records)
    half = len(records) // 2
    stop = tailed.append_tails(tails, offsets, 0, half, BASE_TS if constant_ts else stamps)
    if stop == half:
        stop = tailed.append_tails(tails, offsets, half, len(records), BASE_TS if constant_ts else stamps)
    assert stop == taken
    assert tailed.estimated_size == one.estimated_size
    assert tailed.build() == one.build()


@settings(max_examples=60, deadline=None)
@given(records=records, limit=st.integers(min_value=62, max_value=20_000), start=st.integers(0, 5))
def test_plan_batches_splits_as_append_tails_does(records: list, limit: int, start: int) -> None:
    """send_arrow's planned layout: the batches, starting empty, that append_tails fills."""
    tails, offsets = tails_of(records)
    sizes = [b - a for a, b in pairwise(offsets)]
    start = min(start, len(records))
    counts, i = [], start
    while i < len(records):
        builder = RecordBatchBuilder(batch_size_limit=limit)
        j = builder.append_tails(tails, offsets, i, len(records), BASE_TS)
        counts.append(j - i)
        i = j
    assert plan_batches(sizes, start, len(records), limit, 1) == counts


@pytest.mark.parametrize("codec", list(Compression))
def test_producer_batch_builder_is_the_keyword_constructor(codec: Compression) -> None:
    level = None if codec in (Compression.NONE, Compression.SNAPPY) else 3
    made = producer_batch_builder(codec, level, 5000, 0.5)
    keyword = RecordBatchBuilder(compression=codec, compression_level=level, batch_size_limit=5000,
                                 estimated_compression_ratio=0.5)
    for b in (made, keyword):
        b.append(BASE_TS, b"k", b"v" * 3000, [("h", b"x")])
    assert (made.compression, made.compression_level, made.batch_size_limit, made.estimated_size,
            made.timestamp_type) == (keyword.compression, keyword.compression_level, keyword.batch_size_limit,
                                     keyword.estimated_size, keyword.timestamp_type)
    assert made.build() == keyword.build()


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


@settings(max_examples=200, deadline=None)
@given(offset_delta=st.integers(0, 2**31 - 1), timestamp_delta=st.integers(-(2**62), 2**62),
       key=st.none() | st.binary(max_size=300), value=st.none() | st.binary(max_size=300),
       hdrs=st.none() | header_lists)
def test_record_size_matches_kafka_pythons(offset_delta: int, timestamp_delta: int, key: bytes | None,
                                           value: bytes | None, hdrs: list | None) -> None:
    expected = DefaultRecordBatchBuilder.size_in_bytes(offset_delta, timestamp_delta, key, value, hdrs or [])
    assert record_size(offset_delta, timestamp_delta, key, value, hdrs) == expected


def test_header_keys_may_be_given_as_utf8_bytes() -> None:
    assert encode_headers([(b"k\xc3\xa9", b"v"), (bytearray(b"n"), None)]) == encode_headers([("k\u00e9", b"v"), ("n", None)])


@pytest.mark.parametrize("many", [False, True], ids=["append", "append_many"])
def test_varints_at_and_around_the_small_varint_table(many: bool) -> None:
    """Each varint looked up in SMALL_VARINTS (0 <= n < SMALL_VARINT_LIMIT) once equals the limit:
    timestamp delta, key and value length, record length, offset delta; and a negative delta."""
    limit = SMALL_VARINT_LIMIT
    rows: list[tuple[int, bytes | None, bytes | None]] = [
        (BASE_TS, None, b"a"),
        (BASE_TS + limit, b"k" * limit, b"v" * limit),
        # attributes, delta -1, offset delta 2, null key, 3-byte length, header count: 8 bytes
        (BASE_TS - 1, None, b"x" * (limit - 8)),
    ]
    rows += [(BASE_TS, None, None)] * (limit - 2)  # the last one has offset delta == limit
    builder = RecordBatchBuilder(batch_size_limit=1 << 30)
    if many:
        stamps, keys, values = ([r[i] for r in rows] for i in range(3))
        assert builder.append_many(stamps, keys, values, None, 0, len(rows)) == len(rows)
        # one timestamp for the whole call: delta == limit, then a negative delta
        assert builder.append_many(BASE_TS + limit, None, [b"c"], None, 0, 1) == 1
        assert builder.append_many(BASE_TS - 2, None, [b"d"], None, 0, 1) == 1
    else:
        for i, (ts, key, value) in enumerate(rows):
            assert builder.append(ts, key, value) == i
        builder.append(BASE_TS + limit, None, b"c")
        builder.append(BASE_TS - 2, None, b"d")
    rows += [(BASE_TS + limit, None, b"c"), (BASE_TS - 2, None, b"d")]
    got = read(builder.build()).records()
    assert len(got[2].value) + 8 == limit  # the record length that equals the limit
    assert [(r.offset, r.timestamp, r.key, r.value) for r in got] == [(i, *row) for i, row in enumerate(rows)]


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
@pytest.mark.parametrize("many", [False, True], ids=["append", "append_many"])
def test_a_record_that_fills_the_batch_exactly_still_fits(codec: Compression, many: bool) -> None:
    second = (BASE_TS + 1000, b"key", b"v" * 50, [("h", b"1")])
    factor = None if codec == Compression.NONE else 1.05  # Java's estimate: uncompressed * ratio * 1.05
    first_size = record_size(0, 0, None, b"first")
    used = RECORD_BATCH_OVERHEAD + (first_size if factor is None else int(first_size * factor))
    exact = used + record_size(1, 1000, *second[1:])
    for limit, fits in ((exact, True), (exact - 1, False)):
        builder = RecordBatchBuilder(compression=codec, batch_size_limit=limit)
        assert builder.has_room_for(BASE_TS, None, b"x" * (2 * limit))  # the first record always fits
        assert builder.append(BASE_TS, None, b"first") == 0
        assert builder.estimated_size == used
        assert builder.has_room_for(*second) is fits
        if many:
            ts, key, value, hdrs = second
            assert builder.append_many([ts], [key], [value], [hdrs], 0, 1) == (1 if fits else 0)
        else:
            assert builder.append(*second) == (1 if fits else None)
        assert builder.record_count == (2 if fits else 1)


def test_a_fresh_builder_estimates_the_bare_header() -> None:
    assert RecordBatchBuilder().estimated_size == RECORD_BATCH_OVERHEAD
    assert RecordBatchBuilder(compression=Compression.LZ4).estimated_size == RECORD_BATCH_OVERHEAD


def test_a_good_compression_ratio_still_checks_the_exact_estimate() -> None:
    # ratio 0.5 * 1.05: 61 + int(uncompressed * 0.525) + next record <= 1000 decides, for records
    # that fast checks on the uncompressed size alone would still let in.
    builder = RecordBatchBuilder(compression=Compression.GZIP, batch_size_limit=1000, estimated_compression_ratio=0.5)
    taken = 0
    while True:
        room = builder.has_room_for(BASE_TS, None, b"v" * 200)
        if builder.append(BASE_TS, None, b"v" * 200) is None:
            assert not room
            break
        assert room
        taken += 1
    assert taken == 7
    many = RecordBatchBuilder(compression=Compression.GZIP, batch_size_limit=1000, estimated_compression_ratio=0.5)
    assert many.append_many(BASE_TS, None, [b"v" * 200] * 20, None, 0, 20) == taken


def test_observed_compression_ratio_updates_the_estimate_until_built() -> None:
    builder = RecordBatchBuilder(compression=Compression.ZSTD)
    builder.append(BASE_TS, None, b"a" * 1000)
    raw = builder.uncompressed_size - RECORD_BATCH_OVERHEAD
    assert builder.estimated_size == RECORD_BATCH_OVERHEAD + int(raw * 1.05)
    builder.set_estimated_compression_ratio(0.2)
    assert builder.estimated_size == RECORD_BATCH_OVERHEAD + int(raw * (0.2 * 1.05))
    built = builder.build()
    builder.set_estimated_compression_ratio(0.5)
    assert builder.estimated_size == len(built)
    assert builder.uncompressed_size == RECORD_BATCH_OVERHEAD + raw


def test_compression_level_reaches_the_codec() -> None:
    value = b"".join(b"record %d " % i for i in range(3000))
    plain = RecordBatchBuilder()
    plain.append(BASE_TS, None, value)
    records_bytes = plain.build()[RECORD_BATCH_OVERHEAD:]
    payloads = []
    for level in (1, 19):
        builder = RecordBatchBuilder(compression=Compression.ZSTD, compression_level=level)
        builder.append(BASE_TS, None, value)
        payloads.append(builder.build()[RECORD_BATCH_OVERHEAD:])
        assert payloads[-1] == compress(Compression.ZSTD, records_bytes, level)
    assert payloads[0] != payloads[1]


def test_none_timestamps_mean_now_in_append_many() -> None:
    before = int(time.time() * 1000)
    builder = RecordBatchBuilder()
    assert builder.append_many([None, None], None, [b"a", b"b"], None, 0, 2) == 2
    builder.append(None, None, b"c")
    after = int(time.time() * 1000)
    batch = read(builder.build())
    assert all(before <= r.timestamp <= after for r in batch)
    assert before <= batch.base_timestamp <= batch.max_timestamp <= after


def test_append_many_of_an_empty_range_at_the_end_appends_nothing() -> None:
    builder = RecordBatchBuilder()
    assert builder.append_many([BASE_TS], None, [b"v"], None, 1, 1) == 1
    assert builder.record_count == 0 and builder.estimated_size == RECORD_BATCH_OVERHEAD


def test_a_record_that_does_not_fit_leaves_the_max_timestamp() -> None:
    builder = RecordBatchBuilder(batch_size_limit=100)
    builder.append(BASE_TS, None, b"a")
    assert builder.append_many(BASE_TS + 5, None, [b"x" * 200], None, 0, 1) == 0
    assert builder.append(BASE_TS + 6, None, b"x" * 200) is None
    assert read(builder.build()).max_timestamp == BASE_TS


def test_create_time_batches_ignore_a_log_append_time() -> None:
    builder = RecordBatchBuilder(log_append_time_ms=BASE_TS + 10**6)
    builder.append(BASE_TS + 7, None, b"a")
    batch = read(builder.build())
    assert (batch.timestamp_type, batch.max_timestamp) == (TimestampType.CREATE_TIME, BASE_TS + 7)


def test_set_producer_state_keeps_or_sets_the_transactional_flag() -> None:
    kept = RecordBatchBuilder(is_transactional=True)
    kept.append(BASE_TS, None, b"a")
    kept.set_producer_state(5, 0, 0)  # not given: unchanged
    assert read(kept.build()).is_transactional
    assert kept.attributes & 0x10
    made = RecordBatchBuilder()
    made.append(BASE_TS, None, b"a")
    made.set_producer_state(5, 0, 0, is_transactional=True)
    assert made.is_transactional is True
    assert read(made.build()).is_transactional
