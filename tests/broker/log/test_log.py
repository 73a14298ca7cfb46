from __future__ import annotations

import pickle
import time
from pathlib import Path

import pytest

from samsa.broker.log import FileSlice, IsolationLevel, Log, LogConfig
from samsa.broker.log.log import RecordTimestampError, _place_in_bytearray
from samsa.broker.log.segment import LogSegment
from samsa.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaError,
    KafkaStorageError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    UnsupportedCompressionTypeError,
)
from samsa.records import (
    RECORD_BATCH_OVERHEAD,
    Compression,
    ControlRecordType,
    MemoryRecords,
    TimestampType,
    build_control_batch,
    read_batch_header,
    rewrite_crc,
    set_base_offset,
    validate_batch,
)
from samsa.records.batch_header import (
    ATTRIBUTES_OFFSET,
    LAST_OFFSET_DELTA_OFFSET,
    RECORDS_COUNT_OFFSET,
)

from .conftest import BASE_TS, build_batch

NOW = BASE_TS + 10_000


def open_log(path: Path, **overrides: object) -> Log:
    topic = {k.replace("_", "."): str(v) for k, v in overrides.items()}
    return Log(path / "t-0", LogConfig.from_configs(None, topic), topic="t", partition=0, now_ms=NOW)


def records_of(data: FileSlice | bytes) -> list[tuple[int, bytes | None]]:
    raw = data.read() if isinstance(data, FileSlice) else data
    return [(r.offset, r.value) for batch in MemoryRecords(raw).batches() for r in batch]


def read_all(log: Log, start: int = 0) -> list[tuple[int, bytes | None]]:
    """Consume the log from ``start`` as a client would, one fetch per call."""
    out: list[tuple[int, bytes | None]] = []
    offset = start
    while offset < log.high_watermark:
        fetched = log.read(offset, 300).records
        got = [r for r in records_of(fetched) if r[0] >= offset]
        assert got, f"no progress at {offset}"
        out.extend(got)
        offset = got[-1][0] + 1
    return out


