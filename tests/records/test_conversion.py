"""Writing legacy message sets and converting between formats (records/legacy_builder.py,
records/conversion.py), read back with samsa's reader and with kafka-python's (another
implementation of the v0/v1 layout, CRCs and codec framings)."""

from __future__ import annotations

import gzip
import struct

import pytest
from kafka.record import MemoryRecords as KafkaPythonRecords
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from samsa.errors import (
    CorruptRecordError,
    InvalidRecordError,
    MessageTooLargeError,
    UnsupportedCompressionTypeError,
)
from samsa.records import (
    Compression,
    MemoryRecords,
    RecordBatch,
    RecordBatchBuilder,
    TimestampType,
    build_control_batch,
    iter_batches,
)
from samsa.records.control import ControlRecordType
from samsa.records.conversion import (
    LegacyRecord,
    down_convert,
    is_legacy_message_set,
    read_legacy_produce,
)
from samsa.records.legacy_builder import build_legacy_records

from .legacy_data import entry, message, message_set, wrapper

TS = 1_700_000_000_000
LEGACY_CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]
ROWS = [(40, TS, b"k0", b"v0"), (41, TS + 7, None, b"v1"), (43, TS + 3, b"k3", None)]


def samsa_rows(data: bytes) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, r.timestamp_type)
            for r in MemoryRecords(data).records()]


def kafka_python_rows(data: bytes) -> list[tuple]:
    out = []
    records = KafkaPythonRecords(data)
    while records.has_next():
        batch = records.next_batch()
        if batch is None:
            break
        for r in batch:
            assert r.validate_crc()
            out.append((r.offset, r.timestamp, r.key, r.value))
    return out


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda c: c.name.lower())
def test_built_legacy_sets_read_back_in_both_readers(magic: int, codec: Compression) -> None:
    data = build_legacy_records(magic, codec, ROWS)
    ts = (lambda t: -1) if magic == 0 else (lambda t: t)
    expected_type = TimestampType.NO_TIMESTAMP_TYPE if magic == 0 else TimestampType.CREATE_TIME
    assert samsa_rows(data) == [(o, ts(t), k, v, expected_type) for o, t, k, v in ROWS]
    kp_ts = (lambda t: None) if magic == 0 else (lambda t: t)
    assert kafka_python_rows(data) == [(o, kp_ts(t), k, v) for o, t, k, v in ROWS]
    batches = list(iter_batches(data))
    # Uncompressed: one entry per record; compressed: one wrapper at the last offset.
    assert len(batches) == (3 if codec == Compression.NONE else 1)
    assert batches[-1].last_offset == 43
    assert all(b.magic == magic and b.compression == codec for b in batches)


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_sets_are_byte_identical_to_kafka_pythons(magic: int) -> None:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    for offset, ts, key, value in ROWS:
        builder.append(offset, ts, key, value)
    assert build_legacy_records(magic, Compression.NONE, ROWS) == bytes(builder.build())


@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda c: c.name.lower())
def test_log_append_time_v1_stamps_every_message(codec: Compression) -> None:
    data = build_legacy_records(1, codec, ROWS, log_append_time=TS + 100)
    assert samsa_rows(data) == [(o, TS + 100, k, v, TimestampType.LOG_APPEND_TIME)
                                for o, _, k, v in ROWS]
    assert [r[1] for r in kafka_python_rows(data)] == [TS + 100] * 3


def test_magic_0_lz4_has_the_pre_0_10_header_checksum() -> None:
    """KafkaLZ4BlockOutputStream (magic 0) hashed the frame magic with the descriptor; a
    standard reader rejects that frame until the checksum byte is recomputed."""
    import lz4.frame

    from samsa.records.compression import lz4_fix_broken_header_checksum, xxh32

    (batch,) = list(iter_batches(build_legacy_records(0, Compression.LZ4, ROWS)))
    payload = batch.wrapper.value  # type: ignore[union-attr]
    assert payload[6] == (xxh32(payload[:6]) >> 8) & 0xFF  # FLG 0x60: descriptor = bytes 4-5
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(payload)
    assert lz4.frame.decompress(lz4_fix_broken_header_checksum(payload))


