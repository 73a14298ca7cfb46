"""Per-partition idempotent/transactional producer state (Kafka's ProducerStateManager and ProducerAppendInfo), and its snapshots.

For every producer id the partition remembers the epoch and the last ``BATCHES_TO_RETAIN`` (5)
batches it appended: a retry of one of them (same epoch, same first and last sequence) is
recognised as a duplicate and answered with the original offsets and max timestamp; an older
epoch, a new epoch not starting at sequence 0, a sequence gap or a retry of an older batch is
refused; a producer the partition does not know (new or expired) may start anywhere.  These
are Kafka's rules (ProducerAppendInfo, ProducerStateEntry, UnifiedLog.append); Kafka no longer
answers UNKNOWN_PRODUCER_ID for an unknown producer (KIP-360).  Transactional producers also
have the first offset of their open transaction, which bounds the last stable offset (LSO);
a marker that aborts one yields the ``AbortedTxn`` the Log writes to the segment's
``.txnindex`` (txn_index.py), where read_committed fetches find it.

State survives restarts through ``<20-digit offset>.snapshot`` files (state of every batch
below that offset) written at segment roll and clean shutdown; after a crash the Log reloads
the newest snapshot at or below the recovered log end and replays the batches after it.

Snapshot file (our own format; Kafka's stores only the last batch per producer):
``int16 version (2) · uint32 CRC-32C of the rest · int32 producer count · producers``; a
producer is ``int64 id · int16 epoch · int32 coordinator epoch · int64 open-transaction first
offset (-1) · int64 last timestamp · int8 n · n × (int32 first seq · int32 last seq · int64
first offset · int64 last offset · int64 timestamp)``.  Version 1 also listed the aborted
transactions after the producers (``int32 count · count × (int64 producer id · int64 first
offset · int64 last offset · int64 LSO)``), before they moved to the ``.txnindex`` files; it
is still read, and its list handed to the Log (``legacy_aborted``) to fill those files.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c

from samsa.broker.log.files import (
    SNAPSHOT_SUFFIX,
    atomic_write,
    filename_prefix,
    is_segment_file_name,
    offset_from_filename,
)
from samsa.broker.log.txn_index import AbortedTxn
from samsa.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaStorageError,
    OutOfOrderSequenceNumberError,
    TransactionCoordinatorFencedError,
)
from samsa.records import NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader

__all__ = [
    "BATCHES_TO_RETAIN",
    "AbortedTxn",
    "BatchMetadata",
    "ProducerStateEntry",
    "ProducerStateManager",
]

BATCHES_TO_RETAIN = 5
_INT32_MAX = 0x7FFFFFFF
_SNAPSHOT_VERSION = 2
_SNAPSHOT_VERSION_WITH_ABORTED = 1  # still read (see the module doc)
_HEAD = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_PRODUCER = struct.Struct(">qhiqqb")
_BATCH = struct.Struct(">iiqqq")
_ABORTED = struct.Struct(">qqqq")


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    last_timestamp: int = -1

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.epoch,
            deque(self.batches, maxlen=BATCHES_TO_RETAIN),
            self.coordinator_epoch,
            self.current_txn_first_offset,
            self.last_timestamp,
        )

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def add_batch(self, epoch: int, batch: BatchMetadata) -> None:
        if epoch != self.epoch:  # ProducerStateEntry.maybeUpdateProducerEpoch
            self.epoch = epoch
            self.batches.clear()
        elif self.batches and not _in_sequence(self.batches[-1].last_seq, batch.first_seq):
            # Only a producer the partition had forgotten (expired, or its batches deleted)
            # gets a batch that does not follow its last one accepted.  A rebuild from the log
            # must forget the older batches too (Kafka's keeps them), or a new batch that
            # reuses their sequences would be taken for a retry and dropped.
            self.batches.clear()
        self.batches.append(batch)


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


def _next_sequence(last_seq: int) -> int:
    return 0 if last_seq in (NO_SEQUENCE, _INT32_MAX) else last_seq + 1


class ProducerStateManager:
    """Producer state of one partition.  Not thread-safe: the Log's lock guards it."""

    def __init__(self, directory: Path, expiration_ms: int = 86_400_000) -> None:
        self.directory = directory
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        # Aborted transactions read from a version 1 snapshot, for the Log to index.
        self.legacy_aborted: list[AbortedTxn] = []
        self.map_end_offset = 0  # every batch below this offset is reflected in the state

    # -- validation on the append path ---------------------------------------------------------

    def check(
        self, header: BatchHeader, staged: dict[int, ProducerStateEntry]
    ) -> BatchMetadata | None:
        """Validate a client batch against the state (plus ``staged`` earlier batches of the
        same request), as Kafka's ProducerAppendInfo.checkProducerEpoch / checkSequence /
        appendDataBatch.  Returns the original metadata if it is a duplicate; raises
        InvalidProducerEpochError, OutOfOrderSequenceNumberError or InvalidTxnStateError."""
        duplicate = self._check_sequence(header, staged)
        if duplicate is None and not header.is_transactional:
            pid = header.producer_id
            entry = staged.get(pid) or self.producers.get(pid)
            if entry is not None and entry.current_txn_first_offset >= 0:
                raise InvalidTxnStateError(
                    f"producer {pid} sent a non-transactional batch while its transaction "
                    f"(from offset {entry.current_txn_first_offset}) is open on this "
                    "partition; commit or abort the transaction first"
                )
        return duplicate

    def _check_sequence(
        self, header: BatchHeader, staged: dict[int, ProducerStateEntry]
    ) -> BatchMetadata | None:
        pid = header.producer_id
        current = self.producers.get(pid)
        epoch = header.producer_epoch
        first_seq = header.base_sequence
        # A duplicate is a retry of a batch already in the log: same epoch and the same first
        # and last sequence as one of the last BATCHES_TO_RETAIN (ProducerStateEntry
        # .findDuplicateBatch).  Earlier batches of this request are not in the log yet: like
        # UnifiedLog.analyzeAndValidateProducerState, look only at the appended state.
        if current is not None:
            duplicate = current.find_duplicate(epoch, first_seq, header.last_sequence)
            if duplicate is not None:
                return duplicate
        current_epoch = current.epoch if current is not None else NO_PRODUCER_EPOCH
        updated = staged.get(pid)  # only exists once this request appended a batch of pid
        updated_epoch = updated.epoch if updated is not None else current_epoch
        if epoch < updated_epoch:
            raise InvalidProducerEpochError(
                f"producer {pid}: batch epoch {epoch} is older than the current epoch "
                f"{updated_epoch}; this producer was fenced by a newer instance"
            )
        if epoch != updated_epoch:
            # A new epoch starts at sequence 0, unless the partition knows no epoch of this
            # producer (new, expired, or its batches deleted by retention or DeleteRecords).
            if first_seq != 0 and updated_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceNumberError(
                    f"producer {pid}: new epoch {epoch} must start at sequence 0, "
                    f"got {first_seq}"
                )
            return None
        if updated is not None and updated.batches:
            last_seq = updated.last_seq
        elif current is not None and epoch == current.epoch:
            last_seq = current.last_seq  # NO_SEQUENCE if the entry holds no batch
        else:
            last_seq = NO_SEQUENCE
        if current_epoch != NO_PRODUCER_EPOCH and not _in_sequence(last_seq, first_seq):
            raise OutOfOrderSequenceNumberError(
                f"producer {pid} epoch {epoch}: expected sequence "
                f"{_next_sequence(last_seq)}, got {first_seq} (batches were lost or reordered)"
            )
        return None

    def stage(
        self,
        header: BatchHeader,
        first_offset: int,
        timestamp: int,
        staged: dict[int, ProducerStateEntry],
    ) -> None:
        """Record an accepted client batch (offsets assigned, header as written to the log) in
        ``staged``; ``commit`` applies it.  The batch's metadata keeps its max timestamp (what
        Kafka's BatchMetadata keeps and answers a duplicate with); ``timestamp`` (the append
        time, or the batch's on replay) ages the producer for expiry."""
        pid = header.producer_id
        entry = staged.get(pid)
        if entry is None:
            current = self.producers.get(pid)
            entry = current.copy() if current is not None else ProducerStateEntry(pid)
            staged[pid] = entry
        last_offset = first_offset + header.last_offset_delta
        if header.base_sequence != NO_SEQUENCE:
            entry.add_batch(
                header.producer_epoch,
                BatchMetadata(header.base_sequence, header.last_sequence, first_offset,
                              last_offset, header.max_timestamp),
            )
        elif header.producer_epoch != entry.epoch:
            entry.epoch = header.producer_epoch
            entry.batches.clear()
        entry.last_timestamp = max(entry.last_timestamp, timestamp)
        if header.is_transactional and not header.is_control and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset

    def commit(self, staged: dict[int, ProducerStateEntry], end_offset: int) -> None:
        for pid, entry in staged.items():
            self.producers[pid] = entry
            if entry.current_txn_first_offset >= 0:
                self.ongoing[pid] = entry.current_txn_first_offset
        self.map_end_offset = end_offset

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Validate a marker the coordinator is about to write, as Kafka's ProducerAppendInfo
        .appendEndTxnMarker: an epoch older than the producer's is INVALID_PRODUCER_EPOCH, a
        coordinator epoch older than the last marker's TRANSACTION_COORDINATOR_FENCED."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"transaction marker of producer {producer_id} has epoch {epoch}, older than "
                f"its current epoch {entry.epoch}; the producer was fenced by a newer instance"
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"transaction marker of producer {producer_id} comes from coordinator epoch "
                f"{coordinator_epoch}, older than {entry.coordinator_epoch}; a newer "
                "transaction coordinator has taken over"
            )

    def complete_txn(
        self, producer_id: int, epoch: int, commit: bool, marker_offset: int, coordinator_epoch: int,
        timestamp: int = -1,
    ) -> AbortedTxn | None:
        """Apply a transaction marker (COMMIT/ABORT control batch) written at ``marker_offset``.
        Returns the aborted transaction to index when it aborts one open on this partition
        (a marker with nothing open changes only the epochs, as in Kafka)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = ProducerStateEntry(producer_id, epoch)
            self.producers[producer_id] = entry
        if epoch > entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = max(entry.last_timestamp, timestamp)
        first = entry.current_txn_first_offset
        entry.current_txn_first_offset = -1
        self.ongoing.pop(producer_id, None)
        self.map_end_offset = max(self.map_end_offset, marker_offset + 1)
        if commit or first < 0:
            return None
        # The LSO once this transaction is over: the first offset of the earliest transaction
        # another producer still has open, else just past the marker
        # (ProducerStateManager.lastStableOffset(CompletedTxn)).
        lso = min(self.ongoing.values(), default=marker_offset + 1)
        return AbortedTxn(producer_id, first, marker_offset, lso)

    # -- replay (recovery) ---------------------------------------------------------------------

    def replay(
        self, header: BatchHeader, control_type: int | None = None, coordinator_epoch: int = -1
    ) -> AbortedTxn | None:
        """Re-apply a batch read back from the log (no validation).  Returns the aborted
        transaction an ABORT marker ends, as ``complete_txn``."""
        if header.next_offset <= self.map_end_offset:
            return None
        aborted = None
        if header.producer_id >= 0:
            if header.is_control and control_type is not None:
                aborted = self.complete_txn(
                    header.producer_id, header.producer_epoch, control_type == 1,
                    header.base_offset, coordinator_epoch, header.max_timestamp,
                )
            elif not header.is_control:
                staged: dict[int, ProducerStateEntry] = {}
                self.stage(header, header.base_offset, header.max_timestamp, staged)
                self.commit(staged, header.next_offset)
        self.map_end_offset = header.next_offset
        return aborted

    # -- queries -------------------------------------------------------------------------------

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction, or None."""
        return min(self.ongoing.values()) if self.ongoing else None

    # -- housekeeping --------------------------------------------------------------------------

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers idle for ``expiration_ms`` with no open transaction; returns count."""
        expired = [
            pid
            for pid, e in self.producers.items()
            if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= self.expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def truncate_head(self, log_start_offset: int) -> None:
        """The log start moved (retention, DeleteRecords): drop the snapshots below it.
        Producers stay until they expire, as in Kafka (ProducerStateManager
        .onLogStartOffsetIncremented keeps them): a retry of a batch that retention or
        DeleteRecords removed is still a duplicate, not appended again."""
        for path in self.snapshot_files():
            if offset_from_filename(path.name) < log_start_offset:
                path.unlink(missing_ok=True)

    def reset(self) -> None:
        self.producers.clear()
        self.ongoing.clear()
        self.legacy_aborted.clear()
        self.map_end_offset = 0

    # -- snapshots -----------------------------------------------------------------------------

    def snapshot_files(self) -> list[Path]:
        """Snapshot files, oldest first."""
        files = [  # other files (an operator's 1.backup.snapshot) are left alone
            p for p in self.directory.glob("*" + SNAPSHOT_SUFFIX)
            if is_segment_file_name(p.name, SNAPSHOT_SUFFIX)
        ]
        return sorted(files, key=lambda p: offset_from_filename(p.name))

    def take_snapshot(self, sync: bool = True) -> Path:
        """Write the state as ``<map_end_offset>.snapshot``."""
        parts = [_COUNT.pack(len(self.producers))]
        for e in self.producers.values():
            parts.append(
                _PRODUCER.pack(
                    e.producer_id, e.epoch, e.coordinator_epoch, e.current_txn_first_offset,
                    e.last_timestamp, len(e.batches),
                )
            )
            parts.extend(
                _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp)
                for b in e.batches
            )
        body = b"".join(parts)
        path = self.directory / (filename_prefix(self.map_end_offset) + SNAPSHOT_SUFFIX)
        atomic_write(path, _HEAD.pack(_SNAPSHOT_VERSION, crc32c(body)) + body, sync=sync)
        return path

    def load_latest_snapshot(self, max_offset: int, log_end: int | None = None) -> bool:
        """Load the newest readable snapshot at or below ``max_offset``; delete any unreadable
        ones and those past ``log_end`` (default ``max_offset``), which describe batches the
        log no longer has.  Returns False (state empty) if none could be loaded."""
        self.reset()
        end = max_offset if log_end is None else log_end
        for path in reversed(self.snapshot_files()):
            offset = offset_from_filename(path.name)
            if offset > end:
                path.unlink(missing_ok=True)
                continue
            if offset > max_offset:
                continue
            try:
                self._read_snapshot(path)
            except (KafkaStorageError, struct.error, OSError):
                self.reset()
                path.unlink(missing_ok=True)
                continue
            self.map_end_offset = offset
            return True
        return False

    def _read_snapshot(self, path: Path) -> None:
        data = path.read_bytes()
        version, crc = _HEAD.unpack_from(data, 0)
        body = memoryview(data)[_HEAD.size :]
        known = (_SNAPSHOT_VERSION, _SNAPSHOT_VERSION_WITH_ABORTED)
        if version not in known or crc32c(body) != crc:
            raise KafkaStorageError(f"producer snapshot {path} is corrupt or of an unknown version")
        pos = 0
        (count,) = _COUNT.unpack_from(body, pos)
        pos += _COUNT.size
        for _ in range(count):
            pid, epoch, coord, txn_first, last_ts, n = _PRODUCER.unpack_from(body, pos)
            pos += _PRODUCER.size
            batches: Iterable[BatchMetadata] = [
                BatchMetadata(*_BATCH.unpack_from(body, pos + i * _BATCH.size)) for i in range(n)
            ]
            pos += n * _BATCH.size
            self.producers[pid] = ProducerStateEntry(
                pid, epoch, deque(batches, maxlen=BATCHES_TO_RETAIN), coord, txn_first, last_ts
            )
            if txn_first >= 0:
                self.ongoing[pid] = txn_first
        if version == _SNAPSHOT_VERSION_WITH_ABORTED:
            (count,) = _COUNT.unpack_from(body, pos)
            pos += _COUNT.size
            for _ in range(count):
                self.legacy_aborted.append(AbortedTxn(*_ABORTED.unpack_from(body, pos)))
                pos += _ABORTED.size
        if pos != len(body):
            raise KafkaStorageError(f"producer snapshot {path} has {len(body) - pos} trailing bytes")

    def retain_snapshots(self, keep: int = 2, recovery_point: int | None = None) -> None:
        """Keep only the newest ``keep`` snapshots, and the newest at or below
        ``recovery_point``: after a crash the segments past the recovery point are replayed
        from such a snapshot to rebuild their transaction indexes."""
        files = self.snapshot_files()
        doomed = files[:-keep] if keep else files
        if recovery_point is not None:
            below = [p for p in files if offset_from_filename(p.name) <= recovery_point]
            if below:
                doomed = [p for p in doomed if p != below[-1]]
        for path in doomed:
            path.unlink(missing_ok=True)