def test_append_assigns_offsets_and_stamps_epoch_without_changing_crc(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    first = log.append_as_leader(build_batch(3), leader_epoch=5, now_ms=NOW)
    second = log.append_as_leader(build_batch(2), leader_epoch=5, now_ms=NOW)
    assert (first.base_offset, first.last_offset, first.log_append_time_ms) == (0, 2, -1)
    assert (second.base_offset, second.last_offset, second.duplicate) == (3, 4, False)
    assert log.log_end_offset == log.high_watermark == 5
    data = log.read(0, 10**6)
    assert data.high_watermark == 5 and data.log_start_offset == 0 and data.last_stable_offset == 5
    raw = data.records.read()
    h1 = validate_batch(raw, 0)  # CRC still valid after the in-place stamps
    h2 = validate_batch(raw, h1.size)
    assert (h1.base_offset, h1.partition_leader_epoch, h2.base_offset) == (0, 5, 3)
    assert records_of(raw) == [(i, v) for i, v in enumerate([b"v0-xxxxxxx", b"v1-xxxxxxx", b"v2-xxxxxxx", b"v0-xxxxxxx", b"v1-xxxxxxx"])]
    log.close()


def test_a_writable_view_is_stamped_in_place_and_bytes_are_copied(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    sent = build_batch(3, compression=Compression.LZ4)
    log.append_as_leader(sent, leader_epoch=2, now_ms=NOW)
    assert sent == build_batch(3, compression=Compression.LZ4)  # bytes: left as they were
    frame = bytearray(b"header" + build_batch(2))  # a produce request's own buffer
    view = memoryview(frame)[6:]
    result = log.append_as_leader(view, leader_epoch=2, now_ms=NOW)
    assert (result.base_offset, result.last_offset) == (3, 4)
    assert validate_batch(frame, 6).base_offset == 3  # stamped where it lay
    assert [offset for offset, _ in read_all(log)] == [0, 1, 2, 3, 4]
    log.close()


def test_place_in_bytearray_finds_where_a_writable_view_starts() -> None:
    frame = bytearray(range(200))
    view = memoryview(frame)
    for part in (view, view[7:], view[7:150][3:40], memoryview(view[90:])):
        place = _place_in_bytearray(part)
        assert place is not None and place[0] is frame
        assert frame[place[1]:place[1] + len(part)] == part
    readonly = memoryview(bytes(frame))
    assert _place_in_bytearray(readonly[5:]) is None  # bytes: the walk gets a copy
    assert _place_in_bytearray(view.toreadonly()[5:]) is None
    assert _place_in_bytearray(view[::2]) is None  # not contiguous
    assert _place_in_bytearray(view[5:5]) is None
    assert _place_in_bytearray(view.cast("H")[2:]) is None  # not bytes


def test_a_large_uncompressed_batch_in_a_frame_is_checked_as_a_copy_of_it_is(
        tmp_path: Path) -> None:
    # Past 64 KiB the record walk reads a produce request's batch in the request's own
    # bytearray (no copy); what it accepts and refuses stays what it does for a copy.
    good = build_batch(1000, value_size=100)
    assert len(good) > 64 * 1024
    count = 1001  # one record more declared than the batch holds
    bad = _patched(_patched(good, LAST_OFFSET_DELTA_OFFSET, (count - 1).to_bytes(4, "big")),
                   RECORDS_COUNT_OFFSET, count.to_bytes(4, "big"))
    messages = []
    for records in (bad, memoryview(bytearray(b"header" + bad))[6:]):
        log = open_log(tmp_path / str(len(messages)))
        with pytest.raises(InvalidRecordError) as raised:
            log.append_as_leader(records, leader_epoch=0, now_ms=NOW)
        messages.append(str(raised.value))
        assert log.log_end_offset == 0
        log.close()
    assert "declares 1001 records" in messages[0] and messages[0] == messages[1]
    log = open_log(tmp_path / "good")
    frame = bytearray(b"header" + good)
    result = log.append_as_leader(memoryview(frame)[6:], leader_epoch=0, now_ms=NOW)
    assert (result.base_offset, result.last_offset) == (0, 999)
    assert [offset for offset, _ in read_all(log)] == list(range(1000))
    log.close()


def test_several_batches_in_one_request(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    result = log.append_as_leader(build_batch(2) + build_batch(3), leader_epoch=0, now_ms=NOW)
    assert (result.base_offset, result.last_offset) == (0, 4)
    assert [o for o, _ in records_of(log.read(0, 10**6).records)] == [0, 1, 2, 3, 4]
    log.close()


def _with_byte(data: bytes, pos: int, value: int) -> bytes:
    buf = bytearray(data)
    buf[pos] = value
    return bytes(buf)


@pytest.mark.parametrize(
    ("records", "error", "match"),
    [
        (_with_byte(build_batch(2), 16, 1), InvalidRecordError, "magic 1"),
        (_with_byte(build_batch(2), 70, 0x55), CorruptRecordError, "CRC"),
        (build_batch(2)[:-3], CorruptRecordError, "truncated"),
        (build_control_batch(ControlRecordType.COMMIT, 7, 0, 0, BASE_TS), InvalidRecordError, "control"),
        (build_batch(2, pid=7, epoch=0, seq=-1), InvalidRecordError, "sequence"),
        (b"", InvalidRecordError, "no record batches"),
    ],
)
def test_validation_rejects_bad_batches_and_writes_nothing(
    tmp_path: Path, records: bytes, error: type[Exception], match: str
) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW)
    with pytest.raises(error, match=match):
        log.append_as_leader(records, leader_epoch=0, now_ms=NOW)
    assert log.log_end_offset == 1
    assert log.active_segment.size == len(build_batch(1))
    log.close()


def test_records_count_must_match_last_offset_delta(tmp_path: Path) -> None:
    buf = bytearray(build_batch(3))
    buf[57:61] = (5).to_bytes(4, "big")  # records count 5, last offset delta 2
    rewrite_crc(buf)
    log = open_log(tmp_path)
    with pytest.raises(InvalidRecordError, match="records count 5"):
        log.append_as_leader(bytes(buf), leader_epoch=0, now_ms=NOW)
    log.close()


def test_max_message_bytes_is_per_topic(tmp_path: Path) -> None:
    log = open_log(tmp_path, max_message_bytes=500)
    log.append_as_leader(build_batch(1, value_size=100), leader_epoch=0, now_ms=NOW)
    with pytest.raises(MessageTooLargeError, match="max.message.bytes=500"):
        log.append_as_leader(build_batch(1, value_size=600), leader_epoch=0, now_ms=NOW)
    log.close()


def test_log_append_time_topic_restamps_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    result = log.append_as_leader(build_batch(2), leader_epoch=0, now_ms=NOW)
    assert result.log_append_time_ms == NOW
    raw = log.read(0, 10**6).records.read()
    header = validate_batch(raw)
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME and header.max_timestamp == NOW
    assert [r.timestamp for b in MemoryRecords(raw).batches() for r in b] == [NOW, NOW]
    log.close()
    # The per-call override works on a CreateTime topic too.
    other = Log(tmp_path / "u-0", LogConfig(), topic="u", partition=0, now_ms=NOW)
    result = other.append_as_leader(
        build_batch(1), leader_epoch=0, now_ms=NOW, timestamp_type_override=TimestampType.LOG_APPEND_TIME
    )
    assert result.log_append_time_ms == NOW
    other.close()


def test_roll_by_size_and_read_across_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1000)
    expected = []
    for i in range(30):
        result = log.append_as_leader(build_batch(2, value_size=50), leader_epoch=0, now_ms=NOW)
        expected += [(result.base_offset, b"v0-".ljust(50, b"x")), (result.last_offset, b"v1-".ljust(50, b"x"))]
    assert len(log.segments) > 4
    assert all(s.size <= 1000 for s in log.segments)
    bases = [s.base_offset for s in log.segments]
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.log")) == [f"{b:020d}.log" for b in bases]
    assert read_all(log) == expected
    assert read_all(log, start=bases[2] + 1) == expected[bases[2] + 1 :]
    log.close()


def test_roll_by_time_uses_batch_timestamps(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_ms=60_000)
    log.append_as_leader(build_batch(1, ts=BASE_TS), leader_epoch=0, now_ms=NOW)
    log.append_as_leader(build_batch(1, ts=BASE_TS + 60_000), leader_epoch=0, now_ms=NOW)
    assert len(log.segments) == 1
    log.append_as_leader(build_batch(1, ts=BASE_TS + 60_001), leader_epoch=0, now_ms=NOW)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def _write_segments(directory: Path, layout: tuple[tuple[int, int], ...]) -> None:
    """One segment per (base offset, record count), written directly: offsets between them are gaps."""
    for base, count in layout:
        segment = LogSegment(directory, base)
        buf = bytearray(build_batch(count))
        set_base_offset(buf, 0, base)
        segment.append(buf, [read_batch_header(buf)])
        segment.close()


def test_read_spans_to_next_segment_over_an_offset_gap(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    directory.mkdir()
    _write_segments(directory, ((0, 5), (10, 3)))
    log = Log(directory, LogConfig(), topic="t", partition=0, now_ms=NOW)
    assert log.log_end_offset == 13
    data = log.read(6, 10**6)
    assert [o for o, _ in records_of(data.records)] == [10, 11, 12]
    log.close()


def test_min_one_message_returns_a_batch_larger_than_max_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(build_batch(1, value_size=100_000), leader_epoch=0, now_ms=NOW)
    log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW)
    whole = log.read(0, 1000, min_one_message=True).records
    assert len(whole) == log.segments[0].translate_offset(1).position  # exactly the first batch
    assert records_of(whole)[0][0] == 0
    assert len(log.read(0, 1000, min_one_message=False).records) == 1000
    log.close()


def test_fetch_offsets_out_of_range_and_at_end(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(build_batch(3), leader_epoch=0, now_ms=NOW)
    assert log.read(3, 1000).records == b""
    with pytest.raises(OffsetOutOfRangeError, match=r"\[0, 3\]"):
        log.read(4, 1000)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 1000)
    log.close()


def test_retention_by_time_moves_log_start_and_keeps_active_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=400, retention_ms=1000)
    for i in range(6):
        log.append_as_leader(build_batch(2, ts=BASE_TS + i * 1000, value_size=100), leader_epoch=0, now_ms=NOW)
    segments = [(s.base_offset, s.max_timestamp) for s in log.segments]
    assert len(segments) == 6
    # At BASE_TS + 3500: segments whose newest record is older than BASE_TS + 2500 go.
    assert log.apply_retention(BASE_TS + 3501) == 3
    assert log.log_start_offset == 6 == log.segments[0].base_offset
    with pytest.raises(OffsetOutOfRangeError):
        log.read(5, 1000)
    assert read_all(log, 6)[0][0] == 6
    assert log.apply_retention(BASE_TS + 10**9) == 2  # everything but the active segment
    assert len(log.segments) == 1 and log.log_start_offset == 10
    log.close()


def test_retention_by_size(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=400, retention_bytes=1000)
    for _ in range(8):
        log.append_as_leader(build_batch(2, value_size=100), leader_epoch=0, now_ms=NOW)
    total = log.size_bytes
    sizes = [s.size for s in log.segments]
    deleted = log.apply_retention(NOW)
    assert deleted >= 1
    # Kafka deletes a segment only while the rest still holds >= retention.bytes.
    assert log.size_bytes >= 1000 > log.size_bytes - log.segments[0].size
    assert log.size_bytes + sum(sizes[:deleted]) == total
    assert log.log_start_offset == log.segments[0].base_offset > 0
    log.close()


