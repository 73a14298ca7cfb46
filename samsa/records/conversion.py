"""Converting between message formats: legacy v0/v1 message sets <-> v2 record batches.

Up (produce): ``read_legacy_produce`` walks a v0/v1 message set as Kafka's broker reads a
produced one (``ByteBufferLogInputStream`` for the shallow entries, ``DeepRecordsIterator`` for
compressed wrappers), keeping the distinction Kafka's answers make: a CRC that does not match
is CORRUPT_MESSAGE (``CorruptRecordError``), a well-formed but invalid set is INVALID_RECORD.
Validation against topic settings and the v2 rebuild are the log's (broker/log/up_conversion.py).

Down (fetch v0-v3): ``down_convert`` is Kafka's ``RecordsUtil.downConvert`` for target magic 0/1:
control batches and headers are dropped, zstd batches cannot be converted
(``UnsupportedCompressionTypeError``), an uncompressed v2 batch becomes one legacy message per
record minus the records below the fetch offset, a compressed one becomes one wrapper with the
same codec holding all its records; offsets are kept.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from samsa.errors import (
    CorruptRecordError,
    InvalidRecordError,
    MessageTooLargeError,
    UnsupportedCompressionTypeError,
)
from samsa.records.batch import RecordBatch
from samsa.records.batch_header import (
    COMPRESSION_CODEC_MASK,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V0,
    MAGIC_V1,
    MAGIC_V2,
    Compression,
    TimestampType,
)
from samsa.records.compression import decompress, lz4_fix_broken_header_checksum
from samsa.records.legacy import MESSAGE_OVERHEAD_V0, LegacyMessage, parse_message
from samsa.records.legacy_builder import LegacyEntry, build_legacy_records

__all__ = [
    "LegacyBatch",
    "LegacyRecord",
    "down_convert",
    "is_legacy_message_set",
    "read_legacy_produce",
]

_ENTRY = struct.Struct(">qi")
_MAX_CODEC = max(Compression)


def is_legacy_message_set(data: bytes | bytearray | memoryview) -> bool:
    """True if the first entry of ``data`` is a magic 0 or 1 message."""
    return len(data) > MAGIC_OFFSET and data[MAGIC_OFFSET] in (MAGIC_V0, MAGIC_V1)


@dataclass(slots=True)
class LegacyRecord:
    """One (deep) record of a produced legacy set, as Kafka's LegacyRecord reports it."""

    offset: int
    timestamp: int  # -1 for v0; the wrapper's for inner records of a LogAppendTime v1 wrapper
    key: bytes | None
    value: bytes | None
    magic: int
    compressed: bool  # the record's own attributes name a codec (invalid for inner records)


@dataclass(slots=True)
class LegacyBatch:
    """One shallow entry: a plain message, or a compressed wrapper."""

    offset: int
    size: int  # bytes including the 12-byte log overhead
    magic: int
    codec: int
    timestamp_type: TimestampType
    message: LegacyMessage
    where: str

    def records(self) -> list[LegacyRecord]:
        """Its records: the message itself, or a wrapper's inner messages (Kafka's
        DeepRecordsIterator checks; an inner CRC mismatch is CORRUPT_MESSAGE)."""
        m = self.message
        if self.codec == Compression.NONE:
            return [LegacyRecord(self.offset, m.timestamp, m.key, m.value, m.magic, False)]
        return _inner_records(m, self.codec, self.where)


def _message(buf: bytes, pos: int, offset: int, size: int, where: str) -> LegacyMessage:
    try:
        return parse_message(buf, pos, offset, size)
    except ValueError as exc:
        raise CorruptRecordError(f"{where}: {exc}") from None


def read_legacy_produce(data: bytes | bytearray | memoryview, max_message_bytes: int
                        ) -> list[LegacyBatch]:
    """The shallow entries of a produced v0/v1 message set, checked as Kafka's
    ``UnifiedLog.analyzeAndValidateRecords`` checks them, in its order: a trailing partial
    entry is dropped; an entry below the minimum size or of an unknown magic is
    CORRUPT_MESSAGE; one larger than ``max_message_bytes`` is MESSAGE_TOO_LARGE; then a bad
    outer CRC is CORRUPT_MESSAGE.  (Mixed magics and the records themselves are the
    validator's: broker/log/up_conversion.py.)
    """
    buf = bytes(data)
    batches: list[LegacyBatch] = []
    pos = 0
    end = len(buf)
    while end - pos >= LOG_OVERHEAD:
        offset, size = _ENTRY.unpack_from(buf, pos)
        where = f"message at offset {offset} (byte {pos})"
        if size < MESSAGE_OVERHEAD_V0:
            raise CorruptRecordError(f"{where}: size {size} is below the minimum "
                                     f"{MESSAGE_OVERHEAD_V0}")
        if end - pos - LOG_OVERHEAD < size:
            break  # a partial trailing entry: Kafka trims it (trimInvalidBytes)
        magic = buf[pos + MAGIC_OFFSET]
        if magic > MAGIC_V2:
            raise CorruptRecordError(f"{where}: invalid magic {magic}")
        if size + LOG_OVERHEAD > max_message_bytes:
            raise MessageTooLargeError(
                f"{where}: {size + LOG_OVERHEAD} bytes exceed max.message.bytes="
                f"{max_message_bytes}")
        if magic == MAGIC_V2:
            raise InvalidRecordError(f"{where}: a magic 2 batch among magic "
                                     f"{buf[MAGIC_OFFSET]} messages")
        message = _message(buf, pos + LOG_OVERHEAD, offset, size, where)
        if not message.crc_valid:
            raise CorruptRecordError(f"{where}: CRC-32 mismatch (stored {message.crc:#010x}); "
                                     "the message is corrupt")
        codec = message.attributes & COMPRESSION_CODEC_MASK
        if codec > _MAX_CODEC:
            raise UnsupportedCompressionTypeError(f"{where}: unknown compression codec {codec}")
        batches.append(LegacyBatch(offset, size + LOG_OVERHEAD, magic, codec,
                                   message.timestamp_type, message, where))
        pos += size + LOG_OVERHEAD
    return batches


