"""Legacy v0/v1 message sets, from the documented layout and from kafka-python's legacy builder."""

import gzip
import struct

import cramjam
import lz4.frame
import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from samsa.errors import CorruptRecordError
from samsa.records import (
    Compression,
    LegacyRecordBatch,
    MemoryRecords,
    RecordBatchBuilder,
    TimestampType,
    iter_batches,
)
from samsa.records.compression import XERIAL_MAGIC
from samsa.records.legacy import parse_message

from .legacy_data import entry, message, message_set, wrapper

TS = 1_700_000_000_000
INNER = [(b"k1", b"v1", TS), (None, b"v2", TS + 5), (b"k3", None, TS + 2)]


def records_of(buf: bytes, check_crcs: bool = True) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, r.timestamp_type, r.headers) for r in MemoryRecords(buf, check_crcs).records()]


def test_documented_example_bytes() -> None:
    v0 = bytes.fromhex("0000000000000000" "00000010" "1fecd70a" "00" "00" "00000001" "6b" "00000001" "76")
    v1 = bytes.fromhex("0000000000000000" "00000018" "39268c33" "01" "00" "0000018bcfe56800" "00000001" "6b" "00000001" "76")
    assert message_set(0, [(b"k", b"v", 0)]) == v0
    assert message_set(1, [(b"k", b"v", TS)]) == v1
    assert records_of(v0) == [(0, -1, b"k", b"v", TimestampType.NO_TIMESTAMP_TYPE, [])]
    assert records_of(v1) == [(0, TS, b"k", b"v", TimestampType.CREATE_TIME, [])]
    batch = next(iter_batches(v1))
    assert isinstance(batch, LegacyRecordBatch)
    assert (batch.magic, batch.crc, batch.base_offset, batch.last_offset, batch.next_offset) == (1, 0x39268C33, 0, 0, 1)
    assert (batch.producer_id, batch.is_control, batch.is_transactional, batch.size) == (-1, False, False, len(v1))


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_sets(magic: int) -> None:
    buf = message_set(magic, INNER, first_offset=40)
    got = records_of(buf)
    assert [r[0] for r in got] == [40, 41, 42]
    assert [(r[2], r[3]) for r in got] == [(k, v) for k, v, _ in INNER]
    assert [r[1] for r in got] == ([-1] * 3 if magic == 0 else [ts for *_, ts in INNER])


def xerial(data: bytes) -> bytes:
    block = bytes(cramjam.snappy.compress_raw(data))
    return XERIAL_MAGIC + struct.pack(">iii", 1, 1, len(block)) + block


CODECS = {
    "gzip": (1, gzip.compress),
    "snappy-xerial": (2, xerial),
    "snappy-raw": (2, lambda d: bytes(cramjam.snappy.compress_raw(d))),
    "lz4": (3, lambda d: lz4.frame.compress(d, block_linked=False, store_size=False)),
}


@pytest.mark.parametrize("codec_name", list(CODECS))
def test_v1_wrapper_relative_offsets(codec_name: str) -> None:
    codec, fn = CODECS[codec_name]
    inner = message_set(1, INNER, first_offset=0)  # relative 0..2
    buf = wrapper(1, codec, fn(inner), wrapper_offset=102, timestamp=TS + 5)
    got = records_of(buf)
    assert [r[0] for r in got] == [100, 101, 102]  # wrapper offset is the last inner one
    assert [r[1] for r in got] == [TS, TS + 5, TS + 2]
    assert [(r[2], r[3]) for r in got] == [(k, v) for k, v, _ in INNER]
    batch = next(iter_batches(buf))
    assert (batch.base_offset, batch.last_offset, batch.records_count) == (100, 102, 3)
    assert batch.compression == codec


@pytest.mark.parametrize("codec_name", list(CODECS))
def test_v0_wrapper_absolute_offsets(codec_name: str) -> None:
    codec, fn = CODECS[codec_name]
    inner = message_set(0, INNER, first_offset=500)
    payload = fn(inner)
    if codec == 3:  # magic 0 LZ4 frames carry the broken header checksum (Lz4BlockOutputStream.useBrokenFlagDescriptorChecksum)
        assert payload[6] == 0x82
        payload = payload[:6] + b"\x1a" + payload[7:]
    got = records_of(wrapper(0, codec, payload, wrapper_offset=502))
    assert [r[0] for r in got] == [500, 501, 502]
    assert {r[4] for r in got} == {TimestampType.NO_TIMESTAMP_TYPE}