def test_delete_records_before(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=400)
    for _ in range(6):
        log.append_as_leader(build_batch(2, value_size=100), leader_epoch=0, now_ms=NOW)
    assert log.delete_records_before(5) == 5
    assert log.segments[0].base_offset <= 5 < log.segments[0].next_offset
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 1000)
    assert read_all(log, 5)[0][0] == 5
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(13)
    assert log.delete_records_before(-1) == 12  # -1 means the high watermark
    assert log.log_start_offset == log.log_end_offset == 12
    assert log.read(12, 1000).records == b""
    assert log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW).base_offset == 12
    log.close()


def test_offset_for_timestamp_finds_the_first_record_at_or_after(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=600, index_interval_bytes=100)
    for i in range(10):
        compression = Compression.GZIP if i % 2 else Compression.NONE
        log.append_as_leader(
            build_batch(4, ts=BASE_TS + i * 100, ts_step=10, value_size=50, compression=compression),
            leader_epoch=0,
            now_ms=NOW,
        )
    assert len(log.segments) > 2
    for i in range(10):
        for j in range(4):
            found = log.offset_for_timestamp(BASE_TS + i * 100 + j * 10)
            assert found is not None and (found.offset, found.timestamp) == (i * 4 + j, BASE_TS + i * 100 + j * 10)
        found = log.offset_for_timestamp(BASE_TS + i * 100 + 35)  # between batches: the next one
        if i < 9:
            assert found is not None and found.offset == (i + 1) * 4
    assert log.offset_for_timestamp(BASE_TS + 10_000) is None
    assert log.offset_for_timestamp(0) == (BASE_TS, 0, 0)
    assert log.offset_of_max_timestamp() == (BASE_TS + 930, 39, 0)
    log.close()


def test_end_offset_for_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert log.end_offset_for_epoch(0) == (-1, -1)
    log.append_as_leader(build_batch(2), leader_epoch=1, now_ms=NOW)
    log.append_as_leader(build_batch(3), leader_epoch=3, now_ms=NOW)
    log.append_as_leader(build_batch(1), leader_epoch=3, now_ms=NOW)
    assert log.end_offset_for_epoch(3) == (3, 6)
    assert log.end_offset_for_epoch(1) == (1, 2)
    assert log.end_offset_for_epoch(2) == (1, 2)
    assert log.end_offset_for_epoch(0) == (0, 0)
    assert log.end_offset_for_epoch(4) == (-1, -1)
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n3 2\n"
    log.close()


def test_flush_messages_one_advances_recovery_point_every_append(tmp_path: Path) -> None:
    log = open_log(tmp_path, flush_messages=1)
    log.append_as_leader(build_batch(2), leader_epoch=0, now_ms=NOW)
    assert log.recovery_point == 2
    log.close()
    lazy = Log(tmp_path / "u-0", LogConfig(), topic="u", partition=0, now_ms=NOW)
    lazy.append_as_leader(build_batch(2), leader_epoch=0, now_ms=NOW)
    assert lazy.recovery_point == 0
    lazy.flush()
    assert lazy.recovery_point == 2
    lazy.close()


def test_flush_ms_and_rolled_segments_are_flushed_by_maintain(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300, flush_ms=5000)
    for _ in range(3):
        log.append_as_leader(build_batch(2, value_size=100), leader_epoch=0, now_ms=NOW)
    log.maintain(NOW + 1)
    assert log.recovery_point == log.active_segment.base_offset > 0  # rolled segments flushed
    log.maintain(NOW + 5000)
    assert log.recovery_point == log.log_end_offset
    log.close()


def test_read_committed_stops_at_open_transaction_and_lists_aborted(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(build_batch(2), leader_epoch=0, now_ms=NOW)
    log.append_as_leader(build_batch(2, pid=9, epoch=0, seq=0, transactional=True), leader_epoch=0, now_ms=NOW)
    assert log.last_stable_offset == 2 and log.high_watermark == 4
    committed = log.read(0, 10**6, isolation=IsolationLevel.READ_COMMITTED)
    assert [o for o, _ in records_of(committed.records)] == [0, 1]
    assert committed.last_stable_offset == 2 and committed.aborted_transactions == []
    assert log.read(2, 10**6, isolation=IsolationLevel.READ_COMMITTED).records == b""
    marker = log.append_control_marker(producer_id=9, producer_epoch=0, commit=False, coordinator_epoch=1, leader_epoch=0, now_ms=NOW)
    assert marker.base_offset == 4 and log.last_stable_offset == 5
    fetched = log.read(0, 10**6, isolation=IsolationLevel.READ_COMMITTED)
    assert fetched.aborted_transactions is not None
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in fetched.aborted_transactions] == [(9, 2, 4)]
    batches = list(MemoryRecords(fetched.records.read()).batches())
    assert batches[-1].is_control and batches[-1].control_marker().is_abort
    log.close()


def test_concurrent_appends_and_reads(tmp_path: Path) -> None:
    import threading

    log = open_log(tmp_path, segment_bytes=2000)
    errors: list[Exception] = []
    done = threading.Event()

    def writer() -> None:
        try:
            for _ in range(40):
                log.append_as_leader(build_batch(2), leader_epoch=0, now_ms=NOW)
        except Exception as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    def reader() -> None:
        try:
            while not done.is_set():
                offset = 0
                while offset < log.high_watermark:
                    raw = log.read(offset, 500).records
                    data = raw.read() if isinstance(raw, FileSlice) else raw
                    batches = list(MemoryRecords(data).batches())  # CRC-checked
                    assert batches, offset
                    offset = batches[-1].next_offset
        except Exception as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    writers = [threading.Thread(target=writer) for _ in range(4)]
    readers = [threading.Thread(target=reader) for _ in range(2)]
    for t in writers + readers:
        t.start()
    for t in writers:
        t.join()
    done.set()
    for t in readers:
        t.join()
    assert not errors
    assert log.log_end_offset == 320
    assert [o for o, _ in read_all(log)] == list(range(320))
    log.close()


def _now() -> int:
    return time.time_ns() // 1_000_000


def test_the_broker_clock_is_used_when_no_time_is_given(tmp_path: Path) -> None:
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    before = _now()
    result = log.append_as_leader(build_batch(2), leader_epoch=0)
    marker = log.append_control_marker(producer_id=3, producer_epoch=0, commit=True,
                                       coordinator_epoch=0, leader_epoch=0)
    log.roll()
    after = _now()
    assert type(result.log_append_time_ms) is int
    assert before <= result.log_append_time_ms <= after
    header = validate_batch(log.read(marker.base_offset, 10**6).records.read(), 0)
    assert header.is_control and before <= header.max_timestamp <= after
    assert before <= log.active_segment.created_ms <= after
    log.flush()
    log.maintain(NOW)
    log.close()
    old = open_log(tmp_path / "old", retention_ms=1000)
    old.append_as_leader(build_batch(2), leader_epoch=0, now_ms=NOW)
    old.roll(now_ms=NOW)
    assert old.apply_retention() == 1  # records of BASE_TS are older than retention.ms now
    old.close()


