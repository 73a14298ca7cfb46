"""Reading v2 batches: the worked example, corruption and truncation."""

import re
import struct
from collections.abc import Sequence

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.errors import CorruptRecordError
from samsa.records import (
    Compression,
    RecordBatch,
    RecordBatchBuilder,
    TimestampType,
    decode_records,
    iter_batches,
)
from samsa.records.batch import iter_records
from samsa.records.compression import DecompressedSizeError

from .strategies import BASE_TS

# Kafka's DefaultRecord layout, as kafka-python's DefaultRecordBatchBuilder writes two records, (ts=1700000000000, b'k', b'v', [('h', b'x')]) and (ts=+5, None, b'vv')
EXAMPLE_RECORDS = bytes.fromhex("18000000026b0276020268027810000a020104767600")


def example_batch() -> bytes:
    tail = struct.pack(">hiqqqhii", 0, 1, 1_700_000_000_000, 1_700_000_000_005, -1, -1, -1, 2) + EXAMPLE_RECORDS
    return struct.pack(">qiibI", 0, 71, 0, 2, crc32c(tail)) + tail


def test_worked_example_decodes_exactly() -> None:
    buf = example_batch()
    assert len(buf) == 83
    batch = RecordBatch(buf)
    batch.ensure_valid()
    assert (batch.batch_length if hasattr(batch, "batch_length") else batch.header.batch_length) == 71
    assert (batch.last_offset_delta, batch.base_timestamp, batch.max_timestamp) == (1, 1_700_000_000_000, 1_700_000_000_005)
    r0, r1 = batch
    assert (r0.offset, r0.timestamp, r0.key, r0.value, r0.headers) == (0, 1_700_000_000_000, b"k", b"v", [("h", b"x")])
    assert (r1.offset, r1.timestamp, r1.key, r1.value, r1.headers) == (1, 1_700_000_000_005, None, b"vv", [])
    assert r0.timestamp_type is TimestampType.CREATE_TIME


def test_builder_reproduces_the_worked_example() -> None:
    builder = RecordBatchBuilder(partition_leader_epoch=0)  # kafka-python writes epoch 0
    builder.append(1_700_000_000_000, b"k", b"v", [("h", b"x")])
    builder.append(1_700_000_000_005, None, b"vv")
    assert builder.build() == example_batch()


def build(n: int = 5, codec: Compression = Compression.NONE, base_offset: int = 0) -> bytes:
    builder = RecordBatchBuilder(compression=codec, base_offset=base_offset)
    for i in range(n):
        builder.append(BASE_TS + i, b"key-%d" % i, b"value-%d" % i * 3, [("i", b"%d" % i)])
    return builder.build()


@pytest.mark.parametrize("codec", list(Compression))
def test_flipped_byte_fails_the_crc_naming_the_offset(codec: Compression) -> None:
    clean = build(20, codec, base_offset=4242)
    for pos in range(21, len(clean)):
        buf = bytearray(clean)
        buf[pos] ^= 0x40
        with pytest.raises(CorruptRecordError, match="offset 4242.*CRC"):
            list(iter_batches(buf))


@pytest.mark.parametrize("codec", list(Compression))
def test_truncated_batch_is_a_clean_end_of_iteration(codec: Compression) -> None:
    a, b = build(3, codec), build(7, codec, base_offset=3)
    for cut in range(len(a), len(a) + len(b)):
        got = list(iter_batches(a + b[: cut - len(a)]))
        assert [x.base_offset for x in got] == [0]
    assert [x.base_offset for x in iter_batches(a + b)] == [0, 3]
    with pytest.raises(CorruptRecordError, match="offset 3.*truncated"):
        RecordBatch(b[:-1])


@settings(max_examples=300, deadline=None)
@given(
    codec=st.sampled_from(list(Compression)),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), min_size=1, max_size=4),
)
def test_any_corruption_raises_only_corrupt_record_error(codec: Compression, flips: list) -> None:
    """With CRC checks off, the record decoder itself must still fail cleanly."""
    buf = bytearray(build(6, codec))
    for pos, mask in flips:
        buf[pos % len(buf)] ^= mask
    try:
        for batch in iter_batches(bytes(buf), check_crcs=False):
            for record in batch:
                assert isinstance(record.offset, int)
    except CorruptRecordError as exc:
        assert "offset" in str(exc) or "byte" in str(exc)


