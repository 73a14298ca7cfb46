from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from crc32c import crc32c

from samsa.broker.log.handle_cache import HandleCache
from samsa.broker.log.index import CorruptIndexError
from samsa.broker.log.segment import LogSegment
from samsa.errors import CorruptRecordError
from samsa.records import RECORD_BATCH_OVERHEAD, read_batch_header, set_base_offset, validate_batch

from .conftest import BASE_TS, build_batch


def _stamped(data: bytes, base_offset: int) -> bytearray:
    buf = bytearray(data)
    set_base_offset(buf, 0, base_offset)
    return buf


def _fill(segment: LogSegment, batches: int, records: int = 2, value_size: int = 100) -> list[int]:
    """Append ``batches`` batches; returns their file positions."""
    positions = []
    offset = segment.next_offset
    for i in range(batches):
        buf = _stamped(build_batch(records, ts=BASE_TS + i * 10, value_size=value_size), offset)
        header = read_batch_header(buf)
        positions.append(segment.size)
        segment.append(buf, [header])
        offset = header.next_offset
    return positions


def test_files_are_named_by_20_digit_base_offset(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 42)
    segment.close()  # the index files are made by their first write
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000042.index",
        "00000000000000000042.log",
        "00000000000000000042.timeindex",
    ]


def test_append_read_round_trip(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 100, index_interval_bytes=200)
    positions = _fill(segment, 20)
    assert segment.next_offset == 140
    assert len(segment.offset_index) > 3  # sparse entries every ~200 bytes
    # offset 117 lies in the batch [116, 117]
    piece = segment.read(117, 10_000)
    assert piece is not None
    assert piece.position == positions[8]
    data = piece.read()
    assert read_batch_header(data).base_offset == 116
    assert len(data) == segment.size - positions[8]
    validate_batch(data, 0)
    assert segment.read(140, 10_000) is None  # nothing at or after the end
    segment.close()


def test_read_respects_max_bytes_max_position_and_min_one_message(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0)
    positions = _fill(segment, 3, value_size=5000)  # each batch > 10 KB
    batch_size = positions[1]
    small = segment.read(0, 100, min_one_message=False)
    assert small is not None and small.size == 100  # a partial batch, as Kafka returns
    whole = segment.read(0, 100, min_one_message=True)
    assert whole is not None and whole.size == batch_size  # first batch whole despite max_bytes
    bounded = segment.read(2, 10**6, max_position=positions[2])
    assert bounded is not None and (bounded.position, bounded.size) == (positions[1], batch_size)
    assert segment.read(4, 10**6, max_position=positions[2]) is None  # above the limit
    segment.close()


def test_file_slice_supports_sendfile(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0)
    _fill(segment, 2)
    piece = segment.read(0, 10**6)
    assert piece is not None
    out = tmp_path / "out"
    with open(out, "wb") as f:
        sent = os.sendfile(f.fileno(), piece.fileno(), piece.position, len(piece))
    assert sent == len(piece)
    assert out.read_bytes() == piece.read()
    segment.close()


def test_recover_truncates_torn_tail_and_rebuilds_indexes(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=100)
    _fill(segment, 10)
    good_size = segment.size
    entries = len(segment.offset_index)
    segment.close()
    with open(tmp_path / "00000000000000000000.log", "ab") as f:
        f.write(build_batch(3)[:40])  # a torn write
    (tmp_path / "00000000000000000000.index").write_bytes(b"\xff" * 13)
    reopened = LogSegment(tmp_path, 0, index_interval_bytes=100)
    seen: list[int] = []
    assert reopened.recover(lambda h: seen.append(h.base_offset)) == 40
    assert reopened.size == good_size == (tmp_path / "00000000000000000000.log").stat().st_size
    assert seen == list(range(0, 20, 2))
    assert reopened.next_offset == 20
    assert len(reopened.offset_index) == entries
    reopened.offset_index.sanity_check(reopened.size)
    reopened.close()


def test_recover_stops_at_crc_mismatch(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0)
    positions = _fill(segment, 5)
    segment.close()
    path = tmp_path / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[positions[3] + 70] ^= 0x01  # a record byte of the 4th batch
    path.write_bytes(data)
    reopened = LogSegment(tmp_path, 0)
    assert reopened.recover() == len(data) - positions[3]
    assert reopened.next_offset == 6
    reopened.close()


