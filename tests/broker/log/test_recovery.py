"""Opening a partition directory after a crash: leftover files of interrupted operations are
removed (Kafka's LogLoader.removeTempFilesAndCollectSwapFiles), and every batch after the
recovery point is re-validated even when it is larger than recovery's read buffer."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from samsa.broker.log import Log, LogConfig
from samsa.broker.log.files import atomic_write
from samsa.broker.log.segment import _RECOVER_CHUNK, LogSegment
from samsa.records import MemoryRecords, read_batch_header, set_base_offset

from .conftest import BASE_TS, build_batch

NOW = BASE_TS + 10_000


def _write_segment(directory: Path, base: int, batches: list[bytes]) -> list[int]:
    """A segment file of ``batches`` (offsets from ``base``) as a crashed broker left it;
    returns each batch's file position."""
    segment = LogSegment(directory, base)
    positions = []
    offset = base
    for data in batches:
        buf = bytearray(data)
        set_base_offset(buf, 0, offset)
        header = read_batch_header(buf)
        positions.append(segment.size)
        segment.append(buf, [header])
        offset = header.next_offset
    segment.close()
    return positions


def _open(directory: Path, *, clean: bool = False) -> Log:
    return Log(directory, LogConfig(), topic="t", partition=0, clean_shutdown=clean, now_ms=NOW)


def _values(log: Log, offset: int) -> list[tuple[int, bytes | None]]:
    records = log.read(offset, 1 << 30).records
    raw = records if isinstance(records, bytes) else records.read()
    return [(r.offset, r.value) for batch in MemoryRecords(raw).batches() for r in batch if r.offset >= offset]


def test_leftovers_of_interrupted_operations_are_removed(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    directory.mkdir()
    _write_segment(directory, 0, [build_batch(5)])
    leftovers = [
        "00000000000000000000.log.tmp",  # atomic_write's temporary file
        "00000000000000000000.log.deleted",  # a segment renamed for asynchronous deletion
        # A log cleaner's output (samsa does not compact, so none of its .swap files can be a
        # finished swap to complete, as Kafka's LogLoader would).
        "00000000000000000000.log.cleaned",
        "00000000000000000000.log.swap",
        "00000000000000000003.index.deleted",
    ]
    for name in leftovers:
        (directory / name).write_bytes(b"junk")
    # Indexes whose .log is gone: a segment delete interrupted between its files.
    (directory / "00000000000000000005.index").write_bytes(struct.pack(">ii", 3, 4000))
    (directory / "00000000000000000005.timeindex").write_bytes(struct.pack(">qi", BASE_TS, 3))

    for clean in (True, False):
        log = _open(directory, clean=clean)
        assert sorted(p.name for p in directory.iterdir() if not p.name.endswith(".snapshot")) == [
            "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex",
        ]
        assert log.log_end_offset == 5
        log.close()
        for name in leftovers:
            (directory / name).write_bytes(b"junk")
        (directory / "00000000000000000005.index").write_bytes(struct.pack(">ii", 3, 4000))
        (directory / "00000000000000000005.timeindex").write_bytes(struct.pack(">qi", BASE_TS, 3))


def test_a_segment_rolled_where_a_stale_index_was_left_reads_correctly(tmp_path: Path) -> None:
    # A stale index of an older segment at the same base offset must not be reused: its
    # entries point at positions in a file that no longer exists.
    directory = tmp_path / "t-0"
    directory.mkdir()
    _write_segment(directory, 0, [build_batch(5)])
    (directory / "00000000000000000005.index").write_bytes(struct.pack(">ii", 3, 40_000))
    (directory / "00000000000000000005.timeindex").write_bytes(struct.pack(">qi", BASE_TS + 5, 3))
    log = _open(directory)
    log.roll(NOW)
    assert [s.base_offset for s in log.segments] == [0, 5]
    for i in range(5):
        log.append_as_leader(build_batch(1, value_size=50, key_prefix=b"n%d-" % i), leader_epoch=0, now_ms=NOW)
    assert [o for o, _ in _values(log, 8)] == [8, 9]
    log.close()
    reopened = _open(directory)  # unclean: the new segment is validated and re-indexed
    assert reopened.recovered_bytes_truncated == 0
    assert [o for o, _ in _values(reopened, 8)] == [8, 9]
    reopened.close()


def test_recovery_revalidates_a_batch_larger_than_its_read_buffer(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    directory.mkdir()
    big_value = _RECOVER_CHUNK + _RECOVER_CHUNK // 2  # one record larger than the buffer
    batches = [build_batch(3), build_batch(1, value_size=big_value), build_batch(2)]
    positions = _write_segment(directory, 0, batches)
    size = (directory / "00000000000000000000.log").stat().st_size
    assert positions[2] - positions[1] > _RECOVER_CHUNK

    log = _open(directory)  # no clean-shutdown marker, recovery point 0: every batch is checked
    assert log.recovered_bytes_truncated == 0
    assert log.log_end_offset == 6
    assert (directory / "00000000000000000000.log").stat().st_size == size
    got = _values(log, 3)
    assert [o for o, _ in got] == [3, 4, 5]
    assert len(got[0][1] or b"") == big_value
    log.close()


def test_recovery_still_cuts_a_corrupt_batch_larger_than_its_read_buffer(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    directory.mkdir()
    batches = [build_batch(3), build_batch(1, value_size=_RECOVER_CHUNK * 2), build_batch(2)]
    positions = _write_segment(directory, 0, batches)
    path = directory / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[positions[1] + _RECOVER_CHUNK + 100] ^= 0x01  # past the first buffer's end
    path.write_bytes(data)

    log = _open(directory)
    assert log.recovered_bytes_truncated == len(data) - positions[1]
    assert log.log_end_offset == 3
    assert path.stat().st_size == positions[1]
    log.close()


def test_an_atomic_write_interrupted_before_its_rename_leaves_a_file_that_loading_removes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A crash between writing a snapshot's temporary file and renaming it: the old snapshot
    # (none here) stays, and the next load removes the temporary file, whatever its name is.
    directory = tmp_path / "t-0"
    directory.mkdir()
    _write_segment(directory, 0, [build_batch(5)])

    def crash(src: object, dst: object) -> None:
        raise SystemExit("crashed before the rename")  # not an OSError: no cleanup runs

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", crash)
        with pytest.raises(SystemExit):
            atomic_write(directory / "00000000000000000005.snapshot", b"state")
    [leftover] = [p.name for p in directory.iterdir() if not p.name.startswith("00000000000000000000.")]
    log = _open(directory)
    assert not (directory / leftover).exists()
    assert log.log_end_offset == 5
    log.close()