def read_all(buf: bytes | bytearray) -> list:
    return [r for batch in iter_batches(buf) for r in batch]


def test_structural_errors_name_the_offset() -> None:
    # A consistent CRC over broken records (as a buggy writer would produce).
    def rewrite(records: bytes, count: int) -> bytes:
        tail = struct.pack(">hiqqqhii", 0, count - 1, BASE_TS, BASE_TS, -1, -1, -1, count) + records
        return struct.pack(">qiibI", 77, len(tail) + 9, -1, 2, crc32c(tail)) + tail

    with pytest.raises(CorruptRecordError, match="offset 77.*records end early"):
        read_all(rewrite(EXAMPLE_RECORDS, 3))
    with pytest.raises(CorruptRecordError, match="offset 77.*remain after"):
        read_all(rewrite(EXAMPLE_RECORDS, 1))
    with pytest.raises(CorruptRecordError, match="offset 77.*record 0"):
        read_all(rewrite(b"\x02" + EXAMPLE_RECORDS[1:], 2))  # length 1 is impossible
    bad_codec = bytearray(rewrite(EXAMPLE_RECORDS, 2))
    bad_codec[22] = 6  # attributes: codec 6 does not exist
    struct.pack_into(">I", bad_codec, 17, crc32c(bytes(bad_codec[21:])))
    with pytest.raises(CorruptRecordError, match="offset 77"):
        read_all(bad_codec)
    bad_gzip = bytearray(build(3, Compression.GZIP, base_offset=9))
    bad_gzip[-6] ^= 0xFF  # inside the gzip CRC-32 trailer
    struct.pack_into(">I", bad_gzip, 17, crc32c(bytes(bad_gzip[21:])))
    with pytest.raises(CorruptRecordError, match="offset 9.*gzip"):
        read_all(bad_gzip)


def test_reader_accepts_memoryview_and_bytearray_and_caches() -> None:
    buf = build(4, Compression.SNAPPY) + build(2, base_offset=4)
    for view in (memoryview(buf), bytearray(buf), buf):
        batches = list(iter_batches(view))
        assert [r.offset for b in batches for r in b] == [0, 1, 2, 3, 4, 5]
        assert all(isinstance(r.value, bytes) for b in batches for r in b)
    batch = next(iter_batches(buf))
    assert batch.records() is batch.records()
    assert list(batch) == batch.records()
    assert bytes(batch.raw()) == buf[: batch.size]
    assert len(batch) == 4 and batch.is_valid()
    assert "SNAPPY" in repr(batch)


# A plain reference for DefaultRecord (Kafka's DefaultRecord.writeTo): zigzag varints written 7
# bits at a time, with no fast paths, so the decoder's inline one- and two-byte varints are
# checked at their boundaries (63/64 and 8191/8192 zigzag to one, two and three bytes).
def zigzag(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes((n,)))


def record_body(ts_delta: int, offset_delta: int, key: bytes | None, value: bytes | None,
                headers: Sequence[tuple[str, bytes | None]] = ()) -> bytes:
    def blob(b: bytes | None) -> bytes:
        return zigzag(-1) if b is None else zigzag(len(b)) + b

    body = b"\x00" + zigzag(ts_delta) + zigzag(offset_delta) + blob(key) + blob(value)
    body += zigzag(len(headers)) + b"".join(zigzag(len(k.encode())) + k.encode() + blob(v) for k, v in headers)
    return body


def framed(body: bytes) -> bytes:
    return zigzag(len(body)) + body


def value_for_record_length(length: int) -> bytes:
    """A value that makes a keyless, headerless record exactly ``length`` bytes long."""
    for size in range(length, -1, -1):
        if len(record_body(0, 0, None, bytes(size))) == length:
            return bytes(size)
    raise AssertionError(length)


BOUNDARY_LENGTHS = [0, 1, 63, 64, 8191, 8192]
BOUNDARY_DELTAS = [-8193, -8192, -65, -64, -1, 0, 1, 63, 64, 8191, 8192, 2**31 - 1, -(2**31) + 1]  # int32 both ways


