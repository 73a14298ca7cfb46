"""poll_arrow's decoder against poll()'s: the same fetched bytes through CompletedFetch.take
(records) and CompletedFetch.take_arrow (Arrow columns) give the same records, positions and
errors -- every codec, nulls, empty values, headers, LogAppendTime, v0/v1 message sets,
aborted transactions under read_committed, fetches from inside a batch, corrupt records."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa.consumer.arrow_records import ARROW_SCHEMA, PollColumns, assemble
from samsa.consumer.fetcher import CompletedFetch, ResponseData
from samsa.errors import CorruptRecordError
from samsa.net.cluster import TopicPartition
from samsa.records import Compression, RecordBatchBuilder, TimestampType
from samsa.records.legacy_builder import build_legacy_records
from tests.consumer.test_read_committed import ABORTING, LOG
from tests.records import strategies

TP = TopicPartition("arrow", 3)
REPO_ROOT = Path(__file__).resolve().parents[2]


def build(batches: list[list[Any]], codec: Compression = Compression.NONE, base: int = 0,
          log_append_time: int | None = None) -> bytes:
    out = b""
    for records in batches:
        builder = RecordBatchBuilder(compression=codec, base_offset=base, batch_size_limit=1 << 30,
                                     log_append_time_ms=log_append_time,
                                     timestamp_type=TimestampType.LOG_APPEND_TIME if log_append_time
                                     else TimestampType.CREATE_TIME)
        for ts, key, value, headers in records:
            builder.append(ts, key, value, headers)
        out += bytes(builder.build())
        base += len(records)
    return out


def fetch(data: bytes, start: int = 0, **kw: Any) -> CompletedFetch:
    kw.setdefault("check_crcs", True)
    kw.setdefault("read_committed", False)
    kw.setdefault("aborted", None)
    return CompletedFetch(TP, start, data, kw["check_crcs"], kw["read_committed"], kw["aborted"])


def rows_of(cf: CompletedFetch, step: int) -> list[Any]:
    out: list[Any] = []
    while not cf.consumed:
        out += cf.take(step, None, None)
    return out


def arrow_of(cf: CompletedFetch, step: int) -> pa.Table:
    pieces: list[Any] = []
    while not cf.consumed:
        taken = cf.take_arrow(step)
        assert sum(p.num_rows for p in taken) <= step
        pieces += taken
    table = pa.Table.from_batches(pieces, schema=ARROW_SCHEMA)
    assert set(table.column("topic").to_pylist()) <= {TP.topic}
    assert set(table.column("partition").to_pylist()) <= {TP.partition}
    return table


def as_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    cols = table.to_pydict()
    return [(o, ts, k, v, [(h["key"], h["value"]) for h in hs], t) for o, ts, k, v, hs, t in zip(
        cols["offset"], cols["timestamp"], cols["key"], cols["value"], cols["headers"],
        cols["timestamp_type"], strict=True)]


def expected(records: list[Any]) -> list[tuple[Any, ...]]:
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers), int(r.timestamp_type))
            for r in records]


def same(data: bytes, start: int = 0, step: int = 1_000_000, **kw: Any) -> list[Any]:
    a, b = fetch(data, start, **kw), fetch(data, start, **kw)
    rows = rows_of(a, step)
    table = arrow_of(b, step)
    assert as_rows(table) == expected(rows)
    assert b.next_offset == a.next_offset
    return rows


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(strategies.records, min_size=1, max_size=4), codec=strategies.codecs,
       start=st.integers(0, 60), step=st.integers(1, 50), append_time=st.booleans())
def test_take_arrow_matches_take(batches: list[list[Any]], codec: Compression, start: int,
                                 step: int, append_time: bool) -> None:
    data = build(batches, codec, log_append_time=1_800_000_000_000 if append_time else None)
    same(data, start=min(start, sum(map(len, batches))), step=step)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fetches=st.lists(st.tuples(st.lists(strategies.records, min_size=1, max_size=3),
                                  strategies.codecs), min_size=1, max_size=4),
       step=st.integers(1, 60))
def test_one_poll_reads_several_partitions_into_one_set_of_columns(
        fetches: list[tuple[list[list[Any]], Compression]], step: int) -> None:
    """As Fetcher.fetched_arrow: each poll reads the fetches of several partitions (some of one
    response, joined into one buffer, others each in its own; plain or compressed, bytes or
    not) into one PollColumns, and each partition's records are one batch of it; the records
    and positions are poll()'s."""
    datas = [build(batches, codec) for batches, codec in fetches]
    tps = [TopicPartition(f"t{i % 2}", i) for i in range(len(datas))]
    rows_fetches = [CompletedFetch(tp, 0, d, True, False, None) for tp, d in zip(tps, datas, strict=True)]
    response = ResponseData()  # the partitions of one fetch response, joined when first read
    arrow_fetches = [CompletedFetch(tp, 0, bytearray(d) if i % 3 else d, True, False, None,
                                    response=response if i % 2 == 0 else None)
                     for i, (tp, d) in enumerate(zip(tps, datas, strict=True))]
    got: dict[TopicPartition, list[pa.RecordBatch]] = {tp: [] for tp in tps}
    while not all(cf.consumed for cf in arrow_fetches):
        columns = PollColumns()
        pieces: dict[TopicPartition, list[Any]] = {}
        remaining = step
        for cf in arrow_fetches:
            while remaining > 0 and not cf.consumed:
                taken = cf.take_arrow(remaining, columns)
                remaining -= sum(p.num_rows for p in taken)
                if taken:
                    pieces.setdefault(cf.tp, []).extend(taken)
        assert remaining >= 0
        for tp, p in pieces.items():
            batch = assemble(columns, p)
            assert batch.schema == ARROW_SCHEMA
            assert set(batch.column("topic").to_pylist()) <= {tp.topic}
            assert set(batch.column("partition").to_pylist()) <= {tp.partition}
            got[tp].append(batch)
    for a, b in zip(rows_fetches, arrow_fetches, strict=True):
        table = pa.Table.from_batches(got[b.tp], schema=ARROW_SCHEMA)
        assert as_rows(table) == expected(rows_of(a, step))
        assert b.next_offset == a.next_offset