def test_zstd_cannot_be_written_in_legacy_sets() -> None:
    with pytest.raises(ValueError, match="zstd"):
        build_legacy_records(1, Compression.ZSTD, ROWS)


# --- down-conversion (RecordsUtil.downConvert) --------------------------------------------------

def v2_batch(codec: Compression, base_offset: int, count: int, *, headers: bool = False,
             log_append_time: int | None = None) -> bytes:
    builder = RecordBatchBuilder(
        compression=codec, base_offset=base_offset,
        timestamp_type=TimestampType.LOG_APPEND_TIME if log_append_time else
        TimestampType.CREATE_TIME, log_append_time_ms=log_append_time)
    for i in range(count):
        builder.append(TS + i, b"k%d" % i, b"v%d" % i, [("h", b"x")] if headers else None)
    return builder.build()


def batches_of(data: bytes) -> list[RecordBatch]:
    return list(iter_batches(data))  # type: ignore[arg-type]


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_v2_drops_records_below_the_fetch_offset(magic: int) -> None:
    data = v2_batch(Compression.NONE, 100, 5, headers=True)
    converted = down_convert(batches_of(data), magic, 102)
    rows = samsa_rows(converted)
    assert [r[0] for r in rows] == [102, 103, 104]  # librdkafka relies on this
    assert [(r[2], r[3]) for r in rows] == [(b"k2", b"v2"), (b"k3", b"v3"), (b"k4", b"v4")]
    assert [r[1] for r in rows] == ([-1] * 3 if magic == 0 else [TS + 2, TS + 3, TS + 4])
    assert all(b.magic == magic for b in iter_batches(converted))
    assert len(list(iter_batches(converted))) == 3  # one message per record, headers gone


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS[1:], ids=lambda c: c.name.lower())
def test_compressed_v2_becomes_one_wrapper_with_every_record(magic: int,
                                                            codec: Compression) -> None:
    data = v2_batch(codec, 100, 4)
    converted = down_convert(batches_of(data), magic, 102)
    (batch,) = list(iter_batches(converted))
    assert (batch.magic, batch.compression, batch.last_offset) == (magic, codec, 103)
    assert [r[0] for r in samsa_rows(converted)] == [100, 101, 102, 103]
    assert [r[0] for r in kafka_python_rows(converted)] == [100, 101, 102, 103]


def test_log_append_time_batches_keep_their_time_in_v1() -> None:
    data = v2_batch(Compression.GZIP, 0, 2, log_append_time=TS + 999)
    rows = samsa_rows(down_convert(batches_of(data), 1, 0))
    assert [(r[1], r[4]) for r in rows] == [(TS + 999, TimestampType.LOG_APPEND_TIME)] * 2


def test_control_batches_are_dropped_and_zstd_refused() -> None:
    marker = bytearray(build_control_batch(ControlRecordType.COMMIT, 7, 0, 0, TS))
    struct.pack_into(">q", marker, 0, 5)
    data = v2_batch(Compression.NONE, 0, 5) + bytes(marker)
    assert [r[0] for r in samsa_rows(down_convert(batches_of(data), 1, 0))] == [0, 1, 2, 3, 4]
    assert down_convert(batches_of(bytes(marker)), 1, 0) == b""
    with pytest.raises(UnsupportedCompressionTypeError):
        down_convert(batches_of(v2_batch(Compression.ZSTD, 0, 2)), 1, 0)


# --- reading produced legacy sets (ByteBufferLogInputStream, DeepRecordsIterator) ----------------

def kafka_python_set(magic: int, codec: int, rows: list[tuple], offset: int = 0) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, (ts, key, value) in enumerate(rows):
        builder.append(offset + i, ts, key, value)
    return bytes(builder.build())


def test_kafka_python_sets_are_recognised_and_read() -> None:
    data = kafka_python_set(1, 1, [(TS, b"a", b"1"), (TS + 1, None, b"2")])
    assert is_legacy_message_set(data)
    (batch,) = read_legacy_produce(data, 1 << 20)
    assert (batch.magic, batch.codec) == (1, Compression.GZIP)
    assert [(r.timestamp, r.key, r.value) for r in batch.records()] == [
        (TS, b"a", b"1"), (TS + 1, None, b"2")]
    assert not is_legacy_message_set(v2_batch(Compression.NONE, 0, 1))


