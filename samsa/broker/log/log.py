"""Log: one topic-partition's durable, segmented, offset-addressed record batch store.

Thread-safe: every public method takes the log's lock (request handler threads share logs).
Reads return FileSlices whose bytes are sent after the lock is released.
"""

from __future__ import annotations

import bisect
import ctypes
import enum
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from samsa.broker.log.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    read_epoch_checkpoint,
    write_epoch_checkpoint,
)
from samsa.broker.log.cleaned_segments import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    SWAP_SUFFIX,
    recover_swaps,
    rename_segment_files,
)
from samsa.broker.log.config import LONG_MAX, LogConfig
from samsa.broker.log.file_slice import FileSlice
from samsa.broker.log.files import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    fsync_dir,
    is_segment_file_name,
    offset_from_filename,
)
from samsa.broker.log.handle_cache import HandleCache
from samsa.broker.log.producer_state import ProducerStateEntry, ProducerStateManager
from samsa.broker.log.recompression import recompressed_batch
from samsa.broker.log.segment import LogSegment
from samsa.broker.log.storage_errors import EPISODES, storage_error
from samsa.broker.log.txn_index import AbortedTxn
from samsa.broker.log.validator import (
    BatchPlace,
    RecordTimestampError,
    checked_max_timestamp,
    sound_header,
    walk_records,
)
from samsa.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaStorageError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    UnsupportedCompressionTypeError,
)
from samsa.records import (
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    Compression,
    ControlRecordType,
    RecordBatch,
    TimestampType,
    build_control_batch,
    read_batch_header,
    set_log_append_time,
    validate_batch,
)
from samsa.records.batch_header import (
    TIMESTAMP_TYPE_MASK,
    set_max_timestamp,
    stamp_offset_and_epoch,
)
from samsa.records.compression import DecompressedSizeError, decompress_scratch
from samsa.records.scratch import scratch_buffer

__all__ = ["AppendResult", "FetchData", "IsolationLevel", "Log", "RecordTimestampError",
           "TimestampAndOffset"]

_INT32 = struct.Struct(">i")
_LOWEST_BASE = -(1 << 63) + 64
_CODECS = {int(c): c for c in Compression}  # a dict lookup, not an Enum call, per batch
_MAX_CODEC = max(Compression)  # hoisted: iterating the enum per batch shows in produce profiles
_SNAPSHOTS_TO_KEEP = 2
_BYTES_COPY_MAX = 64 * 1024  # records walked from a bytes (copy or lz4 output) up to this
_new_tuple = tuple.__new__


def _place_in_bytearray(view: memoryview) -> tuple[bytearray, int] | None:
    """The bytearray a writable, contiguous, non-empty byte view shows and where the view
    starts in it, else None.  (A memoryview does not tell where it starts: ctypes reads both
    addresses.)  The record walk reads a large uncompressed batch of a produce request there
    instead of from a copy: a 1 MiB copy costs about what walking it does."""
    obj = view.obj
    if type(obj) is not bytearray or view.readonly or not view.c_contiguous \
            or view.itemsize != 1 or not view:
        return None
    offset = (ctypes.addressof(ctypes.c_char.from_buffer(view))
              - ctypes.addressof(ctypes.c_char.from_buffer(obj)))
    return (obj, offset) if 0 <= offset <= len(obj) - len(view) else None


class IsolationLevel(enum.IntEnum):
    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


class AppendResult(NamedTuple):
    """Where an append landed.  ``duplicate``: a retry of a batch already in the log (nothing
    was written; the offsets are the original ones).  (A NamedTuple: one is made per produce
    request, at less than half a frozen dataclass's cost.)"""

    base_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime (or a duplicate)
    log_start_offset: int
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class FetchData:
    """What a fetch returns: ``records`` is a FileSlice (or b"" when nothing is available)."""

    records: FileSlice | bytes
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int
    aborted_transactions: list[AbortedTxn] | None = None  # only for read_committed