def test_columns_nulls_empties_and_headers() -> None:
    records = [(1_700_000_000_000, None, b"", [("h", b"x" * 20), ("n", None), ("\u00e9", b"")]),
               (1_700_000_000_001, b"", None, []),
               (1_699_000_000_000, b"k" * 13, b"v" * 12, [("k", b"")])]
    data = build([records])
    table = arrow_of(fetch(data), 100)
    assert table.column("key").to_pylist() == [None, b"", b"k" * 13]
    assert table.column("value").to_pylist() == [b"", None, b"v" * 12]
    assert table.column("headers").to_pylist()[0] == [
        {"key": "h", "value": b"x" * 20}, {"key": "n", "value": None}, {"key": "\u00e9", "value": b""}]
    assert table.column("timestamp").to_pylist() == [r[0] for r in records]
    assert table.column("topic").to_pylist() == ["arrow"] * 3
    assert table.column("partition").to_pylist() == [3] * 3


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.SNAPPY,
                                   Compression.LZ4])
def test_legacy_message_sets(magic: int, codec: Compression) -> None:
    entries = [(i, 1_700_000_000_000 + i, None if i % 3 else b"k%d" % i, b"value-%d" % i)
               for i in range(40)]
    data = b"".join(build_legacy_records(magic, codec, entries[i:i + 10]) for i in range(0, 40, 10))
    rows = same(data, start=5, step=7)
    assert [r.offset for r in rows] == list(range(5, 40))


def test_mixed_kinds_in_one_fetch() -> None:
    """Uncompressed, compressed and v1 batches one after the other are decoded run by run."""
    records = [(1_700_000_000_000 + i, None, b"v%d" % i, []) for i in range(30)]
    data = (build([records[:10]]) + build([records[10:20]], Compression.ZSTD, base=10)
            + build_legacy_records(1, Compression.NONE,
                                   [(20 + i, 1, None, b"legacy") for i in range(5)])
            + build([records[:5]], base=25))
    assert len(same(data, step=8)) == 30