def test_control_markers_are_create_time_batches_of_their_type(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    results = [
        log.append_control_marker(producer_id=3, producer_epoch=0, commit=commit,
                                  coordinator_epoch=0, leader_epoch=0, now_ms=NOW)
        for commit in (True, False)
    ]
    assert [r.log_append_time_ms for r in results] == [-1, -1]
    batches = list(MemoryRecords(log.read(0, 10**6).records.read()).batches())
    assert [b.control_marker().is_commit for b in batches] == [True, False]
    assert [b.header.timestamp_type for b in batches] == [TimestampType.CREATE_TIME] * 2
    log.close()


def test_roll_starts_the_new_segment_at_the_given_time(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW)
    log.roll(now_ms=NOW + 5)
    assert (len(log.segments), log.active_segment.created_ms) == (2, NOW + 5)
    log.close()


def _six_segments(tmp_path: Path, **overrides: object) -> Log:
    """Segments [0-1] [2-3] ... [10-11 active]; segment i's records at BASE_TS + i * 1000 (+1)."""
    log = open_log(tmp_path, segment_bytes=400, **overrides)
    for i in range(6):
        log.append_as_leader(build_batch(2, ts=BASE_TS + i * 1000, value_size=100), leader_epoch=0, now_ms=NOW)
    assert [s.base_offset for s in log.segments] == [0, 2, 4, 6, 8, 10]
    return log


def test_segments_below_a_restored_log_start_are_skipped_and_deleted(tmp_path: Path) -> None:
    # The log start comes back from its checkpoint at restart; segments wholly below it stay
    # on disk until retention runs (UnifiedLog.deleteLogStartOffsetBreachedSegments).
    _six_segments(tmp_path).close()
    log = Log(tmp_path / "t-0", LogConfig(), topic="t", partition=0, log_start_offset=6,
              clean_shutdown=True, now_ms=NOW)
    assert log.offset_for_timestamp(BASE_TS) == (BASE_TS + 3000, 6, 0)
    assert log.delete_records_before(6) == 6
    assert len(log.segments) == 6  # the log start did not move: nothing to do
    assert log.apply_retention(NOW) == 3
    assert [s.base_offset for s in log.segments] == [6, 8, 10]
    log.close()


def test_offset_for_timestamp_in_a_log_append_time_batch_cut_by_the_log_start(tmp_path: Path) -> None:
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    log.append_as_leader(build_batch(3), leader_epoch=0, now_ms=NOW)
    log.delete_records_before(1)
    assert log.offset_for_timestamp(0) == (NOW, 1, 0)
    log.close()


def test_offset_of_max_timestamp_earliest_segment_and_later_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=400)
    log.append_as_leader(build_batch(2, ts=BASE_TS, ts_step=50, value_size=100), leader_epoch=-1, now_ms=NOW)
    log.append_as_leader(build_batch(2, ts=BASE_TS, ts_step=50, value_size=100), leader_epoch=-1, now_ms=NOW)
    assert len(log.segments) == 2
    assert log.offset_of_max_timestamp() == (BASE_TS + 50, 1, -1)  # tie: the earlier segment
    other = Log(tmp_path / "u-0", LogConfig(), topic="u", partition=0, now_ms=NOW)
    other.append_as_leader(build_batch(2, ts=BASE_TS), leader_epoch=0, now_ms=NOW)
    other.append_as_leader(build_batch(2, ts=BASE_TS + 100), leader_epoch=0, now_ms=NOW)
    assert other.offset_of_max_timestamp() == (BASE_TS + 101, 3, 0)
    other.close()
    log.close()


def test_records_older_than_the_epoch_cache_have_no_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(build_batch(2, ts=BASE_TS), leader_epoch=0, now_ms=NOW)
    log.close()
    (tmp_path / "t-0" / "leader-epoch-checkpoint").unlink()
    log = open_log(tmp_path)
    log.append_as_leader(build_batch(2, ts=BASE_TS + 100), leader_epoch=2, now_ms=NOW)
    assert log.offset_for_timestamp(BASE_TS) == (BASE_TS, 0, -1)
    assert log.offset_for_timestamp(BASE_TS + 100) == (BASE_TS + 100, 2, 2)
    log.close()


