"""record_loops: the compiled per-record loops read exactly what the row decoder
(samsa.records.batch.iter_records) reads, and refuse what it refuses.

Every test runs against the installed module (compiled by setup.py where it can be) and its
pure-Python source, loaded under another name, as tests/broker/log/test_validator.py does."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.consumer.records import ConsumerRecord
from samsa.errors import CorruptRecordError
from samsa.records import Compression, TimestampType, iter_batches, record_loops
from samsa.records.batch import iter_records
from samsa.records.builder import RecordBatchBuilder
from samsa.records.varint import decode_varint
from tests.broker.handmade_batches import handmade_record
from tests.records import strategies as rs
from tests.support.compiled_modules import both_builds, check_compiled_in_use, is_compiled

COMPILED = is_compiled(record_loops)
M: ModuleType = record_loops


@pytest.fixture(scope="module", autouse=True, params=["installed", "source"])
def implementation(request: pytest.FixtureRequest) -> Iterator[ModuleType]:
    with both_builds(request, record_loops) as module, pytest.MonkeyPatch.context() as patch:
        patch.setitem(globals(), "M", module)
        yield module


def test_the_compiled_loops_are_in_use_where_they_can_be_built() -> None:
    check_compiled_in_use(record_loops)


def section_of(records: list[Any], codec: Compression = Compression.NONE,
               append_time: bool = False) -> tuple[bytes, Any]:
    builder = RecordBatchBuilder(codec, base_offset=1000, timestamp_type=(
        TimestampType.LOG_APPEND_TIME if append_time else TimestampType.CREATE_TIME))
    for ts, key, value, headers in records:
        assert builder.append(ts, key, value, headers) is not None
    (batch,) = iter_batches(builder.build())
    if append_time:  # as a broker sets it: every record gets the batch's max timestamp
        batch.header = batch.header._replace(max_timestamp=rs.BASE_TS + 5)
    return batch.records_section(), batch.header


def rows(data: bytes, header: Any, chunk: int, min_offset: int = 0,
         key_fn: Any = None, value_fn: Any = None) -> list[Any]:
    append_time = header.max_timestamp if header.timestamp_type == TimestampType.LOG_APPEND_TIME else -1
    out: list[Any] = []
    pos, left = 0, header.records_count
    while left:
        got, pos, left = M.decode_rows(data, pos, left, chunk, min_offset, header.base_offset,
                                       header.base_timestamp, append_time, header.timestamp_type,
                                       ("t", 3), 7, ConsumerRecord, key_fn, value_fn)
        assert len(got) == chunk or left == 0, "a chunk comes short only at the batch's end"
        out += got
    return out


def expected(data: bytes, header: Any, min_offset: int = 0) -> list[ConsumerRecord]:
    return [ConsumerRecord("t", 3, r.offset, r.timestamp, r.timestamp_type, r.key, r.value,
                           tuple(r.headers), -1 if r.key is None else len(r.key),
                           -1 if r.value is None else len(r.value), 7)
            for r in iter_records(data, header.records_count, header.base_offset,
                                  header.base_timestamp, header.timestamp_type,
                                  header.max_timestamp)
            if r.offset >= min_offset]


@settings(max_examples=150, deadline=None)
@given(rs.records, st.integers(1, 50), st.integers(0, 45), st.booleans(), rs.codecs)
def test_decode_rows_reads_what_the_row_decoder_reads(records: list[Any], chunk: int, skip: int,
                                                      append_time: bool, codec: Compression) -> None:
    data, header = section_of(records, codec, append_time)
    got = rows(data, header, chunk, min_offset=1000 + skip)
    assert got == expected(data, header, 1000 + skip)
    assert all(type(r) is ConsumerRecord for r in got)


def test_decode_rows_applies_the_deserializers() -> None:
    data, header = section_of([(rs.BASE_TS, b"k", b"v", []), (rs.BASE_TS, None, None, [])])
    got = rows(data, header, 10, key_fn=lambda t, b: ("key", t, b), value_fn=lambda t, b: ("value", b))
    assert [(r.key, r.value, r.serialized_key_size, r.serialized_value_size) for r in got] == [
        (("key", "t", b"k"), ("value", b"v"), 1, 1), (("key", "t", None), ("value", None), -1, -1)]


@settings(max_examples=100, deadline=None)
@given(rs.records)
def test_record_starts_finds_each_record(records: list[Any]) -> None:
    data, header = section_of(records)
    padded = b"xyz" + data + b"!"
    starts: list[int] = []
    M.record_starts(padded, 3, 3 + len(data), header.records_count, starts)
    assert len(starts) == len(records) and starts[0] == 3
    # each record is its length varint plus that many bytes, up to the next one
    for start, after in zip(starts, [*starts[1:], 3 + len(data)], strict=True):
        length, body = decode_varint(padded, start)
        assert body + length == after


LIES = {
    "key longer than the record": handmade_record(0, b"v", key=b"k", key_length=40),
    "value longer than the record": handmade_record(0, b"v", value_length=40),
    "negative key length": handmade_record(0, b"v", key_length=-2),
    "bytes after the fields": handmade_record(0, b"v", trailing=b"zz"),
    "header count beyond the record": handmade_record(0, b"v", header_count=5),
    "record shorter than its fields": handmade_record(0, b"value", length=7),
    "null header key": handmade_record(0, b"v", headers=[(None, b"x")]),
}


@pytest.mark.parametrize("lie", sorted(LIES))
def test_a_record_that_lies_is_refused_as_the_row_decoder_refuses_it(lie: str) -> None:
    good = handmade_record(1, b"fine")
    data = LIES[lie] + good
    with pytest.raises(CorruptRecordError):
        list(iter_records(data, 2, 0, 0, TimestampType.CREATE_TIME, -1))
    with pytest.raises((ValueError, IndexError)):
        M.decode_rows(data, 0, 2, 10, 0, 0, 0, -1, TimestampType.CREATE_TIME, ("t", 0), None,
                      ConsumerRecord, None, None)


@pytest.mark.parametrize("count, extra", [(3, b""), (1, b""), (2, b"\x00")])
def test_records_that_do_not_fill_the_section_exactly_are_refused(count: int, extra: bytes) -> None:
    data = handmade_record(0, b"a") + handmade_record(1, b"b") + extra
    with pytest.raises((ValueError, IndexError)):
        M.record_starts(data, 0, len(data), count, [])
    with pytest.raises((ValueError, IndexError)):
        M.decode_rows(data, 0, count, 10, 0, 0, 0, -1, TimestampType.CREATE_TIME, ("t", 0), None,
                      ConsumerRecord, None, None)


def test_an_overlong_varint_is_refused() -> None:
    data = b"\xff" * 6 + b"\x01" + b"\x00" * 20
    for call in (lambda: M.record_starts(data, 0, len(data), 1, []),
                 lambda: M.decode_rows(data, 0, 1, 1, 0, 0, 0, -1, TimestampType.CREATE_TIME,
                                       ("t", 0), None, ConsumerRecord, None, None)):
        with pytest.raises(ValueError, match="varint"):
            call()


def columns_as_rows(data: bytes, sections: list[tuple[int, int, int, int]], want: int = 1 << 30,
                    min_offset: int = 0) -> list[Any]:
    cols = M.RecordColumns()
    for start, end, count, base in sections:
        _, left = M.record_columns(data, start, end, count, want - cols.count, min_offset, base, cols)
        assert left == 0 or cols.count == want
        if left:
            break
    n = cols.count
    value_len = cols.value_len or [cols.value_size] * n
    sizes = [max(v, 0) for v in value_len]
    value_pos = [gap + sum(sizes[:i]) for i, gap in enumerate(itertools.accumulate(cols.value_gaps))]
    rows_at = [*cols.offset_rows, n]  # offsets follow on from each listed one
    offsets = [value + i - row for row, value, stop in zip(rows_at, cols.offset_values, rows_at[1:],
                                                           strict=False)
               for i in range(row, stop)]
    keys = [None if kl < 0 else data[vp - kb : vp - kb + kl]
            for kb, kl, vp in zip(cols.key_back, cols.key_len, value_pos, strict=False)] or [None] * n
    counts = cols.header_counts or [0] * n
    value_ends = [p + s for p, s in zip(value_pos, sizes, strict=True)]
    header_ends = [end for end, c in zip(value_ends, counts, strict=True) for _ in range(c)]
    pairs = []
    for end, ka, kl, va, vl in zip(header_ends, cols.header_key_at, cols.header_key_len,
                                   cols.header_value_at, cols.header_value_len, strict=True):
        kp = end + ka
        pairs.append((data[kp : kp + kl].decode(), None if vl < 0 else data[kp + va : kp + va + vl]))
    headers, at = [], 0
    for c in counts:
        headers.append(pairs[at : at + c])
        at += c
    values = [None if vl < 0 else data[vp : vp + vl] for vp, vl in zip(value_pos, value_len, strict=True)]
    return list(zip(offsets, cols.timestamp_deltas, keys, values, headers, strict=True))


@settings(max_examples=150, deadline=None)
@given(st.lists(rs.records, min_size=1, max_size=3), st.lists(st.integers(0, 5), min_size=3, max_size=3),
       st.integers(1, 40), st.integers(0, 30))
def test_record_columns_read_what_the_row_decoder_reads(batches: list[list[Any]], gaps: list[int],
                                                        limit: int, skip: int) -> None:
    """Several sections of one buffer (a run of batches), with gaps between their offsets (a
    compacted log): keys, offsets and header counts are filled in once the first record needs
    them; up to ``want`` records, those below ``min_offset`` checked but skipped."""
    data, sections, want, base = b"", [], [], 0
    for records, gap in zip(batches, gaps, strict=False):
        base += gap
        section, header = section_of(records)
        sections.append((len(data), len(data) + len(section), header.records_count, base))
        want += [(base + i, r.timestamp - header.base_timestamp, r.key, r.value, r.headers)
                 for i, r in enumerate(iter_records(section, header.records_count, 0,
                                                    header.base_timestamp,
                                                    TimestampType.CREATE_TIME, -1))]
        data += section
        base += header.records_count
    assert columns_as_rows(data, sections) == want
    assert columns_as_rows(data, sections, limit, skip) == [r for r in want if r[0] >= skip][:limit]


def test_record_columns_stop_at_want_and_go_on_from_there() -> None:
    section, _ = section_of([(rs.BASE_TS + i, None, b"v%d" % i, []) for i in range(10)])
    cols = M.RecordColumns()
    pos, left = M.record_columns(section, 0, len(section), 10, 4, 0, 1000, cols)
    assert (cols.count, left) == (4, 6)
    assert M.record_columns(section, pos, len(section), left, 100, 0, 1000, cols) == (len(section), 0)
    assert cols.count == 10
    assert (cols.offset_rows, cols.offset_values) == ([0], [1000])  # the rest follow on
    with pytest.raises(ValueError, match="remain"):  # a section longer than its records
        M.record_columns(section + b"\x00", 0, len(section) + 1, 10, 100, 0, 1000, M.RecordColumns())


def test_record_columns_keep_offset_gaps_inside_a_batch() -> None:
    data = handmade_record(0, b"a") + handmade_record(2, b"b") + handmade_record(5, b"c")
    assert [(o, v) for o, _t, _k, v, _h in columns_as_rows(data, [(0, len(data), 3, 10)])] == [
        (10, b"a"), (12, b"b"), (15, b"c")]


@pytest.mark.parametrize("lie", sorted(LIES))
def test_record_columns_refuse_a_record_that_lies(lie: str) -> None:
    data = LIES[lie] + handmade_record(1, b"fine")
    with pytest.raises((ValueError, IndexError)):
        M.record_columns(data, 0, len(data), 2, 2, 0, 0, M.RecordColumns())


@pytest.mark.parametrize("size", [0, 63, 64, 8191, 8192, 1_048_575, 1_048_576])
def test_every_varint_width_is_read(size: int) -> None:
    """Keys, values and header fields of sizes whose varints take one to four bytes (the one-
    and two-byte ones are read inline): both loops read what the row decoder reads."""
    blob = bytes(range(256)) * (size // 256 + 1)
    records = [(rs.BASE_TS, blob[:size], blob[1 : size + 1], [("h" * min(size, 9000), blob[:size])]),
               (rs.BASE_TS + size, None, blob[:size], []), (rs.BASE_TS, b"k", b"", [])]
    builder = RecordBatchBuilder(base_offset=1000, batch_size_limit=1 << 30)
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers)
    (batch,) = iter_batches(builder.build())
    data, header = batch.records_section(), batch.header
    assert rows(data, header, 2) == expected(data, header)
    assert [(o, k, v, h) for o, _, k, v, h in columns_as_rows(data, [(0, len(data), 3, 1000)])] == [
        (r.offset, r.key, r.value, list(r.headers)) for r in expected(data, header)]


@pytest.mark.parametrize("sizes", [[5, 5, 5], [5, 5, 7], [7, 5, 5], [-1, -1, -1], [0, 0, -1],
                                   [-1, 0, 0]])
def test_record_columns_lists_value_lengths_once_they_differ(sizes: list[int]) -> None:
    """Values of one size are kept as that size alone (value_len empty); the first of
    another size lists them all, also when it comes in a later batch."""
    data, sections, want, base = b"", [], [], 0
    for size in sizes:  # a batch each
        value = None if size < 0 else b"v" * size
        section, _ = section_of([(rs.BASE_TS, None, value, []), (rs.BASE_TS, None, value, [])])
        sections.append((len(data), len(data) + len(section), 2, base))
        want += [(base, 0, None, value, []), (base + 1, 0, None, value, [])]
        data += section
        base += 2
    cols = M.RecordColumns()
    assert columns_as_rows(data, sections) == want
    for start, end, count, first in sections:
        M.record_columns(data, start, end, count, 100, 0, first, cols)
    assert cols.value_len == ([] if len(set(sizes)) == 1 else [s for s in sizes for _ in (0, 1)])
