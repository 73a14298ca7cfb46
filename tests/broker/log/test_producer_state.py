from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from samsa.broker.log import IsolationLevel, Log, LogConfig, LogManager
from samsa.broker.log.producer_state import (
    AbortedTxn,
    BatchMetadata,
    ProducerStateEntry,
    ProducerStateManager,
)
from samsa.errors import InvalidProducerEpochError, OutOfOrderSequenceNumberError
from samsa.records import ControlRecordType, build_control_batch, read_batch_header, set_base_offset

from .conftest import BASE_TS, build_batch

NOW = BASE_TS + 10_000
PID = 4242
_INT32_MAX = 0x7FFFFFFF


def produce(log: Log, seq: int, count: int = 2, epoch: int = 0, pid: int = PID):
    return log.append_as_leader(build_batch(count, pid=pid, epoch=epoch, seq=seq), leader_epoch=0, now_ms=NOW)


@pytest.fixture
def log(tmp_path: Path):
    log = Log(tmp_path / "t-0", LogConfig(), topic="t", partition=0, now_ms=NOW)
    yield log
    log.close()


def test_duplicates_return_the_original_offsets(log: Log) -> None:
    results = [produce(log, seq) for seq in range(0, 12, 2)]  # six batches: 0-1, 2-3, ... 10-11
    assert [r.base_offset for r in results] == [0, 2, 4, 6, 8, 10]
    end = log.log_end_offset
    retry = produce(log, 10)
    assert retry.duplicate and (retry.base_offset, retry.last_offset) == (10, 11)
    older = produce(log, 2)  # the 5th most recent batch is still remembered
    assert older.duplicate and older.base_offset == 2
    assert log.log_end_offset == end
    with pytest.raises(OutOfOrderSequenceNumberError):
        produce(log, 0)  # the oldest batch fell out of the 5-batch window


def test_sequence_gap_is_out_of_order(log: Log) -> None:
    produce(log, 0)
    with pytest.raises(OutOfOrderSequenceNumberError, match="expected sequence 2, got 4"):
        produce(log, 4)
    assert produce(log, 2).base_offset == 2


def test_old_epoch_is_fenced_and_new_epoch_restarts_at_zero(log: Log) -> None:
    produce(log, 0, epoch=1)
    with pytest.raises(InvalidProducerEpochError):
        produce(log, 2, epoch=0)
    with pytest.raises(OutOfOrderSequenceNumberError, match="must start at sequence 0"):
        produce(log, 5, epoch=2)
    assert not produce(log, 0, epoch=2).duplicate  # same seq, new epoch: not a duplicate
    assert produce(log, 2, epoch=2).base_offset == 4


def test_unknown_producer_may_start_anywhere(log: Log) -> None:
    assert produce(log, 1000, pid=7).base_offset == 0
    assert produce(log, 1002, pid=7).base_offset == 2


def test_sequence_wraps_at_int32_max(log: Log) -> None:
    produce(log, 0x7FFFFFFF - 1, count=2)  # last sequence Int32.MAX
    assert produce(log, 0).base_offset == 2


def test_batches_in_one_request_are_checked_in_order(log: Log) -> None:
    both = build_batch(2, pid=PID, epoch=0, seq=0) + build_batch(2, pid=PID, epoch=0, seq=2)
    assert log.append_as_leader(both, leader_epoch=0, now_ms=NOW).last_offset == 3
    gap = build_batch(2, pid=PID, epoch=0, seq=4) + build_batch(2, pid=PID, epoch=0, seq=9)
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append_as_leader(gap, leader_epoch=0, now_ms=NOW)
    assert log.log_end_offset == 4  # nothing of the failed request was written
    assert produce(log, 4).base_offset == 4


def _dedup_after_reopen(manager: LogManager) -> None:
    log = manager.get_log("t", 0)
    assert log.log_end_offset == 8
    retry = produce(log, 6)
    assert retry.duplicate and retry.base_offset == 6
    with pytest.raises(OutOfOrderSequenceNumberError):
        produce(log, 10)
    assert produce(log, 8).base_offset == 8