def test_end_offset_for_epoch_with_three_epochs(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for epoch in (0, 1, 3):
        log.append_as_leader(build_batch(2), leader_epoch=epoch, now_ms=NOW)
    assert log.end_offset_for_epoch(3) == (3, 6)
    assert log.end_offset_for_epoch(1) == (1, 4)
    assert log.end_offset_for_epoch(2) == (1, 4)
    log.close()


def test_delete_records_before_segment_boundaries(tmp_path: Path) -> None:
    log = _six_segments(tmp_path)
    assert log.delete_records_before(0) == 0
    assert log.delete_records_before(1) == 1
    assert len(log.segments) == 6  # inside the first segment: nothing deleted, no roll
    assert read_all(log, 1)[0][0] == 1
    assert log.delete_records_before(2) == 2  # exactly a segment's base
    assert [s.base_offset for s in log.segments] == [2, 4, 6, 8, 10]
    assert log.delete_records_before(11) == 11  # inside the active segment
    assert [s.base_offset for s in log.segments] == [10]
    with pytest.raises(OffsetOutOfRangeError, match="before 13: the high watermark is 12"):
        log.delete_records_before(13)
    before = _now()
    assert log.delete_records_before(-1) == 12  # everything: the active segment is rolled away
    assert (log.size_bytes, [s.base_offset for s in log.segments]) == (0, [12])
    assert before <= log.active_segment.created_ms <= _now()
    log.close()


def test_moving_the_log_start_truncates_the_epoch_cache(tmp_path: Path) -> None:
    # LeaderEpochFileCache.truncateFromStartAsyncFlush: epochs wholly below the new start go;
    # the epoch holding the start now starts there.
    log = open_log(tmp_path)
    for epoch, count in ((1, 3), (5, 4), (9, 2)):  # epoch 1 at 0, epoch 5 at 3, epoch 9 at 7
        log.append_as_leader(build_batch(count), leader_epoch=epoch, now_ms=NOW)
    checkpoint = tmp_path / "t-0" / "leader-epoch-checkpoint"
    log.delete_records_before(3)
    assert checkpoint.read_text() == "0\n2\n5 3\n9 7\n"
    log.delete_records_before(5)
    assert checkpoint.read_text() == "0\n2\n5 5\n9 7\n"
    assert log.end_offset_for_epoch(5) == (5, 7)
    log.close()


def test_retention_deletes_nothing_when_nothing_is_due(tmp_path: Path) -> None:
    log = _six_segments(tmp_path)
    assert log.apply_retention(NOW) == 0  # default retention.ms is seven days
    compacted = _six_segments(tmp_path / "c", cleanup_policy="compact", retention_ms=0)
    assert compacted.apply_retention(NOW) == 0
    assert len(log.segments) == len(compacted.segments) == 6
    compacted.close()
    log.close()


@pytest.mark.parametrize(
    ("config", "now", "remaining"),
    [
        ({"retention_ms": 0}, BASE_TS + 5002, 1),
        ({"retention_ms": 1000}, BASE_TS + 2001, 5),  # segment 1 is exactly retention.ms old: kept
        ({"retention_bytes": 0}, NOW, 1),
    ],
    ids=["ms-zero", "ms-boundary", "bytes-zero"],
)
def test_retention_boundaries(tmp_path: Path, config: dict[str, int], now: int, remaining: int) -> None:
    log = _six_segments(tmp_path, **config)
    assert log.apply_retention(now) == 6 - remaining
    assert len(log.segments) == remaining
    assert log.log_start_offset == log.segments[0].base_offset == 12 - 2 * remaining
    log.close()


def test_retention_bytes_boundary_deletes_while_the_rest_still_holds_enough(tmp_path: Path) -> None:
    probe = _six_segments(tmp_path / "probe")
    total, first = probe.size_bytes, probe.segments[0].size
    probe.close()
    log = _six_segments(tmp_path, retention_bytes=total - first)
    assert log.apply_retention(NOW) == 1
    assert log.log_start_offset == 2 and len(log.segments) == 5
    log.close()


def test_flush_ms_counts_from_the_last_flush(tmp_path: Path) -> None:
    log = open_log(tmp_path, flush_ms=5000)
    log.maintain(NOW)  # one segment, nothing rolled
    log.append_as_leader(build_batch(2), leader_epoch=0, now_ms=NOW)
    log.flush(now_ms=NOW + 100)
    log.append_as_leader(build_batch(2), leader_epoch=0, now_ms=NOW)
    log.maintain(NOW + 5099)
    assert log.recovery_point == 2
    log.maintain(NOW + 5100)
    assert log.recovery_point == 4
    log.append_as_leader(build_batch(2), leader_epoch=0, now_ms=NOW)
    log.maintain(NOW + 10099)
    assert log.recovery_point == 4
    log.maintain(NOW + 10100)
    assert log.recovery_point == 6
    log.flush()  # now: the next flush.ms flush is due 5 s after the wall clock
    log.append_as_leader(build_batch(2), leader_epoch=0, now_ms=NOW)
    log.maintain(NOW + 20000)
    assert log.recovery_point == 6
    log.close()


def test_maintain_flushes_every_rolled_segment(tmp_path: Path) -> None:
    log = _six_segments(tmp_path)
    log.maintain(NOW)
    assert log.recovery_point == 10
    log.close()


def test_an_abandoned_log_refuses_appends(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.abandon()
    with pytest.raises(KafkaStorageError, match="closed"):
        log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW)


# -- produce validation: messages, fragments and limits -------------------------------------


def _patched(data: bytes, offset: int, value: bytes) -> bytes:
    """``data`` with ``value`` written at ``offset`` and the CRC recomputed."""
    buf = bytearray(data)
    buf[offset : offset + len(value)] = value
    rewrite_crc(buf)
    return bytes(buf)


def _with_codec(data: bytes, codec: int) -> bytes:
    low = ATTRIBUTES_OFFSET + 1  # the attributes' low byte holds the codec
    return _patched(data, low, bytes([data[low] & ~0x07 | codec]))


def _undecompressable() -> bytes:
    gzipped = build_batch(2, compression=Compression.GZIP)
    return _patched(gzipped, RECORD_BATCH_OVERHEAD, bytes(len(gzipped) - RECORD_BATCH_OVERHEAD))  # not a gzip stream


def _count_claims_three(data: bytes) -> bytes:
    """A two-record batch whose header declares three (count and last offset delta agree)."""
    return _patched(_patched(data, LAST_OFFSET_DELTA_OFFSET, (2).to_bytes(4, "big")),
                    RECORDS_COUNT_OFFSET, (3).to_bytes(4, "big"))


_SECOND = len(build_batch(1))  # where the second batch of ``build_batch(1) + ...`` starts


@pytest.mark.parametrize(
    ("records", "error", "detail"),
    [
        (b"", InvalidRecordError, "the produce request has no record batches for this partition"),
        (_with_byte(build_batch(2), 16, 1), InvalidRecordError,
         ("batch at byte 0 has magic 1; this broker accepts only magic 2 record batches "
          "(use a client that produces v2 batches)")),
        (build_batch(1) + build_batch(2, pid=0, epoch=0, seq=-1), InvalidRecordError,
         f"batch at byte {_SECOND} of t-0: idempotent batch of producer 0 has no base sequence"),
        (build_batch(1) + build_batch(2, transactional=True), InvalidRecordError,
         f"batch at byte {_SECOND} of t-0: transactional batch without a producer id"),
        (build_batch(1) + _with_codec(build_batch(2), 5), UnsupportedCompressionTypeError,
         f"batch at byte {_SECOND} of t-0: unknown compression codec 5"),
        (build_batch(1) + _count_claims_three(build_batch(2)), InvalidRecordError,
         f"batch at byte {_SECOND} of t-0: header declares 3 records but the batch holds 2"),
    ],
    ids=["empty", "magic", "pid-0-no-sequence", "transactional-no-pid", "codec-5", "count"],
)
def test_rejected_produce_names_the_batch_and_the_partition(
    tmp_path: Path, records: bytes, error: type[KafkaError], detail: str
) -> None:
    log = open_log(tmp_path)
    with pytest.raises(error) as raised:
        log.append_as_leader(records, leader_epoch=0, now_ms=NOW)
    assert raised.value.detail == detail
    assert log.log_end_offset == 0
    log.close()


def test_records_that_do_not_decompress_are_corrupt(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    with pytest.raises(CorruptRecordError) as raised:
        log.append_as_leader(build_batch(1) + _undecompressable(), leader_epoch=0, now_ms=NOW)
    assert (raised.value.detail or "").startswith(
        f"batch at byte {_SECOND} of t-0: records do not decompress (gzip")
    log.close()


def test_zstd_the_highest_codec_is_accepted(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(build_batch(3, compression=Compression.ZSTD), leader_epoch=0, now_ms=NOW)
    assert [o for o, _ in read_all(log)] == [0, 1, 2]
    log.close()


@pytest.mark.parametrize(
    ("records", "error"),
    [
        # Fewer bytes than reach the magic byte: not a batch of another magic, a cut-off one.
        (build_batch(2)[:16], CorruptRecordError),
        (build_batch(2) + build_batch(2)[:10], CorruptRecordError),
        # Kafka's ByteBufferLogInputStream checks the size as soon as the length is readable.
        (build_batch(1, value_size=600)[:12], MessageTooLargeError),
    ],
    ids=["cut-before-magic", "second-cut-before-size", "length-only"],
)
def test_fragments_of_a_batch_are_rejected(
    tmp_path: Path, records: bytes, error: type[Exception]
) -> None:
    log = open_log(tmp_path, max_message_bytes=500)
    with pytest.raises(error):
        log.append_as_leader(records, leader_epoch=0, now_ms=NOW)
    assert log.log_end_offset == 0
    log.close()


def test_max_message_bytes_admits_a_batch_of_exactly_that_size(tmp_path: Path) -> None:
    batch = build_batch(2, value_size=100)
    exact = open_log(tmp_path / "exact", max_message_bytes=len(batch))
    assert exact.append_as_leader(batch, leader_epoch=0, now_ms=NOW).last_offset == 1
    exact.close()
    under = open_log(tmp_path / "under", max_message_bytes=len(batch) - 1)
    with pytest.raises(MessageTooLargeError, match=f"record batch of {len(batch)} bytes"):
        under.append_as_leader(batch, leader_epoch=0, now_ms=NOW)
    under.close()


def test_a_record_older_than_the_base_timestamp_is_checked_against_before_max_ms(
    tmp_path: Path,
) -> None:
    # Record 1 is 50 ms older than record 0 (the base): within one-byte deltas, and 1050 ms old.
    log = open_log(tmp_path, message_timestamp_before_max_ms=1000)
    with pytest.raises(RecordTimestampError) as raised:
        log.append_as_leader(build_batch(2, ts=NOW - 1000, ts_step=-50), leader_epoch=0, now_ms=NOW)
    message = (f"Timestamp {NOW - 1050} of record 1 is out of range. The timestamp should be "
               f"within [{NOW - 1000}, {NOW + 3_600_000}]")
    assert raised.value.record_errors == [(1, message)]
    assert raised.value.detail == (
        "batch at byte 0 of t-0: 1 record(s) rejected (message.timestamp.before.max.ms=1000, "
        f"message.timestamp.after.max.ms=3600000), the first: {message}")
    log.append_as_leader(build_batch(2, ts=NOW - 950, ts_step=-50), leader_epoch=0, now_ms=NOW)
    assert log.log_end_offset == 2
    log.close()


def test_log_append_time_does_not_check_record_timestamps(tmp_path: Path) -> None:
    # LogValidator.validateTimestamp only checks CreateTime records.
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime",
                   message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=1000)
    log.append_as_leader(build_batch(2, ts=BASE_TS), leader_epoch=0, now_ms=NOW)
    log.append_as_leader(build_batch(2, ts=NOW + 5000), leader_epoch=0, now_ms=NOW)
    assert log.log_end_offset == 4
    log.close()


def test_a_later_batch_with_a_wrong_max_timestamp_is_corrected_in_place(tmp_path: Path) -> None:
    # sarama sends MaxTimestamp -1: the broker stores the largest record timestamp.
    second = _patched(build_batch(3, ts=BASE_TS + 100), 35, (-1).to_bytes(8, "big", signed=True))
    log = open_log(tmp_path)
    result = log.append_as_leader(build_batch(2) + second, leader_epoch=0, now_ms=NOW)
    assert (result.base_offset, result.last_offset) == (0, 4)
    raw = log.read(0, 10**6).records.read()
    first = validate_batch(raw, 0)
    stored = validate_batch(raw, first.size)
    assert (stored.base_offset, stored.records_count, stored.max_timestamp) == (2, 3, BASE_TS + 102)
    assert [o for o, _ in records_of(raw)] == [0, 1, 2, 3, 4]
    log.close()


# -- append: offsets, flushing, rolling, producer state -------------------------------------


def test_flush_messages_counts_every_record_since_the_last_flush(tmp_path: Path) -> None:
    log = open_log(tmp_path, flush_messages=3)
    log.append_as_leader(build_batch(2), leader_epoch=0, now_ms=NOW)
    assert log.recovery_point == 0  # 2 of 3
    log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW)
    assert log.recovery_point == 3  # exactly flush.messages
    log.append_as_leader(build_batch(2) + build_batch(1), leader_epoch=0, now_ms=NOW)
    assert log.recovery_point == 6  # both batches of one request count
    log.close()


def test_a_retry_of_producer_zero_is_a_duplicate(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    batch = build_batch(2, pid=0, epoch=0, seq=0)
    log.append_as_leader(batch, leader_epoch=0, now_ms=NOW)
    retry = log.append_as_leader(batch, leader_epoch=0, now_ms=NOW + 1)
    assert (retry.duplicate, retry.base_offset, retry.last_offset) == (True, 0, 1)
    assert log.log_end_offset == 2
    log.close()


def test_batches_without_a_producer_id_leave_no_producer_state(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(build_batch(2) + build_batch(1), leader_epoch=0, now_ms=NOW)
    assert log.producer_state.producers == {}
    log.close()


def test_log_append_time_restamps_every_batch_of_a_request(tmp_path: Path) -> None:
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    result = log.append_as_leader(build_batch(2) + build_batch(3), leader_epoch=0, now_ms=NOW)
    assert (result.base_offset, result.last_offset) == (0, 4)
    raw = log.read(0, 10**6).records.read()
    headers = [batch.header for batch in MemoryRecords(raw).batches()]
    assert [(h.base_offset, h.records_count, h.max_timestamp) for h in headers] == [(0, 2, NOW), (2, 3, NOW)]
    assert log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW).base_offset == 5
    log.close()


def test_segment_ms_counts_from_creation_when_the_first_batch_has_no_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_ms=1000)
    log.append_as_leader(build_batch(1, ts=-1, ts_step=0), leader_epoch=0, now_ms=NOW)
    log.append_as_leader(build_batch(1, ts=-1, ts_step=0), leader_epoch=0, now_ms=NOW + 1000)
    assert len(log.segments) == 1
    log.append_as_leader(build_batch(1, ts=-1, ts_step=0), leader_epoch=0, now_ms=NOW + 1001)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_a_segment_rolled_by_an_append_is_created_at_the_append_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    log.append_as_leader(build_batch(2, value_size=100), leader_epoch=0, now_ms=NOW)
    log.append_as_leader(build_batch(2, value_size=100), leader_epoch=0, now_ms=NOW + 7)
    assert [(s.base_offset, s.created_ms) for s in log.segments] == [(0, NOW), (2, NOW + 7)]
    log.close()


def test_a_segment_rolls_before_its_relative_offsets_overflow_int32(tmp_path: Path) -> None:
    # Index entries hold offsets relative to the segment's base as int32 (LogSegment.canConvertToRelativeOffset).
    top = (1 << 31) - 1
    directory = tmp_path / "t-0"
    directory.mkdir()
    segment = LogSegment(directory, 0)
    buf = bytearray(build_batch(1))
    set_base_offset(buf, 0, top - 1)
    segment.append(buf, [read_batch_header(buf)])
    segment.close()
    log = Log(directory, LogConfig(), topic="t", partition=0, now_ms=NOW)
    assert log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW).last_offset == top
    assert len(log.segments) == 1  # base + int32 max still fits
    assert log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW).last_offset == top + 1
    assert [s.base_offset for s in log.segments] == [0, top + 1]
    log.close()


