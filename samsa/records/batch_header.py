"""The 61-byte header of a magic-v2 record batch: constants, parsing, validation, in-place rewrites.

Layout (all big-endian; Kafka's DefaultRecordBatch):

    0 BaseOffset int64 · 8 BatchLength int32 · 12 PartitionLeaderEpoch int32 · 16 Magic int8
    17 CRC uint32 (CRC-32C of bytes 21..end) · 21 Attributes int16 · 23 LastOffsetDelta int32
    27 BaseTimestamp int64 · 35 MaxTimestamp int64 · 43 ProducerId int64 · 51 ProducerEpoch int16
    53 BaseSequence int32 · 57 RecordsCount int32 · 61 records…

The broker uses the rewrite helpers to stamp offsets, leader epoch and LogAppendTime into a
batch it received without re-encoding it.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator
from typing import NamedTuple

from crc32c import crc32c

from samsa.errors import CorruptRecordError

__all__ = [
    "ATTRIBUTES_OFFSET",
    "COMPRESSION_CODEC_MASK",
    "CONTROL_FLAG_MASK",
    "CRC_OFFSET",
    "DELETE_HORIZON_FLAG_MASK",
    "LOG_OVERHEAD",
    "MAGIC_OFFSET",
    "MAGIC_V0",
    "MAGIC_V1",
    "MAGIC_V2",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "RECORD_BATCH_OVERHEAD",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_FLAG_MASK",
    "BatchHeader",
    "Compression",
    "TimestampType",
    "compute_crc",
    "crc_is_valid",
    "increment_sequence",
    "iter_batch_headers",
    "read_batch_header",
    "read_produce_check_fields",
    "rewrite_crc",
    "set_base_offset",
    "set_log_append_time",
    "set_max_timestamp",
    "set_partition_leader_epoch",
    "set_producer_state",
    "stamp_offset_and_epoch",
    "validate_batch",
]

RECORD_BATCH_OVERHEAD = 61
LOG_OVERHEAD = 12  # BaseOffset + BatchLength: the part not counted in BatchLength
MAGIC_V0 = 0
MAGIC_V1 = 1
MAGIC_V2 = 2

# Byte positions inside a batch.
BASE_OFFSET_OFFSET = 0
BATCH_LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # CRC coverage starts here
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57

# Attribute bits.
COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

_INT32_MAX = 0x7FFFFFFF


class Compression(enum.IntEnum):
    """Codec ids stored in attribute bits 0-2."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(enum.IntEnum):
    """Attribute bit 3. NO_TIMESTAMP_TYPE (-1) exists only for magic 0 messages."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


_HEADER = struct.Struct(">qiibIhiqqqhii")
assert _HEADER.size == RECORD_BATCH_OVERHEAD
_I16 = struct.Struct(">h")
# BaseOffset, BatchLength, PartitionLeaderEpoch: the first 16 bytes, none covered by the CRC.
_STAMP = struct.Struct(">qii")
# BatchLength, then (past epoch, magic, CRC) Attributes, (past LastOffsetDelta) BaseTimestamp
# and MaxTimestamp: bytes 8..43.
_PRODUCE_CHECK = struct.Struct(">i9xh4xqq")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_PRODUCER_STATE = struct.Struct(">qhi")
_new_tuple = tuple.__new__


class BatchHeader(NamedTuple):
    """The decoded fixed header of a v2 batch (fields in wire order)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch including the 12-byte log overhead."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & COMPRESSION_CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """BaseSequence + LastOffsetDelta, wrapping past Int32.MAX to 0 as Kafka does."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequence arithmetic modulo Int32.MAX + 1 (sequences never go negative)."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def _where(buf: bytes | bytearray | memoryview, pos: int) -> str:
    """'offset N (byte P)' when the base offset is readable, else just the position."""
    if len(buf) - pos >= 8:
        return f"batch at offset {_I64.unpack_from(buf, pos)[0]} (byte {pos})"
    return f"batch at byte {pos}"


def read_batch_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Decode the 61-byte header at ``pos``; magic must be 2.

    Raises CorruptRecordError if fewer than 61 bytes remain or the magic is not 2.  The CRC and
    the batch length are not checked here (see validate_batch).
    """
    if len(buf) - pos < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(
            f"{_where(buf, pos)}: only {max(len(buf) - pos, 0)} bytes left, "
            f"a v2 batch header needs {RECORD_BATCH_OVERHEAD}"
        )
    # tuple.__new__ rather than _make (which also checks the length): every produced batch.
    header: BatchHeader = _new_tuple(BatchHeader, _HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC_V2:
        raise CorruptRecordError(
            f"batch at offset {header.base_offset} (byte {pos}): magic {header.magic}, expected 2"
        )
    return header


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC-32C of bytes Attributes..end of the batch at ``pos`` whose total size is ``size``."""
    with memoryview(buf) as view:
        return crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size])


def crc_is_valid(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    """True if the stored CRC matches the batch bytes (the batch must be complete in ``buf``)."""
    return compute_crc(buf, pos, header.size) == header.crc


def validate_batch(
    buf: bytes | bytearray | memoryview, pos: int = 0, max_size: int | None = None
) -> BatchHeader:
    """Check one complete batch at ``pos``: size bounds, magic and CRC-32C.

    Returns its header; raises CorruptRecordError naming the offset and what was wrong.
    """
    header = read_batch_header(buf, pos)
    size = header.batch_length + LOG_OVERHEAD
    if (size < RECORD_BATCH_OVERHEAD or size > len(buf) - pos or header.records_count < 0
            or (max_size is not None and size > max_size)):
        _raise_invalid_batch(header, pos, size, len(buf), max_size)
    with memoryview(buf) as view:
        actual = crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size])
    if actual != header.crc:
        raise CorruptRecordError(
            f"batch at offset {header.base_offset} (byte {pos}): CRC-32C mismatch (stored "
            f"{header.crc:#010x}, computed {actual:#010x}); the batch is corrupt"
        )
    return header