def test_should_roll_by_size_and_time(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, now_ms=0)
    common = {"incoming_last_offset": 10, "now_ms": 0, "segment_ms": 1000}
    assert not segment.should_roll(incoming_bytes=10**9, incoming_max_timestamp=BASE_TS, segment_bytes=100, **common)
    _fill(segment, 1)  # first batch max timestamp BASE_TS + 1
    size = segment.size
    assert not segment.should_roll(
        incoming_bytes=100, incoming_max_timestamp=BASE_TS, segment_bytes=size + 100, **common
    )
    assert segment.should_roll(
        incoming_bytes=101, incoming_max_timestamp=BASE_TS, segment_bytes=size + 100, **common
    )
    # Kafka's time rule: incoming batch's max timestamp minus the first batch's.
    assert not segment.should_roll(
        incoming_bytes=1, incoming_max_timestamp=BASE_TS + 1001, segment_bytes=10**9, **common
    )
    assert segment.should_roll(
        incoming_bytes=1, incoming_max_timestamp=BASE_TS + 1002, segment_bytes=10**9, **common
    )
    segment.close()


def test_load_after_clean_close_finds_end_and_max_timestamp(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 7, index_interval_bytes=150)
    _fill(segment, 9)
    end, max_ts = segment.next_offset, segment.max_timestamp
    segment.on_become_inactive()
    segment.close()
    again = LogSegment(tmp_path, 7, index_interval_bytes=150)
    again.load()
    assert (again.next_offset, again.max_timestamp) == (end, max_ts)
    found = again.find_offset_by_timestamp(BASE_TS + 41)
    assert found is not None and found.header.base_offset == 7 + 8
    assert again.find_offset_by_timestamp(max_ts + 1) is None
    again.close()


def test_delete_keeps_handed_out_slices_readable(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0)
    _fill(segment, 2)
    piece = segment.read(0, 10**6)
    assert piece is not None
    expected = piece.read()
    segment.delete()
    assert list(tmp_path.iterdir()) == []
    assert piece.read() == expected


def _segment_of(tmp_path: Path, ts: int) -> LogSegment:
    tmp_path.mkdir(exist_ok=True)
    segment = LogSegment(tmp_path, 0)
    buf = _stamped(build_batch(1, ts=ts), 0)
    segment.append(buf, [read_batch_header(buf)])
    return segment


def test_largest_timestamp_is_the_records_or_else_the_file_mtime(tmp_path: Path) -> None:
    epoch_start = _segment_of(tmp_path / "zero", 0)  # timestamp 0 is a timestamp
    assert epoch_start.largest_timestamp() == 0
    epoch_start.close()
    untimed = _segment_of(tmp_path / "none", -1)  # NO_TIMESTAMP: retention uses the file time
    os.utime(untimed.log_path, (1_600_000_000.5, 1_600_000_000.5))
    assert untimed.largest_timestamp() == 1_600_000_000_500
    untimed.close()


def test_delete_is_idempotent_and_close_after_it_is_harmless(tmp_path: Path) -> None:
    segment = _segment_of(tmp_path, BASE_TS)
    segment.delete()
    segment.close()
    segment.delete()
    assert list(tmp_path.iterdir()) == []


def test_recovery_rebuilds_the_indexes_the_appends_wrote(tmp_path: Path) -> None:
    size = len(build_batch(2, value_size=100))
    segment = LogSegment(tmp_path, 0, index_interval_bytes=size)  # an entry every other batch
    _fill(segment, 5)
    segment.close()
    written = (segment.offset_index.path.read_bytes(), segment.time_index.path.read_bytes())
    assert len(written[0]) == 2 * 8  # entries at the third and fifth batch
    again = LogSegment(tmp_path, 0, index_interval_bytes=size)
    assert again.recover() == 0
    again.close()
    assert (again.offset_index.path.read_bytes(), again.time_index.path.read_bytes()) == written


def test_recovery_of_untimed_batches_keeps_the_base_as_offset_of_max_timestamp(tmp_path: Path) -> None:
    segment = _segment_of(tmp_path, -1)
    assert segment.recover() == 0
    assert (segment.max_timestamp, segment.offset_of_max_timestamp) == (-1, 0)
    segment.close()