def test_a_failed_write_is_a_storage_error_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import os

    from samsa.broker.log import segment as segment_module

    log = open_log(tmp_path)

    def full(*_: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(segment_module.os, "pwrite", full)
    with pytest.raises(KafkaStorageError) as raised:
        log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW)
    assert raised.value.detail == (
        f"writing to {log.active_segment.log_path} failed: [Errno {errno.ENOSPC}] "
        f"{os.strerror(errno.ENOSPC)}; check the disk of the data dir")
    monkeypatch.undo()
    log.close()


def test_an_append_reports_the_current_log_start(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(build_batch(3), leader_epoch=0, now_ms=NOW)
    log.delete_records_before(2)
    assert log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW).log_start_offset == 2
    marker = log.append_control_marker(producer_id=1, producer_epoch=0, commit=True,
                                       coordinator_epoch=0, leader_epoch=0, now_ms=NOW)
    assert marker.log_start_offset == 2
    log.close()


# -- opening, recovery, producer state on restart -------------------------------------------


def _reopen(tmp_path: Path, **kwargs: object) -> Log:
    return Log(tmp_path / "t-0", LogConfig(), topic="t", partition=0, **kwargs)  # type: ignore[arg-type]


def _damage_first_batch_of_each_segment(log: Log) -> list[Path]:
    """Flip a value byte of each segment's first batch: its CRC no longer matches."""
    paths = [s.log_path for s in log.segments if s.size]
    for path in paths:
        data = bytearray(path.read_bytes())
        data[read_batch_header(data).size - 3] ^= 0xFF
        path.write_bytes(data)
    return paths


