from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from samsa.broker.log import Log, LogConfig, LogManager
from samsa.broker.log.producer_state import (
    BatchMetadata,
    ProducerStateEntry,
    ProducerStateManager,
)
from samsa.errors import InvalidProducerEpochError, OutOfOrderSequenceNumberError

from .conftest import BASE_TS, build_batch

NOW = BASE_TS + 10_000
PID = 4242


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