def _empty_batch(base_offset: int) -> bytearray:
    """A batch with no records (61 bytes): what Kafka's log cleaner keeps of a batch whose
    records it removed, to retain the producer's sequence state (DefaultRecordBatch)."""
    buf = bytearray(build_batch(1)[:RECORD_BATCH_OVERHEAD])
    struct.pack_into(">i", buf, 8, RECORD_BATCH_OVERHEAD - 12)  # batch length
    struct.pack_into(">i", buf, 57, 0)  # records count
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    set_base_offset(buf, 0, base_offset)
    return buf


def test_recovery_keeps_an_empty_batch_at_the_end_of_the_file(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0)
    _fill(segment, 1)  # offsets 0-1
    empty = _empty_batch(2)
    segment.append(empty, [validate_batch(empty, 0)])
    size = segment.size
    assert segment.recover() == 0
    assert (segment.size, segment.next_offset) == (size, 3)
    segment.close()


# -- tests that bite: truncation, index bookkeeping, short writes, flushing, rolls -----------


def _append(segment: LogSegment, data: bytes, base_offset: int) -> int:
    """Append one batch at ``base_offset``; returns its file position."""
    buf = _stamped(data, base_offset)
    position = segment.size
    segment.append(buf, [read_batch_header(buf)])
    return position


def test_truncate_to_cuts_whole_batches_from_the_one_holding_the_offset_on(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=100)
    positions = _fill(segment, 5)  # batches [0,1] [2,3] [4,5] [6,7] [8,9]
    end = segment.size
    # offset 5 lies inside batch [4,5]: that batch stays, as in Kafka (batches are not split)
    assert segment.truncate_to(5) == end - positions[3]
    assert segment.size == positions[3] == segment.log_path.stat().st_size
    assert (segment.next_offset, segment.max_timestamp, segment.offset_of_max_timestamp) == (6, BASE_TS + 21, 5)
    segment.offset_index.sanity_check(segment.size)
    # a batch starting exactly at the offset goes
    assert segment.truncate_to(4) == positions[3] - positions[2]
    assert (segment.size, segment.next_offset) == (positions[2], 4)
    assert segment.read(4, 10_000) is None
    # appends continue at the new end
    _fill(segment, 1)
    piece = segment.read(4, 10_000)
    assert piece is not None and piece.position == positions[2]
    assert read_batch_header(piece.read()).base_offset == 4
    segment.close()


def test_truncate_to_an_offset_at_or_past_the_end_removes_nothing(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=0)  # an index entry per batch
    _fill(segment, 3)  # last batch [4,5]
    size, entries = segment.size, len(segment.offset_index)
    assert segment.truncate_to(6) == 0  # no batch at or after 6
    assert segment.truncate_to(5) == 0  # inside the last batch, which stays whole
    assert (segment.size, segment.next_offset, len(segment.offset_index)) == (size, 6, entries)
    segment.close()


def test_truncate_to_the_base_offset_empties_the_segment_and_forgets_its_first_timestamp(
    tmp_path: Path,
) -> None:
    segment = LogSegment(tmp_path, 10)
    _append(segment, build_batch(2, ts=BASE_TS), 10)
    assert segment.first_batch_timestamp == BASE_TS + 1
    removed = segment.size
    assert segment.truncate_to(10) == removed
    assert (segment.size, segment.next_offset, segment.max_timestamp) == (0, 10, -1)
    _append(segment, build_batch(1, ts=BASE_TS + 500), 10)
    assert segment.first_batch_timestamp == BASE_TS + 500  # time rolls count from the new batch
    segment.close()


def test_truncate_to_keeps_the_first_batch_holding_the_max_timestamp(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0)
    for base in (0, 1, 2):
        _append(segment, build_batch(1, ts=BASE_TS), base)  # equal timestamps
    segment.truncate_to(2)
    assert (segment.max_timestamp, segment.offset_of_max_timestamp) == (BASE_TS, 0)
    segment.close()


def test_index_spacing_restarts_after_a_truncation(tmp_path: Path) -> None:
    size = len(build_batch(2, value_size=100))
    segment = LogSegment(tmp_path, 0, index_interval_bytes=size)  # an entry every other batch
    _fill(segment, 2)
    segment.truncate_to(2)  # one batch left, no entries
    assert len(segment.offset_index) == 0
    _fill(segment, 2)  # counts from zero again: the batch after next gets the entry
    assert len(segment.offset_index) == 0
    _fill(segment, 1)
    assert len(segment.offset_index) == 1
    segment.close()