def test_v1_log_append_time_wrapper_overrides_inner_timestamps() -> None:
    buf = wrapper(1, 1, gzip.compress(message_set(1, INNER)), 2, timestamp=TS + 999, log_append_time=True)
    assert {(r[1], r[4]) for r in records_of(buf)} == {(TS + 999, TimestampType.LOG_APPEND_TIME)}


def test_crc32_corruption_is_detected() -> None:
    buf = bytearray(message_set(1, INNER, first_offset=7))
    buf[-5] ^= 1  # key byte of the message at offset 9
    with pytest.raises(CorruptRecordError, match="offset 9.*CRC-32"):
        records_of(bytes(buf))
    assert len(records_of(bytes(buf), check_crcs=False)) == 3
    inner = bytearray(message_set(1, INNER))
    inner[-5] ^= 1  # key byte of the last inner message
    with pytest.raises(CorruptRecordError, match="offset 2.*inner message at offset 2"):
        records_of(wrapper(1, 1, gzip.compress(bytes(inner)), 2))


def test_malformed_wrappers() -> None:
    with pytest.raises(CorruptRecordError, match="no inner messages"):
        records_of(wrapper(1, 1, gzip.compress(b""), 0))
    nested = message_set(1, [(None, b"x", TS)])
    double = entry(0, message(1, None, gzip.compress(nested), 1, TS))
    with pytest.raises(CorruptRecordError, match="itself compressed"):
        records_of(wrapper(1, 1, gzip.compress(double), 0))
    with pytest.raises(CorruptRecordError, match="not allowed"):
        records_of(wrapper(1, 4, b"zstd is v2 only", 0))
    with pytest.raises(CorruptRecordError, match="claims 24 bytes, 21 left$"):
        records_of(wrapper(1, 1, gzip.compress(message_set(1, INNER)[:-3]), 2))
    with pytest.raises(CorruptRecordError, match="offset 5"):
        records_of(entry(5, message(1, b"k", b"v")[:-1] + b"\x00\x00"))  # value length lies


def test_truncated_tail_and_mixed_magics() -> None:
    legacy = message_set(0, INNER) + message_set(1, INNER, first_offset=3)
    v2 = RecordBatchBuilder(base_offset=6)
    v2.append(TS, b"k", b"v2-record")
    buf = legacy + v2.build()
    assert [r[0] for r in records_of(buf)] == list(range(7))
    for cut in range(len(buf)):
        assert len(records_of(buf[:cut])) <= 7  # never raises on a partial tail
    assert len(records_of(buf[:-1])) == 6


@pytest.mark.parametrize(("magic", "codec"), [(m, c) for m in (0, 1) for c in (0, 1, 2, 3)])
def test_kafka_python_legacy_builder(magic: int, codec: int) -> None:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, (key, value, ts) in enumerate(INNER):
        builder.append(i, ts, key, value)
    buf = bytes(builder.build())
    got = records_of(buf)
    assert [r[0] for r in got] == [0, 1, 2]  # producer-side set: offsets not yet assigned
    assert [(r[2], r[3]) for r in got] == [(k, v) for k, v, _ in INNER]
    if magic == 1:
        assert [r[1] for r in got] == [ts for *_, ts in INNER]
    batches = list(MemoryRecords(buf))
    assert all(b.compression == Compression(codec) for b in batches)


# --- exact answers at the boundaries of the layout ----------------------------------------------


def test_the_smallest_messages_parse() -> None:
    """RECORD_OVERHEAD_V0/V1: null key and value; empty ones are as long."""
    for magic, size in ((0, 14), (1, 22)):
        for key, value in ((None, None), (b"", b"")):
            msg = message(magic, key, value, 0, TS)
            assert len(msg) == size
            parsed = parse_message(msg, 0, 7, size)
            assert (parsed.offset, parsed.magic, parsed.key, parsed.value, parsed.crc_valid) == (
                7, magic, key, value, True)


def v0_body(*fields: int | bytes) -> bytes:
    """A v0 message (any CRC) made of key/value length fields (int) and bytes."""
    return bytes(6) + b"".join(struct.pack(">i", f) if isinstance(f, int) else f for f in fields)


