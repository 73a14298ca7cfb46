"""Writing legacy message sets, magic v0 and v1 (the layout legacy.py reads).

The broker writes these only to answer Fetch v0-v3 (down-conversion), as Kafka's
``MemoryRecordsBuilder`` does for magic < 2 (``appendLegacyRecord``, ``toInnerOffset``,
``writeLegacyCompressedWrapperHeader``):

* uncompressed: one log entry per record, at its absolute offset;
* compressed: one wrapper entry (key null, value = the compressed inner entries) at the offset of
  the last record; inner offsets are absolute in v0 and relative to the first record in v1;
* v1 carries timestamps: with LogAppendTime every message (inner and wrapper) gets the append
  time and the timestamp-type attribute bit; the wrapper of a CreateTime set carries the largest
  inner timestamp.

Codec framing follows Kafka's Java writers: snappy in xerial's framed stream format
(``SnappyOutputStream``), LZ4 frames whose v0 header checksum has the pre-0.10 bug
(``KafkaLZ4BlockOutputStream`` with ``useBrokenFlagDescriptorChecksum``).  zstd does not exist
below magic 2.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

import cramjam

from samsa.records.batch_header import (
    MAGIC_V0,
    MAGIC_V1,
    TIMESTAMP_TYPE_MASK,
    Compression,
)
from samsa.records.compression import compress, xxh32

__all__ = ["LegacyEntry", "build_legacy_records", "encode_message", "xerial_snappy"]

_ENTRY = struct.Struct(">qi")
_CRC = struct.Struct(">I")
_I32 = struct.Struct(">i")
_NULL = _I32.pack(-1)
_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # xerial SnappyOutputStream's default block size

# (offset, timestamp, key, value) of one record to write.
LegacyEntry = tuple[int, int, "bytes | None", "bytes | None"]


def encode_message(magic: int, attributes: int, timestamp: int, key: bytes | None,
                   value: bytes | None) -> bytes:
    """One message (Crc, Magic, Attributes, [Timestamp], Key, Value) with its CRC-32."""
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic == MAGIC_V1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        if field is None:
            body += _NULL
        else:
            body += _I32.pack(len(field))
            body += field
    return _CRC.pack(zlib.crc32(body)) + bytes(body)


def _entry(offset: int, message: bytes) -> bytes:
    return _ENTRY.pack(offset, len(message)) + message


def xerial_snappy(data: bytes | bytearray | memoryview) -> bytes:
    """Snappy in xerial's stream framing (what Java's SnappyOutputStream writes)."""
    out = bytearray(_XERIAL_HEADER)
    view = memoryview(data)
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start:start + _XERIAL_BLOCK]))
        out += _I32.pack(len(block))
        out += block
    return bytes(out)


def _lz4_v0(frame: bytes) -> bytes:
    """Give an LZ4 frame the header checksum pre-0.10 Kafka wrote for magic 0: xxh32 over the
    frame magic *and* the descriptor (readers of magic 0 expect it; see legacy.py)."""
    buf = bytearray(frame)
    flg = buf[4]
    descriptor_end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    buf[descriptor_end] = (xxh32(bytes(buf[0:descriptor_end])) >> 8) & 0xFF
    return bytes(buf)


def _compress(codec: Compression, magic: int, data: bytes) -> bytes:
    if codec == Compression.SNAPPY:
        return xerial_snappy(data)
    if codec == Compression.LZ4:
        frame = compress(codec, data)
        return _lz4_v0(frame) if magic == MAGIC_V0 else frame
    if codec == Compression.ZSTD:
        raise ValueError(f"zstd is not allowed in magic {magic} messages")
    return compress(codec, data)


def build_legacy_records(magic: int, codec: Compression, records: Sequence[LegacyEntry], *,
                         log_append_time: int | None = None) -> bytes:
    """The message set for ``records`` (ascending offsets) in ``magic`` 0 or 1.

    ``log_append_time``: the set is LogAppendTime-stamped with this time (v1 only; v0 has no
    timestamps).  Empty ``records`` give b"".
    """
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise ValueError(f"magic {magic} is not a legacy format")
    if not records:
        return b""
    append_time = log_append_time if magic == MAGIC_V1 else None
    attributes = TIMESTAMP_TYPE_MASK if append_time is not None else 0
    out = bytearray()
    if codec == Compression.NONE:
        for offset, timestamp, key, value in records:
            ts = append_time if append_time is not None else timestamp
            out += _entry(offset, encode_message(magic, attributes, ts, key, value))
        return bytes(out)
    base = records[0][0]
    max_timestamp = -1
    for offset, timestamp, key, value in records:
        ts = append_time if append_time is not None else timestamp
        max_timestamp = max(max_timestamp, ts)
        inner_offset = offset - base if magic == MAGIC_V1 else offset
        out += _entry(inner_offset, encode_message(magic, attributes, ts, key, value))
    value = _compress(codec, magic, bytes(out))
    wrapper = encode_message(magic, attributes | int(codec), max_timestamp, None, value)
    return _entry(records[-1][0], wrapper)
