from __future__ import annotations

import os
import stat
import struct
from pathlib import Path

import pytest

from samsa.broker.log.index import CorruptIndexError, OffsetIndex, TimeIndex


def test_offset_index_lookup_is_greatest_entry_at_or_below(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000100.index", 100)
    assert index.lookup(150) == (100, 0)  # empty: base offset, position 0
    index.append(110, 4000)
    index.append(120, 8000)
    index.append(130, 12000)
    assert index.lookup(99) == (100, 0)
    assert index.lookup(110) == (110, 4000)
    assert index.lookup(119) == (110, 4000)
    assert index.lookup(125) == (120, 8000)
    assert index.lookup(10**9) == (130, 12000)
    assert index.last_offset == 130


def test_offset_index_file_format_and_reload(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(path, 100)
    index.append(105, 300)
    index.append(104, 400)  # not increasing: ignored
    index.close()
    assert path.read_bytes() == (5).to_bytes(4, "big") + (300).to_bytes(4, "big")
    again = OffsetIndex(path, 100)
    assert again.lookup(200) == (105, 300)
    again.sanity_check(log_size=1000)
    again.close()


def test_offset_index_truncate(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "0.index", 0)
    for i in range(1, 6):
        index.append(i * 10, i * 100)
    index.truncate_to(30)
    assert index.lookup(1000) == (20, 200)
    assert index.size_bytes == 16
    assert (tmp_path / "0.index").stat().st_size == 16
    index.close()


def test_offset_index_sanity_check_catches_damage(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    index = OffsetIndex(path, 0)
    index.append(10, 500)
    index.close()
    with open(path, "ab") as f:
        f.write(b"\x01\x02\x03")  # torn entry
    damaged = OffsetIndex(path, 0)
    with pytest.raises(CorruptIndexError, match="multiple of the entry size"):
        damaged.sanity_check(log_size=1000)
    damaged.close()
    beyond = OffsetIndex(path, 0)
    with pytest.raises(CorruptIndexError, match="outside"):
        beyond.sanity_check(log_size=100)  # position 500 lies past a 100-byte log
    beyond.close()


def test_time_index_lookup_before_and_monotonic_entries(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "00000000000000000050.timeindex", 50)
    assert index.last_entry == (-1, 50)
    index.maybe_append(1000, 60)
    index.maybe_append(1000, 65)  # same timestamp: ignored
    index.maybe_append(900, 70)  # older: ignored
    index.maybe_append(2000, 80)
    assert len(index) == 2
    assert index.lookup_before(1000) == (-1, 50)
    assert index.lookup_before(1001) == (1000, 60)
    assert index.lookup_before(5000) == (2000, 80)
    assert index.last_entry == (2000, 80)
    index.close()
    data = (tmp_path / "00000000000000000050.timeindex").read_bytes()
    assert data[:12] == (1000).to_bytes(8, "big") + (10).to_bytes(4, "big")
    reloaded = TimeIndex(tmp_path / "00000000000000000050.timeindex", 50)
    reloaded.sanity_check(next_offset=81)
    with pytest.raises(CorruptIndexError):
        reloaded.sanity_check(next_offset=80)
    reloaded.truncate_to(80)
    assert reloaded.last_entry == (1000, 60)
    reloaded.close()


def test_relative_offsets_must_fit_int32(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "0.index", 0)
    with pytest.raises(ValueError):
        index.append(1 << 31, 10)
    index.close()


def test_offset_index_ignores_an_entry_not_past_the_last(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000100.index", 100)
    index.append(105, 300)
    index.append(105, 400)  # same offset
    index.append(106, 300)  # same position
    assert len(index) == 1 and index.lookup(200) == (105, 300)
    index.close()


def test_truncate_to_is_relative_to_the_base_offset(tmp_path: Path) -> None:
    offsets = OffsetIndex(tmp_path / "00000000000000000100.index", 100)
    times = TimeIndex(tmp_path / "00000000000000000100.timeindex", 100)
    for i, offset in enumerate((100, 105, 110)):
        offsets.append(offset, i * 100)
        times.maybe_append(1000 + i, offset)
    offsets.truncate_to(105)
    assert len(offsets) == 1 and offsets.lookup(200) == (100, 0)
    times.truncate_to(110)  # exactly the last entry goes
    assert len(times) == 2 and times.last_entry == (1001, 105)
    offsets.close()
    times.close()


def test_index_delete_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    index = OffsetIndex(path, 0)
    index.append(1, 10)
    index.delete()
    index.close()
    index.delete()
    assert not path.exists()


def _offset_index_file(path: Path, entries: list[tuple[int, int]]) -> OffsetIndex:
    """An offset index opened from a file holding ``entries`` (relative offset, position) as a
    crash or a bad disk may leave them (``append`` refuses what is not increasing)."""
    path.write_bytes(b"".join(struct.pack(">ii", k, v) for k, v in entries))
    return OffsetIndex(path, 0)


def _time_index_file(path: Path, entries: list[tuple[int, int]]) -> TimeIndex:
    path.write_bytes(b"".join(struct.pack(">qi", t, o) for t, o in entries))
    return TimeIndex(path, 0)


@pytest.mark.parametrize(
    "entries",
    [[(10, 100), (10, 200)], [(10, 100), (20, 100)], [(10, 100), (5, 200)], [(10, 100), (20, 50)]],
    ids=["same-offset", "same-position", "offset-goes-back", "position-goes-back"],
)
def test_offset_index_sanity_check_wants_both_columns_strictly_increasing(
    tmp_path: Path, entries: list[tuple[int, int]]
) -> None:
    index = _offset_index_file(tmp_path / "0.index", entries)
    with pytest.raises(CorruptIndexError, match="entry 1 is not increasing"):
        index.sanity_check(log_size=1000)
    index.close()


def test_offset_index_sanity_check_accepts_an_entry_for_the_first_batch(tmp_path: Path) -> None:
    # With index.interval.bytes=0 a one-record first batch is indexed as (base offset, byte 0).
    index = _offset_index_file(tmp_path / "0.index", [(0, 0), (5, 100)])
    index.sanity_check(log_size=101)
    index.close()


@pytest.mark.parametrize(
    "entries", [[(-1, 100)], [(5, -1)], [(5, 100)]], ids=["negative-offset", "negative-position", "at-log-end"]
)
def test_offset_index_sanity_check_rejects_entries_outside_the_log(
    tmp_path: Path, entries: list[tuple[int, int]]
) -> None:
    index = _offset_index_file(tmp_path / "0.index", entries)
    with pytest.raises(CorruptIndexError, match="outside the 100-byte log"):
        index.sanity_check(log_size=100)  # a batch at byte 100 would lie past the log's end
    index.close()


@pytest.mark.parametrize(
    "entries",
    [[(1000, 10), (1000, 20)], [(1000, 10), (900, 20)], [(1000, 20), (2000, 10)]],
    ids=["same-timestamp", "timestamp-goes-back", "offset-goes-back"],
)
def test_time_index_sanity_check_wants_increasing_entries(
    tmp_path: Path, entries: list[tuple[int, int]]
) -> None:
    index = _time_index_file(tmp_path / "0.timeindex", entries)
    with pytest.raises(CorruptIndexError, match="entry 1 is not increasing"):
        index.sanity_check(next_offset=100)
    index.close()


def test_time_index_takes_a_newer_timestamp_at_the_same_offset(tmp_path: Path) -> None:
    # Kafka's TimeIndex.maybeAppend appends any larger timestamp, also for the last entry's
    # offset; such a file is sane.
    path = tmp_path / "0.timeindex"
    index = TimeIndex(path, 0)
    index.maybe_append(1000, 60)
    index.maybe_append(2000, 60)
    assert len(index) == 2 and index.last_entry == (2000, 60)
    index.close()
    reloaded = TimeIndex(path, 0)
    reloaded.sanity_check(next_offset=61)
    reloaded.close()


def test_time_index_sanity_check_accepts_an_entry_at_the_base_offset(tmp_path: Path) -> None:
    index = _time_index_file(tmp_path / "0.timeindex", [(1000, 0)])  # the first record
    index.sanity_check(next_offset=1)
    index.close()


def test_time_index_sanity_check_says_what_is_wrong(tmp_path: Path) -> None:
    path = tmp_path / "0.timeindex"
    index = _time_index_file(path, [(1000, 0), (2000, 80)])
    with pytest.raises(CorruptIndexError, match="past the log end offset 80"):
        index.sanity_check(next_offset=80)
    index.close()
    with open(path, "ab") as f:
        f.write(b"\x01\x02\x03")  # torn entry
    torn = TimeIndex(path, 0)
    with pytest.raises(CorruptIndexError, match="27 is not a multiple of the entry size 12"):
        torn.sanity_check(next_offset=100)
    torn.close()


def test_index_files_are_created_rw_r_r(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        index = OffsetIndex(tmp_path / "0.index", 0)
        index.close()  # the first write creates the file
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "0.index").stat().st_mode) == 0o644


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_an_index_holds_no_descriptor_between_writes(tmp_path: Path) -> None:
    before = _open_descriptors()
    indexes = [OffsetIndex(tmp_path / f"{i}.index", 0) for i in range(50)]
    for index in indexes:
        index.append(10, 100)
        index.flush()
    assert _open_descriptors() == before
    for index in indexes:
        index.close()
    again = OffsetIndex(tmp_path / "7.index", 0)
    assert again.lookup(10) == (10, 100) and _open_descriptors() == before


def test_the_largest_relative_offset_is_int32_max(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000100.index", 100)
    index.append(100 + 0x7FFFFFFF, 10)
    assert index.lookup(10**12) == (100 + 0x7FFFFFFF, 10)
    with pytest.raises(ValueError, match="offset 2147483748 is not representable relative to base offset 100"):
        index.append(100 + 0x7FFFFFFF + 1, 20)
    index.close()


def test_closing_an_index_twice_touches_no_descriptor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = OffsetIndex(tmp_path / "0.index", 0)
    index.append(1, 10)
    index.close()

    def untouchable(*args: object) -> None:
        raise AssertionError(f"a closed index used a file descriptor: {args}")

    for name in ("close", "ftruncate", "pwrite", "fsync"):
        monkeypatch.setattr(os, name, untouchable)
    index.close()
    monkeypatch.undo()
    assert (tmp_path / "0.index").stat().st_size == 8
