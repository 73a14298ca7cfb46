"""What the log cleaner keeps of each batch and record (Kafka's Cleaner.cleanInto /
shouldRetainRecord, CleanedTransactionMetadata, MemoryRecords.filterTo).

Per data record: past the offset map's ``latest_offset`` it is kept (beyond this round); a
keyless record is dropped; otherwise it is kept iff it is the latest offset of its key and it
has a value or its batch's delete horizon (KIP-534) has not passed.  Batches of aborted
transactions are dropped whole; a transaction marker is kept while data of its transaction
remains, then stamped with a delete horizon and dropped once it has passed.  The last batch of
each producer the partition still knows is kept (empty if need be) so its sequence and epoch
survive (an idempotent producer's next batch must follow it).

A batch that keeps every record and needs no horizon is copied byte for byte; otherwise it is
rebuilt with the same base offset, LastOffsetDelta, producer id/epoch, base sequence, leader
epoch, flags and codec, holding only the kept records.
"""

from __future__ import annotations

import enum
import heapq
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from crc32c import crc32c

from samsa.broker.log.offset_map import OffsetMap, key_hash
from samsa.broker.log.txn_index import AbortedTxn
from samsa.errors import CorruptRecordError
from samsa.records import (
    COMPRESSION_CODEC_MASK,
    DELETE_HORIZON_FLAG_MASK,
    LOG_OVERHEAD,
    MAGIC_V2,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    Compression,
    ControlRecordType,
    Record,
    RecordBatch,
    TimestampType,
    compress,
)
from samsa.records.builder import encode_headers
from samsa.records.varint import encode_varint, encode_varlong

__all__ = ["BatchRetention", "FilterContext", "TxnTracker", "encode_batch", "filter_batch"]

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")


class BatchRetention(enum.Enum):
    DELETE = 0  # drop without looking at the records
    DELETE_EMPTY = 1  # drop if no record survives
    RETAIN_EMPTY = 2  # keep, as a bare header if no record survives


@dataclass(slots=True)
class _AbortedState:
    txn: AbortedTxn
    seen_data: bool = False


@dataclass(slots=True)
class TxnTracker:
    """Transactions met while walking the log in offset order (CleanedTransactionMetadata):
    which data batches belong to aborted transactions, and which markers may go."""

    _pending: list[tuple[int, int, AbortedTxn]] = field(default_factory=list)
    _ongoing_aborted: dict[int, _AbortedState] = field(default_factory=dict)
    _ongoing_committed: set[int] = field(default_factory=set)
    # Entries for the .txnindex of the segment being written (ABORT markers kept).
    cleaned_index: list[AbortedTxn] | None = None

    def add_aborted(self, txns: Iterable[AbortedTxn]) -> None:
        for txn in txns:
            heapq.heappush(self._pending, (txn.first_offset, txn.last_offset, txn))

    def _consume_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0][0] <= offset:
            txn = heapq.heappop(pending)[2]
            self._ongoing_aborted.setdefault(txn.producer_id, _AbortedState(txn))

    def on_data_batch(self, header: BatchHeader) -> bool:
        """True if the batch belongs to an aborted transaction (discard it whole)."""
        self._consume_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        state = self._ongoing_aborted.get(header.producer_id)
        if state is not None:
            state.seen_data = True
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_control_batch(self, header: BatchHeader, control_type: int | None) -> bool:
        """True if the marker may be discarded (its transaction has no data left here)."""
        self._consume_up_to(header.last_offset)
        if control_type is None:
            return True  # an already emptied control batch
        pid = header.producer_id
        if control_type == ControlRecordType.ABORT:
            state = self._ongoing_aborted.pop(pid, None)
            if state is not None and state.seen_data:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(state.txn)
                return False
            return True
        if control_type == ControlRecordType.COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False


def control_type_of(batch: RecordBatch) -> int | None:
    """The control record's type, None for an empty control batch."""
    if batch.header.records_count == 0:
        return None
    try:
        marker = batch.control_marker()
    except (CorruptRecordError, ValueError):
        return -1  # unknown: kept (Kafka's default branch)
    return None if marker is None else int(marker.type)


@dataclass(slots=True)
class FilterContext:
    """One cleaning round's inputs to the filter."""

    offset_map: OffsetMap
    tracker: TxnTracker
    now_ms: int
    delete_retention_ms: int
    # producer id -> (last data offset or -1, epoch): the producers the partition knows.
    last_of_producers: dict[int, tuple[int, int]]
    upper_bound: int  # the round's first uncleanable offset
    keep_last_offset: int = -1  # also keep (empty) the batch ending here: the group's end
    records_read: int = 0
    records_kept: int = 0


def _is_last_of_producer(header: BatchHeader, ctx: FilterContext) -> bool:
    last = ctx.last_of_producers.get(header.producer_id)
    if last is None:
        return False
    last_data_offset, epoch = last
    if last_data_offset >= 0:
        return header.last_offset == last_data_offset
    return header.is_control and header.producer_epoch == epoch


