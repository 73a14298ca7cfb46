"""Legacy (magic v0/v1) message sets written from the documented layout (Kafka's LegacyRecord).

Test-only: Samsa reads these formats but never writes them.
"""

from __future__ import annotations

import struct
import zlib


def message(magic: int, key: bytes | None, value: bytes | None, attributes: int = 0, timestamp: int = 0) -> bytes:
    """Crc, Magic, Attributes, [Timestamp], Key, Value with a correct CRC-32."""
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    return struct.pack(">I", zlib.crc32(body)) + body


def entry(offset: int, msg: bytes) -> bytes:
    """A log entry: Offset, MessageSize, Message."""
    return struct.pack(">qi", offset, len(msg)) + msg


def message_set(
    magic: int,
    records: list[tuple[bytes | None, bytes | None, int]],
    first_offset: int = 0,
) -> bytes:
    """Uncompressed entries (key, value, timestamp) at consecutive offsets."""
    return b"".join(
        entry(first_offset + i, message(magic, k, v, 0, ts)) for i, (k, v, ts) in enumerate(records)
    )


def wrapper(
    magic: int,
    codec: int,
    compressed_inner: bytes,
    wrapper_offset: int,
    timestamp: int = 0,
    log_append_time: bool = False,
) -> bytes:
    """A compressed wrapper entry whose value is ``compressed_inner``."""
    attributes = codec | (0x08 if log_append_time else 0)
    return entry(wrapper_offset, message(magic, None, compressed_inner, attributes, timestamp))
