"""Log settings that were once accepted without effect, now honoured (issue 16): the roll
jitter (segment.jitter.ms), the delayed removal of deleted segments (file.delete.delay.ms),
parallel log loading (num.recovery.threads.per.data.dir) and preallocate refused."""

from __future__ import annotations

import random
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from samsa.broker.log import Log, LogConfig, LogManager
from samsa.broker.log import log as log_module
from samsa.broker.log.config import resolve_broker_config, validate_topic_configs
from samsa.errors import InvalidConfigError

from .conftest import BASE_TS, build_batch

NOW = BASE_TS + 10_000


def open_log(path: Path, **topic: str) -> Log:
    return Log(path / "t-0", LogConfig.from_configs(None, topic), topic="t", partition=0,
               now_ms=NOW)


def append_at(log: Log, ts: int) -> None:
    log.append_as_leader(build_batch(1, ts=ts), leader_epoch=0, now_ms=ts)


# -- segment.jitter.ms ------------------------------------------------------------------------

def test_jitter_resolves_from_broker_settings() -> None:
    assert resolve_broker_config(None)["log.roll.jitter.ms"] == 0
    assert resolve_broker_config({"log.roll.jitter.hours": 2})["log.roll.jitter.ms"] == 7_200_000
    assert resolve_broker_config({"log.roll.jitter.hours": 2, "log.roll.jitter.ms": 5}
                                 )["log.roll.jitter.ms"] == 5
    assert LogConfig.from_configs({"log.roll.jitter.ms": 70}).segment_jitter_ms == 70
    assert LogConfig.from_configs(None, {"segment.jitter.ms": "30"}).segment_jitter_ms == 30
    with pytest.raises(InvalidConfigError, match="segment.jitter.ms"):
        validate_topic_configs({"segment.jitter.ms": "-1"})


def test_random_jitter_is_below_jitter_and_segment_ms() -> None:
    assert LogConfig(segment_jitter_ms=0).random_segment_jitter() == 0
    config = LogConfig(segment_ms=100, segment_jitter_ms=1_000_000)
    jitters = {config.random_segment_jitter() for _ in range(300)}
    assert all(0 <= j < 100 for j in jitters) and len(jitters) > 10  # capped by segment.ms


def test_segment_rolls_early_by_its_jitter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    monkeypatch.setattr(random, "randrange", lambda bound: 400)
    log = open_log(tmp_path, **{"segment.ms": "1000", "segment.jitter.ms": "500"})
    assert log.active_segment.roll_jitter_ms == 400
    append_at(log, BASE_TS)
    append_at(log, BASE_TS + 600)  # waited 600 = segment.ms - jitter: not yet
    assert len(log.segments) == 1
    append_at(log, BASE_TS + 601)  # past segment.ms - jitter (1000 without the jitter)
    assert len(log.segments) == 2
    assert log.active_segment.roll_jitter_ms == 400  # each new segment draws its own
    log.close()


def test_no_jitter_rolls_at_segment_ms(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"segment.ms": "1000"})
    append_at(log, BASE_TS)
    append_at(log, BASE_TS + 1000)
    assert len(log.segments) == 1
    append_at(log, BASE_TS + 1001)
    assert len(log.segments) == 2
    log.close()


# -- file.delete.delay.ms -----------------------------------------------------------------------

def _fill(log: Log, batches: int = 6) -> None:
    for i in range(batches):
        log.append_as_leader(build_batch(2, value_size=100, ts=NOW + i), leader_epoch=0,
                             now_ms=NOW)


def test_deleted_segment_files_wait_file_delete_delay(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"segment.bytes": "400", "retention.bytes": "0",
                                "file.delete.delay.ms": "5000"})
    _fill(log)
    before = {p.name for p in log.dir.glob("*.log")}
    deleted = log.apply_retention(NOW)
    assert deleted >= 1
    gone = before - {p.name for p in log.dir.glob("*.log")}
    assert len(gone) == deleted  # no longer segments of the log ...
    waiting = {p.name for p in log.dir.glob("*.deleted")}
    assert {name + ".deleted" for name in gone} <= waiting  # ... but renamed, not unlinked
    assert any(name.endswith(".index.deleted") for name in waiting)
    log.maintain(NOW + 4999)
    assert {p.name for p in log.dir.glob("*.deleted")} == waiting
    log.maintain(NOW + 5000)
    assert not list(log.dir.glob("*.deleted"))
    log.close()


