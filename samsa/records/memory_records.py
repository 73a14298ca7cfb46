"""Iterating a buffer of concatenated batches of any magic (a fetch response, a log segment).

Every entry starts with ``int64 offset, int32 size`` and has its magic at byte 16, so one loop
dispatches v2 batches to ``RecordBatch`` and v0/v1 entries to ``LegacyRecordBatch``.  A partial
batch at the end (fetch responses are cut at the byte limit) ends the iteration silently; a
complete batch that is corrupt raises CorruptRecordError naming its offset.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from samsa.errors import CorruptRecordError
from samsa.records.batch import Record, RecordBatch
from samsa.records.batch_header import (
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V0,
    MAGIC_V1,
    MAGIC_V2,
    RECORD_BATCH_OVERHEAD,
    read_batch_header,
)
from samsa.records.legacy import MESSAGE_OVERHEAD_V0, LegacyRecordBatch

__all__ = ["AnyBatch", "MemoryRecords", "iter_batches"]

AnyBatch = RecordBatch | LegacyRecordBatch

_ENTRY = struct.Struct(">qi")


def iter_batches(buf: bytes | bytearray | memoryview, check_crcs: bool = True) -> Iterator[AnyBatch]:
    """Yield each complete batch in ``buf``; see the module docstring for the error rules."""
    pos = 0
    end = len(buf)
    while end - pos > MAGIC_OFFSET:
        offset, length = _ENTRY.unpack_from(buf, pos)
        size = length + LOG_OVERHEAD
        magic = buf[pos + MAGIC_OFFSET]
        if magic == MAGIC_V2:
            if size < RECORD_BATCH_OVERHEAD:
                raise CorruptRecordError(
                    f"batch at offset {offset} (byte {pos}): batch length {length} is below the "
                    f"minimum {RECORD_BATCH_OVERHEAD - LOG_OVERHEAD}"
                )
            if size > end - pos:
                return
            v2 = RecordBatch(buf, pos, read_batch_header(buf, pos))
            if check_crcs:
                v2.ensure_valid()
            yield v2
        elif magic == MAGIC_V0 or magic == MAGIC_V1:
            if length < MESSAGE_OVERHEAD_V0:
                raise CorruptRecordError(
                    f"message at offset {offset} (byte {pos}): size {length} is below the minimum "
                    f"{MESSAGE_OVERHEAD_V0}"
                )
            if size > end - pos:
                return
            legacy = LegacyRecordBatch(buf, pos, check_crcs)
            if check_crcs:
                legacy.ensure_valid()
            yield legacy
        else:
            if size > end - pos and size >= RECORD_BATCH_OVERHEAD:
                # A cut-off tail whose magic byte we may be misreading; treat as partial.
                return
            raise CorruptRecordError(f"batch at offset {offset} (byte {pos}): unknown magic {magic}")
        pos += size


class MemoryRecords:
    """A read-only view over concatenated batches.

    ``check_crcs`` (default True) validates each batch's CRC before it is handed out, as the
    Java consumer's ``check.crcs`` does.
    """

    __slots__ = ("buffer", "check_crcs")

    def __init__(self, buf: bytes | bytearray | memoryview, check_crcs: bool = True) -> None:
        self.buffer = buf
        self.check_crcs = check_crcs

    def batches(self) -> Iterator[AnyBatch]:
        return iter_batches(self.buffer, self.check_crcs)

    def __iter__(self) -> Iterator[AnyBatch]:
        return iter_batches(self.buffer, self.check_crcs)

    def records(self, include_control: bool = False) -> Iterator[Record]:
        """Every record of every batch, in order; control batches are skipped by default."""
        for batch in iter_batches(self.buffer, self.check_crcs):
            if batch.is_control and not include_control:
                continue
            yield from batch.records()

    def size_in_bytes(self) -> int:
        return len(self.buffer)

    def valid_bytes(self) -> int:
        """Bytes taken by complete batches (no CRC check); the rest is a partial tail."""
        pos = 0
        end = len(self.buffer)
        while end - pos >= LOG_OVERHEAD:
            _, length = _ENTRY.unpack_from(self.buffer, pos)
            size = length + LOG_OVERHEAD
            if length < MESSAGE_OVERHEAD_V0 or size > end - pos:
                break
            pos += size
        return pos

    def has_partial_batch(self) -> bool:
        return self.valid_bytes() < len(self.buffer)