def test_reopening_after_a_crash_recovers_and_has_flushed_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(build_batch(2) + build_batch(2), leader_epoch=0, now_ms=NOW)
    path = log.active_segment.log_path
    log.abandon()
    with path.open("ab") as f:
        f.write(bytes(7))  # a torn write after the last batch
    reopened = _reopen(tmp_path, now_ms=NOW)  # no recovery point, no clean shutdown: the defaults
    assert (reopened.log_end_offset, reopened.recovered_bytes_truncated) == (4, 7)
    assert reopened.recovery_point == 0
    reopened.close()


def test_a_clean_reopen_starts_flushed_to_the_log_end(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(build_batch(3), leader_epoch=0, now_ms=NOW)
    log.close()
    reopened = _reopen(tmp_path, clean_shutdown=True, now_ms=NOW)
    assert reopened.recovery_point == reopened.log_end_offset == 3
    reopened.close()


def test_segments_opened_by_a_log_are_created_at_its_clock(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    assert log.active_segment.created_ms == NOW  # an empty directory: one new segment
    for _ in range(2):
        log.append_as_leader(build_batch(2, value_size=100), leader_epoch=0, now_ms=NOW)
    log.close()
    reopened = _reopen(tmp_path, clean_shutdown=True, now_ms=NOW + 5)
    assert [s.created_ms for s in reopened.segments] == [NOW + 5, NOW + 5]
    reopened.close()


def test_a_clean_restart_trusts_the_segments_and_their_indexes(tmp_path: Path) -> None:
    # LogLoader recovers segments only after an unclean shutdown: after a clean one the files
    # are loaded as they are (indexes sanity-checked), so batch CRCs are not checked again.
    log = open_log(tmp_path, segment_bytes=300, index_interval_bytes=1)
    for _ in range(4):
        log.append_as_leader(build_batch(1, value_size=60), leader_epoch=0, now_ms=NOW)
    assert [s.base_offset for s in log.segments] == [0, 2]
    indexes = [len(s.offset_index) for s in log.segments]
    _damage_first_batch_of_each_segment(log)
    log.close()
    reopened = _reopen(tmp_path, clean_shutdown=True, now_ms=NOW)
    assert (reopened.log_end_offset, reopened.recovered_bytes_truncated) == (4, 0)
    assert [len(s.offset_index) for s in reopened.segments] == indexes == [1, 1]
    reopened.close()


def test_only_segments_from_the_recovery_point_on_are_recovered(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    for _ in range(4):
        log.append_as_leader(build_batch(1, value_size=60), leader_epoch=0, now_ms=NOW)
    _damage_first_batch_of_each_segment(log)  # segment 0 (offsets 0-1) and segment 2 (2-3)
    log.close()
    # Recovery point 2: segment 0 was flushed before the crash and is trusted.
    reopened = _reopen(tmp_path, recovery_point=2, now_ms=NOW)
    assert [s.base_offset for s in reopened.segments] == [0, 2]
    assert reopened.log_end_offset == 2 and reopened.recovered_bytes_truncated > 0
    assert reopened.segments[0].size > 0
    reopened.close()


def test_reopening_drops_epochs_that_start_at_the_new_log_end(tmp_path: Path) -> None:
    # LeaderEpochFileCache.truncateFromEnd: entries starting at or after the log end go.
    log = open_log(tmp_path)
    log.append_as_leader(build_batch(2), leader_epoch=0, now_ms=NOW)
    log.append_as_leader(build_batch(2), leader_epoch=1, now_ms=NOW)
    path = log.active_segment.log_path
    log.abandon()
    with path.open("r+b") as f:
        f.truncate(len(build_batch(2)))  # the second batch never reached the disk
    reopened = _reopen(tmp_path, now_ms=NOW)
    assert (reopened.log_end_offset, reopened.latest_epoch) == (2, 0)
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    reopened.close()


def test_an_explicit_flush_restarts_the_flush_messages_count(tmp_path: Path) -> None:
    log = open_log(tmp_path, flush_messages=3)
    log.append_as_leader(build_batch(2), leader_epoch=0, now_ms=NOW)
    log.flush(now_ms=NOW)
    assert log.recovery_point == 2
    log.append_as_leader(build_batch(2), leader_epoch=0, now_ms=NOW)
    assert log.recovery_point == 2  # 2 of 3 since the flush
    log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW)
    assert log.recovery_point == 5
    log.close()


def _aborted(log: Log, offset: int) -> list[tuple[int, int, int]]:
    fetched = log.read(offset, 10**6, isolation=IsolationLevel.READ_COMMITTED)
    assert fetched.aborted_transactions is not None
    return [(t.producer_id, t.first_offset, t.last_offset) for t in fetched.aborted_transactions]


def test_a_clean_reopen_lists_an_aborted_transaction_once(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(build_batch(2, pid=9, epoch=0, seq=0, transactional=True), leader_epoch=0, now_ms=NOW)
    log.append_control_marker(producer_id=9, producer_epoch=0, commit=False, coordinator_epoch=0,
                              leader_epoch=0, now_ms=NOW)
    log.close()
    reopened = _reopen(tmp_path, clean_shutdown=True, now_ms=NOW)
    assert _aborted(reopened, 0) == [(9, 0, 2)]
    reopened.close()


def test_producer_state_replays_the_batches_after_the_last_snapshot(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(build_batch(2, pid=5, epoch=0, seq=0), leader_epoch=0, now_ms=NOW)
    log.close()  # snapshot at offset 2
    log = _reopen(tmp_path, clean_shutdown=True, now_ms=NOW)
    second = build_batch(2, pid=5, epoch=0, seq=2)
    log.append_as_leader(second, leader_epoch=0, now_ms=NOW)
    log.abandon()  # crash: no snapshot at 4, batch [2, 3] is replayed from the segment
    log = _reopen(tmp_path, now_ms=NOW)
    retry = log.append_as_leader(second, leader_epoch=0, now_ms=NOW)
    assert (retry.duplicate, retry.base_offset, retry.last_offset) == (True, 2, 3)
    log.close()


def test_rolling_an_empty_active_segment_does_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.roll(now_ms=NOW)
    assert [s.base_offset for s in log.segments] == [0]
    log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW)
    log.roll(now_ms=NOW)
    log.roll(now_ms=NOW)
    assert [s.base_offset for s in log.segments] == [0, 1]
    log.close()


def test_a_closed_log_refuses_appends_and_reads_and_closes_once(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW)
    log.close()
    log.close()  # a second close is a no-op
    with pytest.raises(KafkaStorageError) as appending:
        log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW)
    with pytest.raises(KafkaStorageError) as reading:
        log.read(0, 1000)
    assert appending.value.detail == reading.value.detail == "the log of t-0 is closed"


def test_delete_removes_every_file_and_closes_the_log(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW)
    log.roll(now_ms=NOW)
    log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW)
    log.delete()
    assert (tmp_path / "t-0").is_dir() and list((tmp_path / "t-0").iterdir()) == []
    assert (log.segments, log.size_bytes) == ([], 0)
    with pytest.raises(KafkaStorageError) as appending:
        log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW)
    assert appending.value.detail == "the log of t-0 is closed"
    log.close()  # nothing left to close