def _raise_invalid_batch(header: BatchHeader, pos: int, size: int, buf_len: int,
                         max_size: int | None) -> None:
    # Kept out of validate_batch so that the common (valid) path builds no messages.
    where = f"batch at offset {header.base_offset} (byte {pos})"
    if size < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(
            f"{where}: batch length {header.batch_length} is smaller than the minimum "
            f"{RECORD_BATCH_OVERHEAD - LOG_OVERHEAD}"
        )
    if max_size is not None and size > max_size:
        raise CorruptRecordError(f"{where}: size {size} exceeds the limit {max_size}")
    if size > buf_len - pos:
        raise CorruptRecordError(
            f"{where}: truncated, claims {size} bytes but only {buf_len - pos} are present"
        )
    raise CorruptRecordError(f"{where}: negative record count {header.records_count}")


def iter_batch_headers(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each complete v2 batch in concatenated ``buf``.

    Stops silently at a trailing partial batch (as fetch responses may end mid-batch).  A batch
    whose length is impossible or whose magic is not 2 raises CorruptRecordError.  CRCs are not
    checked.
    """
    pos = 0
    end = len(buf)
    while end - pos >= LOG_OVERHEAD:
        batch_length = _I32.unpack_from(buf, pos + BATCH_LENGTH_OFFSET)[0]
        size = batch_length + LOG_OVERHEAD
        if size < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"{_where(buf, pos)}: batch length {batch_length} is smaller than the minimum "
                f"{RECORD_BATCH_OVERHEAD - LOG_OVERHEAD}"
            )
        if pos + size > end:
            return
        yield pos, read_batch_header(buf, pos)
        pos += size


def rewrite_crc(buf: bytearray | memoryview, pos: int = 0) -> int:
    """Recompute and store the CRC of the complete batch at ``pos``; returns it."""
    size = _I32.unpack_from(buf, pos + BATCH_LENGTH_OFFSET)[0] + LOG_OVERHEAD
    crc = compute_crc(buf, pos, size)
    _U32.pack_into(buf, pos + CRC_OFFSET, crc)
    return crc


def set_base_offset(buf: bytearray | memoryview, pos: int, offset: int) -> None:
    """Stamp the base offset (not CRC-covered, so no CRC update)."""
    _I64.pack_into(buf, pos + BASE_OFFSET_OFFSET, offset)


def stamp_offset_and_epoch(buf: bytearray | memoryview, pos: int, offset: int,
                           epoch: int, batch_length: int) -> None:
    """set_base_offset and set_partition_leader_epoch in one call (the broker's per-append
    stamp); ``batch_length`` must be the batch's own, as it is rewritten in between."""
    _STAMP.pack_into(buf, pos, offset, batch_length, epoch)


def read_produce_check_fields(buf: bytes | bytearray | memoryview, pos: int = 0
                              ) -> tuple[int, int, int, int]:
    """(BatchLength, Attributes, BaseTimestamp, MaxTimestamp) of the batch at ``pos`` with one
    struct call, for the broker's request-level checks (no BatchHeader built)."""
    return _PRODUCE_CHECK.unpack_from(buf, pos + BATCH_LENGTH_OFFSET)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Stamp the partition leader epoch (not CRC-covered, so no CRC update)."""
    _I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp_ms: int) -> None:
    """Switch the batch to LogAppendTime with MaxTimestamp = ``timestamp_ms``; CRC recomputed.

    Records keep their deltas; readers report ``timestamp_ms`` for every record of such a batch.
    """
    attributes = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
    max_timestamp = _I64.unpack_from(buf, pos + MAX_TIMESTAMP_OFFSET)[0]
    if attributes & TIMESTAMP_TYPE_MASK and max_timestamp == timestamp_ms:
        return
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    rewrite_crc(buf, pos)


def set_max_timestamp(buf: bytearray | memoryview, pos: int, log_append_time: bool,
                      max_timestamp: int) -> bool:
    """Store the timestamp type and MaxTimestamp the broker computed (Kafka's
    ``DefaultRecordBatch.setMaxTimestamp``): the CRC is recomputed only when either changed.
    Returns True if the batch was rewritten."""
    attributes = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
    stored = _I64.unpack_from(buf, pos + MAX_TIMESTAMP_OFFSET)[0]
    wanted = (attributes | TIMESTAMP_TYPE_MASK if log_append_time
              else attributes & ~TIMESTAMP_TYPE_MASK)
    if attributes == wanted and stored == max_timestamp:
        return False
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, wanted)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
    rewrite_crc(buf, pos)
    return True


def set_producer_state(
    buf: bytearray | memoryview,
    pos: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    is_transactional: bool | None = None,
) -> None:
    """Re-stamp producer id/epoch/base sequence (and optionally the transactional bit); CRC recomputed.

    Used by the producer to retry an already-built batch after an epoch bump or a sequence reset.
    """
    _PRODUCER_STATE.pack_into(buf, pos + PRODUCER_ID_OFFSET, producer_id, producer_epoch, base_sequence)
    if is_transactional is not None:
        attributes = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
        if is_transactional:
            attributes |= TRANSACTIONAL_FLAG_MASK
        else:
            attributes &= ~TRANSACTIONAL_FLAG_MASK
        _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
    rewrite_crc(buf, pos)
