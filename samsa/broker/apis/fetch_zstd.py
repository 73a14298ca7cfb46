"""Fetch below v10 and zstd (KIP-110): what an old fetcher may be sent.

zstd batches exist from Produce v7 / Fetch v10 on; a client that fetches with v9 or older
predates them (or chose not to negotiate them) and cannot decompress one.  What Kafka does:

* 3.9 (``KafkaApis.maybeConvertFetchedData``): UNSUPPORTED_COMPRESSION_TYPE (76) for a partition
  whose *topic* has ``compression.type=zstd`` (the broker then recompresses everything to zstd),
  but zstd batches a producer wrote under ``compression.type=producer`` go out as stored;
  Fetch v0-3 down-conversion cannot convert a zstd batch (``RecordsUtil.downConvert``: 76 if it
  is the first batch, else the response stops before it).
* 4.x (KAFKA-18269, KIP-896) dropped the check with Fetch v0-3.

This broker answers 76 in both cases, the topic's codec and a stored zstd batch, so that a
client working against it also works against Kafka 3.9: it never receives bytes it cannot
decode, and it sees the same 76 where 3.9 sends one.  Like 3.9's down-conversion, batches
before the first zstd one are still returned, so the client gets every record up to it.
"""

from __future__ import annotations

import os
import struct

from samsa.broker.log.file_slice import FileSlice
from samsa.records.batch_header import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    LOG_OVERHEAD,
    MAGIC_V2,
    Compression,
)

__all__ = ["ZSTD_MIN_FETCH_VERSION", "without_zstd"]

ZSTD_MIN_FETCH_VERSION = 10
_PREFIX = ATTRIBUTES_OFFSET + 2  # BaseOffset .. Attributes: what the check reads of a batch
_CHUNK = 64 * 1024
# BatchLength (byte 8), Magic (16), Attributes (21) of a v2 batch header.
_LENGTH_AND_ATTRIBUTES = struct.Struct(">8xi4xb4xh")
assert _LENGTH_AND_ATTRIBUTES.size == _PREFIX


def without_zstd(records: FileSlice) -> FileSlice | None:
    """``records`` cut before its first zstd batch (the whole slice when it has none); None if
    the first batch is zstd.  Reads batch headers only, in chunks."""
    fd = records.fileno()
    start = pos = records.position
    end = start + records.size
    buf = b""
    buf_start = pos
    while end - pos >= _PREFIX:
        off = pos - buf_start
        if off + _PREFIX > len(buf):
            buf = os.pread(fd, min(_CHUNK, end - pos), pos)
            buf_start, off = pos, 0
            if len(buf) < _PREFIX:
                break
        batch_length, magic, attributes = _LENGTH_AND_ATTRIBUTES.unpack_from(buf, off)
        if magic == MAGIC_V2 and attributes & COMPRESSION_CODEC_MASK == Compression.ZSTD:
            return records.head(pos - start) if pos > start else None
        if batch_length <= 0:
            break  # not a batch: leave the slice as it is
        pos += batch_length + LOG_OVERHEAD
    return records