def test_delete_records_renames_then_removes(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"segment.bytes": "400", "file.delete.delay.ms": "100"})
    _fill(log)
    log.delete_records_before(log.high_watermark)
    assert list(log.dir.glob("*.log.deleted"))
    log.maintain(log_module._now_ms() + 100)
    assert not list(log.dir.glob("*.deleted"))
    log.close()


def test_zero_delay_removes_at_once(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"segment.bytes": "400", "retention.bytes": "0",
                                "file.delete.delay.ms": "0"})
    _fill(log)
    assert log.apply_retention(NOW) >= 1
    assert not list(log.dir.glob("*.deleted"))
    log.close()


def test_files_waiting_at_a_crash_are_removed_at_load(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"segment.bytes": "400", "retention.bytes": "0"})
    _fill(log)
    log.apply_retention(NOW)
    assert list(log.dir.glob("*.deleted"))
    start = log.log_start_offset
    log.abandon()  # a crash before the delay passed
    reopened = open_log(tmp_path, **{"segment.bytes": "400"})
    assert not list(reopened.dir.glob("*.deleted"))
    assert reopened.segments[0].base_offset == start
    reopened.close()


# -- num.recovery.threads.per.data.dir ----------------------------------------------------------

def _crashed_dir(open_manager: Callable[..., LogManager], tmp_path: Path, partitions: int
                 ) -> Path:
    """A data dir as a power cut leaves it (copied while the manager runs): loading it
    recovers every log."""
    manager = open_manager()
    manager.create_topic("t", partitions)
    for p in range(partitions):
        manager.get_log("t", p).append_as_leader(build_batch(3), leader_epoch=0, now_ms=NOW)
    image = tmp_path / "crash"
    shutil.copytree(manager.data_dir, image)
    return image


def test_logs_load_on_recovery_threads(open_manager: Callable[..., LogManager], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    data_dir = _crashed_dir(open_manager, tmp_path, 4)
    # Two logs must be loading at once to pass the barrier; one thread would time out.
    barrier = threading.Barrier(2, timeout=10)
    threads: set[str] = set()
    real_init = Log.__init__

    def loading(self: Log, *args: object, **kwargs: object) -> None:
        threads.add(threading.current_thread().name)
        if kwargs.get("partition") in (0, 1):
            barrier.wait()
        real_init(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Log, "__init__", loading)
    manager = open_manager({"num.recovery.threads.per.data.dir": 2}, data_dir)
    assert not manager.had_clean_shutdown
    assert len(threads) == 2 and all(t.startswith("samsa-log-recovery") for t in threads)
    assert all(manager.get_log("t", p).log_end_offset == 3 for p in range(4))


def test_one_recovery_thread_loads_in_order(open_manager: Callable[..., LogManager], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    data_dir = _crashed_dir(open_manager, tmp_path, 3)
    threads: set[str] = set()
    real_init = Log.__init__

    def loading(self: Log, *args: object, **kwargs: object) -> None:
        threads.add(threading.current_thread().name)
        real_init(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Log, "__init__", loading)
    manager = open_manager({"num.recovery.threads.per.data.dir": 1}, data_dir)
    assert threads == {threading.current_thread().name}
    assert all(manager.get_log("t", p).log_end_offset == 3 for p in range(3))


def test_a_failed_load_releases_the_others(open_manager: Callable[..., LogManager], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    data_dir = _crashed_dir(open_manager, tmp_path, 4)
    real_init = Log.__init__

    def loading(self: Log, *args: object, **kwargs: object) -> None:
        if kwargs.get("partition") == 2:
            raise OSError("disk gone")
        real_init(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Log, "__init__", loading)
    with pytest.raises(OSError, match="disk gone"):
        LogManager(data_dir, {"num.recovery.threads.per.data.dir": 3})
    monkeypatch.setattr(Log, "__init__", real_init)
    reopened = open_manager({"num.recovery.threads.per.data.dir": 3}, data_dir)  # lock freed
    assert all(reopened.get_log("t", p).log_end_offset == 3 for p in range(4))


# -- preallocate, min.insync.replicas ---------------------------------------------------------

def test_preallocate_true_is_refused() -> None:
    assert validate_topic_configs({"preallocate": "false"}) == {"preallocate": "false"}
    with pytest.raises(InvalidConfigError, match="does not preallocate"):
        validate_topic_configs({"preallocate": "true"})


def test_min_insync_replicas_must_be_positive() -> None:
    assert validate_topic_configs({"min.insync.replicas": "3"}) == {"min.insync.replicas": "3"}
    with pytest.raises(InvalidConfigError, match="min.insync.replicas"):
        validate_topic_configs({"min.insync.replicas": "0"})