def filter_batch(data: bytes | bytearray | memoryview, header: BatchHeader,
                 ctx: FilterContext) -> bytes | bytearray | memoryview | None:
    """The bytes to write for one source batch (``data``), or None to drop it."""
    batch = RecordBatch(data, 0, header)
    if header.is_control:
        control = control_type_of(batch)
        can_discard = ctx.tracker.on_control_batch(header, control)
        horizon_passed = header.has_delete_horizon and header.base_timestamp <= ctx.now_ms
        discard_records = can_discard and horizon_passed
    else:
        can_discard = discard_records = ctx.tracker.on_data_batch(header)
    if (header.producer_id >= 0 and _is_last_of_producer(header, ctx)) or (
            header.next_offset in (ctx.upper_bound, ctx.keep_last_offset + 1)):
        retention = BatchRetention.RETAIN_EMPTY
    elif discard_records:
        retention = BatchRetention.DELETE
    else:
        retention = BatchRetention.DELETE_EMPTY
    ctx.records_read += header.records_count
    if retention is BatchRetention.DELETE:
        return None
    marker_for_empty_txn = can_discard and header.is_control
    kept: list[Record] = []
    tombstones = False
    if not discard_records:
        if header.is_control:
            kept = batch.records()
        else:
            offset_map = ctx.offset_map
            latest = offset_map.latest_offset
            deletes_retained = not header.has_delete_horizon or ctx.now_ms < header.base_timestamp
            for record in batch:
                if record.offset > latest:
                    keep = True
                elif record.key is None:
                    keep = False
                else:
                    keep = (record.offset >= offset_map.get_hash(key_hash(record.key))
                            and (record.value is not None or deletes_retained))
                if keep:
                    kept.append(record)
                    if record.value is None:
                        tombstones = True
    ctx.records_kept += len(kept)
    set_horizon = (tombstones or marker_for_empty_txn) and not header.has_delete_horizon
    if kept and len(kept) == header.records_count and not set_horizon:
        return data  # unchanged
    if not kept:
        if retention is BatchRetention.RETAIN_EMPTY:
            return encode_empty_batch(header)
        return None
    horizon = ctx.now_ms + ctx.delete_retention_ms if set_horizon else None
    return encode_batch(header, kept, horizon)


def encode_empty_batch(header: BatchHeader) -> bytes:
    """A bare v2 header keeping the batch's offsets, producer fields, epoch and flags
    (DefaultRecordBatch.writeEmptyHeader): 61 bytes, no records."""
    attributes = header.attributes & ~COMPRESSION_CODEC_MASK
    return _pack(header.base_offset, header.partition_leader_epoch, attributes,
                 header.last_offset_delta, -1, header.max_timestamp, header, 0, b"")


def encode_batch(header: BatchHeader, records: list[Record], delete_horizon: int | None) -> bytes:
    """A batch of ``records`` with ``header``'s identity; with ``delete_horizon`` the
    attribute bit 6 is set and BaseTimestamp holds the horizon (KIP-534), the records'
    timestamp deltas rewritten so their timestamps do not change."""
    log_append_time = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    attributes = header.attributes
    if delete_horizon is not None:
        base_ts = delete_horizon
        attributes |= DELETE_HORIZON_FLAG_MASK
    elif log_append_time:
        base_ts = header.base_timestamp
    else:
        base_ts = records[0].timestamp
    if log_append_time:
        max_ts = header.max_timestamp
        # Records read back show the batch's time: their stored deltas do not matter.
        deltas = [0] * len(records)
    else:
        max_ts = max(r.timestamp for r in records)
        deltas = [r.timestamp - base_ts for r in records]
    parts = []
    base_offset = header.base_offset
    for record, delta in zip(records, deltas, strict=True):
        body = b"".join((
            b"\x00", encode_varlong(delta), encode_varint(record.offset - base_offset),
            b"\x01" if record.key is None else encode_varint(len(record.key)) + record.key,
            b"\x01" if record.value is None else encode_varint(len(record.value)) + record.value,
            encode_headers(record.headers) if record.headers else b"\x00",
        ))
        parts.append(encode_varint(len(body)))
        parts.append(body)
    section = b"".join(parts)
    codec = header.attributes & COMPRESSION_CODEC_MASK
    if codec:
        section = compress(Compression(codec), section)
    return _pack(base_offset, header.partition_leader_epoch, attributes,
                 header.last_offset_delta, base_ts, max_ts, header, len(records), section)


def _pack(base_offset: int, leader_epoch: int, attributes: int, last_offset_delta: int,
          base_ts: int, max_ts: int, header: BatchHeader, count: int, section: bytes) -> bytes:
    buf = bytearray(RECORD_BATCH_OVERHEAD)
    buf += section
    _HEADER.pack_into(buf, 0, base_offset, len(buf) - LOG_OVERHEAD, leader_epoch, MAGIC_V2, 0,
                      attributes, last_offset_delta, base_ts, max_ts, header.producer_id,
                      header.producer_epoch, header.base_sequence, count)
    _CRC.pack_into(buf, 17, crc32c(memoryview(buf)[21:]))
    return bytes(buf)