# -- reads ------------------------------------------------------------------------------------


def test_a_read_returns_the_first_batch_whole_by_default(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(build_batch(3), leader_epoch=0, now_ms=NOW)
    assert len(log.read(0, 10).records) == len(build_batch(3))
    log.close()


def test_a_read_of_zero_bytes_returns_no_records(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(build_batch(3), leader_epoch=0, now_ms=NOW)
    assert log.read(0, 0, min_one_message=False).records == b""
    log.close()


def test_read_uncommitted_reads_past_an_open_transaction(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(build_batch(2), leader_epoch=0, now_ms=NOW)
    log.append_as_leader(build_batch(2, pid=9, epoch=0, seq=0, transactional=True), leader_epoch=0, now_ms=NOW)
    fetched = log.read(0, 10**6)
    assert [o for o, _ in records_of(fetched.records)] == [0, 1, 2, 3]
    assert (fetched.last_stable_offset, fetched.aborted_transactions) == (2, None)
    log.close()


def test_a_read_committed_at_or_past_the_lso_lists_no_aborted_transaction(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(build_batch(2, pid=1, epoch=0, seq=0, transactional=True), leader_epoch=0, now_ms=NOW)
    log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW)
    log.append_as_leader(build_batch(2, pid=2, epoch=0, seq=0, transactional=True), leader_epoch=0, now_ms=NOW)
    log.append_control_marker(producer_id=2, producer_epoch=0, commit=False, coordinator_epoch=0,
                              leader_epoch=0, now_ms=NOW)
    assert log.last_stable_offset == 0  # producer 1's transaction is still open
    assert log.read(3, 10**6, isolation=IsolationLevel.READ_COMMITTED).records == b""
    # Nothing is read at or past the LSO, so no list is needed (LocalLog.emptyFetchDataInfo).
    assert _aborted(log, 3) == [] and _aborted(log, 0) == []
    log.append_control_marker(producer_id=1, producer_epoch=0, commit=True, coordinator_epoch=0,
                              leader_epoch=0, now_ms=NOW)
    assert _aborted(log, 3) == [(2, 3, 5)]  # producer 2's aborted transaction starts there
    log.close()


def test_a_read_in_an_offset_gap_continues_in_the_next_segment(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    directory.mkdir()
    _write_segments(directory, ((0, 5), (5, 2), (10, 3), (20, 2)))  # gaps at 7-9 and 13-19
    log = Log(directory, LogConfig(), topic="t", partition=0, now_ms=NOW)
    assert [o for o, _ in records_of(log.read(8, 10**6).records)][:3] == [10, 11, 12]
    assert [o for o, _ in records_of(log.read(15, 10**6).records)] == [20, 21]
    log.close()


def test_topic_index_settings_apply_to_new_segments(tmp_path: Path) -> None:
    # index.interval.bytes=1: an entry per batch after the first; segment.index.bytes=16: two
    # entries of eight bytes fill an index, and a full index rolls the segment.
    log = open_log(tmp_path, index_interval_bytes=1, segment_index_bytes=16)
    for _ in range(4):
        log.append_as_leader(build_batch(1), leader_epoch=0, now_ms=NOW)
    assert [s.base_offset for s in log.segments] == [0, 3]
    assert len(log.segments[0].offset_index) == 2
    log.close()


def test_a_view_is_checked_while_a_failed_lz4_check_still_holds_the_scratch_buffer(tmp_path: Path) -> None:
    # LZ4 blocks decompress into the thread's scratch buffer through a memoryview; an error
    # raised there keeps that view alive in its traceback for as long as the error is
    # referenced.  Copying a produced view into the same buffer must then not resize it.
    lz4 = bytearray(build_batch(20, compression=Compression.LZ4, value_size=50))
    at = len(lz4) - 12  # inside the compressed block, before the frame's end mark
    broken = _patched(bytes(lz4), at, bytes([lz4[at] ^ 0x55]))
    log = open_log(tmp_path)
    with pytest.raises(CorruptRecordError, match="lz4 decompression failed") as raised:
        log.append_as_leader(memoryview(bytearray(broken)), leader_epoch=0, now_ms=NOW)
    result = log.append_as_leader(memoryview(bytearray(build_batch(2))), leader_epoch=0, now_ms=NOW)
    assert (result.base_offset, result.last_offset) == (0, 1)
    assert raised.value.__cause__ is not None  # still referenced up to here
    log.close()


def test_a_record_timestamp_error_pickles_with_its_record_errors() -> None:
    # As every KafkaError (samsa.errors): pickling keeps the type and its details, for users
    # who pass errors between processes.
    error = RecordTimestampError("2 record(s) rejected", [(0, "too old"), (3, "too new")])
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is RecordTimestampError
    assert (copy.detail, copy.record_errors) == ("2 record(s) rejected", [(0, "too old"), (3, "too new")])