def _inner_records(wrapper: LegacyMessage, codec: int, where: str) -> list[LegacyRecord]:
    """DeepRecordsIterator: the inner messages of a compressed wrapper."""
    if codec == Compression.ZSTD:
        raise InvalidRecordError(f"{where}: zstd is not allowed in a magic {wrapper.magic} "
                                 "wrapper")
    if wrapper.value is None:
        raise InvalidRecordError(f"{where}: compressed wrapper with a null value")
    payload = wrapper.value
    try:
        if codec == Compression.LZ4 and wrapper.magic == MAGIC_V0:
            payload = lz4_fix_broken_header_checksum(payload)
        data = decompress(Compression(codec), payload)
    except ValueError as exc:
        raise CorruptRecordError(f"{where}: the wrapper's value does not decompress ({exc})"
                                 ) from None
    lat = wrapper.timestamp_type == TimestampType.LOG_APPEND_TIME
    records: list[LegacyRecord] = []
    pos = 0
    end = len(data)
    while end - pos >= LOG_OVERHEAD:
        offset, size = _ENTRY.unpack_from(data, pos)
        inner_where = f"{where}, inner message at offset {offset}"
        if size < MESSAGE_OVERHEAD_V0 or end - pos - LOG_OVERHEAD < size:
            raise CorruptRecordError(f"{inner_where}: size {size} does not fit the wrapper")
        message = _message(data, pos + LOG_OVERHEAD, offset, size, inner_where)
        if message.magic != wrapper.magic:
            raise InvalidRecordError(f"{inner_where}: compressed message magic {message.magic} "
                                     f"does not match wrapper magic {wrapper.magic}")
        if not message.crc_valid:
            raise CorruptRecordError(f"{inner_where}: CRC-32 mismatch (stored "
                                     f"{message.crc:#010x}); the message is corrupt")
        timestamp = wrapper.timestamp if lat else message.timestamp
        records.append(LegacyRecord(offset, timestamp, message.key, message.value,
                                    message.magic,
                                    bool(message.attributes & COMPRESSION_CODEC_MASK)))
        pos += LOG_OVERHEAD + size
    if pos != end:
        raise CorruptRecordError(f"{where}: {end - pos} stray bytes after the inner messages")
    if not records:
        raise InvalidRecordError(f"{where}: compressed wrapper with no inner records")
    if wrapper.magic == MAGIC_V1 and wrapper.offset != 0 and wrapper.offset < records[-1].offset:
        raise InvalidRecordError(
            f"{where}: wrapper offset {wrapper.offset} is less than the last inner message "
            f"offset {records[-1].offset} and it is not zero")
    return records


def down_convert(batches: Iterable[RecordBatch], to_magic: int, first_offset: int) -> bytes:
    """The legacy ``to_magic`` (0 or 1) message sets for ``batches`` (v2), concatenated.

    Raises UnsupportedCompressionTypeError at a zstd batch (Kafka fails the whole conversion of
    that chunk).  May return b"" (only control batches, or every record below
    ``first_offset``)."""
    if to_magic not in (MAGIC_V0, MAGIC_V1):
        raise ValueError(f"cannot down-convert to magic {to_magic}")
    out = bytearray()
    pending: list[tuple[RecordBatch, list[LegacyEntry]]] = []
    for batch in batches:
        if batch.is_control:
            continue
        codec = batch.compression
        if codec == Compression.ZSTD:
            raise UnsupportedCompressionTypeError(
                "down-conversion of zstd-compressed batches is not supported; fetch with "
                "version 10 or later")
        records = [(r.offset, r.timestamp, r.key, r.value) for r in batch
                   if codec != Compression.NONE or r.offset >= first_offset]
        if records:
            pending.append((batch, records))
    for batch, records in pending:
        lat = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
        out += build_legacy_records(to_magic, batch.compression, records,
                                    log_append_time=batch.max_timestamp if lat else None)
    return bytes(out)
