"""Reading v2 batches: the worked example, corruption and truncation."""

import struct

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
    iter_batches,
)

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
