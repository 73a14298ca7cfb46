"""ArrowRecords: batches built from Arrow columns are byte for byte the batches that
RecordBatchBuilder.append builds for the same records (same split into batches under
batch_size_limit and compressed-size estimates, same varints, deltas, attributes, CRC)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.records import Compression
from samsa.records.arrow_records import ArrowRecords, as_binary, encode_varints
from samsa.records.builder import RecordBatchBuilder
from samsa.records.varint import encode_varint, encode_varlong
from tests.records import strategies as rs

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def columns(records: list[Any]) -> tuple[pa.Array, pa.Array, pa.Array | None]:
    keys = pa.array([k for _t, k, _v, _h in records], pa.binary())
    values = pa.array([v for _t, _k, v, _h in records], pa.binary())
    headers = pa.array([[{"key": hk, "value": hv} for hk, hv in h] for _t, _k, _v, h in records], HEADERS)
    return as_binary(keys, "key"), as_binary(values, "value"), headers


def batches_by_append(records: list[Any], codec: Compression, limit: int, ratio: float) -> list[bytes]:
    out, builder = [], None
    for ts, key, value, headers in records:
        if builder is None or builder.append(ts, key, value, headers) is None:
            if builder is not None:
                out.append(builder.build())
            builder = RecordBatchBuilder(codec, batch_size_limit=limit, estimated_compression_ratio=ratio)
            assert builder.append(ts, key, value, headers) == 0
    assert builder is not None
    out.append(builder.build())
    return out


def batches_by_arrow(rows: ArrowRecords, codec: Compression, limit: int, ratio: float) -> list[bytes]:
    out, i = [], 0
    while i < len(rows):
        builder = RecordBatchBuilder(codec, batch_size_limit=limit, estimated_compression_ratio=ratio)
        # Several calls into one batch, as the accumulator makes when one call's rows run out.
        step = max(1, (len(rows) - i) // 2)
        j = rows.append_to(builder, i, i + step)
        if j == i + step:
            j = rows.append_to(builder, j, len(rows))
        assert j > i
        i = j
        out.append(builder.build())
    return out


@settings(max_examples=150, deadline=None)
@given(rs.records, rs.codecs, st.sampled_from([64, 200, 1000, 16384]),
       st.sampled_from([0.3, 1.0, 1.7]))
def test_arrow_batches_equal_the_ones_append_builds(records: list[Any], codec: Compression, limit: int,
                                                     ratio: float) -> None:
    keys, values, headers = columns(records)
    stamps = np.array([t for t, *_ in records], np.int64)
    rows = ArrowRecords(keys, values, headers, stamps)
    assert batches_by_arrow(rows, codec, limit, ratio) == batches_by_append(records, codec, limit, ratio)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(rs.keys, rs.values), min_size=1, max_size=300), rs.codecs)
def test_one_timestamp_for_all_rows_and_no_headers(pairs: list[Any], codec: Compression) -> None:
    records = [(rs.BASE_TS, k, v, []) for k, v in pairs]
    keys, values, _ = columns(records)
    rows = ArrowRecords(keys, values, None, rs.BASE_TS)
    assert batches_by_arrow(rows, codec, 2000, 1.0) == batches_by_append(records, codec, 2000, 1.0)


@settings(max_examples=100, deadline=None)
@given(rs.records, st.sampled_from([64, 200, 1000, 16384]))
def test_planned_batches_of_one_timestamp_equal_the_ones_append_builds(records: list[Any], limit: int) -> None:
    """One timestamp for every row and no compression: rows are laid out in batches ahead
    (plan_batches) and encoded whole; each batch must still be append's, byte for byte."""
    records = [(rs.BASE_TS, k, v, h) for _t, k, v, h in records]
    keys, values, headers = columns(records)
    rows = ArrowRecords(keys, values, headers, rs.BASE_TS)
    assert batches_by_arrow(rows, Compression.NONE, limit, 1.0) == batches_by_append(
        records, Compression.NONE, limit, 1.0)


@settings(max_examples=50, deadline=None)
@given(st.lists(rs.values, min_size=1, max_size=200), st.lists(st.sampled_from([150, 700, 5000]), min_size=1),
       st.integers(0, 5))
def test_batches_of_other_sizes_and_unplanned_starts_take_the_loop(values: list[Any], limits: list[int],
                                                                   cut: int) -> None:
    """A batch of another size than the plan's, or one starting at a row the plan did not
    start a batch at (a first batch that ends early), is filled record by record: the batches
    are append's for the same sizes."""
    records = [(rs.BASE_TS, None, v, []) for v in values]
    rows = ArrowRecords(None, as_binary(pa.array(values, pa.binary()), "value"), None, rs.BASE_TS)
    got, want, i, b = [], [], 0, 0
    while i < len(records):
        limit = limits[b % len(limits)]
        arrow, ref = (RecordBatchBuilder(Compression.NONE, batch_size_limit=limit) for _ in range(2))
        end = min(len(records), i + cut) if b == 0 and cut else len(records)
        j = rows.append_to(arrow, i, end)
        for ts, key, value, headers in records[i:j]:
            assert ref.append(ts, key, value, headers) is not None
        assert j > i and (j == len(records) or j == end or ref.append(*records[j]) is None)
        got.append(arrow.build())
        want.append(ref.build())
        i, b = j, b + 1
    assert got == want


