"""Opening, flushing and closing a Log: what a restart trusts and what it recovers (Kafka's
LogLoader: files after a clean shutdown are trusted, otherwise segments from the one holding
the recovery point on are recovered), flush.messages counting, and a closed log."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from samsa.broker.log import Log, LogConfig
from samsa.errors import KafkaStorageError

from .conftest import BASE_TS, build_batch
from .test_log import read_all

NOW = BASE_TS + 10_000
FIRST_SEGMENT = "00000000000000000000.log"


def _config(**overrides: object) -> LogConfig:
    return LogConfig.from_configs(None, {k.replace("_", "."): str(v) for k, v in overrides.items()})


def _open(directory: Path, config: LogConfig | None = None, **kwargs: object) -> Log:
    return Log(directory, config or _config(), topic="t", partition=0, **kwargs)  # type: ignore[arg-type]


def _append(log: Log, count: int = 1, *, epoch: int = 0, now_ms: int = NOW, **batch: object) -> None:
    for _ in range(count):
        log.append_as_leader(build_batch(**batch), leader_epoch=epoch, now_ms=now_ms)  # type: ignore[arg-type]


def _index_entries(log: Log) -> list[int]:
    return [len(segment.offset_index) for segment in log.segments]


def _three_segments_indexed_per_batch(directory: Path) -> Log:
    """Three segments of three batches each, written with an index entry for every batch."""
    log = _open(directory, _config(index_interval_bytes=1), now_ms=NOW)
    for i in range(3):
        if i:
            log.roll(NOW)
        _append(log, 3)
    return log


def test_a_log_opened_without_a_recovery_point_or_clean_shutdown_recovers_from_the_start(
        tmp_path: Path) -> None:
    log = _open(tmp_path, now_ms=NOW)
    _append(log, 3)
    log.abandon()  # a crash: nothing flushed
    reopened = _open(tmp_path, now_ms=NOW)  # the defaults: recovery point 0, unclean
    assert reopened.recovery_point == 0
    assert [offset for offset, _ in read_all(reopened)] == [0, 1, 2]
    reopened.close()


def test_a_clean_shutdown_trusts_the_files_and_sets_the_recovery_point_to_the_end(
        tmp_path: Path) -> None:
    log = _three_segments_indexed_per_batch(tmp_path)
    written = _index_entries(log)
    log.close()
    assert all(n >= 2 for n in written)
    # Reopened with the default index interval: a recovery would rebuild every index sparser.
    clean = _open(tmp_path, clean_shutdown=True, now_ms=NOW)
    assert _index_entries(clean) == written
    assert clean.recovery_point == clean.log_end_offset == 9
    clean.abandon()
    unclean = _open(tmp_path, now_ms=NOW)
    assert _index_entries(unclean) != written  # the control: recovery does rebuild them
    unclean.close()


def test_recovery_starts_at_the_segment_that_holds_the_recovery_point(tmp_path: Path) -> None:
    log = _three_segments_indexed_per_batch(tmp_path)
    written = _index_entries(log)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    log.abandon()
    # Segments wholly below the recovery point (the next one starts at or below it) are
    # trusted; the one holding it, and every later one, are recovered (rebuilt indexes).
    reopened = _open(tmp_path, recovery_point=6, now_ms=NOW)
    entries = _index_entries(reopened)
    assert entries[:2] == written[:2]
    assert entries[2] < written[2]
    assert reopened.recovery_point == 6
    reopened.close()


def test_stray_files_named_like_logs_are_not_taken_for_segments(tmp_path: Path) -> None:
    log = _open(tmp_path, now_ms=NOW)
    _append(log, 2)
    log.close()
    (tmp_path / "1.2.log").write_bytes(b"an operator's copy")
    (tmp_path / "notes.log").write_bytes(b"")
    reopened = _open(tmp_path, clean_shutdown=True, now_ms=NOW)
    assert [s.base_offset for s in reopened.segments] == [0]
    assert [offset for offset, _ in read_all(reopened)] == [0, 1]
    reopened.close()
    assert sorted(p.name for p in tmp_path.glob("*.log")) == [FIRST_SEGMENT, "1.2.log", "notes.log"]


def test_segments_without_timestamps_roll_by_the_time_since_they_were_opened(
        tmp_path: Path) -> None:
    # A first batch without a timestamp (-1): segment.ms counts from when the segment was
    # created or loaded (Kafka's LogSegment.rollingBasedTimestamp falls back to its create time).
    config = _config(segment_ms=1000)
    log = _open(tmp_path, config, now_ms=NOW)
    _append(log, ts=-1, ts_step=0)
    _append(log, ts=-1, ts_step=0, now_ms=NOW + 1000)
    assert len(log.segments) == 1
    _append(log, ts=-1, ts_step=0, now_ms=NOW + 1001)
    assert len(log.segments) == 2
    log.close()
    loaded_at = NOW + 5000
    reopened = _open(tmp_path, config, clean_shutdown=True, now_ms=loaded_at)
    _append(reopened, ts=-1, ts_step=0, now_ms=loaded_at + 1000)
    assert len(reopened.segments) == 2
    _append(reopened, ts=-1, ts_step=0, now_ms=loaded_at + 1001)
    assert len(reopened.segments) == 3
    reopened.close()


def test_index_interval_and_index_size_come_from_the_config(tmp_path: Path) -> None:
    # index.interval.bytes=1: an entry for every batch after the first; segment.index.bytes=32:
    # four 8-byte offset entries fill the index, which rolls the segment.
    log = _open(tmp_path, _config(index_interval_bytes=1, segment_index_bytes=32), now_ms=NOW)
    _append(log, 5)
    assert _index_entries(log) == [4]
    _append(log)
    assert [s.base_offset for s in log.segments] == [0, 5]
    log.close()


def test_flush_messages_counts_the_messages_since_the_last_full_flush(tmp_path: Path) -> None:
    log = _open(tmp_path, _config(flush_messages=3), now_ms=NOW)
    _append(log, 2)
    assert log.recovery_point == 0  # two of three: nothing flushed yet
    log.flush(NOW)
    assert log.recovery_point == 2
    _append(log, 2)
    assert log.recovery_point == 2  # the count started again at the flush
    _append(log)
    assert log.recovery_point == 5
    log.close()


def test_an_epoch_that_starts_at_the_recovered_log_end_is_forgotten(tmp_path: Path) -> None:
    log = _open(tmp_path, now_ms=NOW)
    _append(log, 2, epoch=0)
    _append(log, epoch=1)
    assert log.latest_epoch == 1
    log.abandon()
    segment = tmp_path / FIRST_SEGMENT
    segment.write_bytes(segment.read_bytes()[:-5])  # epoch 1's only batch was torn
    reopened = _open(tmp_path, now_ms=NOW)
    assert reopened.log_end_offset == 2
    assert reopened.latest_epoch == 0
    reopened.close()


def test_expired_producers_stay_forgotten_after_a_restart(tmp_path: Path) -> None:
    config = dataclasses.replace(_config(), producer_id_expiration_ms=1000)
    log = _open(tmp_path, config, now_ms=NOW)
    _append(log, pid=1, epoch=0, seq=0, ts=NOW, ts_step=0)
    assert log.remove_expired_producers(NOW + 1000) == 1
    _append(log, pid=2, epoch=0, seq=0, ts=NOW + 1000, ts_step=0, now_ms=NOW + 1000)
    log.close()
    reopened = _open(tmp_path, config, clean_shutdown=True, now_ms=NOW + 1000)
    assert sorted(reopened.producer_state.producers) == [2]
    reopened.close()


def test_a_closed_log_refuses_reads_and_appends_and_closes_once(tmp_path: Path) -> None:
    log = _open(tmp_path, now_ms=NOW)
    _append(log)
    log.close()
    log.close()  # a second close does nothing
    with pytest.raises(KafkaStorageError, match="log of t-0 is closed"):
        log.read(0, 1000)
    with pytest.raises(KafkaStorageError, match="log of t-0 is closed"):
        _append(log)