def flip(data: bytes, at: int) -> bytes:
    out = bytearray(data)
    out[at] ^= 0x01
    return bytes(out)


def test_bad_outer_crc_is_corrupt() -> None:
    data = message_set(1, [(b"k", b"v", TS), (b"k2", b"v2", TS)])
    with pytest.raises(CorruptRecordError, match="CRC"):
        read_legacy_produce(flip(data, len(data) - 1), 1 << 20)


def test_bad_inner_crc_of_a_compressed_wrapper_is_corrupt() -> None:
    import gzip

    inner = entry(0, message(1, b"k", b"v", 0, TS))
    inner = flip(inner, len(inner) - 1)  # the inner message's value: its CRC no longer matches
    data = wrapper(1, 1, gzip.compress(inner), 0, TS)
    (batch,) = read_legacy_produce(data, 1 << 20)  # the wrapper's own CRC is fine
    with pytest.raises(CorruptRecordError, match="inner message.*CRC"):
        batch.records()


def test_invalid_wrappers_are_invalid_records() -> None:
    import gzip

    inner_v0 = entry(0, message(0, b"k", b"v"))
    (batch,) = read_legacy_produce(wrapper(1, 1, gzip.compress(inner_v0), 0, TS), 1 << 20)
    with pytest.raises(InvalidRecordError, match="magic"):
        batch.records()
    (batch,) = read_legacy_produce(wrapper(1, 4, b"\x00" * 8, 0, TS), 1 << 20)
    with pytest.raises(InvalidRecordError, match="zstd"):
        batch.records()
    two = entry(0, message(1, b"a", b"1", 0, TS)) + entry(5, message(1, b"b", b"2", 0, TS))
    (batch,) = read_legacy_produce(wrapper(1, 1, gzip.compress(two), 3, TS), 1 << 20)
    with pytest.raises(InvalidRecordError, match="wrapper offset 3"):
        batch.records()


def test_size_rules_of_the_shallow_iterator() -> None:
    data = message_set(0, [(b"k", b"v", 0)] * 3)
    assert len(read_legacy_produce(data + data[:20], 1 << 20)) == 3  # partial tail trimmed
    with pytest.raises(CorruptRecordError, match="below the minimum"):
        read_legacy_produce(struct.pack(">qi", 0, 13) + b"\x00" * 13, 1 << 20)
    from samsa.errors import MessageTooLargeError

    with pytest.raises(MessageTooLargeError):
        read_legacy_produce(data, 20)


# --- exact answers of the produce-side reader at its boundaries ---------------------------------

SMALLEST_V0 = entry(0, message(0, None, None))  # 12 + 14 bytes: RECORD_OVERHEAD_V0


def key_length_lies(magic: int) -> bytes:
    """A message whose key length (100) runs past its end."""
    msg = bytearray(message(magic, b"k", b"v", 0, TS))
    struct.pack_into(">i", msg, 6 if magic == 0 else 14, 100)
    return bytes(msg)


def deep(data: bytes) -> list[LegacyRecord]:
    (batch,) = read_legacy_produce(data, 1 << 20)
    return batch.records()


def test_shallow_entries_report_offset_size_and_timestamp_type() -> None:
    first = entry(5, message(1, b"k", b"v", 0x08, TS))  # LogAppendTime attribute, no codec
    data = first + entry(6, message(0, None, b"w"))
    one, two = read_legacy_produce(data, 1 << 20)
    assert (one.offset, one.size, one.magic, one.codec, one.timestamp_type, one.where) == (
        5, len(first), 1, 0, TimestampType.LOG_APPEND_TIME, "message at offset 5 (byte 0)")
    assert (two.offset, two.size, two.timestamp_type, two.where) == (
        6, len(data) - len(first), TimestampType.NO_TIMESTAMP_TYPE,
        f"message at offset 6 (byte {len(first)})")
    assert one.records() == [LegacyRecord(5, TS, b"k", b"v", 1, False)]
    assert two.records() == [LegacyRecord(6, -1, None, b"w", 0, False)]


