from __future__ import annotations

import os
import struct
from pathlib import Path

from crc32c import crc32c

from samsa.broker.log.segment import LogSegment
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
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000042.index",
        "00000000000000000042.log",
        "00000000000000000042.timeindex",
    ]
    segment.close()


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