def test_an_index_entry_is_due_once_more_than_the_interval_was_written(tmp_path: Path) -> None:
    size = len(build_batch(2, value_size=100))
    segment = LogSegment(tmp_path, 0, index_interval_bytes=size - 1)  # each whole batch is more
    _fill(segment, 3)
    assert len(segment.offset_index) == 2  # entries at the second and third batch
    segment.close()


def test_the_default_index_interval_is_4096_bytes(tmp_path: Path) -> None:
    first = build_batch(1, value_size=4025)
    assert len(first) == 4097  # just over Kafka's default index.interval.bytes
    segment = LogSegment(tmp_path, 0)
    _append(segment, first, 0)
    _append(segment, build_batch(1), 1)
    assert segment.offset_index.lookup(1) == (1, 4097)
    segment.close()


def test_the_first_batch_timestamp_is_the_first_batchs_even_after_a_reopen(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0)
    _append(segment, build_batch(1, ts=BASE_TS), 0)
    _append(segment, build_batch(1, ts=BASE_TS + 50), 1)
    assert segment.first_batch_timestamp == BASE_TS
    segment.close()
    again = LogSegment(tmp_path, 0)
    again.load()
    _append(again, build_batch(1, ts=BASE_TS + 90), 2)  # not the first batch of the file
    assert again.first_batch_timestamp == BASE_TS
    again.close()


def test_offset_of_max_timestamp_is_the_first_batch_with_that_timestamp(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0)
    _append(segment, build_batch(2, ts=BASE_TS, ts_step=0), 0)
    _append(segment, build_batch(1, ts=BASE_TS), 2)
    assert (segment.max_timestamp, segment.offset_of_max_timestamp) == (BASE_TS, 1)
    segment.close()
    again = LogSegment(tmp_path, 0)
    again.load()  # no time index entries: the batches are scanned
    assert (again.max_timestamp, again.offset_of_max_timestamp) == (BASE_TS, 1)
    again.close()


class _ShortWrites:
    """os.pwrite that writes at most ``chunk`` bytes per call, then optionally fails."""

    def __init__(self, chunk: int, fail_after: int | None = None) -> None:
        self.real = os.pwrite
        self.chunk, self.fail_after, self.calls = chunk, fail_after, 0

    def __call__(self, fd: int, data: bytes, position: int) -> int:
        assert len(data) > 0, "a write of nothing"
        self.calls += 1
        assert self.calls < 1000, "the write makes no progress"
        if self.fail_after is not None and self.calls > self.fail_after:
            raise OSError(28, "No space left on device")
        return self.real(fd, bytes(data[: self.chunk]), position)


def test_a_short_disk_write_is_completed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    segment = LogSegment(tmp_path, 0)
    _fill(segment, 1)
    data = _stamped(build_batch(3), 2)
    monkeypatch.setattr(os, "pwrite", _ShortWrites(50))
    _append(segment, data, 2)
    monkeypatch.undo()
    assert segment.log_path.read_bytes()[-len(data) :] == data
    assert segment.recover() == 0 and segment.next_offset == 5
    segment.close()


def test_a_failed_write_leaves_no_partial_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    segment = LogSegment(tmp_path, 0)
    _fill(segment, 1)
    size = segment.size
    monkeypatch.setattr(os, "pwrite", _ShortWrites(50, fail_after=2))
    with pytest.raises(OSError, match="No space"):
        _append(segment, build_batch(3), 2)
    monkeypatch.undo()
    assert segment.log_path.stat().st_size == segment.size == size
    segment.close()


def _count_log_fsyncs(monkeypatch: pytest.MonkeyPatch, log_path: Path) -> list[int]:
    """Record the fsyncs of ``log_path`` (by inode)."""
    calls: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        if os.fstat(fd).st_ino == log_path.stat().st_ino:
            calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def test_flush_fsyncs_the_log_only_when_something_is_unflushed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    segment = LogSegment(tmp_path, 0)
    calls = _count_log_fsyncs(monkeypatch, segment.log_path)
    segment.flush()
    assert calls == []  # a new, empty segment has nothing to sync
    _fill(segment, 1)
    segment.flush()
    segment.flush()
    assert len(calls) == 1  # the append, once
    segment.close()
    again = LogSegment(tmp_path, 0)
    again.load()  # a clean shutdown left everything synced
    again.flush()
    assert len(calls) == 1
    again.recover()  # rebuilt indexes (and maybe a cut file) must reach the disk
    again.flush()
    assert len(calls) == 2
    again.close()