def _fill(manager: LogManager) -> None:
    manager.create_topic("t", 1, {"segment.bytes": "300"})
    log = manager.get_log("t", 0)
    for seq in range(0, 8, 2):
        produce(log, seq)
    assert len(log.segments) > 1


def test_dedup_survives_clean_restart(open_manager: Callable[..., LogManager], tmp_path: Path) -> None:
    manager = open_manager()
    _fill(manager)
    manager.close()
    assert (tmp_path / "data" / "t-0" / "00000000000000000008.snapshot").exists()
    _dedup_after_reopen(open_manager())


def test_dedup_survives_crash_without_snapshot(open_manager: Callable[..., LogManager], tmp_path: Path) -> None:
    manager = open_manager()
    _fill(manager)
    crashed = tmp_path / "crashed"
    shutil.copytree(tmp_path / "data", crashed)  # the files as a crash would leave them
    manager.close()
    for snapshot in crashed.glob("t-0/*.snapshot"):
        snapshot.unlink()  # no snapshot at all: state is rebuilt from the log start
    assert not (crashed / ".kafka_cleanshutdown").exists()
    _dedup_after_reopen(open_manager(data_dir=crashed))


def test_crash_replays_from_the_last_snapshot(open_manager: Callable[..., LogManager], tmp_path: Path) -> None:
    manager = open_manager()
    _fill(manager)  # the rolls wrote snapshots below offset 8
    crashed = tmp_path / "crashed"
    shutil.copytree(tmp_path / "data", crashed)
    manager.close()
    assert list(crashed.glob("t-0/*.snapshot"))
    _dedup_after_reopen(open_manager(data_dir=crashed))