def test_read_committed_skips_aborted_transactions_and_markers() -> None:
    aborted = [SimpleNamespace(producer_id=ABORTING, first_offset=0)]
    rows = same(LOG, read_committed=True, aborted=aborted, step=2)
    assert [r.value for r in rows] == [b"committed-2", b"committed-3", b"plain-4",
                                       b"next-7", b"next-8"]


def test_mixing_poll_and_poll_arrow_on_one_fetch() -> None:
    records = [(1_700_000_000_000, None, b"v%d" % i, []) for i in range(100)]
    data = build([records[:60], records[60:]])
    cf = fetch(data)
    got = [r.offset for r in cf.take(7, None, None)]
    got += cf.take_arrow(30)[0].column("offset").to_pylist()  # rest of a batch poll() started
    got += [r.offset for r in cf.take(5, None, None)]  # rest of a batch poll_arrow() started
    while not cf.consumed:
        got += [o for p in cf.take_arrow(40) for o in p.column("offset").to_pylist()]
    assert got == list(range(100))


def corrupt(data: bytes, record_index: int) -> bytes:
    """``data`` (one uncompressed batch, CRC not checked) with record ``record_index``'s key
    length set past the record's end."""
    from samsa.records.varint import decode_varint

    buf = bytearray(data)
    pos = 61
    for _ in range(record_index):
        length, after = decode_varint(buf, pos)
        pos = after + length
    _, pos = decode_varint(buf, pos)  # length
    pos += 1  # attributes
    _, pos = decode_varint(buf, pos)  # timestamp delta
    _, pos = decode_varint(buf, pos)  # offset delta
    buf[pos] = 0x7E  # key length 63
    return bytes(buf)


def test_corrupt_record_same_error_after_the_records_before_it() -> None:
    records = [(1_700_000_000_000, b"k", b"v%d" % i, []) for i in range(20)]
    data = corrupt(build([records]), 12)
    a, b = fetch(data, check_crcs=False), fetch(data, check_crcs=False)
    rows = a.take(100, None, None)
    pieces = b.take_arrow(100)
    assert [r.offset for r in rows] == pieces[0].column("offset").to_pylist() == list(range(12))
    assert a.next_offset == b.next_offset == 12
    with pytest.raises(CorruptRecordError) as row_error:
        a.take(100, None, None)
    with pytest.raises(CorruptRecordError) as arrow_error:
        b.take_arrow(100)
    assert str(arrow_error.value) == str(row_error.value)
    assert "seek to offset 20" in str(arrow_error.value)


def test_crc_failure_raises_as_poll_does() -> None:
    good = build([[(1, None, b"a", [])] * 3])
    bad = bytearray(build([[(1, None, b"b", [])] * 3], base=3))
    bad[-1] ^= 0xFF
    a, b = fetch(good + bytes(bad)), fetch(good + bytes(bad))
    assert len(a.take(10, None, None)) == 3
    assert b.take_arrow(10)[0].num_rows == 3
    with pytest.raises(CorruptRecordError) as row_error:
        a.take(10, None, None)
    with pytest.raises(CorruptRecordError) as arrow_error:
        b.take_arrow(10)
    assert str(arrow_error.value) == str(row_error.value)


def test_reading_records_into_arrow_does_not_import_pandas() -> None:
    """pa.array() on a numpy array looks for pandas first and imports it: about 0.2 s at a
    consumer's first poll_arrow(), for a library the columns never need."""
    code = """
import sys
from tests.consumer.test_arrow_records import build, fetch
from samsa.consumer.arrow_records import PollColumns, assemble
columns = PollColumns()
pieces = fetch(build([[(1, None, b"v", [])] * 20, [(2, b"k", b"w" * 20, [("h", b"x")])] * 5])
               ).take_arrow(100, columns)
batch = assemble(columns, pieces)
assert batch.num_rows == 25, batch
assert "pandas" not in sys.modules, "imported pandas"
"""
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO_ROOT)
