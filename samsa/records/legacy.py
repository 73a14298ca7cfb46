"""Reading legacy message sets, magic v0 and v1 (Kafka's LegacyRecord). Read-side only.

A log entry is ``int64 Offset, int32 MessageSize, Message`` where Message is
``uint32 Crc (CRC-32 of Magic..end), int8 Magic, int8 Attributes, [int64 Timestamp (v1)],
int32 KeyLength + Key, int32 ValueLength + Value`` (lengths -1 for null).

A compressed message is a wrapper with a null key whose value is the compressed concatenation
of inner log entries.  Inner offsets are absolute in v0 and relative (0..n-1) in v1, where the
wrapper carries the absolute offset of the last inner message.  A v1 wrapper with
LogAppendTime overrides the timestamps of its inner messages.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from samsa.errors import CorruptRecordError
from samsa.records.batch import Record
from samsa.records.batch_header import (
    COMPRESSION_CODEC_MASK,
    LOG_OVERHEAD,
    MAGIC_V0,
    MAGIC_V1,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    Compression,
    TimestampType,
)
from samsa.records.compression import decompress, lz4_fix_broken_header_checksum

__all__ = [
    "MESSAGE_OVERHEAD_V0",
    "MESSAGE_OVERHEAD_V1",
    "LegacyMessage",
    "LegacyRecordBatch",
    "parse_message",
]

# crc + magic + attributes + key length + value length (+ timestamp in v1)
MESSAGE_OVERHEAD_V0 = 14
MESSAGE_OVERHEAD_V1 = 22

_ENTRY = struct.Struct(">qi")
_PREFIX_V0 = struct.Struct(">Ibb")
_PREFIX_V1 = struct.Struct(">Ibbq")
_I32 = struct.Struct(">i")


class LegacyMessage:
    """One decoded v0/v1 message with the offset of its log entry."""

    __slots__ = ("attributes", "crc", "crc_valid", "key", "magic", "offset", "timestamp", "value")

    def __init__(
        self,
        offset: int,
        crc: int,
        magic: int,
        attributes: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        crc_valid: bool,
    ) -> None:
        self.offset = offset
        self.crc = crc
        self.magic = magic
        self.attributes = attributes
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.crc_valid = crc_valid

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & COMPRESSION_CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == MAGIC_V0:
            return TimestampType.NO_TIMESTAMP_TYPE
        if self.attributes & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME


def _read_bytes(buf: bytes, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    if end - pos < 4:
        raise ValueError(f"{what} length is truncated")
    (length,) = _I32.unpack_from(buf, pos)
    pos += 4
    if length == -1:
        return None, pos
    if length < 0 or pos + length > end:
        raise ValueError(f"{what} length {length} does not fit the message")
    return buf[pos : pos + length], pos + length


def parse_message(buf: bytes, pos: int, offset: int, size: int) -> LegacyMessage:
    """Decode the message of ``size`` bytes at ``pos`` (just after the log entry header)."""
    end = pos + size
    if size < MESSAGE_OVERHEAD_V0 or end > len(buf):
        raise ValueError(f"message size {size} is impossible here")
    magic = buf[pos + 4]
    if magic == MAGIC_V0:
        crc, magic, attributes = _PREFIX_V0.unpack_from(buf, pos)
        timestamp = NO_TIMESTAMP
        body = pos + 6
    elif magic == MAGIC_V1:
        if size < MESSAGE_OVERHEAD_V1:
            raise ValueError(f"v1 message size {size} is below the minimum {MESSAGE_OVERHEAD_V1}")
        crc, magic, attributes, timestamp = _PREFIX_V1.unpack_from(buf, pos)
        body = pos + 14
    else:
        raise ValueError(f"magic {magic} is not a legacy message format")
    key, body = _read_bytes(buf, body, end, "key")
    value, body = _read_bytes(buf, body, end, "value")
    if body != end:
        raise ValueError(f"{end - body} bytes follow the value inside the message")
    crc_valid = zlib.crc32(memoryview(buf)[pos + 4 : end]) == crc
    return LegacyMessage(offset, crc, magic, attributes, timestamp, key, value, crc_valid)


class LegacyRecordBatch:
    """One shallow v0/v1 log entry: a plain message or a compressed wrapper.

    Offers the same read interface as ``RecordBatch`` (fields without a v0/v1 meaning take
    their "none" values) so consumers can treat every magic alike.
    """

    __slots__ = ("_check_crcs", "_records", "_size", "wrapper")

    partition_leader_epoch = NO_PARTITION_LEADER_EPOCH
    producer_id = NO_PRODUCER_ID
    producer_epoch = NO_PRODUCER_EPOCH
    base_sequence = NO_SEQUENCE
    last_sequence = NO_SEQUENCE
    is_transactional = False
    is_control = False

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0, check_crcs: bool = True) -> None:
        if len(buf) - pos < LOG_OVERHEAD:
            raise CorruptRecordError(f"legacy log entry at byte {pos}: fewer than {LOG_OVERHEAD} bytes")
        offset, size = _ENTRY.unpack_from(buf, pos)
        if size < MESSAGE_OVERHEAD_V0 or len(buf) - pos - LOG_OVERHEAD < size:
            raise CorruptRecordError(
                f"message at offset {offset} (byte {pos}): size {size} is below the minimum or "
                "beyond the buffer"
            )
        data = bytes(memoryview(buf)[pos + LOG_OVERHEAD : pos + LOG_OVERHEAD + size])
        try:
            self.wrapper = parse_message(data, 0, offset, size)
        except ValueError as exc:
            raise CorruptRecordError(f"message at offset {offset} (byte {pos}): {exc}") from None
        self._size = size + LOG_OVERHEAD
        self._check_crcs = check_crcs
        self._records: list[Record] | None = None

    @property
    def magic(self) -> int:
        return self.wrapper.magic

    @property
    def crc(self) -> int:
        return self.wrapper.crc

    @property
    def attributes(self) -> int:
        return self.wrapper.attributes

    @property
    def compression(self) -> Compression:
        return self.wrapper.compression

    @property
    def timestamp_type(self) -> TimestampType:
        return self.wrapper.timestamp_type

    @property
    def max_timestamp(self) -> int:
        return self.wrapper.timestamp

    @property
    def size(self) -> int:
        return self._size

    @property
    def base_offset(self) -> int:
        records = self.records()
        return records[0].offset if records else self.wrapper.offset

    @property
    def last_offset(self) -> int:
        return self.wrapper.offset

    @property
    def next_offset(self) -> int:
        return self.wrapper.offset + 1

    @property
    def records_count(self) -> int:
        return len(self.records())

    def is_valid(self) -> bool:
        return self.wrapper.crc_valid

    def ensure_valid(self) -> None:
        if not self.wrapper.crc_valid:
            raise CorruptRecordError(
                f"message at offset {self.wrapper.offset}: CRC-32 mismatch (stored "
                f"{self.wrapper.crc:#010x}); the message is corrupt"
            )

    def records(self) -> list[Record]:
        if self._records is None:
            try:
                self._records = self._decode()
            except ValueError as exc:
                raise CorruptRecordError(f"message at offset {self.wrapper.offset}: {exc}") from None
        return self._records

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def __len__(self) -> int:
        return len(self.records())

    def control_marker(self) -> None:
        return None

    def _decode(self) -> list[Record]:
        w = self.wrapper
        codec = w.attributes & COMPRESSION_CODEC_MASK
        if codec == Compression.NONE:
            return [Record(w.offset, w.timestamp, w.key, w.value, [], w.timestamp_type)]
        if codec >= Compression.ZSTD:  # zstd (KIP-110) and unknown codecs
            raise ValueError(f"compression codec {codec} is not allowed in magic {w.magic} messages")
        if w.value is None:
            raise ValueError("compressed wrapper message has a null value")
        payload = w.value
        if codec == Compression.LZ4 and w.magic == MAGIC_V0:
            payload = lz4_fix_broken_header_checksum(payload)
        inner = self._inner_messages(decompress(Compression(codec), payload))
        if not inner:
            raise ValueError("compressed wrapper message holds no inner messages")
        shift = 0
        if w.magic == MAGIC_V1:
            # Relative inner offsets: the wrapper holds the absolute offset of the last one.  A
            # negative base means offsets were never assigned (a producer's set, wrapper offset
            # 0): keep the relative ones, as Java's and kafka-python's readers do.
            shift = max(w.offset - inner[-1].offset, 0)
        override = w.magic == MAGIC_V1 and w.attributes & TIMESTAMP_TYPE_MASK
        records = []
        for m in inner:
            if override:
                records.append(
                    Record(m.offset + shift, w.timestamp, m.key, m.value, [], TimestampType.LOG_APPEND_TIME)
                )
            else:
                records.append(Record(m.offset + shift, m.timestamp, m.key, m.value, [], m.timestamp_type))
        return records

    def _inner_messages(self, data: bytes) -> list[LegacyMessage]:
        messages = []
        pos = 0
        end = len(data)
        while pos < end:
            if end - pos < LOG_OVERHEAD:
                raise ValueError(f"inner message at byte {pos} is truncated")
            offset, size = _ENTRY.unpack_from(data, pos)
            pos += LOG_OVERHEAD
            if size < 0 or pos + size > end:
                raise ValueError(f"inner message at offset {offset} claims {size} bytes, {end - pos} left")
            message = parse_message(data, pos, offset, size)
            if message.attributes & COMPRESSION_CODEC_MASK:
                raise ValueError(f"inner message at offset {offset} is itself compressed")
            if self._check_crcs and not message.crc_valid:
                raise ValueError(f"inner message at offset {offset}: CRC-32 mismatch")
            messages.append(message)
            pos += size
        return messages

    def __repr__(self) -> str:
        w = self.wrapper
        return (
            f"LegacyRecordBatch(offset={w.offset}, magic={w.magic}, "
            f"compression={w.attributes & COMPRESSION_CODEC_MASK}, size={self._size})"
        )
