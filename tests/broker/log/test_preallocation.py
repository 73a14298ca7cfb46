"""Blocks reserved ahead of a segment's appends (segment.py): the file's size stays the bytes
appended, and no block is left past the end once the segment stops being written (roll, close,
the cleaner's output) or after a crash's recovery."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.broker.log import Log, LogConfig
from samsa.broker.log import segment as segment_module
from samsa.broker.log.segment import LogSegment
from samsa.records import MemoryRecords, read_batch_header, set_base_offset

from .conftest import BASE_TS, build_batch

NOW = BASE_TS + 10_000


def _reserved_bytes(path: Path) -> int:
    """Bytes of blocks the file holds past what its size needs."""
    st = os.stat(path)
    needed = -(-st.st_size // st.st_blksize) * st.st_blksize
    return max(st.st_blocks * 512 - needed, 0)


@pytest.fixture
def reserving(tmp_path: Path) -> Iterator[None]:
    """Skip where the file system (or platform) reserves nothing."""
    (tmp_path / "probe").mkdir()
    segment = LogSegment(tmp_path / "probe", 0)
    _append(segment, 0, 10)
    reserved = _reserved_bytes(segment.log_path)
    segment.delete()
    if not reserved:
        pytest.skip("blocks cannot be reserved here (no fallocate with FALLOC_FL_KEEP_SIZE)")
    yield


def _append(segment: LogSegment, offset: int, records: int, value_size: int = 100) -> int:
    buf = bytearray(build_batch(records, value_size=value_size))
    set_base_offset(buf, 0, offset)
    header = read_batch_header(buf)
    segment.append(buf, [header])
    return header.next_offset


def _log(directory: Path, *, clean: bool = True, **settings: int) -> Log:
    return Log(directory, LogConfig(**settings), topic="t", partition=0, clean_shutdown=clean,
               now_ms=NOW)


def _values(log: Log) -> list[bytes | None]:
    """Every record's value, read segment by segment."""
    values: list[bytes | None] = []
    while len(values) < log.log_end_offset:
        records = log.read(len(values), 1 << 30).records
        raw = records if isinstance(records, bytes) else records.read()
        values += [r.value for batch in MemoryRecords(raw).batches() for r in batch
                   if r.offset >= len(values)]
    return values


def test_appends_reserve_blocks_past_the_end_without_changing_the_size(
        tmp_path: Path, reserving: None) -> None:
    segment = LogSegment(tmp_path, 0)
    _append(segment, 0, 100)
    assert os.stat(segment.log_path).st_size == segment.size
    assert _reserved_bytes(segment.log_path) >= 1024 * 1024 - segment.size
    assert segment.recover() == 0 and segment.next_offset == 100  # nothing extra to read
    segment.close()


def test_becoming_inactive_frees_the_reserved_blocks_and_keeps_the_mtime(
        tmp_path: Path, reserving: None) -> None:
    segment = LogSegment(tmp_path, 0)
    _append(segment, 0, 100)
    mtime = os.stat(segment.log_path).st_mtime_ns
    time.sleep(0.02)
    segment.on_become_inactive()
    st = os.stat(segment.log_path)
    assert st.st_size == segment.size and _reserved_bytes(segment.log_path) == 0
    assert st.st_mtime_ns == mtime  # retention of untimed segments reads it
    segment.close()


def test_rolled_and_closed_segments_hold_no_blocks_past_their_end(
        tmp_path: Path, reserving: None) -> None:
    log = _log(tmp_path, segment_bytes=20_000)
    for _ in range(8):
        log.append_as_leader(build_batch(50, value_size=100), leader_epoch=0, now_ms=NOW)
    rolled = log.segments_snapshot()[:-1]
    assert rolled
    assert all(_reserved_bytes(s.log_path) == 0 for s in rolled)
    assert _reserved_bytes(log.active_segment.log_path) > 0
    log.close()
    assert all(_reserved_bytes(s.log_path) == 0 for s in log.segments_snapshot())
    reopened = _log(tmp_path, segment_bytes=20_000)
    assert len(_values(reopened)) == 400
    reopened.close()