class TimestampAndOffset(NamedTuple):
    timestamp: int
    offset: int
    leader_epoch: int


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Log:
    """The log of one partition in ``directory`` (``<topic>-<partition>``).

    Opening a log loads or recovers its segments: after a clean shutdown the files are trusted
    (indexes sanity-checked and rebuilt if damaged); otherwise every segment from the one holding
    ``recovery_point`` on is validated batch by batch (size, CRC), cut at the first invalid
    byte, later segments deleted, indexes rebuilt.  Producer state is then loaded from the
    newest snapshot and brought up to date by replaying the batches after it; the replay also
    rebuilds the transaction indexes of recovered segments, so it starts from a snapshot at or
    below the first of them (Kafka's LogLoader.recoverSegment rebuilds the producer state up to
    a segment before recovering it).
    """

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        *,
        topic: str,
        partition: int,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = False,
        now_ms: int | None = None,
        files: HandleCache | None = None,
    ) -> None:
        self.dir = Path(directory)
        self._files = files  # the broker's cache of open segment files (None: the shared one)
        self.topic = topic
        self.partition = partition
        self.config = config
        self._lock = threading.RLock()
        now = _now_ms() if now_ms is None else now_ms
        self.dir.mkdir(parents=True, exist_ok=True)
        self._epoch_path = self.dir / LEADER_EPOCH_CHECKPOINT
        self.producer_state = ProducerStateManager(self.dir, config.producer_id_expiration_ms)
        self.segments: list[LogSegment] = []
        self.recovered_bytes_truncated = 0
        self._txn_rebuild_from: int | None = None  # first segment whose .txnindex was emptied
        # Files of deleted segments (renamed *.deleted) and when to unlink them: after
        # file.delete.delay.ms, by maintain() (LocalLog.deleteSegmentFiles' asynchronous delete).
        self._pending_deletes: list[tuple[int, list[Path]]] = []
        self._load_segments(recovery_point, log_start_offset, clean_shutdown, now)
        leo = self.segments[-1].next_offset
        self._log_end_offset = leo
        self._high_watermark = leo
        self._log_start_offset = min(max(log_start_offset, self.segments[0].base_offset), leo)
        self._recovery_point = min(recovery_point, leo) if not clean_shutdown else leo
        self._unflushed_messages = 0
        self._last_flush_ms = now
        stored_epochs = read_epoch_checkpoint(self._epoch_path)
        self._epochs = [(e, o) for e, o in stored_epochs if o < leo]
        if self._epochs != stored_epochs:
            write_epoch_checkpoint(self._epoch_path, self._epochs)
        self._load_producer_state()
        self._closed = False

    # -- loading ------------------------------------------------------------------------------

    def _load_segments(
        self, recovery_point: int, log_start_offset: int, clean: bool, now_ms: int
    ) -> None:
        # A log cleaner's swap interrupted by a crash: undone or completed (cleaned_segments.py).
        recover_swaps(self.dir)
        for path in self.dir.iterdir():
            name = path.name
            if name.endswith((".tmp", ".deleted", ".cleaned", ".swap")):
                path.unlink(missing_ok=True)
            elif name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)) and not path.with_name(
                name.rsplit(".", 1)[0] + LOG_SUFFIX
            ).exists():
                path.unlink(missing_ok=True)  # index left behind by an interrupted delete
        bases = sorted(
            offset_from_filename(p.name)
            for p in self.dir.glob("*" + LOG_SUFFIX)
            if is_segment_file_name(p.name, LOG_SUFFIX)  # other files are left alone
        )
        for base in bases:
            self.segments.append(self._new_segment(base, now_ms))
        for i, segment in enumerate(self.segments):
            next_base = self.segments[i + 1].base_offset if i + 1 < len(self.segments) else None
            needs_recovery = not clean and (next_base is None or next_base > recovery_point)
            if not needs_recovery:
                if segment.load_or_recover():
                    self._txn_index_emptied(segment)
                continue
            self._txn_index_emptied(segment)
            truncated = segment.recover()
            self.recovered_bytes_truncated += truncated
            if truncated:
                for later in self.segments[i + 1 :]:
                    later.delete()
                del self.segments[i + 1 :]
                break
        if not self.segments:
            self.segments.append(self._new_segment(log_start_offset, now_ms))

    def _new_segment(self, base_offset: int, now_ms: int) -> LogSegment:
        return LogSegment(
            self.dir,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_bytes=self.config.segment_index_bytes,
            now_ms=now_ms,
            files=self._files,
            roll_jitter_ms=self.config.random_segment_jitter(),
        )

    def _txn_index_emptied(self, segment: LogSegment) -> None:
        if self._txn_rebuild_from is None:
            self._txn_rebuild_from = segment.base_offset

    def _load_producer_state(self) -> None:
        state = self.producer_state
        leo = self._log_end_offset
        # Replay at least the segments whose transaction index recovery emptied.
        rebuild = self._txn_rebuild_from
        upto = leo if rebuild is None else min(rebuild, leo)
        if not state.load_latest_snapshot(upto, log_end=leo):
            state.map_end_offset = self._log_start_offset
        state.truncate_head(self._log_start_offset)
        for txn in state.legacy_aborted:  # from a snapshot written before .txnindex files
            self._index_aborted(txn)
        state.legacy_aborted.clear()
        if state.map_end_offset < leo:
            self._replay_from(max(state.map_end_offset, self._log_start_offset))
        state.map_end_offset = leo

    def _replay_from(self, offset: int) -> None:
        i = max(bisect.bisect_right(self._bases(), offset) - 1, 0)
        for segment in self.segments[i:]:
            start = segment.offset_index.lookup(offset)[1]
            for batch in segment.iter_batches(start, segment.size):
                header = batch.header
                if header.next_offset <= offset:
                    continue
                if header.is_control and header.producer_id >= 0:
                    marker = self._read_control_marker(segment, batch.position, header)
                    if marker is not None:
                        aborted = self.producer_state.replay(header, marker[0], marker[1])
                        if aborted is not None:
                            self._index_aborted(aborted, segment)
                        continue
                self.producer_state.replay(header)

    def _index_aborted(self, txn: AbortedTxn, segment: LogSegment | None = None) -> None:
        """Add an aborted transaction to the index of the segment holding its marker, unless
        that index already has it (a replay over segments whose index survived)."""
        if segment is None:
            i = bisect.bisect_right(self._bases(), txn.last_offset) - 1
            if i < 0 or txn.last_offset >= self.segments[i].next_offset:
                return  # its segment is gone (retention, DeleteRecords)
            segment = self.segments[i]
        if txn.last_offset > segment.txn_index.last_offset:
            try:
                segment.txn_index.append(txn)
            except OSError as exc:
                raise self._storage_failed("writing to", segment.txn_index.path, exc) from exc

    @staticmethod
    def _read_control_marker(
        segment: LogSegment, position: int, header: BatchHeader
    ) -> tuple[int, int] | None:
        """(control type, coordinator epoch) of a control batch, or None if unreadable."""
        data = segment.read_bytes(position, header.size)
        try:
            marker = RecordBatch(data, 0, header).control_marker()
        except (CorruptRecordError, ValueError):
            return None
        if marker is None:
            return None
        return int(marker.type), marker.coordinator_epoch

    def _bases(self) -> list[int]:
        return [s.base_offset for s in self.segments]

    # -- properties ---------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def last_stable_offset(self) -> int:
        with self._lock:
            return self._last_stable_offset()

    def _last_stable_offset(self) -> int:
        """The first offset of the earliest open transaction (at least the log start) if it is
        below the high watermark, else the high watermark (UnifiedLog.lastStableOffset).  One
        replica: the high watermark follows the log end, so no completed transaction is still
        waiting to be replicated."""
        first = self.producer_state.first_unstable_offset()
        hw = self._high_watermark
        if first is None:
            return hw
        first = max(first, self._log_start_offset)
        return min(first, hw)

    def has_open_transaction(self, producer_id: int) -> bool:
        """Whether ``producer_id`` has a transaction open on this partition (written data, no
        marker yet)."""
        with self._lock:
            return producer_id in self.producer_state.ongoing

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def handle_cache(self) -> HandleCache | None:
        """The cache this log's segments open their files through (None: the shared one)."""
        return self._files

    @property
    def size_bytes(self) -> int:
        with self._lock:
            return sum(s.size for s in self.segments)

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    def update_config(self, config: LogConfig) -> None:
        """Apply changed topic configs (AlterConfigs); takes effect on the next append/roll."""
        with self._lock:
            self.config = config
            self.producer_state.expiration_ms = config.producer_id_expiration_ms

    # -- append -------------------------------------------------------------------------------

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        *,
        leader_epoch: int,
        now_ms: int | None = None,
        timestamp_type_override: TimestampType | None = None,
    ) -> AppendResult:
        """Validate the client's batches as Kafka's LogValidator does, assign offsets, append.

        ``timestamp_type_override`` forces CreateTime/LogAppendTime; by default the topic's
        ``message.timestamp.type`` decides.  Raises InvalidRecordError, CorruptRecordError,
        MessageTooLargeError, UnsupportedCompressionTypeError, InvalidProducerEpochError,
        OutOfOrderSequenceNumberError or InvalidTxnStateError (a non-transactional batch of a
        producer whose transaction is open here); nothing is written then.

        A writable memoryview (the produce request's own buffer) is stamped in place (offsets,
        leader epoch) and written from there; anything else is copied first.  So a caller
        passing a writable view must not share it.
        """
        now = _now_ms() if now_ms is None else now_ms
        if type(records) is memoryview and not records.readonly:
            buf: bytearray | memoryview = records
        else:
            buf = bytearray(records)
        with self._lock:
            if self._closed:
                self._check_open()
            if timestamp_type_override is None:
                log_append_time = self.config.log_append_time
            else:
                log_append_time = timestamp_type_override == TimestampType.LOG_APPEND_TIME
            buf, headers = self._validate_client_batches(buf, log_append_time, now)
            return self._append(buf, headers, leader_epoch, now, log_append_time, client=True)

    def append_control_marker(
        self,
        *,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        leader_epoch: int,
        now_ms: int | None = None,
    ) -> AppendResult:
        """Write a COMMIT/ABORT transaction marker (for the transaction coordinator).  It ends
        the producer's transaction open on this partition, if any; an abort is recorded in
        the segment's ``.txnindex``.  Raises InvalidProducerEpochError for an epoch older
        than the producer's, TransactionCoordinatorFencedError for a coordinator epoch older
        than the last marker's; nothing is written then."""
        now = _now_ms() if now_ms is None else now_ms
        control_type = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        buf = bytearray(
            build_control_batch(control_type, producer_id, producer_epoch, coordinator_epoch, now)
        )
        with self._lock:
            self._check_open()
            self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
            header = read_batch_header(buf, 0)
            result = self._append(buf, [(0, header)], leader_epoch, now, False, client=False)
            aborted = self.producer_state.complete_txn(
                producer_id, producer_epoch, commit, result.base_offset, coordinator_epoch, now,
            )
            if aborted is not None:
                self._index_aborted(aborted, self.segments[-1])
            return result

    def _validate_client_batches(self, buf: bytearray | memoryview, log_append_time: bool,
                                 now: int
                                 ) -> tuple[bytearray | memoryview, list[tuple[int, BatchHeader]]]:
        """Validate the produced batches; returns the buffer to append (``buf``, or a new one
        when batches were recompressed to the topic's compression.type) and each batch's
        position and header in it."""
        if not buf:
            raise InvalidRecordError("the produce request has no record batches for this partition")
        headers: list[tuple[int, BatchHeader]] = []
        max_bytes = self.config.max_message_bytes
        want_min = self.config.timestamp_before_max_ms < LONG_MAX and not log_append_time
        need_key = "compact" in self.config.cleanup_policy  # LogValidator.validateKey
        # compression.type other than producer: batches of another codec are rebuilt
        # (recompression.py); None (the default) costs one compare per batch.
        target = self.config.target_codec
        rebuilt: list[tuple[int, int, bytearray]] | None = None  # (pos, end, new batch)
        pos = 0
        while pos < len(buf):
            # The checks in one compiled call; only a batch that fails one is checked again,
            # step by step, to raise the error that names the problem.
            header = sound_header(buf, pos, max_bytes) or self._checked_header(buf, pos)
            # (tuple.__new__: a NamedTuple's own constructor is a Python-level call.)
            where = _new_tuple(BatchPlace, (pos, self.topic, self.partition))
            attributes = header.attributes
            count = header.records_count
            codec = attributes & COMPRESSION_CODEC_MASK
            start = pos + RECORD_BATCH_OVERHEAD
            end = pos + header.batch_length + LOG_OVERHEAD
            section: bytes | bytearray
            if codec == 0:  # uncompressed
                if type(buf) is memoryview and end - start <= _BYTES_COPY_MAX:
                    # Strided slices of a memoryview are slow and the compiled walk reads a
                    # bytes fastest (validator.py): walk a bytes copy.
                    section = bytes(buf[start:end])
                    first, last = 0, end - start
                elif type(buf) is memoryview:
                    # A large one is walked in the bytearray the view shows (the request's
                    # frame, processor.py), where the view starts in it; else copied into
                    # scratch space (no fresh allocation to page-fault).
                    place = _place_in_bytearray(buf)
                    if place is not None:
                        section, offset = place
                        first, last = offset + start, offset + end
                    else:
                        section = scratch_buffer(end - start)
                        section[: end - start] = buf[start:end]
                        first, last = 0, end - start
                else:
                    section, first, last = buf, start, end
            else:
                try:
                    section, last = decompress_scratch(_CODECS[codec], memoryview(buf)[start:end],
                                                       max_bytes=self.config.max_decompressed_bytes,
                                                       bytes_up_to=_BYTES_COPY_MAX)
                except DecompressedSizeError as exc:
                    raise MessageTooLargeError(
                        f"{where}: {exc} (samsa.decompressed.batch.max.bytes); send smaller "
                        "batches or raise the limit") from None
                except ValueError as exc:
                    raise CorruptRecordError(f"{where}: records do not decompress ({exc})") from exc
                first = 0
            # Every record parsed, as LogValidator does; nothing is appended if one fails.
            # (A base timestamp within 64 ms of the smallest long can underflow: then measure.)
            lo, hi = walk_records(section, first, last, count, where,
                                  header.max_timestamp - header.base_timestamp,
                                  want_min or header.base_timestamp < _LOWEST_BASE, need_key)
            # MaxTimestamp is the broker's, never the client's (LogValidator): sarama sends -1.
            max_timestamp = checked_max_timestamp(self.config, header, lo, hi, log_append_time,
                                                  now, section, first, last, where)
            if not log_append_time and (max_timestamp != header.max_timestamp
                                        or attributes & TIMESTAMP_TYPE_MASK):
                set_max_timestamp(buf, pos, False, max_timestamp)  # CRC too
                header = read_batch_header(buf, pos)
            if target is not None and codec != target:
                # LogValidator.validateMessagesAndAssignOffsetsCompressed: no in-place
                # assignment across codecs, a new batch with the same records.
                batch = recompressed_batch(buf, pos, memoryview(section)[first:last], target,
                                           self.config.compression_level(target), max_bytes,
                                           where)
                if rebuilt is None:
                    rebuilt = []
                rebuilt.append((pos, end, batch))
                header = read_batch_header(batch, 0)
            headers.append((pos, header))
            pos = end
        if rebuilt is None:
            return buf, headers
        return self._with_rebuilt(buf, headers, rebuilt)

    def _checked_header(self, buf: bytearray | memoryview, pos: int) -> BatchHeader:
        """The header of the produced batch at ``pos`` after the checks LogValidator makes
        before the records (size, magic, CRC, counts, flags, codec), raising the first that
        fails.  validator.sound_header makes the same checks in one call."""
        max_bytes = self.config.max_message_bytes
        remaining = len(buf) - pos
        if remaining > MAGIC_OFFSET and buf[pos + MAGIC_OFFSET] != MAGIC_V2:
            raise InvalidRecordError(
                f"batch at byte {pos} has magic {buf[pos + MAGIC_OFFSET]}; this broker accepts "
                "only magic 2 record batches (use a client that produces v2 batches)"
            )
        if remaining >= LOG_OVERHEAD:
            size = _INT32.unpack_from(buf, pos + 8)[0] + LOG_OVERHEAD
            if size > max_bytes:
                raise MessageTooLargeError(
                    f"record batch of {size} bytes exceeds max.message.bytes={max_bytes} of "
                    f"{self.topic}-{self.partition}; send smaller batches or raise the limit"
                )
        header = validate_batch(buf, pos)  # size + CRC-32C; raises CorruptRecordError
        where = BatchPlace(pos, self.topic, self.partition)
        count = header.records_count
        attributes = header.attributes
        producer_id = header.producer_id
        if count != header.last_offset_delta + 1 or count < 1:
            raise InvalidRecordError(
                f"{where}: records count {count} does not match last offset "
                f"delta {header.last_offset_delta} (must be count - 1, count >= 1)"
            )
        if attributes & CONTROL_FLAG_MASK:
            raise InvalidRecordError(f"{where}: clients may not produce control batches")
        if producer_id >= 0 and header.base_sequence < 0:
            raise InvalidRecordError(
                f"{where}: idempotent batch of producer {producer_id} has no base sequence"
            )
        if attributes & TRANSACTIONAL_FLAG_MASK and producer_id < 0:
            raise InvalidRecordError(f"{where}: transactional batch without a producer id")
        codec = attributes & COMPRESSION_CODEC_MASK
        if codec > _MAX_CODEC:
            raise UnsupportedCompressionTypeError(f"{where}: unknown compression codec {codec}")
        return header

    @staticmethod
    def _with_rebuilt(buf: bytearray | memoryview, headers: list[tuple[int, BatchHeader]],
                      rebuilt: list[tuple[int, int, bytearray]]
                      ) -> tuple[bytearray, list[tuple[int, BatchHeader]]]:
        """``buf`` with the recompressed batches in place of the produced ones, and the
        batches' new positions."""
        out = bytearray()
        replaced = {pos: (end, batch) for pos, end, batch in rebuilt}
        moved: list[tuple[int, BatchHeader]] = []
        for pos, header in headers:
            new_pos = len(out)
            if pos in replaced:
                out += replaced[pos][1]
            else:
                out += buf[pos : pos + header.batch_length + LOG_OVERHEAD]
            moved.append((new_pos, header))
        return out, moved

    def _append(
        self,
        buf: bytearray | memoryview,
        batches: list[tuple[int, BatchHeader]],
        leader_epoch: int,
        now_ms: int,
        log_append_time: bool,
        *,
        client: bool,
    ) -> AppendResult:
        state = self.producer_state
        staged: dict[int, ProducerStateEntry] = {}
        next_offset = self._log_end_offset
        first_offset = next_offset
        stamped: list[BatchHeader] = []
        max_timestamp = NO_TIMESTAMP
        messages = 0
        for pos, header in batches:
            if client and header.producer_id >= 0:
                duplicate = state.check(header, staged)
                if duplicate is not None:
                    # UnifiedLog.append answers a duplicate with the original offsets and sets
                    # logAppendTime to the original batch's max timestamp, whatever the
                    # topic's timestamp type.
                    return AppendResult(
                        duplicate.first_offset,
                        duplicate.last_offset,
                        duplicate.timestamp,
                        self._log_start_offset,
                        duplicate=True,
                    )
            stamp_offset_and_epoch(buf, pos, next_offset, leader_epoch, header.batch_length)
            if log_append_time:
                set_log_append_time(buf, pos, now_ms)  # also rewrites attributes and CRC
                header = read_batch_header(buf, pos)
            else:
                # (base_offset, batch_length, partition_leader_epoch, ...): what was stamped.
                # (tuple.__new__: a third of the cost of the generated constructor.)
                header = _new_tuple(BatchHeader, (next_offset, header[1], leader_epoch)
                                    + header[3:])
            if client and header.producer_id >= 0:
                state.stage(header, next_offset, now_ms, staged)
            stamped.append(header)
            max_timestamp = max(max_timestamp, header.max_timestamp)
            messages += header.records_count
            next_offset += header.last_offset_delta + 1
        segment = self.segments[-1]
        config = self.config
        if segment.should_roll(
            incoming_bytes=len(buf),
            incoming_max_timestamp=max_timestamp,
            incoming_last_offset=next_offset - 1,
            now_ms=now_ms,
            segment_bytes=config.segment_bytes,
            # (_roll_ms called only where it differs: a call less per append.)
            segment_ms=(config.segment_ms if "compact" not in config.cleanup_policy
                        else self._roll_ms()),
        ):
            segment = self._roll(now_ms)
        path = self._epoch_path
        try:
            if not self._epochs or leader_epoch > self._epochs[-1][0]:
                # Checkpointed before the data so that the cache never lags the log.
                epochs = [*self._epochs, (leader_epoch, first_offset)]
                write_epoch_checkpoint(path, epochs)
                self._epochs = epochs
            path = segment.log_path
            segment.append(buf, stamped)
        except OSError as exc:
            raise self._storage_failed("writing to", path, exc) from exc
        if EPISODES.failing:  # (a dict check, not a call, per append)
            EPISODES.succeeded(self._episode)
        state.commit(staged, next_offset)
        self._log_end_offset = next_offset
        self._unflushed_messages += messages
        if self._unflushed_messages >= self.config.flush_messages:
            self._flush(next_offset)
        self._high_watermark = next_offset
        return _new_tuple(AppendResult, (first_offset, next_offset - 1,
                                         now_ms if log_append_time else -1,
                                         self._log_start_offset, False))

    def _roll_ms(self) -> int:
        """segment.ms, capped for a compacted log by max.compaction.lag.ms: the active
        segment is never cleaned (LogConfig.maxSegmentMs)."""
        config = self.config
        if "compact" in config.cleanup_policy:
            return min(config.segment_ms, config.max_compaction_lag_ms)
        return config.segment_ms

    def _roll(self, now_ms: int) -> LogSegment:
        """Close the active segment for appends and start a new one at the log end offset.
        A storage error leaves the old segment active (each step can be redone)."""
        old = self.segments[-1]
        if old.size == 0:
            return old
        try:
            old.on_become_inactive()
            self.producer_state.map_end_offset = self._log_end_offset
            self.producer_state.take_snapshot(sync=False)
            # Keep one a crash's replay can start from: at or below the first segment that
            # recovery re-validates (the one holding the recovery point).
            bases = self._bases()
            first_recovered = bases[max(bisect.bisect_right(bases, self._recovery_point) - 1, 0)]
            self.producer_state.retain_snapshots(_SNAPSHOTS_TO_KEEP, first_recovered)
            segment = self._new_segment(self._log_end_offset, now_ms)
        except OSError as exc:
            raise self._storage_failed("rolling to a new segment after", old.log_path,
                                       exc) from exc
        self.segments.append(segment)
        return segment

    @property
    def _episode(self) -> str:
        return str(self.dir)

    def _storage_failed(self, action: str, path: Path | str, exc: OSError) -> KafkaStorageError:
        """The KAFKA_STORAGE_ERROR for a failed write, logged once per failure episode."""
        error = storage_error(action, exc.filename or path, exc)
        EPISODES.failed(self._episode, error)
        return error

    def roll(self, now_ms: int | None = None) -> None:
        """Force a new segment (tests, admin)."""
        with self._lock:
            self._roll(_now_ms() if now_ms is None else now_ms)

    # -- read ---------------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        min_one_message: bool = True,
        isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
    ) -> FetchData:
        """Batches from the one containing ``fetch_offset``, up to ``max_bytes`` (the first batch
        whole if ``min_one_message``), never past the high watermark (or the LSO for
        read_committed).  Raises OffsetOutOfRangeError outside [log start, log end]."""
        with self._lock:
            self._check_open()
            start, end = self._log_start_offset, self._log_end_offset
            if fetch_offset < start or fetch_offset > end:
                raise OffsetOutOfRangeError(
                    f"fetch offset {fetch_offset} of {self.topic}-{self.partition} is outside the "
                    f"log range [{start}, {end}]"
                )
            hw = self._high_watermark
            lso = self._last_stable_offset()
            committed = isolation == IsolationLevel.READ_COMMITTED
            max_offset = lso if committed else hw
            records: FileSlice | bytes = b""
            found = None
            if fetch_offset < max_offset:
                found = self._read_below(fetch_offset, max_offset, max_bytes, min_one_message)
                if found is not None:
                    records = found[1] or b""
            aborted = None
            if committed:
                # A read at or past the LSO lists none (LocalLog.emptyFetchDataInfo).
                aborted = [] if found is None else self._collect_aborted(fetch_offset, *found)
            return FetchData(records, hw, start, lso, aborted)

    def _collect_aborted(self, fetch_offset: int, index: int, records: FileSlice) -> list[AbortedTxn]:
        """The aborted transactions a read_committed consumer needs for ``records``, read from
        segment ``index``: as LocalLog.addAbortedTransactions, the range ends at an offset
        known to lie past the bytes read (the offset index's first entry at or after their
        end, else the next segment's base, else the log end), and the walk over the
        segments' indexes stops at the first entry whose LSO reaches that bound."""
        segment = self.segments[index]
        upper = segment.offset_index.upper_bound_offset(records.position + records.size)
        if upper is None:
            nxt = index + 1
            upper = self.segments[nxt].base_offset if nxt < len(self.segments) else self._log_end_offset
        collected: list[AbortedTxn] = []
        for later in self.segments[index:]:
            found, complete = later.txn_index.collect(fetch_offset, upper)
            collected.extend(found)
            if complete:
                break
        return collected

    def _position_of(self, offset: int) -> tuple[int, int]:
        """(segment index, file position) where the batch starting at ``offset`` begins (or
        would begin: the log end)."""
        if offset >= self._log_end_offset:
            return len(self.segments) - 1, self.segments[-1].size
        i = bisect.bisect_right(self._bases(), offset) - 1
        for j in range(max(i, 0), len(self.segments)):
            segment = self.segments[j]
            found = segment.translate_offset(offset)
            if found is not None:
                return j, found.position
        return len(self.segments) - 1, self.segments[-1].size

    def _read_below(
        self, fetch_offset: int, max_offset: int, max_bytes: int, min_one_message: bool
    ) -> tuple[int, FileSlice] | None:
        """(index of the segment read, its bytes from ``fetch_offset``), or None."""
        limit_index, limit_position = self._position_of(max_offset)
        i = max(bisect.bisect_right(self._bases(), fetch_offset) - 1, 0)
        compacted = "compact" in self.config.cleanup_policy
        while i <= limit_index:
            segment = self.segments[i]
            max_position = limit_position if i == limit_index else None
            found = segment.read(fetch_offset, max_bytes, max_position, min_one_message)
            if found is not None and compacted and i < limit_index and _only_empty_batches(
                    segment, found):
                # The rest of the segment is record-less batches the cleaner kept (a group's or
                # a producer's last): go on to the next segment, as Kafka's read passes a
                # segment it emptied.  A fetch answered with empty batches alone makes
                # librdkafka double its fetch size, and fail with MSG_SIZE_TOO_LARGE after ten
                # such answers in a row.
                found = None
            if found is not None:
                return i, found
            i += 1
        return None

    # -- offsets by time / epoch ----------------------------------------------------------------

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """First record with timestamp >= ``timestamp`` at or after the log start (ListOffsets);
        None if there is none below the high watermark."""
        with self._lock:
            self._check_open()
            for segment in self.segments:
                if segment.max_timestamp < timestamp or segment.next_offset <= self._log_start_offset:
                    continue
                found = segment.find_offset_by_timestamp(timestamp)
                if found is None:
                    continue
                ts, offset = self._first_record_at_or_after(segment, found.position, found.header, timestamp)
                if offset >= self._high_watermark:
                    return None
                return TimestampAndOffset(ts, max(offset, self._log_start_offset), self._epoch_for(offset))
            return None

    def _first_record_at_or_after(
        self, segment: LogSegment, position: int, header: BatchHeader, timestamp: int
    ) -> tuple[int, int]:
        if header.timestamp_type == TimestampType.LOG_APPEND_TIME:
            return header.max_timestamp, max(header.base_offset, self._log_start_offset)
        data = segment.read_bytes(position, header.size)
        try:
            for record in RecordBatch(data, 0, header):
                if record.timestamp >= timestamp and record.offset >= self._log_start_offset:
                    return record.timestamp, record.offset
        except (CorruptRecordError, ValueError):
            pass
        return header.max_timestamp, header.base_offset

    def offset_of_max_timestamp(self) -> TimestampAndOffset | None:
        """ListOffsets MAX_TIMESTAMP (KIP-734) as Kafka 3.8+ answers it (KAFKA-16310,
        ``UnifiedLog.fetchOffsetByTimestamp``): in the segment with the largest timestamp (the
        earliest segment on ties), the first batch whose MaxTimestamp is that timestamp, and in
        it the first record that carries it (``RecordBatch.offsetOfMaxTimestamp``), with the
        batch's leader epoch.  Segments and time indexes keep the batch ("shallow") offset of
        their max timestamp, as Kafka's do; the record is found here, at lookup time."""
        with self._lock:
            self._check_open()
            best = self.segments[0]
            for segment in self.segments[1:]:
                if segment.max_timestamp > best.max_timestamp:
                    best = segment
            target = best.max_timestamp
            start = best.offset_index.lookup(best.offset_of_max_timestamp)[1]
            for batch in best.iter_batches(start, best.size):
                header = batch.header
                if header.max_timestamp != target:
                    continue
                offset = self._first_record_with(best, batch.position, header, target)
                if offset is None:
                    return None
                epoch = header.partition_leader_epoch
                return TimestampAndOffset(target, offset, epoch if epoch >= 0 else -1)
            return None

    @staticmethod
    def _first_record_with(segment: LogSegment, position: int, header: BatchHeader,
                           timestamp: int) -> int | None:
        """Offset of the batch's first record whose timestamp is ``timestamp``."""
        if header.timestamp_type == TimestampType.LOG_APPEND_TIME:
            return header.base_offset  # every record reads as the batch's MaxTimestamp
        data = segment.read_bytes(position, header.size)
        try:
            for record in RecordBatch(data, 0, header):
                if record.timestamp == timestamp:
                    return record.offset
        except (CorruptRecordError, ValueError):
            pass
        return None

    def _epoch_for(self, offset: int) -> int:
        epoch = -1
        for e, start in self._epochs:
            if start <= offset:
                epoch = e
        return epoch

    @property
    def latest_epoch(self) -> int:
        # No lock (asked on every produce): _epochs is replaced, never changed in place.
        epochs = self._epochs
        return epochs[-1][0] if epochs else -1

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= ``epoch``, end offset of that epoch), or
        (-1, -1) when unknown — Kafka's LeaderEpochFileCache.endOffsetFor."""
        with self._lock:
            if epoch < 0 or not self._epochs:
                return -1, -1
            if epoch == self._epochs[-1][0]:
                return epoch, self._log_end_offset
            higher = next(((e, o) for e, o in self._epochs if e > epoch), None)
            if higher is None:
                return -1, -1
            floor = [(e, o) for e, o in self._epochs if e <= epoch]
            if not floor:
                return epoch, higher[1]
            return floor[-1][0], higher[1]

    # -- deletion -------------------------------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (-1 = the high watermark),
        deleting segments wholly below it.  Returns the new log start offset."""
        with self._lock:
            self._check_open()
            if offset == -1:
                offset = self._high_watermark
            if offset < 0 or offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot delete records of {self.topic}-{self.partition} before {offset}: "
                    f"the high watermark is {self._high_watermark}"
                )
            if offset > self._log_start_offset:
                self._advance_log_start(offset)
            return self._log_start_offset

    def _advance_log_start(self, offset: int) -> None:
        self._log_start_offset = offset
        if offset >= self._log_end_offset and self.segments[-1].size:
            self._roll(_now_ms())
        doomed = 0
        while doomed < len(self.segments) - 1 and self.segments[doomed + 1].base_offset <= offset:
            doomed += 1
        self._delete_segments(doomed)
        self._on_log_start_moved()

    def _delete_segments(self, count: int, now_ms: int | None = None) -> None:
        """Delete the ``count`` oldest segments (never the active one)."""
        count = min(count, len(self.segments) - 1)
        if count <= 0:
            return
        doomed = self.segments[:count]
        del self.segments[:count]
        renamed: list[Path] = []
        try:
            for segment in doomed:
                segment.abandon()
                renamed += rename_segment_files(self.dir, segment.base_offset, "",
                                                DELETED_SUFFIX)
        except OSError as exc:
            raise self._storage_failed("deleting a segment of", self.dir, exc) from exc
        self._delete_later(renamed, _now_ms() if now_ms is None else now_ms)
        self._log_start_offset = max(self._log_start_offset, self.segments[0].base_offset)
        self._on_log_start_moved()

    def _delete_later(self, paths: list[Path], now_ms: int) -> None:
        """Unlink ``paths`` (a deleted segment's files, already renamed *.deleted) once
        file.delete.delay.ms has passed: at once if it is 0, else from maintain().  Kafka's
        LocalLog.deleteSegmentFiles schedules the same delay so that readers still holding the
        files finish; leftovers of a crash are removed when the log is loaded."""
        delay = self.config.file_delete_delay_ms
        if delay <= 0:
            for path in paths:
                path.unlink(missing_ok=True)
        elif paths:
            self._pending_deletes.append((now_ms + delay, paths))

    def _delete_due(self, now_ms: int) -> None:
        due = [paths for at, paths in self._pending_deletes if at <= now_ms]
        if not due:
            return
        self._pending_deletes = [(at, paths) for at, paths in self._pending_deletes
                                 if at > now_ms]
        for paths in due:
            for path in paths:
                path.unlink(missing_ok=True)

    def _on_log_start_moved(self) -> None:
        """Forget leader epochs and snapshots below the new log start (producers stay until
        they expire, as in Kafka; aborted transactions go with their segments' indexes)."""
        start = self._log_start_offset
        self.producer_state.truncate_head(start)
        below = [(e, o) for e, o in self._epochs if o < start]
        if not below:
            return
        kept = [(e, o) for e, o in self._epochs if o >= start]
        if not kept or kept[0][1] > start:
            kept.insert(0, (below[-1][0], start))
        if kept != self._epochs:
            self._epochs = kept
            try:
                write_epoch_checkpoint(self._epoch_path, self._epochs)
            except OSError as exc:
                raise self._storage_failed("writing", self._epoch_path, exc) from exc

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete old segments by ``retention.ms`` (segment's largest timestamp) and
        ``retention.bytes``; never the active segment.  Returns segments deleted."""
        now = _now_ms() if now_ms is None else now_ms
        with self._lock:
            self._check_open()
            if "delete" not in self.config.cleanup_policy:
                return 0
            candidates = self.segments[:-1]
            count = 0
            retention_ms = self.config.retention_ms
            if retention_ms >= 0:
                while count < len(candidates) and now - candidates[count].largest_timestamp() > retention_ms:
                    count += 1
            retention_bytes = self.config.retention_bytes
            if retention_bytes >= 0:
                excess = sum(s.size for s in self.segments) - retention_bytes
                by_size = 0
                while by_size < len(candidates) and excess - candidates[by_size].size >= 0:
                    excess -= candidates[by_size].size
                    by_size += 1
                count = max(count, by_size)
            while count < len(candidates) and candidates[count].next_offset <= self._log_start_offset:
                count += 1
            self._delete_segments(count, now)
            return count

    # -- the log cleaner (cleaner.py) --------------------------------------------------------------

    def segments_snapshot(self) -> list[LogSegment]:
        """The segments now, oldest first (the last is the active one)."""
        with self._lock:
            return list(self.segments)

    def last_records_of_producers(self) -> dict[int, tuple[int, int]]:
        """Producer id -> (offset of its last data batch or -1, epoch) for every producer the
        partition knows (UnifiedLog.lastRecordsOfActiveProducers): the cleaner keeps those
        batches so that sequences and epochs survive cleaning."""
        with self._lock:
            return {pid: (e.last_offset, e.epoch) for pid, e in self.producer_state.producers.items()}

    def aborted_transactions(self, start: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start, upper), from the segments' .txnindex."""
        with self._lock:
            entries = [list(s.txn_index.entries) for s in self.segments]
        return [t for found in entries for t in found
                if t.last_offset >= start and t.first_offset < upper]

    def replace_segments(self, cleaned: LogSegment, old: list[LogSegment],
                         on_step: Callable[[str], None] | None = None) -> bool:
        """Swap the cleaner's ``cleaned`` segment (closed, its files ``.cleaned``) in for the
        consecutive segments ``old`` (cleaned_segments.py has the protocol).  Returns False,
        deleting the cleaned files, if ``old`` are no longer the log's (retention, DeleteRecords
        or truncation removed some meanwhile) or the log is closed."""
        step = on_step or (lambda _name: None)
        with self._lock:
            first = next((i for i, s in enumerate(self.segments) if s is old[0]), None)
            if (self._closed or first is None
                    or self.segments[first:first + len(old)] != old
                    or first + len(old) >= len(self.segments)):  # never the active segment
                cleaned.delete()
                return False
            base = cleaned.base_offset
            try:
                rename_segment_files(self.dir, base, CLEANED_SUFFIX, SWAP_SUFFIX)
                fsync_dir(self.dir)
                step("swap")
                deleted: list[Path] = []
                for segment in old:
                    segment.abandon()
                    deleted += rename_segment_files(self.dir, segment.base_offset, "",
                                                    DELETED_SUFFIX)
                step("deleted")
                rename_segment_files(self.dir, base, SWAP_SUFFIX, "")
                fsync_dir(self.dir)
                step("swapped")
                segment = self._new_segment(base, _now_ms())
                segment.load_or_recover()
            except OSError as exc:
                raise self._storage_failed("swapping in the cleaned segment of", self.dir,
                                           exc) from exc
            self.segments[first:first + len(old)] = [segment]
            # The replaced segments' files go after file.delete.delay.ms, as Kafka's
            # LocalLog.replaceSegments deletes them asynchronously.
            self._delete_later(deleted, _now_ms())
            return True

    # -- flush / housekeeping ---------------------------------------------------------------------

    def _flush(self, up_to: int) -> None:
        for segment in self.segments:
            if segment.base_offset >= up_to:
                break
            try:
                segment.flush()
            except OSError as exc:
                raise self._storage_failed("flushing", segment.log_path, exc) from exc
        self._recovery_point = max(self._recovery_point, up_to)
        if up_to >= self._log_end_offset:
            self._unflushed_messages = 0

    def flush(self, now_ms: int | None = None) -> None:
        """fsync everything appended so far; the recovery point moves to the log end offset."""
        with self._lock:
            if self._closed:
                return
            self._flush(self._log_end_offset)
            self._last_flush_ms = _now_ms() if now_ms is None else now_ms

    def maintain(self, now_ms: int) -> None:
        """Periodic work the LogManager schedules: deleted segments' files past
        ``file.delete.delay.ms`` unlinked, ``flush.ms`` flushes, flushing segments that were
        rolled (so the recovery point follows rolls, as Kafka does), producer expiry."""
        with self._lock:
            if self._closed:
                return
            if self._pending_deletes:
                self._delete_due(now_ms)
            if self.config.flush_ms < LONG_MAX and now_ms - self._last_flush_ms >= self.config.flush_ms:
                self._flush(self._log_end_offset)
                self._last_flush_ms = now_ms
            elif self._recovery_point < self.segments[-1].base_offset:
                self._flush(self.segments[-1].base_offset)

    def remove_expired_producers(self, now_ms: int) -> int:
        with self._lock:
            return self.producer_state.remove_expired(now_ms)

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"the log of {self.topic}-{self.partition} is closed")

    def close(self) -> None:
        """Flush, snapshot producer state at the log end, close files (clean shutdown)."""
        with self._lock:
            if self._closed:
                return
            try:
                self._flush(self._log_end_offset)
                if self._log_end_offset:  # a log never written has no producer state to keep
                    # (as Kafka's takeSnapshot, which skips when nothing is new); two fsyncs
                    # per empty partition made a clean shutdown of many slow
                    self.producer_state.map_end_offset = self._log_end_offset
                    self.producer_state.take_snapshot()
                    self.producer_state.retain_snapshots(_SNAPSHOTS_TO_KEEP, self._log_end_offset)
                for segment in self.segments:
                    segment.on_become_inactive()
                    segment.close()
            except OSError as exc:
                raise self._storage_failed("closing the log in", self.dir, exc) from exc
            finally:
                for segment in self.segments:
                    segment.abandon()  # descriptors are released even if a write failed
                self._closed = True

    def abandon(self) -> None:
        """Release file descriptors without writing anything: no flush, no snapshot, no index
        write (a crash, in tests; undoing a failed topic creation)."""
        with self._lock:
            for segment in self.segments:
                segment.abandon()
            self._closed = True

    def delete(self) -> None:
        """Close and remove every file of this log (topic deletion); the directory stays."""
        with self._lock:
            for segment in self.segments:
                segment.delete()
            self.segments = []
            self._closed = True
            for path in self.dir.iterdir():
                path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return (
            f"Log({self.topic}-{self.partition}, start={self._log_start_offset}, "
            f"end={self._log_end_offset}, segments={len(self.segments)})"
        )


def _only_empty_batches(segment: LogSegment, found: FileSlice) -> bool:
    """True if ``found`` runs to the end of ``segment`` and holds whole batches without records
    only (a partial batch at the end of a short read is not taken for an empty one)."""
    end = found.position + found.size
    if end != segment.size:
        return False
    position = found.position
    for batch in segment.iter_batches(position, end):
        if batch.header.records_count:
            return False
        position = batch.position + batch.header.size
    return position == end and found.size > 0