def test_decoder_matches_the_reference_layout_at_varint_boundaries() -> None:
    fields = (
        [(d, -d, b"k", b"v", []) for d in BOUNDARY_DELTAS]  # timestamp and offset deltas
        + [(0, 0, b"\x01" * n, None, []) for n in BOUNDARY_LENGTHS]
        + [(0, 0, None, b"\x02" * n, []) for n in BOUNDARY_LENGTHS]
        + [(0, 0, None, value_for_record_length(n), []) for n in (6, 63, 64, 8191, 8192)]
        + [(0, 0, None, None, [("h" * n, b"x" * n), ("n", None)]) for n in BOUNDARY_LENGTHS]
    )
    data = b"".join(framed(record_body(*f)) for f in fields)
    record_lengths = {len(record_body(*f)) for f in fields}
    assert {6, 63, 64, 8191, 8192} <= record_lengths
    expected = [(1000 + od, BASE_TS + ts, k, v, h) for ts, od, k, v, h in fields]
    got = list(iter_records(data, len(fields), 1000, BASE_TS, TimestampType.CREATE_TIME, -1))
    assert [tuple(r[:5]) for r in got] == expected
    assert decode_records(data, len(fields), 1000, BASE_TS, TimestampType.CREATE_TIME, -1) == got
    # LogAppendTime: every record reports the batch's MaxTimestamp.
    two = b"".join(framed(record_body(*f)) for f in fields[:2])
    lat = list(iter_records(two, 2, 0, BASE_TS, TimestampType.LOG_APPEND_TIME, 42))
    assert [(r.timestamp, r.timestamp_type) for r in lat] == [(42, TimestampType.LOG_APPEND_TIME)] * 2
    assert decode_records(two, 2, 0, BASE_TS, TimestampType.LOG_APPEND_TIME, 42) == lat


def test_header_keys_decode_like_java_strings_and_counts_may_be_non_minimal() -> None:
    # Utils.utf8 (new String(bytes, UTF_8)) replaces malformed input instead of failing, and
    # ByteUtils.readVarint accepts a zero written in two bytes.
    body = b"\x00\x00\x00\x01\x01" + zigzag(1) + zigzag(2) + b"\xffA" + zigzag(1) + b"x"
    (record,) = iter_records(framed(body), 1, 0, BASE_TS, TimestampType.CREATE_TIME, -1)
    assert record.headers == [("\ufffdA", b"x")]
    body = b"\x00\x00\x00\x01\x01" + b"\x80\x00"
    (record,) = iter_records(framed(body), 1, 0, BASE_TS, TimestampType.CREATE_TIME, -1)
    assert record.headers == []


NULLS = b"\x00\x00\x00\x01\x01"  # attributes, deltas 0, key and value null