def test_a_crash_leaves_reserved_blocks_that_recovery_frees(tmp_path: Path,
                                                            reserving: None) -> None:
    log = _log(tmp_path)
    for _ in range(3):
        log.append_as_leader(build_batch(50, value_size=100), leader_epoch=0, now_ms=NOW)
    path = log.active_segment.log_path
    size = log.active_segment.size
    log.abandon()  # a crash: nothing trimmed
    assert _reserved_bytes(path) > 0 and os.stat(path).st_size == size
    recovered = _log(tmp_path, clean=False)
    assert recovered.recovered_bytes_truncated == 0
    assert recovered.log_end_offset == 150 and len(_values(recovered)) == 150
    assert _reserved_bytes(path) == 0 and os.stat(path).st_size == size
    recovered.append_as_leader(build_batch(50, value_size=100), leader_epoch=0, now_ms=NOW)
    assert len(_values(recovered)) == 200
    recovered.close()
    assert _reserved_bytes(path) == 0


def test_a_crash_with_a_torn_tail_and_reserved_blocks_recovers_the_whole_batches(
        tmp_path: Path, reserving: None) -> None:
    log = _log(tmp_path)
    for _ in range(2):
        log.append_as_leader(build_batch(50, value_size=100), leader_epoch=0, now_ms=NOW)
    path = log.active_segment.log_path
    log.abandon()
    with open(path, "ab") as f:  # half a batch, inside the reserved blocks
        f.write(bytes(build_batch(50, value_size=100))[:700])
    recovered = _log(tmp_path, clean=False)
    assert recovered.recovered_bytes_truncated == 700
    assert recovered.log_end_offset == 100
    assert _reserved_bytes(path) == 0
    recovered.close()


def test_a_truncation_then_appends_reserve_again(tmp_path: Path, reserving: None) -> None:
    segment = LogSegment(tmp_path, 0)
    offset = 0
    for _ in range(4):
        offset = _append(segment, offset, 10)
    assert segment.truncate_to(20) > 0
    assert _reserved_bytes(segment.log_path) == 0  # ftruncate freed them
    offset = _append(segment, 20, 10)
    assert os.stat(segment.log_path).st_size == segment.size
    assert _reserved_bytes(segment.log_path) > 0
    assert segment.recover() == 0 and segment.next_offset == 30
    segment.on_become_inactive()
    assert _reserved_bytes(segment.log_path) == 0
    segment.close()


def test_a_large_append_reserves_past_its_own_end(tmp_path: Path, reserving: None) -> None:
    segment = LogSegment(tmp_path, 0)
    _append(segment, 0, 3000, value_size=1000)  # ~3 MB: reserves four times that, up to 8 MiB
    assert os.stat(segment.log_path).st_size == segment.size
    assert _reserved_bytes(segment.log_path) >= 8 * 1024 * 1024 - 4096
    segment.on_become_inactive()
    assert _reserved_bytes(segment.log_path) == 0
    segment.close()


def test_without_fallocate_appends_just_allocate_as_they_go(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(segment_module, "_fallocate", None)
    segment = LogSegment(tmp_path, 0)
    offset = 0
    for _ in range(3):
        offset = _append(segment, offset, 100)
    assert _reserved_bytes(segment.log_path) == 0
    assert segment.recover() == 0 and segment.next_offset == 300
    segment.on_become_inactive()
    segment.close()


def test_a_file_system_that_cannot_reserve_is_not_asked_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def unsupported(fd: int, mode: int, offset: int, length: int) -> int:
        calls.append(length)
        return -1

    monkeypatch.setattr(segment_module, "_fallocate", unsupported)
    monkeypatch.setattr(segment_module.ctypes, "get_errno", lambda: segment_module.errno.EOPNOTSUPP)
    segment = LogSegment(tmp_path, 0)
    offset = 0
    for _ in range(3):
        offset = _append(segment, offset, 100)
    assert len(calls) == 1 and segment_module._fallocate is None
    assert segment.recover() == 0 and segment.next_offset == 300
    segment.close()