@pytest.mark.parametrize("missing", [".index", ".timeindex"])
def test_a_missing_index_file_is_detected_and_rebuilt(tmp_path: Path, missing: str) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=100)
    _fill(segment, 5)
    entries = len(segment.offset_index)
    segment.close()
    assert LogSegment(tmp_path, 0).load_or_recover() is False  # both present: trusted
    (tmp_path / ("00000000000000000000" + missing)).unlink()
    again = LogSegment(tmp_path, 0, index_interval_bytes=100)
    with pytest.raises(CorruptIndexError, match=r"index files of .*00000000000000000000\.log are missing"):
        again.load()
    assert again.load_or_recover() is True
    assert len(again.offset_index) == entries
    again.close()


def test_load_reports_the_bytes_after_the_last_whole_batch(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0)
    _fill(segment, 2)
    good = segment.size
    segment.close()
    with open(segment.log_path, "ab") as f:
        f.write(build_batch(3, value_size=100)[:100])  # a whole header, a partial batch
    again = LogSegment(tmp_path, 0)
    with pytest.raises(CorruptRecordError, match=rf"100 bytes after the last whole batch at byte {good}$"):
        again.load()
    again.close()


def test_load_rejects_an_impossible_batch_length(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0)
    positions = _fill(segment, 2)
    segment.close()
    data = bytearray(segment.log_path.read_bytes())
    struct.pack_into(">i", data, positions[1] + 8, 0)
    segment.log_path.write_bytes(data)
    again = LogSegment(tmp_path, 0)
    with pytest.raises(CorruptRecordError, match=rf"impossible batch length 0 at byte {positions[1]}"):
        again.load()
    again.close()


def test_a_read_finds_an_empty_batch_at_the_end_of_the_segment(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=0)  # the empty batch gets an entry
    _fill(segment, 1)
    empty = _empty_batch(2)
    position = _append(segment, empty, 2)
    piece = segment.read(2, 1000)
    assert piece is not None and (piece.position, piece.read()) == (position, bytes(empty))
    segment.close()
    (tmp_path / "only").mkdir()
    only_empty = LogSegment(tmp_path / "only", 0)  # a 61-byte segment
    _append(only_empty, _empty_batch(0), 0)
    assert only_empty.read(0, 1000) is not None
    only_empty.close()


def test_a_read_far_past_an_index_entry_finds_the_right_batch(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=0)
    positions = _fill(segment, 2)  # the second batch gets the only entry
    segment.close()
    again = LogSegment(tmp_path, 0, index_interval_bytes=10**9)  # index.interval.bytes raised
    again.load()
    positions += _fill(again, 20)
    assert len(again.offset_index) == 1
    piece = again.read(30, 10**6)
    assert piece is not None and piece.position == positions[15]
    assert read_batch_header(piece.read()).base_offset == 30
    again.close()


def test_a_read_is_cut_at_max_bytes_unless_asked_for_a_whole_message(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0)
    _fill(segment, 1)
    piece = segment.read(0, 10)
    assert piece is not None and piece.size == 10
    nothing = segment.read(0, 0)
    assert nothing is not None and nothing.size == 0
    segment.close()


def test_a_closed_segments_slice_is_sent_whole_then_lets_its_file_go(tmp_path: Path) -> None:
    # A Fetch response still being sent when its segment is closed (topic deleted, broker
    # stopping) must not see its descriptor closed under it: the slice keeps it until done.
    segment = LogSegment(tmp_path, 0, files=HandleCache(4))
    _fill(segment, 1)
    piece = segment.read(0, 100)
    assert piece is not None
    expected = piece.read()
    fd = piece.fileno()
    segment.close()
    assert piece.read() == expected
    del piece
    with pytest.raises(OSError):
        os.fstat(fd)  # the last user gone, the descriptor is closed