def test_snapshot_round_trip(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    entry = ProducerStateEntry(5, 3, coordinator_epoch=2, current_txn_first_offset=40, last_timestamp=77)
    for i in range(7):
        entry.add_batch(3, BatchMetadata(i * 2, i * 2 + 1, 30 + i * 2, 31 + i * 2, 70 + i))
    state.producers[5] = entry
    state.ongoing[5] = 40
    state.map_end_offset = 44
    path = state.take_snapshot()
    assert path.name == "00000000000000000044.snapshot"
    loaded = ProducerStateManager(tmp_path)
    assert loaded.load_latest_snapshot(100)
    assert loaded.map_end_offset == 44 and loaded.ongoing == {5: 40}
    assert loaded.producers[5] == entry and len(entry.batches) == 5
    assert not ProducerStateManager(tmp_path).load_latest_snapshot(43)  # newer than the log: dropped
    assert not path.exists()


def test_corrupt_snapshot_is_ignored(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    state.producers[1] = ProducerStateEntry(1, 0)
    state.map_end_offset = 10
    path = state.take_snapshot()
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(data)
    assert not ProducerStateManager(tmp_path).load_latest_snapshot(10)


def test_expired_producers_are_forgotten(log: Log) -> None:
    produce(log, 0)
    assert log.remove_expired_producers(NOW + 86_400_000 - 1) == 0
    assert log.remove_expired_producers(NOW + 86_400_000) == 1
    assert produce(log, 50).base_offset == 2  # unknown again: any sequence accepted


def test_rebuild_after_expiry_does_not_take_new_batches_for_retries(tmp_path: Path) -> None:
    # An expired producer may start again anywhere; if the rebuild from the log brought back
    # the batches the expiry had forgotten, a new batch reusing their sequences would be
    # answered as a duplicate and never written.
    log = Log(tmp_path / "t-0", LogConfig(), topic="t", partition=0, now_ms=NOW)
    produce(log, 2, count=1)  # unknown producer: sequence 2 is fine (offset 0)
    later = NOW + 86_400_000
    assert log.remove_expired_producers(later) == 1
    log.append_as_leader(build_batch(2, pid=PID, epoch=0, seq=0, ts=later), leader_epoch=0,
                         now_ms=later)  # sequences 0-1 at offsets 1-2
    crashed = tmp_path / "crashed" / "t-0"
    shutil.copytree(log.dir, crashed)
    log.close()
    for snapshot in crashed.glob("*.snapshot"):
        snapshot.unlink()
    rebuilt = Log(crashed, LogConfig(), topic="t", partition=0, now_ms=later)
    try:
        result = rebuilt.append_as_leader(build_batch(1, pid=PID, epoch=0, seq=2, ts=later),
                                          leader_epoch=0, now_ms=later)
        assert (result.duplicate, result.base_offset) == (False, 3)
    finally:
        rebuilt.close()


def test_producers_outlive_the_deletion_of_their_batches(log: Log) -> None:
    # Kafka keeps producer state when the log start moves past a producer's batches
    # (ProducerStateManager.onLogStartOffsetIncremented): a late retry stays a duplicate.
    produce(log, 0)
    produce(log, 2)
    log.delete_records_before(4)
    retry = produce(log, 2)
    assert retry.duplicate and (retry.base_offset, retry.log_start_offset) == (2, 4)
    assert log.log_end_offset == 4
    with pytest.raises(OutOfOrderSequenceNumberError):
        produce(log, 6)


def _txn(log: Log, seq: int, count: int = 2, pid: int = 0, now_ms: int = NOW):
    return log.append_as_leader(
        build_batch(count, pid=pid, epoch=0, seq=seq, transactional=True), leader_epoch=0, now_ms=now_ms
    )


def _marker(log: Log, commit: bool, pid: int = 0, coordinator_epoch: int = 1):
    return log.append_control_marker(producer_id=pid, producer_epoch=0, commit=commit,
                                     coordinator_epoch=coordinator_epoch, leader_epoch=0, now_ms=NOW)


def _aborted(log: Log, start: int = 0) -> list[tuple[int, int, int]]:
    fetched = log.read(start, 10**6, isolation=IsolationLevel.READ_COMMITTED)
    assert fetched.aborted_transactions is not None
    return [(t.producer_id, t.first_offset, t.last_offset) for t in fetched.aborted_transactions]


def test_transaction_state_is_rebuilt_from_markers_after_a_crash(tmp_path: Path) -> None:
    # Producer id 0 is a valid id (ProducerIdManager starts at 0).  An aborted transaction at
    # offset 0, a committed one, then idempotent batches after a marker in the same segment and
    # an open transaction: a rebuild from the log (no snapshot) must find the same state.
    log = Log(tmp_path / "t-0", LogConfig(), topic="t", partition=0, now_ms=NOW)
    _txn(log, 0)  # 0-1
    _marker(log, commit=False, coordinator_epoch=1)  # 2: abort (coordinator epoch 1 = COMMIT's type)
    _txn(log, 2)  # 3-4
    _marker(log, commit=True, coordinator_epoch=7)  # 5
    produce(log, 0, pid=PID)  # 6-7: a plain idempotent producer, after the markers
    _txn(log, 4)  # 8-9: still open
    expected = ([(0, 0, 2)], 8, log.producer_state.producers[0].coordinator_epoch)
    assert expected == (_aborted(log), log.last_stable_offset, 7)
    crashed = tmp_path / "crashed" / "t-0"
    shutil.copytree(log.dir, crashed)
    log.close()
    for snapshot in crashed.glob("*.snapshot"):
        snapshot.unlink()
    rebuilt = Log(crashed, LogConfig(), topic="t", partition=0, now_ms=NOW)
    try:
        assert (_aborted(rebuilt), rebuilt.last_stable_offset,
                rebuilt.producer_state.producers[0].coordinator_epoch) == expected
        assert produce(rebuilt, 0, pid=PID).duplicate  # replay went on after the markers
        _marker(rebuilt, commit=True, coordinator_epoch=7)
        assert rebuilt.last_stable_offset == rebuilt.log_end_offset == 11
    finally:
        rebuilt.close()  # the snapshot of the rebuilt state must be writable


def test_a_marker_keeps_the_batches_of_its_epoch(log: Log) -> None:
    # ProducerStateEntry.maybeUpdateProducerEpoch: a marker of the same epoch keeps the batches,
    # so a retry after the commit is still a duplicate; a new transaction starts its own LSO.
    _txn(log, 0, pid=PID)
    _marker(log, commit=True, pid=PID)
    retry = _txn(log, 0, pid=PID)
    assert retry.duplicate and retry.base_offset == 0
    assert _aborted(log) == []  # a commit is not an aborted transaction
    assert _txn(log, 2, pid=PID).base_offset == 3
    assert log.last_stable_offset == 3


def test_the_first_offset_of_an_open_transaction_at_offset_zero_is_kept(log: Log) -> None:
    _txn(log, 0)  # 0-1, transaction opens at offset 0
    _txn(log, 2)  # 2-3, same transaction
    assert log.last_stable_offset == 0
    assert log.remove_expired_producers(NOW + 10 * 86_400_000) == 0  # open: never expires
    _marker(log, commit=False)
    assert _aborted(log) == [(0, 0, 4)]


def test_marker_for_a_producer_the_partition_does_not_know(tmp_path: Path) -> None:
    # The coordinator writes markers to every partition of the transaction, also to one where
    # the producer wrote nothing (or whose state expired): the marker creates the entry.
    state = ProducerStateManager(tmp_path)
    state.map_end_offset = 7
    # Nothing was open: nothing to index (ProducerAppendInfo.appendEndTxnMarker).
    assert state.complete_txn(11, 3, False, 7, 5, timestamp=70) is None
    assert state.producers[11] == ProducerStateEntry(11, 3, coordinator_epoch=5, last_timestamp=70)
    assert state.ongoing == {}
    assert state.map_end_offset == 8  # the marker's offset + 1
    assert state.complete_txn(11, 4, True, 9, 6, timestamp=90) is None  # a newer epoch: taken
    assert state.producers[11] == ProducerStateEntry(11, 4, coordinator_epoch=6, last_timestamp=90)
    assert state.map_end_offset == 10


def test_replay_skips_batches_below_the_map_end(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    state.map_end_offset = 2
    header = read_batch_header(build_batch(2, pid=PID, epoch=0, seq=0))  # offsets 0-1
    state.replay(header)
    assert state.producers == {} and state.map_end_offset == 2
    state.map_end_offset = 0
    state.replay(header)
    assert state.producers[PID].last_seq == 1 and state.map_end_offset == 2


def test_replay_of_an_unreadable_marker_changes_no_transaction(tmp_path: Path) -> None:
    # Log._replay_from passes no control type when a marker's record cannot be read.
    state = ProducerStateManager(tmp_path)
    header = read_batch_header(build_control_batch(ControlRecordType.ABORT, PID, 0, 0, BASE_TS))
    assert state.replay(header) is None
    assert (state.producers, state.ongoing, state.map_end_offset) == ({}, {}, 1)


def test_replay_of_a_batch_without_sequence_takes_its_epoch(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    state.replay(read_batch_header(build_batch(2, pid=PID, epoch=0, seq=0)))
    batch = bytearray(build_batch(1, pid=PID, epoch=1, seq=-1))
    set_base_offset(batch, 0, 2)
    state.replay(read_batch_header(batch))
    entry = state.producers[PID]
    assert (entry.epoch, list(entry.batches)) == (1, [])


def test_sequence_errors_say_which_sequence_was_expected(log: Log) -> None:
    produce(log, _INT32_MAX - 1)  # unknown producer: any start; ends at INT32_MAX
    with pytest.raises(OutOfOrderSequenceNumberError, match="expected sequence 0, got 5"):
        produce(log, 5)
    with pytest.raises(InvalidProducerEpochError, match="epoch -1 is older than the current epoch 0"):
        log.append_as_leader(build_batch(1, pid=PID, epoch=-1, seq=0), leader_epoch=0, now_ms=NOW)


def test_check_against_a_staged_epoch_without_batches(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    header = read_batch_header(build_batch(1, pid=PID, epoch=1, seq=5))
    assert state.check(header, {PID: ProducerStateEntry(PID, 1)}) is None  # unknown producer
    known = ProducerStateEntry(PID, 0)
    known.add_batch(0, BatchMetadata(0, 1, 0, 1, BASE_TS))
    state.producers[PID] = known
    with pytest.raises(OutOfOrderSequenceNumberError, match="expected sequence 0, got 5"):
        state.check(header, {PID: ProducerStateEntry(PID, 1)})


def test_one_request_may_bump_the_epoch_and_go_on_in_it(log: Log) -> None:
    produce(log, 0)  # epoch 0, offsets 0-1
    both = build_batch(2, pid=PID, epoch=1, seq=0) + build_batch(2, pid=PID, epoch=1, seq=2)
    assert log.append_as_leader(both, leader_epoch=0, now_ms=NOW).last_offset == 5
    again = build_batch(2, pid=PID, epoch=1, seq=4) + build_batch(2, pid=PID, epoch=1, seq=6)
    assert log.append_as_leader(again, leader_epoch=0, now_ms=NOW).last_offset == 9
    retry = produce(log, 4, epoch=1)  # the first batch of the last request is remembered
    assert retry.duplicate and retry.base_offset == 6


def test_a_late_append_time_does_not_make_a_producer_older(log: Log) -> None:
    log.append_as_leader(build_batch(1, pid=PID, epoch=0, seq=0), leader_epoch=0, now_ms=NOW + 1000)
    log.append_as_leader(build_batch(1, pid=PID, epoch=0, seq=1), leader_epoch=0, now_ms=NOW)
    assert log.remove_expired_producers(NOW + 86_400_000 + 999) == 0
    assert log.remove_expired_producers(NOW + 86_400_000 + 1000) == 1


def test_changed_expiration_applies_to_the_producer_state(log: Log) -> None:
    produce(log, 0)
    log.update_config(LogConfig.from_configs({"producer.id.expiration.ms": "1000"}))
    assert log.remove_expired_producers(NOW + 999) == 0
    assert log.remove_expired_producers(NOW + 1000) == 1


# -- snapshot files: which one is loaded, what survives a round trip ---------------------------


def _snapshot_at(directory: Path, offset: int, last_timestamp: int = 77) -> Path:
    """A snapshot at ``offset`` holding one producer whose last timestamp tells snapshots apart."""
    state = ProducerStateManager(directory)
    state.producers[PID] = ProducerStateEntry(PID, 0, last_timestamp=last_timestamp)
    state.map_end_offset = offset
    return state.take_snapshot(sync=False)


def _load(directory: Path, max_offset: int) -> ProducerStateManager | None:
    state = ProducerStateManager(directory)
    return state if state.load_latest_snapshot(max_offset) else None


def test_snapshot_with_a_bad_checksum_or_an_unknown_version_is_not_loaded(tmp_path: Path) -> None:
    # A flipped bit inside a field still parses; only the CRC tells the snapshot is damaged.
    path = _snapshot_at(tmp_path, 10)
    data = bytearray(path.read_bytes())
    data[-8] ^= 0x01  # inside the producer's last timestamp (its batch count follows)
    path.write_bytes(bytes(data))
    assert _load(tmp_path, 10) is None and not path.exists()
    # A version this broker does not know is refused even with a correct checksum.
    path = _snapshot_at(tmp_path, 10)
    path.write_bytes((3).to_bytes(2, "big") + path.read_bytes()[2:])
    assert _load(tmp_path, 10) is None and not path.exists()


def test_snapshot_at_exactly_the_log_end_is_loaded(tmp_path: Path) -> None:
    path = _snapshot_at(tmp_path, 44)
    state = _load(tmp_path, 44)
    assert state is not None and state.map_end_offset == 44 and path.exists()


def test_every_snapshot_newer_than_the_log_is_dropped_and_the_next_one_loaded(tmp_path: Path) -> None:
    older, kept, newer, newest = (_snapshot_at(tmp_path, o, last_timestamp=o) for o in (10, 20, 30, 40))
    state = _load(tmp_path, 25)
    assert state is not None and state.map_end_offset == 20
    assert state.producers[PID].last_timestamp == 20
    assert (older.exists(), kept.exists(), newer.exists(), newest.exists()) == (True, True, False, False)


def test_an_unreadable_snapshot_falls_back_to_the_one_before(tmp_path: Path) -> None:
    _snapshot_at(tmp_path, 10, last_timestamp=10)
    damaged = _snapshot_at(tmp_path, 20, last_timestamp=20)
    damaged.write_bytes(damaged.read_bytes()[:-1])
    state = _load(tmp_path, 100)
    assert state is not None and state.map_end_offset == 10
    assert state.producers[PID].last_timestamp == 10 and not damaged.exists()


def test_snapshot_keeps_a_transaction_open_at_offset_zero(tmp_path: Path) -> None:
    # The LSO needs the open transaction, also when it began at the very first offset.
    state = ProducerStateManager(tmp_path)
    state.producers[0] = ProducerStateEntry(0, 0, current_txn_first_offset=0)
    state.ongoing[0] = 0
    state.map_end_offset = 10
    path = state.take_snapshot(sync=False)
    assert path.read_bytes()[:2] == b"\x00\x02"  # version 2: aborted transactions are in .txnindex
    loaded = _load(tmp_path, 10)
    assert loaded is not None and loaded.legacy_aborted == []
    assert (loaded.ongoing, loaded.first_unstable_offset()) == ({0: 0}, 0)


def test_a_version_1_snapshot_hands_its_aborted_transactions_over(tmp_path: Path) -> None:
    # Version 1 kept the aborted transactions after the producers; they are still read, for
    # the Log to write into the .txnindex files.
    import struct

    from crc32c import crc32c

    producer = struct.pack(">qhiqqb", 0, 0, -1, 0, 77, 0)  # open transaction from offset 0
    aborted = struct.pack(">qqqq", 7, 2, 4, 0) + struct.pack(">qqqq", 8, 5, 9, 0)
    body = struct.pack(">i", 1) + producer + struct.pack(">i", 2) + aborted
    (tmp_path / "00000000000000000010.snapshot").write_bytes(struct.pack(">hI", 1, crc32c(body)) + body)
    loaded = _load(tmp_path, 10)
    assert loaded is not None
    assert loaded.legacy_aborted == [AbortedTxn(7, 2, 4, 0), AbortedTxn(8, 5, 9, 0)]
    assert (loaded.ongoing, loaded.producers[0].last_timestamp) == ({0: 0}, 77)


def test_a_state_without_snapshot_replays_a_one_record_batch_at_offset_zero(tmp_path: Path) -> None:
    # The map end starts at 0 (fresh, or after no snapshot could be loaded): the batch at
    # offset 0, whose next offset is 1, is not yet reflected in the state.
    header = read_batch_header(build_batch(1, pid=PID, epoch=0, seq=0))
    fresh = ProducerStateManager(tmp_path)
    fresh.replay(header)
    assert fresh.producers[PID].last_seq == 0
    reloaded = ProducerStateManager(tmp_path)
    assert not reloaded.load_latest_snapshot(100)
    reloaded.replay(header)
    assert reloaded.producers[PID].last_seq == 0 and reloaded.map_end_offset == 1


def test_retain_snapshots_keeps_only_the_newest(tmp_path: Path) -> None:
    paths = [_snapshot_at(tmp_path, o) for o in (10, 20, 30)]
    state = ProducerStateManager(tmp_path)
    state.retain_snapshots(2)
    assert [p.exists() for p in paths] == [False, True, True]
    state.retain_snapshots(0)
    assert state.snapshot_files() == []


def test_truncate_head_keeps_what_reaches_the_new_log_start(tmp_path: Path) -> None:
    # Kafka deletes snapshots below the log start (deleteSnapshotsBefore).
    at_start, above = _snapshot_at(tmp_path, 10), _snapshot_at(tmp_path, 20)
    state = ProducerStateManager(tmp_path)
    state.truncate_head(10)
    assert at_start.exists() and above.exists()
    state.truncate_head(11)
    assert not at_start.exists() and above.exists()


def test_files_not_named_like_snapshots_are_neither_loaded_nor_deleted(tmp_path: Path) -> None:
    kept = _snapshot_at(tmp_path, 10, last_timestamp=10)
    stray = tmp_path / "1.backup.snapshot"  # an operator's copy, taken for "snapshot 1" before
    stray.write_bytes(kept.read_bytes())
    state = _load(tmp_path, 0)  # the log end is below every real snapshot
    assert state is None and not kept.exists() and stray.exists()
    assert ProducerStateManager(tmp_path).snapshot_files() == []
