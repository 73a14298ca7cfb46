"""Writing legacy message sets and converting between formats (records/legacy_builder.py,
records/conversion.py), read back with samsa's reader and with kafka-python's (another
implementation of the v0/v1 layout, CRCs and codec framings)."""

from __future__ import annotations

import struct

import pytest
from kafka.record import MemoryRecords as KafkaPythonRecords
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from samsa.errors import (
    CorruptRecordError,
    InvalidRecordError,
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