def test_the_log_file_is_created_readable_by_all_writable_by_the_owner(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        segment = LogSegment(tmp_path, 0)
    finally:
        os.umask(old)
    assert segment.log_path.stat().st_mode & 0o777 == 0o644
    segment.close()


def test_on_become_inactive_records_a_max_timestamp_of_zero(tmp_path: Path) -> None:
    segment = _segment_of(tmp_path, 0)
    assert len(segment.time_index) == 0
    segment.on_become_inactive()
    assert segment.time_index.last_entry == (0, 0)
    segment.close()


_ROLL = {"incoming_bytes": 1, "segment_bytes": 10**9, "segment_ms": 1000}


def test_roll_rule_for_relative_offsets_holds_for_a_nonzero_base(tmp_path: Path) -> None:
    base = 5_000_000_000
    segment = LogSegment(tmp_path, base)
    common = {"incoming_max_timestamp": BASE_TS, "now_ms": 0, **_ROLL}
    for _ in range(2):  # empty, then holding a batch
        assert not segment.should_roll(incoming_last_offset=base + 0x7FFFFFFF, **common)
        assert segment.should_roll(incoming_last_offset=base + 0x80000000, **common)
        _append(segment, build_batch(1), base)
    segment.close()


def test_time_roll_of_a_first_batch_at_timestamp_zero_uses_the_timestamps(tmp_path: Path) -> None:
    segment = _segment_of(tmp_path, 0)  # created at 0 too
    assert segment.should_roll(incoming_max_timestamp=1001, incoming_last_offset=1, now_ms=0, **_ROLL)
    segment.close()


def test_time_roll_of_an_untimed_first_batch_uses_the_clock_since_creation(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, now_ms=5000)
    _append(segment, build_batch(1, ts=-1, ts_step=0), 0)
    common = {"incoming_last_offset": 1, **_ROLL}
    assert not segment.should_roll(incoming_max_timestamp=BASE_TS, now_ms=6000, **common)
    assert segment.should_roll(incoming_max_timestamp=BASE_TS, now_ms=6001, **common)
    segment.close()


@pytest.mark.parametrize("max_index_bytes, entries", [(16, 2), (20, 2), (4, 1)])
def test_a_full_offset_index_rolls_the_segment(tmp_path: Path, max_index_bytes: int, entries: int) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=0, max_index_bytes=max_index_bytes)
    common = {"incoming_max_timestamp": BASE_TS, "incoming_last_offset": 100, "now_ms": 0, **_ROLL}
    for base in range(entries + 1):  # equal timestamps: the time index keeps one entry
        assert not segment.should_roll(**common)
        _append(segment, build_batch(1, ts=BASE_TS), base)
    assert (len(segment.offset_index), len(segment.time_index)) == (entries, 1)
    assert segment.should_roll(**common)
    segment.close()


def _recovered_bases(tmp_path: Path, base: int, bases: list[int], count: int = 2) -> tuple[list[int], int]:
    tmp_path.mkdir(exist_ok=True)
    segment = LogSegment(tmp_path, base)
    for b in bases:
        _append(segment, build_batch(count), b)
    seen: list[int] = []
    truncated = segment.recover(lambda h: seen.append(h.base_offset))
    segment.close()
    return seen, truncated


def test_recovery_cuts_at_a_batch_whose_offsets_go_backwards(tmp_path: Path) -> None:
    size = len(build_batch(2))
    assert _recovered_bases(tmp_path, 0, [0, 2, 1, 5]) == ([0, 2], 2 * size)


def test_recovery_keeps_offsets_up_to_the_int32_relative_limit(tmp_path: Path) -> None:
    base, limit = 100, 0x7FFFFFFF
    size = len(build_batch(2))
    # last offset base + limit fits; base + limit + 1 would not
    assert _recovered_bases(tmp_path / "a", base, [base, base + limit - 1]) == ([base, base + limit - 1], 0)
    assert _recovered_bases(tmp_path / "b", base, [base, base + limit]) == ([base], size)


def test_recovery_keeps_a_batch_larger_than_8_mib(tmp_path: Path) -> None:
    # max.message.bytes may be raised that far; the batch length is a 32-bit field
    segment = LogSegment(tmp_path, 0)
    _append(segment, build_batch(1, value_size=9 * 1024 * 1024), 0)
    assert segment.recover() == 0 and segment.next_offset == 1
    segment.close()