def test_no_key_column_means_null_keys_and_strings_are_utf8() -> None:
    values = as_binary(pa.array(["é", "", None]), "value")
    rows = ArrowRecords(None, values, None, 5)
    got = batches_by_arrow(rows, Compression.NONE, 16384, 1.0)
    assert got == batches_by_append([(5, None, "é".encode(), []), (5, None, b"", []), (5, None, None, [])],
                                    Compression.NONE, 16384, 1.0)


@given(st.lists(st.none() | st.binary(max_size=20), max_size=30), st.integers(0, 5), st.integers(0, 30),
       st.booleans())
def test_as_binary_widens_offsets_of_slices_with_nulls(items: list[Any], lo: int, size: int, text: bool) -> None:
    """binary and string columns keep their bytes; only the offsets widen (sliced, nulls)."""
    if text:
        column = pa.array([None if b is None else b.hex() for b in items], pa.string())
    else:
        column = pa.array(items, pa.binary())
    column = column.slice(min(lo, len(column)), size)
    got = as_binary(column, "value")
    assert got.type == pa.large_binary()
    want = column.cast(pa.large_string()).view(pa.large_binary()) if text else column.cast(pa.large_binary())
    assert got.to_pylist() == want.to_pylist() and got.null_count == want.null_count


@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=50))
def test_varints_are_the_scalar_encoder_s(values: list[int]) -> None:
    got = encode_varints(np.array(values, np.int64)).to_pylist()
    assert got == [encode_varlong(v) for v in values]
    framed = encode_varints(np.array(values, np.int64), b"\x00\x00", b"\x01").to_pylist()
    assert framed == [b"\x00\x00" + encode_varlong(v) + b"\x01" for v in values]
    small = [v for v in values if -(2**31) <= v < 2**31]
    assert encode_varints(np.array(small, np.int64)).to_pylist() == [encode_varint(v) for v in small]


def test_offset_deltas_past_the_table_and_long_rows() -> None:
    n = 140_000  # past the table of offset-delta encodings
    values = as_binary(pa.array([b"v"] * n), "value")
    rows = ArrowRecords(None, values, None, rs.BASE_TS)
    records = [(rs.BASE_TS, None, b"v", [])] * n
    assert batches_by_arrow(rows, Compression.NONE, 2**21, 1.0) == batches_by_append(
        records, Compression.NONE, 2**21, 1.0)


def test_many_planned_batches_of_varied_rows() -> None:
    """Thousands of rows of varied sizes, planned in small and large batches: still append's."""
    rng = np.random.default_rng(7)
    values = [b"v" * int(size) for size in rng.integers(0, 300, 9000)]
    records = [(rs.BASE_TS, None, v, []) for v in values]
    for limit in (900, 16384):
        rows = ArrowRecords(None, as_binary(pa.array(values, pa.binary()), "value"), None, rs.BASE_TS)
        assert batches_by_arrow(rows, Compression.NONE, limit, 1.0) == batches_by_append(
            records, Compression.NONE, limit, 1.0)


@pytest.mark.parametrize("value", [None, b"", b"x", b"x" * 63, b"x" * 64, b"x" * 200, b"x" * 9000])
@pytest.mark.parametrize("limit", [100, 1000, 16384])
def test_keyless_headerless_values_of_one_length(value: bytes | None, limit: int) -> None:
    """The heads of such rows come from a table of offsetDeltas (one value length): still
    append's batches, nulls, empty values and multi-byte length varints included."""
    n = 3000
    records = [(rs.BASE_TS, None, value, [])] * n
    rows = ArrowRecords(None, as_binary(pa.array([value] * n, pa.binary()), "value"), None, rs.BASE_TS)
    assert batches_by_arrow(rows, Compression.NONE, limit, 1.0) == batches_by_append(
        records, Compression.NONE, limit, 1.0)


def test_bad_columns_say_what_to_give() -> None:
    with pytest.raises(TypeError, match="binary or string"):
        as_binary(pa.array([1, 2]), "value")
    headers = pa.array([[{"key": None, "value": b"x"}]], HEADERS)
    with pytest.raises(ValueError, match="null key"):
        ArrowRecords(None, as_binary(pa.array([b"v"]), "value"), headers, 0)
