"""Record batches written byte by byte, the way clients other than ours fill in the header.

sarama 1.22 leaves MaxTimestamp at -1; other clients may put anything there.  The broker must
not believe it (Kafka's LogValidator recomputes it), so tests need batches whose header says
what the test wants rather than what samsa's own builder would write.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from crc32c import crc32c

from samsa.records import Compression
from samsa.records.compression import compress
from samsa.records.varint import encode_varint, encode_varlong

# Attributes .. RecordsCount: what the CRC covers before the records.
_AFTER_CRC = struct.Struct(">hiqqqhii")
# BaseOffset, BatchLength, PartitionLeaderEpoch, Magic, CRC.
_BEFORE_CRC = struct.Struct(">qiibI")
LOG_APPEND_TIME_FLAG = 0x08


def handmade_batch(timestamps: Sequence[int], *, max_timestamp: int = -1,
                   base_timestamp: int | None = None, values: Sequence[bytes] | None = None,
                   codec: Compression = Compression.NONE, flags: int = 0) -> bytes:
    """A v2 batch of one record per timestamp (keyless, value ``v<i>`` unless given), base
    offset 0, no producer id, with ``max_timestamp`` written into the header as is."""
    base = timestamps[0] if base_timestamp is None else base_timestamp
    records = bytearray()
    for i, ts in enumerate(timestamps):
        value = values[i] if values is not None else b"v%d" % i
        body = (b"\x00" + encode_varlong(ts - base) + encode_varint(i) + encode_varint(-1)
                + encode_varint(len(value)) + value + encode_varint(0))
        records += encode_varint(len(body)) + body
    payload = bytes(records) if codec == Compression.NONE else compress(codec, bytes(records))
    count = len(timestamps)
    after_crc = _AFTER_CRC.pack(int(codec) | flags, count - 1, base, max_timestamp,
                                -1, -1, -1, count) + payload
    batch_length = 4 + 1 + 4 + len(after_crc)  # PartitionLeaderEpoch, Magic, CRC, the rest
    return _BEFORE_CRC.pack(0, batch_length, -1, 2, crc32c(after_crc)) + after_crc


def handmade_record(offset_delta: int, value: bytes | None = b"v", *, key: bytes | None = None,
                    timestamp_delta: int = 0,
                    headers: Sequence[tuple[bytes | None, bytes | None]] = (),
                    key_length: int | None = None, value_length: int | None = None,
                    header_count: int | None = None, trailing: bytes = b"",
                    length: int | None = None) -> bytes:
    """One v2 record.  ``key_length``, ``value_length``, ``header_count`` and ``length`` write
    that number in place of the true one (a record that lies); ``trailing`` adds bytes after
    its fields, inside its length.  A header key of None is written as length -1."""
    def sized(data: bytes | None, lie: int | None = None) -> bytes:
        size = (-1 if data is None else len(data)) if lie is None else lie
        return encode_varint(size) + (data or b"")

    body = (b"\x00" + encode_varlong(timestamp_delta) + encode_varint(offset_delta)
            + sized(key, key_length) + sized(value, value_length)
            + encode_varint(len(headers) if header_count is None else header_count)
            + b"".join(sized(k) + sized(v) for k, v in headers) + trailing)
    return encode_varint(len(body) if length is None else length) + body


def wrap_records(records: bytes, count: int, *, codec: Compression = Compression.NONE,
                 base_timestamp: int = 0, max_timestamp: int = -1,
                 last_offset_delta: int | None = None) -> bytes:
    """A v2 batch (base offset 0, no producer id) around an uncompressed records section,
    compressed with ``codec``, with ``count`` in the header and a correct CRC."""
    payload = records if codec == Compression.NONE else compress(codec, records)
    last = count - 1 if last_offset_delta is None else last_offset_delta
    after_crc = _AFTER_CRC.pack(int(codec), last, base_timestamp, max_timestamp,
                                -1, -1, -1, count) + payload
    batch_length = 4 + 1 + 4 + len(after_crc)
    return _BEFORE_CRC.pack(0, batch_length, -1, 2, crc32c(after_crc)) + after_crc
