"""Writing legacy message sets (legacy_builder.py), checked against the documented layout."""

from __future__ import annotations

import cramjam
import lz4.frame
import pytest

from samsa.records import Compression, LegacyRecordBatch
from samsa.records.compression import (
    LZ4_FRAME_MAGIC,
    decompress,
    lz4_fix_broken_header_checksum,
    xxh32,
)
from samsa.records.legacy_builder import _lz4_v0, build_legacy_records, xerial_snappy

from .legacy_data import entry, message, message_set

TS = 1_700_000_000_000
ROWS = [(100, TS + 2, b"k0", b"v0"), (101, TS + 9, None, b"v1"), (102, TS + 5, b"k2", None)]


def wrapper_value(data: bytes) -> bytes:
    value = LegacyRecordBatch(data).wrapper.value
    assert value is not None
    return value


def test_unknown_magic_and_empty_sets() -> None:
    with pytest.raises(ValueError, match="magic 2 is not a legacy format"):
        build_legacy_records(2, Compression.NONE, ROWS)
    assert build_legacy_records(1, Compression.GZIP, []) == b""


@pytest.mark.parametrize(("magic", "first_inner"), [(0, 100), (1, 0)])
def test_compressed_inner_offsets_follow_kafkas_to_inner_offset(magic: int, first_inner: int) -> None:
    # MemoryRecordsBuilder.toInnerOffset: relative to the first record in v1, absolute in v0; the
    # wrapper sits at the last offset and, in v1, carries the largest inner timestamp.
    data = build_legacy_records(magic, Compression.GZIP, ROWS)
    inner = [(key, value, ts) for _, ts, key, value in ROWS]
    value = wrapper_value(data)
    assert decompress(Compression.GZIP, value) == message_set(magic, inner, first_offset=first_inner)
    assert data == entry(102, message(magic, None, value, int(Compression.GZIP), TS + 9))


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
def test_wrapper_timestamp_starts_from_no_timestamp(codec: Compression) -> None:
    # MemoryRecordsBuilder's maxTimestamp starts at RecordBatch.NO_TIMESTAMP (-1).
    for stamps, wrapper_ts in (([-1, -1], -1), ([-5, -3], -1)):
        rows = [(i, ts, None, b"v") for i, ts in enumerate(stamps)]
        data = build_legacy_records(1, codec, rows)
        inner = message_set(1, [(None, b"v", ts) for ts in stamps])
        if codec == Compression.NONE:
            assert data == inner
        else:
            assert data == entry(1, message(1, None, wrapper_value(data), int(codec), wrapper_ts))


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
def test_magic_0_has_no_log_append_time(codec: Compression) -> None:
    plain = build_legacy_records(0, codec, ROWS)
    assert build_legacy_records(0, codec, ROWS, log_append_time=TS + 100) == plain
    assert LegacyRecordBatch(plain).attributes == int(codec)  # no timestamp-type bit


def test_xerial_snappy_writes_one_length_prefixed_block_per_32_kib() -> None:
    data = bytes(range(256)) * 320  # 80 KiB: blocks of 32, 32 and 16 KiB
    out = xerial_snappy(data)
    expected = b"\x82SNAPPY\x00" + (1).to_bytes(4, "big") + (1).to_bytes(4, "big")
    for start in range(0, len(data), 32 * 1024):
        block = bytes(cramjam.snappy.compress_raw(data[start:start + 32 * 1024]))
        expected += len(block).to_bytes(4, "big") + block
    assert out == expected
    assert decompress(Compression.SNAPPY, out) == data


def _frame(flg: int, extra: bytes) -> bytes:
    """An LZ4 frame start: magic, FLG, BD, ``extra`` (content size / dictionary id), a correct
    header checksum (xxh32 of the descriptor), then some block bytes."""
    descriptor = bytes([flg, 0x40]) + extra
    return LZ4_FRAME_MAGIC + descriptor + bytes([(xxh32(descriptor) >> 8) & 0xFF]) + b"\x05\x00\x00\x80hello"


@pytest.mark.parametrize(
    "frame",
    [
        lz4.frame.compress(b"hello world " * 10, store_size=True, block_linked=False),  # FLG 0x68
        _frame(0x60, b""),
        _frame(0x68, bytes(range(1, 9))),  # content size
        _frame(0x61, b"\x0a\x0b\x0c\x0d"),  # dictionary id
        _frame(0x69, bytes(range(1, 9)) + b"\x0a\x0b\x0c\x0d"),  # both
    ],
    ids=["lz4.frame", "plain", "content-size", "dict-id", "both"],
)
def test_magic_0_lz4_header_checksum_covers_the_frame_magic(frame: bytes) -> None:
    # LZ4 frame format: the descriptor is FLG, BD, [content size: 8 if FLG & 0x08], [dict id: 4 if
    # FLG & 0x01], then HC; Kafka before 0.10 hashed the magic too (KafkaLZ4BlockOutputStream).
    flg = frame[4]
    hc_at = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    broken = _lz4_v0(frame)
    assert broken[hc_at] == (xxh32(frame[:hc_at]) >> 8) & 0xFF != frame[hc_at]
    assert broken[:hc_at] == frame[:hc_at] and broken[hc_at + 1:] == frame[hc_at + 1:]
    assert lz4_fix_broken_header_checksum(broken) == frame