def test_the_smallest_messages_are_read() -> None:
    assert deep(SMALLEST_V0) == [LegacyRecord(0, -1, None, None, 0, False)]
    inner = SMALLEST_V0 + entry(1, message(0, b"", b""))
    assert deep(wrapper(0, Compression.GZIP, gzip.compress(inner), 1)) == [
        LegacyRecord(0, -1, None, None, 0, False), LegacyRecord(1, -1, b"", b"", 0, False)]


def test_max_message_bytes_counts_the_log_overhead() -> None:
    data = entry(0, message(0, b"k", b"v"))
    assert len(data) == 28
    assert len(read_legacy_produce(data, 28)) == 1
    with pytest.raises(MessageTooLargeError, match=r"(^|: )message at offset 0 \(byte 0\): 28 bytes "
                       r"exceed max\.message\.bytes=27$"):
        read_legacy_produce(data, 27)


@pytest.mark.parametrize(("data", "error", "match"), [
    # exactly a log overhead left: Kafka's ByteBufferLogInputStream still checks its size
    (SMALLEST_V0 + struct.pack(">qi", 1, 0), CorruptRecordError,
     r"(^|: )message at offset 1 \(byte 26\): size 0 is below the minimum 14$"),
    (entry(3, bytes(4) + b"\x03" + bytes(9)), CorruptRecordError,
     r"(^|: )message at offset 3 \(byte 0\): invalid magic 3$"),
    (SMALLEST_V0 + v2_batch(Compression.NONE, 1, 1), InvalidRecordError,
     r"(^|: )message at offset 1 \(byte 26\): a magic 2 batch among magic 0 messages$"),
    (entry(4, key_length_lies(1)), CorruptRecordError,
     r"(^|: )message at offset 4 \(byte 0\): key length 100 does not fit the message$"),
    (flip(entry(0, message(1, b"k", b"v", 0, TS)), -1), CorruptRecordError,
     (r"(^|: )message at offset 0 \(byte 0\): CRC-32 mismatch \(stored 0x[0-9a-f]{8}\); "
     r"the message is corrupt$")),
    (entry(0, message(1, None, b"x", 5, TS)), UnsupportedCompressionTypeError,
     r"(^|: )message at offset 0 \(byte 0\): unknown compression codec 5$"),
], ids=["overhead-only-tail", "magic-3", "magic-2", "key-length", "crc", "codec-5"])
def test_shallow_errors_name_the_entry_and_the_fault(data: bytes, error: type[Exception],
                                                     match: str) -> None:
    with pytest.raises(error, match=match):
        read_legacy_produce(data, 1 << 20)


OK_INNER = entry(0, message(1, b"a", b"0", 0, TS))


@pytest.mark.parametrize(("data", "error", "match"), [
    (wrapper(1, Compression.ZSTD, bytes(8), 3, TS), InvalidRecordError,
     r"(^|: )message at offset 3 \(byte 0\): zstd is not allowed in a magic 1 wrapper$"),
    (entry(3, message(1, None, None, Compression.GZIP, TS)), InvalidRecordError,
     r"(^|: )message at offset 3 \(byte 0\): compressed wrapper with a null value$"),
    (wrapper(1, Compression.GZIP, b"not gzip", 0, TS), CorruptRecordError,
     r"(^|: )message at offset 0 \(byte 0\): the wrapper's value does not decompress \(.+\)$"),
    # exactly a log overhead left after the first inner message
    (wrapper(1, Compression.GZIP, gzip.compress(OK_INNER + struct.pack(">qi", 1, 0)), 1, TS),
     CorruptRecordError, (r"(^|: )message at offset 1 \(byte 0\), inner message at offset 1: size 0 "
     r"does not fit the wrapper$")),
    (wrapper(1, Compression.GZIP, gzip.compress(struct.pack(">qi", 0, 0) + bytes(20)), 0, TS),
     CorruptRecordError, (r"(^|: )message at offset 0 \(byte 0\), inner message at offset 0: size 0 "
     r"does not fit the wrapper$")),
    (wrapper(1, Compression.GZIP,
             gzip.compress(OK_INNER + struct.pack(">qi", 1, 30) + bytes(20)), 1, TS),
     CorruptRecordError, (r"(^|: )message at offset 1 \(byte 0\), inner message at offset 1: size 30 "
     r"does not fit the wrapper$")),
    (wrapper(1, Compression.GZIP, gzip.compress(entry(0, key_length_lies(1))), 0, TS),
     CorruptRecordError, (r"(^|: )message at offset 0 \(byte 0\), inner message at offset 0: key "
     r"length 100 does not fit the message$")),
    (wrapper(1, Compression.GZIP, gzip.compress(OK_INNER + bytes(5)), 0, TS), CorruptRecordError,
     r"(^|: )message at offset 0 \(byte 0\): 5 stray bytes after the inner messages$"),
    (wrapper(1, Compression.GZIP, gzip.compress(b""), 0, TS), InvalidRecordError,
     r"(^|: )message at offset 0 \(byte 0\): compressed wrapper with no inner records$"),
    (wrapper(1, Compression.GZIP, gzip.compress(message_set(1, [(b"k", b"v", TS)] * 3)), 1, TS),
     InvalidRecordError, (r"(^|: )message at offset 1 \(byte 0\): wrapper offset 1 is less than the "
     r"last inner message offset 2 and it is not zero$")),
], ids=["zstd", "null-value", "not-gzip", "overhead-only-tail", "size-0", "size-beyond",
        "key-length", "stray-bytes", "empty", "wrapper-offset"])