@pytest.mark.parametrize(("buf", "size", "match"), [
    (bytes(20), 13, "message size 13 is impossible here"),
    (message(0, None, None)[:-1], 14, "message size 14 is impossible here"),
    (message(1, None, None), 21, "v1 message size 21 is below the minimum 22"),
    (bytes(4) + b"\x02" + bytes(9), 14, "magic 2 is not a legacy message format"),
    (v0_body(4, b"abcd") + bytes(8), 14, "value length is truncated"),
    (v0_body(-2, -1), 14, "key length -2 does not fit the message"),
    (v0_body(100, -1), 14, "key length 100 does not fit the message"),
    (v0_body(-1, 100), 14, "value length 100 does not fit the message"),
    (message(0, b"k", b"v") + b"xyz", 19, "3 bytes follow the value inside the message"),
], ids=["size-13", "size-beyond", "v1-size-21", "magic-2", "value-length-truncated",
        "key-length-negative", "key-length-beyond", "value-length-beyond", "bytes-after-value"])
def test_malformed_messages_say_what_is_wrong(buf: bytes, size: int, match: str) -> None:
    with pytest.raises(ValueError, match=f"^{match}$"):
        parse_message(buf, 0, 0, size)


def test_a_batch_reads_from_the_start_and_checks_inner_crcs_by_default() -> None:
    first = LegacyRecordBatch(message_set(1, INNER))  # pos 0: the first of three entries
    assert [(r.offset, r.value) for r in first] == [(0, b"v1")]
    inner = bytearray(message_set(1, INNER))
    inner[-5] ^= 1
    batch = LegacyRecordBatch(wrapper(1, 1, gzip.compress(bytes(inner)), 2))
    with pytest.raises(CorruptRecordError, match="CRC-32 mismatch"):
        batch.records()


ONE = message_set(0, [(b"k", b"v", 0)])


@pytest.mark.parametrize(("buf", "pos", "match"), [
    (bytes(20), 10, r"legacy log entry at byte 10: fewer than 12 bytes"),
    (struct.pack(">qi", 4, 14), 0,
     r"message at offset 4 \(byte 0\): size 14 is below the minimum or beyond the buffer"),
    (struct.pack(">qi", 4, 10) + bytes(10), 0,
     r"message at offset 4 \(byte 0\): size 10 is below the minimum or beyond the buffer"),
    (ONE + struct.pack(">qi", 5, 30) + bytes(20), len(ONE),
     (rf"message at offset 5 \(byte {len(ONE)}\): size 30 is below the minimum or beyond the "
     r"buffer")),
], ids=["fewer-than-12", "only-12", "size-10", "size-beyond"])
def test_bad_log_entries_say_where(buf: bytes, pos: int, match: str) -> None:
    with pytest.raises(CorruptRecordError, match=f": {match}$"):
        LegacyRecordBatch(buf, pos)


OK_INNER = entry(0, message(1, b"k", b"v", 0, TS))


@pytest.mark.parametrize(("buf", "match"), [
    (entry(3, message(1, None, None, 1, TS)),
     "message at offset 3: compressed wrapper message has a null value"),
    (wrapper(1, 1, gzip.compress(b""), 0), "message at offset 0: compressed wrapper message holds no inner messages"),
    (wrapper(1, 1, gzip.compress(OK_INNER + bytes(5)), 0),
     f"message at offset 0: inner message at byte {len(OK_INNER)} is truncated"),
    # exactly a log overhead left: its size is read, and checked by the message parser
    (wrapper(1, 1, gzip.compress(OK_INNER + struct.pack(">qi", 1, 0)), 0),
     "message at offset 0: message size 0 is impossible here"),
], ids=["null-value", "empty", "truncated-inner", "overhead-only-inner"])
def test_bad_wrappers_say_what_is_wrong(buf: bytes, match: str) -> None:
    with pytest.raises(CorruptRecordError, match=f": {match}$"):
        LegacyRecordBatch(buf).records()


@pytest.mark.parametrize("log_append_time", [False, True])
def test_inner_records_have_no_headers(log_append_time: bool) -> None:
    buf = wrapper(1, 1, gzip.compress(message_set(1, INNER)), 2, TS, log_append_time)
    assert [r.headers for r in LegacyRecordBatch(buf)] == [[], [], []]


def test_repr_names_offset_magic_codec_and_size() -> None:
    buf = wrapper(1, 1 | 0x08, gzip.compress(message_set(1, INNER)), 2)  # LogAppendTime bit too
    assert repr(LegacyRecordBatch(buf)) == f"LegacyRecordBatch(offset=2, magic=1, compression=1, size={len(buf)})"
