"""Transactions in a partition's log: the LSO, the per-segment ``.txnindex`` of aborted
transactions and the read_committed collection from it (Kafka's ProducerStateManager,
TransactionIndex, LocalLog.collectAbortedTransactions), the producer-state checks of
transactional appends and markers, and their recovery after a crash."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from crc32c import crc32c

from samsa.broker.log import IsolationLevel, Log, LogConfig
from samsa.broker.log.txn_index import AbortedTxn
from samsa.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)

from .conftest import BASE_TS, build_batch

NOW = BASE_TS + 10_000


def _open(directory: Path, *, clean: bool = False, recovery_point: int = 0, **overrides: object) -> Log:
    topic = {k.replace("_", "."): str(v) for k, v in overrides.items()}
    return Log(directory, LogConfig.from_configs(None, topic), topic="t", partition=0,
               clean_shutdown=clean, recovery_point=recovery_point, now_ms=NOW)


class Writer:
    """Appends transactional batches with the right sequence per producer."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.seq: dict[int, int] = {}

    def txn(self, pid: int, count: int = 2, epoch: int = 0, transactional: bool = True) -> int:
        seq = self.seq.get(pid, 0)
        self.seq[pid] = seq + count
        batch = build_batch(count, pid=pid, epoch=epoch, seq=seq, transactional=transactional)
        return self.log.append_as_leader(batch, leader_epoch=0, now_ms=NOW).base_offset

    def plain(self, count: int = 1) -> int:
        return self.log.append_as_leader(build_batch(count), leader_epoch=0, now_ms=NOW).base_offset

    def end(self, pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> int:
        return self.log.append_control_marker(
            producer_id=pid, producer_epoch=epoch, commit=commit,
            coordinator_epoch=coordinator_epoch, leader_epoch=0, now_ms=NOW).base_offset


def _aborted(log: Log, offset: int, max_bytes: int = 1 << 20) -> list[tuple[int, int]]:
    fetched = log.read(offset, max_bytes, isolation=IsolationLevel.READ_COMMITTED)
    assert fetched.aborted_transactions is not None
    return [(t.producer_id, t.first_offset) for t in fetched.aborted_transactions]


def _entries(log: Log) -> list[list[AbortedTxn]]:
    return [list(s.txn_index.entries) for s in log.segments]


def test_lso_and_index_entries_with_interleaved_producers(tmp_path: Path) -> None:
    log = _open(tmp_path / "t-0")
    w = Writer(log)
    assert w.txn(1) == 0  # 0-1: producer 1 opens a transaction
    assert w.plain() == 2  # non-transactional data never holds the LSO back
    assert w.txn(2) == 3  # 3-4
    assert (log.last_stable_offset, log.high_watermark) == (0, 5)
    assert (log.has_open_transaction(1), log.has_open_transaction(2), log.has_open_transaction(3)) \
        == (True, True, False)
    assert w.end(1, commit=True) == 5
    assert log.last_stable_offset == 3 and not log.has_open_transaction(1)
    assert w.end(2, commit=False) == 6
    assert log.last_stable_offset == log.high_watermark == 7
    assert w.txn(3) == 7  # 7-8
    assert w.txn(1) == 9  # 9-10
    assert w.end(1, commit=False) == 11
    # An entry's LSO: the first offset of another producer's open transaction, else the
    # marker's offset + 1 (ProducerStateManager.lastStableOffset(CompletedTxn)).
    assert _entries(log) == [[AbortedTxn(2, 3, 6, 7), AbortedTxn(1, 9, 11, 7)]]
    assert log.last_stable_offset == 7
    fetched = log.read(0, 1 << 20, isolation=IsolationLevel.READ_COMMITTED)
    assert fetched.last_stable_offset == 7 and fetched.high_watermark == 12
    # Nothing past the LSO is read; the upper bound is the log end (no offset index entry).
    assert _aborted(log, 0) == [(2, 3), (1, 9)]
    assert log.read(7, 1 << 20, isolation=IsolationLevel.READ_COMMITTED).aborted_transactions == []
    assert log.read(0, 1 << 20).aborted_transactions is None  # read_uncommitted
    log.close()


def test_collection_walks_segments_until_an_entry_lso_reaches_the_bound(tmp_path: Path) -> None:
    log = _open(tmp_path / "t-0")
    w = Writer(log)
    w.txn(3)  # 0-1: producer 3, aborted only in the next segment
    w.txn(1)  # 2-3
    w.end(1, commit=False)  # 4: LSO 0 (producer 3 still open)
    log.roll(now_ms=NOW)
    w.end(3, commit=False)  # 5, in segment 5
    w.txn(2)  # 6-7
    w.end(2, commit=False)  # 8
    log.roll(now_ms=NOW)
    w.plain()  # 9
    assert _entries(log) == [[AbortedTxn(1, 2, 4, 0)],
                             [AbortedTxn(3, 0, 5, 6), AbortedTxn(2, 6, 8, 9)],
                             []]
    # A read of segment 0 ends at 5 (the next segment's base): segment 0's entry has LSO 0 <
    # 5, so segment 5 is searched too, up to its first entry with LSO >= 5.
    assert _aborted(log, 0) == [(1, 2), (3, 0)]
    assert _aborted(log, 6) == [(2, 6)]  # ends at 9; (3, 0, 5) ended before offset 6
    assert _aborted(log, 9) == []
    log.close()


def test_the_offset_index_bounds_a_partial_read(tmp_path: Path) -> None:
    # With an index entry per batch, a read of the first batch only is bounded by the next
    # batch's entry (OffsetIndex.fetchUpperBoundOffset), not by the log end.
    log = _open(tmp_path / "t-0", index_interval_bytes=0)
    w = Writer(log)
    w.txn(1)  # 0-1
    w.txn(2)  # 2-3
    w.end(2, commit=False)  # 4: LSO 0
    w.end(1, commit=False)  # 5: LSO 6
    w.txn(3)  # 6-7
    w.end(3, commit=False)  # 8
    first = log.read(0, 1, isolation=IsolationLevel.READ_COMMITTED)
    assert first.records.size == log.read(0, 1).records.size  # the first batch only
    # Upper bound 3 (the entry of batch 2-3): (2, 2) overlaps, (1, 0) too and its LSO 6
    # ends the walk before (3, 6).
    assert _aborted(log, 0, max_bytes=1) == [(2, 2), (1, 0)]
    assert _aborted(log, 0) == [(2, 2), (1, 0), (3, 6)]
    log.close()


def test_a_non_transactional_batch_during_a_transaction_is_invalid_txn_state(tmp_path: Path) -> None:
    log = _open(tmp_path / "t-0")
    w = Writer(log)
    w.txn(1)
    with pytest.raises(InvalidTxnStateError, match="producer 1 .*commit or abort the transaction first"):
        w.txn(1, transactional=False)
    both = build_batch(1, pid=2, epoch=0, seq=0, transactional=True) + \
        build_batch(1, pid=2, epoch=0, seq=1)  # one request: opened, then plain
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(both, leader_epoch=0, now_ms=NOW)
    assert log.log_end_offset == 2 and not log.has_open_transaction(2)  # nothing written
    w.seq[1] = 2
    w.end(1, commit=True)
    assert w.txn(1, transactional=False) == 3  # allowed once the transaction is over
    log.close()


def test_marker_epochs_are_checked(tmp_path: Path) -> None:
    log = _open(tmp_path / "t-0")
    w = Writer(log)
    w.txn(1, epoch=1)
    with pytest.raises(InvalidProducerEpochError, match="epoch 0, older than its current epoch 1"):
        w.end(1, commit=False, epoch=0)
    assert log.log_end_offset == 2 and log.has_open_transaction(1)
    w.end(1, commit=True, epoch=1, coordinator_epoch=5)
    with pytest.raises(TransactionCoordinatorFencedError, match="coordinator epoch 4, older than 5"):
        w.end(1, commit=False, epoch=1, coordinator_epoch=4)
    with pytest.raises(InvalidProducerEpochError):  # a data batch of a fenced epoch
        log.append_as_leader(build_batch(1, pid=1, epoch=0, seq=0, transactional=True),
                             leader_epoch=0, now_ms=NOW)
    assert log.log_end_offset == 3
    log.close()


def test_index_files_go_with_their_segments_and_the_lso_never_drops_below_the_log_start(
        tmp_path: Path) -> None:
    log = _open(tmp_path / "t-0")
    w = Writer(log)
    w.txn(1)
    w.end(1, commit=False)  # 2
    log.roll(now_ms=NOW)
    w.txn(2)  # 3-4, open
    first_index = log.segments[0].txn_index.path
    assert first_index.exists()
    assert log.delete_records_before(4) == 4  # segment 0 goes, with its .txnindex
    assert not first_index.exists() and _entries(log) == [[]]
    # The open transaction began at 3, below the new log start (UnifiedLog clamps it there).
    assert log.last_stable_offset == 4
    w.end(2, commit=False)  # 5
    path = log.segments[0].txn_index.path
    assert path.exists()
    log.delete()
    assert not path.exists()


def _write_history(log: Log) -> None:
    """Committed, aborted and open transactions over two segments."""
    w = Writer(log)
    w.txn(1)  # 0-1
    w.plain()  # 2
    w.txn(2)  # 3-4
    w.end(1, commit=False)  # 5: LSO 3
    w.txn(3)  # 6-7
    w.end(3, commit=True)  # 8
    log.roll(now_ms=NOW)
    w.txn(4)  # 9-10, aborted in this segment
    w.end(2, commit=False)  # 11: LSO 9
    w.end(4, commit=False)  # 12: LSO 13
    w.txn(5)  # 13-14, left open
    w.plain()  # 15


def _observed(log: Log) -> tuple[int, list[list[tuple[int, int]]], list[bytes]]:
    indexes = [s.txn_index.path.read_bytes() if s.txn_index.path.exists() else b""
               for s in log.segments]
    return log.last_stable_offset, [_aborted(log, o) for o in (0, 6, 9, 12)], indexes


@pytest.mark.parametrize("recover_from", ["log start", "the active segment", "no snapshot"])
def test_a_crash_rebuilds_the_lso_and_the_txn_indexes(tmp_path: Path, recover_from: str) -> None:
    directory = tmp_path / "t-0"
    log = _open(directory)
    _write_history(log)
    before = _observed(log)
    assert before[0] == 13 and len(before[2][0]) == 34 and len(before[2][1]) == 68
    active_base = log.active_segment.base_offset
    log.flush()
    log.abandon()  # a SIGKILL: no snapshot at the end, no index written at close
    if recover_from == "no snapshot":
        for path in directory.glob("*.snapshot"):
            path.unlink()
    for segment_index in directory.glob("*.txnindex"):
        segment_index.write_bytes(b"")  # what recovery must not trust
    point = active_base if recover_from == "the active segment" else 0
    if recover_from == "the active segment":
        (directory / "00000000000000000000.txnindex").write_bytes(before[2][0])
    reopened = _open(directory, recovery_point=point)
    assert _observed(reopened) == before
    assert reopened.has_open_transaction(5) and not reopened.has_open_transaction(4)
    Writer(reopened).end(5, commit=False, coordinator_epoch=0)  # the open one can still end
    assert reopened.last_stable_offset == reopened.log_end_offset == 17
    reopened.close()


@pytest.mark.parametrize("damage", ["torn", "garbage version"])
def test_a_damaged_txn_index_is_rebuilt_after_a_clean_shutdown(tmp_path: Path, damage: str) -> None:
    directory = tmp_path / "t-0"
    log = _open(directory)
    _write_history(log)
    log.roll(now_ms=NOW)
    w = Writer(log)
    w.seq[5] = 2
    w.end(5, commit=True)  # a third segment, so that the snapshots start after segment 0
    before = _observed(log)
    log.close()
    path = directory / "00000000000000000009.txnindex"
    data = path.read_bytes()
    path.write_bytes(data[:50] if damage == "torn" else data[:34] + b"\x7f" + data[35:])
    reopened = _open(directory, clean=True, recovery_point=log.log_end_offset)
    assert _observed(reopened) == before
    reopened.close()


def test_a_version_1_snapshot_fills_missing_txn_indexes(tmp_path: Path) -> None:
    # Before .txnindex files the aborted transactions lived in the producer snapshot
    # (version 1); such a log, opened after a clean shutdown, gets its index files.
    directory = tmp_path / "t-0"
    log = _open(directory)
    _write_history(log)
    before = _observed(log)
    end = log.log_end_offset
    entries = [t for segment in _entries(log) for t in segment]
    log.close()
    for path in directory.glob("*.txnindex"):
        path.unlink()
    snapshot = directory / f"{end:020d}.snapshot"
    body = snapshot.read_bytes()[6:] + struct.pack(">i", len(entries)) + b"".join(
        struct.pack(">qqqq", t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
        for t in entries)
    snapshot.write_bytes(struct.pack(">hI", 1, crc32c(body)) + body)
    reopened = _open(directory, clean=True, recovery_point=end)
    assert _observed(reopened) == before
    reopened.close()


def test_an_open_transaction_keeps_its_producer_from_expiring(tmp_path: Path) -> None:
    log = _open(tmp_path / "t-0")
    log.update_config(LogConfig.from_configs({"producer.id.expiration.ms": "1000"}))
    w = Writer(log)
    w.txn(1)
    w.txn(2)
    w.end(2, commit=True)
    assert log.remove_expired_producers(NOW + 10_000) == 1  # producer 2 only
    assert log.has_open_transaction(1) and log.last_stable_offset == 0
    log.close()


def test_rolls_keep_a_snapshot_at_or_below_the_first_segment_recovery_replays(tmp_path: Path) -> None:
    # After a crash the replay that rebuilds the .txnindex of re-validated segments starts at
    # or below the segment holding the recovery point; without such a snapshot it would have
    # to start at the log start.
    log = _open(tmp_path / "t-0")
    w = Writer(log)
    w.plain()
    log.roll(now_ms=NOW)  # snapshot at 1
    w.plain()
    log.flush()  # recovery point 2
    for _ in range(3):
        log.roll(now_ms=NOW)  # snapshots at 2, 3, 4
        w.plain()
    kept = sorted(int(p.name.split(".")[0]) for p in log.dir.glob("*.snapshot"))
    assert kept == [2, 3, 4]  # the newest two, and the one the recovery point's segment needs
    log.close()