def test_wrapper_errors_name_the_wrapper_and_the_fault(data: bytes, error: type[Exception],
                                                       match: str) -> None:
    with pytest.raises(error, match=match):
        deep(data)


def test_inner_records_of_a_v1_wrapper() -> None:
    """DeepRecordsIterator's view: relative offsets as written, each message's own magic and
    timestamp, and whether its attributes name a codec (the validator rejects that)."""
    inner = OK_INNER + entry(1, message(1, None, b"1", Compression.GZIP, TS + 1)) + entry(
        2, message(1, b"c", None, 0, TS + 2))
    expected = [LegacyRecord(0, TS, b"a", b"0", 1, False),
                LegacyRecord(1, TS + 1, None, b"1", 1, True),
                LegacyRecord(2, TS + 2, b"c", None, 1, False)]
    # the wrapper's offset may equal the last inner one (a broker-assigned set)
    assert deep(wrapper(1, Compression.GZIP, gzip.compress(inner), 2, TS + 9)) == expected
    log_append = wrapper(1, Compression.GZIP, gzip.compress(inner), 2, TS + 9,
                         log_append_time=True)
    assert [r.timestamp for r in deep(log_append)] == [TS + 9] * 3


def test_magic_0_lz4_wrappers_with_the_broken_header_checksum_are_read() -> None:
    data = build_legacy_records(0, Compression.LZ4, ROWS)
    assert [(r.offset, r.key, r.value) for r in deep(data)] == [(o, k, v) for o, _, k, v in ROWS]


def test_is_legacy_message_set_needs_the_magic_byte() -> None:
    assert not is_legacy_message_set(bytes(16))
    assert is_legacy_message_set(bytes(16) + b"\x01")
    assert not is_legacy_message_set(bytes(16) + b"\x02")


def test_down_convert_keeps_every_batch_after_a_control_batch() -> None:
    marker = build_control_batch(ControlRecordType.COMMIT, 7, 0, 0, TS)  # offset 0
    data = (bytes(marker) + v2_batch(Compression.GZIP, 1, 2)
            + v2_batch(Compression.NONE, 3, 2))
    assert [r[0] for r in samsa_rows(down_convert(batches_of(data), 1, 0))] == [1, 2, 3, 4]


def test_down_convert_errors_say_what_to_do() -> None:
    with pytest.raises(ValueError, match=r"(^|: )cannot down-convert to magic 2$"):
        down_convert([], 2, 0)
    with pytest.raises(UnsupportedCompressionTypeError,
                       match=r"(^|: )down-conversion of zstd-compressed batches is not supported; "
                       r"fetch with version 10 or later$"):
        down_convert(batches_of(v2_batch(Compression.ZSTD, 0, 2)), 1, 0)
