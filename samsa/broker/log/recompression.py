"""The topic's ``compression.type`` applied on append: a produced batch of another codec is
rebuilt with the topic's codec, as Kafka's ``LogValidator`` does.

Kafka (``validateMessagesAndAssignOffsetsCompressed``) cannot assign offsets in place when the
batch's codec is not the target one (``BrokerCompressionType.targetCompression``: the topic's
``compression.type`` unless it is ``producer``; ``uncompressed`` means none), and builds a new
batch (``buildRecordsAndAssignOffsets``) holding the same records, with the first batch's
producer id, epoch, base sequence and transactional flag, compressed at the topic's
``compression.<codec>.level`` (KIP-390).  The log then assigns offsets, the leader epoch and
LogAppendTime as for any batch, and the producer state sees the same sequences, so a retried
batch is still recognised as a duplicate (Kafka compares sequences, not bytes).

Here the records were parsed and checked by the validator, and their encoding does not depend on
the codec, so the new batch is the old header (codec bits, length and CRC rewritten) followed by
the validated records section compressed with the target codec.  Only a produce whose codec
differs from a non-``producer`` compression.type comes here: the default path does no extra work.
"""

from __future__ import annotations

import struct

from samsa.errors import MessageTooLargeError
from samsa.records import (
    COMPRESSION_CODEC_MASK,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    Compression,
)
from samsa.records.batch_header import (
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_OFFSET,
    rewrite_crc,
)
from samsa.records.compression import compress

__all__ = ["recompressed_batch"]

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def recompressed_batch(buf: bytes | bytearray | memoryview, pos: int,
                       records: bytes | bytearray | memoryview, target: Compression,
                       level: int | None, max_message_bytes: int, where: object) -> bytearray:
    """The batch at ``buf[pos:]`` rebuilt with codec ``target`` around ``records`` (its
    records section, uncompressed and validated): header fields kept but the codec, length
    and CRC.  Raises MessageTooLargeError when the new batch passes max.message.bytes, as
    Kafka's UnifiedLog re-checks batch sizes after the validator changed them."""
    if target == Compression.NONE:
        payload: bytes | bytearray | memoryview = records
    else:
        payload = compress(target, records, level)
    size = RECORD_BATCH_OVERHEAD + len(payload)
    if size > max_message_bytes:
        raise MessageTooLargeError(
            f"{where}: the batch recompressed to the topic's compression.type "
            f"({target.name.lower()}) takes {size} bytes, above max.message.bytes="
            f"{max_message_bytes}; send smaller batches or raise the limit")
    batch = bytearray(size)
    batch[:RECORD_BATCH_OVERHEAD] = buf[pos : pos + RECORD_BATCH_OVERHEAD]
    batch[RECORD_BATCH_OVERHEAD:] = payload
    attributes = _INT16.unpack_from(batch, ATTRIBUTES_OFFSET)[0]
    _INT16.pack_into(batch, ATTRIBUTES_OFFSET,
                     (attributes & ~COMPRESSION_CODEC_MASK) | int(target))
    _INT32.pack_into(batch, BATCH_LENGTH_OFFSET, size - LOG_OVERHEAD)
    rewrite_crc(batch, 0)
    return batch