@pytest.mark.parametrize(
    ("data", "message"),
    [
        # Record length (DefaultRecord.readFrom: sizeOfBodyInBytes), one and two varint bytes.
        (zigzag(-1) + NULLS + b"\x00", "record 0 (offset 5): record length -1 at byte 1 does not fit the batch"),
        (zigzag(-7) + NULLS + b"\x00" * 8, "record 0 (offset 5): record length -7 at byte 1 does not fit the batch"),
        (zigzag(-100) + NULLS + b"\x00" * 200, "record 0 (offset 5): record length -100 at byte 2 does not fit the batch"),
        (zigzag(1) + NULLS + b"\x00", "record 0 (offset 5): record length 1 at byte 1 does not fit the batch"),
        (zigzag(7) + NULLS + b"\x00", "record 0 (offset 5): record length 7 at byte 1 does not fit the batch"),
        # Key and value lengths below -1 (-1 is null).
        (framed(b"\x00\x00\x00" + zigzag(-2) + bytes(9)), "record 0 (offset 5): key length -2"),
        (framed(b"\x00\x00\x00" + zigzag(-3) + bytes(9)), "record 0 (offset 5): key length -3"),
        (framed(b"\x00\x00\x00" + zigzag(-100) + bytes(9)), "record 0 (offset 5): key length -100"),
        (framed(b"\x00\x00\x00\x01" + zigzag(-2) + bytes(9)), "record 0 (offset 5): value length -2"),
        (framed(b"\x00\x00\x00\x01" + zigzag(-3) + bytes(9)), "record 0 (offset 5): value length -3"),
        (framed(b"\x00\x00\x00\x01" + zigzag(-100) + bytes(9)), "record 0 (offset 5): value length -100"),
        (framed(b"\x00\x00\x00\x01" + zigzag(-9000) + bytes(9)), "record 0 (offset 5): value length -9000"),
        # Key and value lengths running past the record (the bytes after it are another's).
        (framed(b"\x00\x00\x00" + zigzag(10) + b"k\x01\x00") + framed(NULLS + b"\x00"),
         "record 0 (offset 5): key length 10 runs past the end of the record"),
        (framed(b"\x00\x00\x00\x01" + zigzag(10) + b"v\x00") + framed(NULLS + b"\x00"),
         "record 0 (offset 5): value length 10 runs past the end of the record"),
        # Headers (DefaultRecord.readHeaders).
        (framed(NULLS + zigzag(-1)), "record 0 (offset 5): negative header count -1"),
        (framed(NULLS + zigzag(1) + zigzag(-1) + bytes(3)),
         "record 0 (offset 5): header key length -1 (header keys cannot be null)"),
        (framed(NULLS + zigzag(1) + zigzag(1) + b"h" + zigzag(-2)), "record 0 (offset 5): header value length -2"),
        # The declared length against what the fields take, both ways.
        (zigzag(7) + NULLS + b"\x00\x00", "record 0 (offset 5): record declared 7 bytes but its fields take 6"),
        (zigzag(6) + b"\x00\x00\x00" + zigzag(1) + b"k\x01\x00", "record 0 (offset 5): record declared 6 bytes but its fields take 7"),
        (framed(NULLS + b"\x00") + framed(NULLS + b"\x00") + b"\x00\x00\x00", "3 bytes remain after the declared 2 records"),
        (framed(NULLS + b"\x00"), "records end early, 1 of 2 decoded (record 1, offset 6, runs past the end)"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_structural_errors_say_what_is_wrong(data: bytes, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=re.escape(f"batch at offset 5: {message}") + "$"):
        list(iter_records(data, 2, 5, BASE_TS, TimestampType.CREATE_TIME, -1))


def test_batch_inside_a_larger_buffer() -> None:
    first, second = build(2), build(3, base_offset=2)
    batch = RecordBatch(first + second, len(first))  # header read at pos
    assert [r.offset for r in batch] == [2, 3, 4]
    with pytest.raises(CorruptRecordError, match=(
            rf"batch at offset 2 \(byte {len(first)}\): truncated, claims {len(second)} bytes "
            rf"but only {len(second) - 1} are present$")):
        RecordBatch(first + second[:-1], len(first))


def test_records_section_is_decompressed_once() -> None:
    for codec in (Compression.NONE, Compression.GZIP):
        batch = RecordBatch(build(3, codec))
        assert batch.records_section() is batch.records_section()


def test_a_batch_past_the_decompression_limit_is_corrupt_naming_offset_and_limit() -> None:
    buf = build(3, Compression.ZSTD)
    size = len(RecordBatch(buf).records_section())
    assert [r.value for r in RecordBatch(buf).iterate(max_decompressed_bytes=size)] == \
        [r.value for r in RecordBatch(buf)]
    with pytest.raises(CorruptRecordError,
                       match=rf"batch at offset 0: zstd payload declares {size} decompressed "
                             rf"bytes, more than the limit of {size - 1} bytes on one batch$"
                       ) as info:
        RecordBatch(buf).iterate(max_decompressed_bytes=size - 1)
    assert isinstance(info.value.__cause__, DecompressedSizeError)


def test_control_batch_without_records_is_corrupt() -> None:
    tail = struct.pack(">hiqqqhii", 0x20, 0, BASE_TS, BASE_TS, 7, 0, -1, 0)
    buf = struct.pack(">qiibI", 31, len(tail) + 9, 0, 2, crc32c(tail)) + tail
    batch = RecordBatch(buf)
    batch.ensure_valid()
    with pytest.raises(CorruptRecordError, match="control batch at offset 31 has no record$"):
        batch.control_marker()
