"""OSErrors on the write path: KAFKA_STORAGE_ERROR, logged once per episode, writes resume."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from samsa.broker.log import Log, LogConfig, LogManager
from samsa.broker.log import files as files_module
from samsa.broker.log import handle_cache as handle_cache_module
from samsa.broker.log import segment as segment_module
from samsa.errors import KafkaStorageError

from .conftest import BASE_TS, build_batch

NOW = BASE_TS + 10_000
LOGGER = "samsa.broker.log"


def _open_log(path: Path, **topic: str) -> Log:
    return Log(path / "t-0", LogConfig.from_configs(None, topic), topic="t", partition=0,
               now_ms=NOW)


def _failing(code: int) -> Callable[..., Any]:
    def fail(*_: object, **__: object) -> Any:
        raise OSError(code, os.strerror(code))
    return fail


def _errors(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_enospc_on_produce_is_logged_once_per_episode_with_the_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    log = _open_log(tmp_path)
    path = log.active_segment.log_path
    caplog.set_level(logging.DEBUG, LOGGER)
    with monkeypatch.context() as full_disk:
        full_disk.setattr(segment_module.os, "pwrite", _failing(errno.ENOSPC))
        for _ in range(3):  # a producer retrying
            with pytest.raises(KafkaStorageError, match="No space left on device"):
                log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW)
    [logged] = _errors(caplog)
    assert str(path) in logged.getMessage() and "No space left on device" in logged.getMessage()
    # Space returns: the next write succeeds, says so once, and a later failure is logged again.
    assert log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW).base_offset == 0
    assert any("writes succeed again" in r.getMessage() and r.levelno == logging.INFO
               for r in caplog.records)
    with monkeypatch.context() as full_again:
        full_again.setattr(segment_module.os, "pwrite", _failing(errno.ENOSPC))
        with pytest.raises(KafkaStorageError):
            log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW)
    assert len(_errors(caplog)) == 2
    assert log.log_end_offset == 1
    log.close()


def test_a_roll_that_cannot_open_its_new_segment_is_a_storage_error_and_is_retried(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _open_log(tmp_path, **{"segment.bytes": "200"})
    log.append_as_leader(build_batch(2, value_size=100), leader_epoch=0, now_ms=NOW)
    with monkeypatch.context() as out_of_descriptors:
        out_of_descriptors.setattr(handle_cache_module.os, "open", _failing(errno.EMFILE))
        with pytest.raises(KafkaStorageError) as raised:
            log.append_as_leader(build_batch(2, value_size=100), leader_epoch=0, now_ms=NOW)
    assert "out of file descriptors" in str(raised.value)
    assert [s.base_offset for s in log.segments] == [0]
    assert log.append_as_leader(build_batch(2, value_size=100), leader_epoch=0,
                                now_ms=NOW).base_offset == 2
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_a_leader_epoch_checkpoint_that_cannot_be_written_appends_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _open_log(tmp_path)
    with monkeypatch.context() as full_disk:
        full_disk.setattr(files_module.os, "fsync", _failing(errno.ENOSPC))
        with pytest.raises(KafkaStorageError, match="leader-epoch-checkpoint"):
            log.append_as_leader(build_batch(1), leader_epoch=3, now_ms=NOW)
    assert log.log_end_offset == 0 and log.latest_epoch == -1
    assert log.append_as_leader(build_batch(1), leader_epoch=3, now_ms=NOW).base_offset == 0
    assert log.latest_epoch == 3
    log.close()


def test_a_failed_flush_is_a_storage_error_and_housekeeping_goes_on_for_the_others(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    manager = LogManager(tmp_path / "data", {"log.flush.interval.ms": 0})
    manager.create_topic("a", 1)
    manager.create_topic("b", 1)
    for name in ("a", "b"):
        manager.get_log(name, 0).append_as_leader(build_batch(1), leader_epoch=0)
    real_fsync = segment_module.os.fsync
    failing_fd = []

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("/a-0/00000000000000000000.log"):
            failing_fd.append(fd)
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_fsync(fd)

    caplog.set_level(logging.INFO, LOGGER)
    monkeypatch.setattr(segment_module.os, "fsync", fsync)
    manager.tick()
    manager.tick()
    assert failing_fd
    assert manager.get_log("b", 0).recovery_point == 1  # flushed despite a-0's failure
    assert manager.get_log("a", 0).recovery_point == 0
    [logged] = _errors(caplog)
    assert "a-0" in logged.getMessage() and "Input/output error" in logged.getMessage()
    monkeypatch.undo()
    manager.tick()
    assert manager.get_log("a", 0).recovery_point == 1
    manager.close()


def test_a_checkpoint_that_cannot_be_written_is_logged_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    manager = LogManager(tmp_path / "data", {"log.flush.offset.checkpoint.interval.ms": 0})
    caplog.set_level(logging.INFO, LOGGER)
    with monkeypatch.context() as full_disk:
        full_disk.setattr(files_module.os, "fsync", _failing(errno.ENOSPC))
        for _ in range(3):
            with pytest.raises(KafkaStorageError, match="recovery-point-offset-checkpoint"):
                manager.checkpoint()
    [logged] = _errors(caplog)
    assert "No space left on device" in logged.getMessage()
    assert not list((tmp_path / "data").glob("*.tmp"))
    manager.checkpoint()
    manager.close()
