from __future__ import annotations

import os
from pathlib import Path

from samsa.broker.log.segment import LogSegment
from samsa.records import read_batch_header, set_base_offset, validate_batch

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
