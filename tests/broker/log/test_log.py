from __future__ import annotations

from pathlib import Path

import pytest

from samsa.broker.log import FileSlice, IsolationLevel, Log, LogConfig
from samsa.broker.log.segment import LogSegment
from samsa.errors import (
    CorruptRecordError,
    InvalidRecordError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
)
from samsa.records import (
    Compression,
    ControlRecordType,
    MemoryRecords,
    TimestampType,
    build_control_batch,
    read_batch_header,
    set_base_offset,
    validate_batch,
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
    from samsa.records import rewrite_crc

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


def test_read_spans_to_next_segment_over_an_offset_gap(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    directory.mkdir()
    for base, count in ((0, 5), (10, 3)):
        segment = LogSegment(directory, base)
        buf = bytearray(build_batch(count))
        set_base_offset(buf, 0, base)
        segment.append(buf, [read_batch_header(buf)])
        segment.close()
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


def _record(value_size: int) -> bytes:
    from samsa.records.varint import encode_varint

    # attributes, timestamp delta, offset delta, null key, value, no headers
    body = b"\0\0\0\x01" + bytes(encode_varint(value_size)) + b"v" * value_size + b"\0"
    return bytes(encode_varint(len(body))) + body


@pytest.mark.parametrize("value_size", [10, 100])  # one- and two-byte record lengths
def test_walk_of_records_checks_count_and_lengths(value_size: int) -> None:
    from samsa.broker.log.log import _walk_records

    data = bytearray(_record(value_size) * 5)
    _walk_records(data, 0, len(data), 5, "batch")
    for wrong in (4, 6):
        with pytest.raises(InvalidRecordError):
            _walk_records(data, 0, len(data), wrong, "batch")
    # Runs of different lengths, as offset deltas widen.
    runs = bytearray(_record(value_size) * 70 + _record(value_size + 1) * 30
                     + _record(value_size) * 3)
    _walk_records(runs, 0, len(runs), 103, "batch")
    with pytest.raises(InvalidRecordError):
        _walk_records(runs, 0, len(runs), 102, "batch")
    # A middle record one byte longer and the next one byte shorter: same total, still valid.
    bad = bytearray(_record(value_size) * 2 + _record(value_size + 1) + _record(value_size - 1)
                    + _record(value_size))
    _walk_records(bad, 0, len(bad), 5, "batch")
    bad[len(_record(value_size)) * 2] += 8  # a length that overruns its neighbours
    with pytest.raises((CorruptRecordError, InvalidRecordError)):
        _walk_records(bad, 0, len(bad), 5, "batch")
    with pytest.raises((CorruptRecordError, InvalidRecordError)):
        _walk_records(data, 0, len(data) - 1, 5, "batch")  # the last record is cut short


def test_walk_of_records_of_all_different_sizes() -> None:
    from samsa.broker.log.log import _walk_records

    data = bytearray(b"".join(_record(10 + i % 7 * 30) for i in range(200)))
    _walk_records(data, 0, len(data), 200, "batch")
    with pytest.raises(InvalidRecordError):
        _walk_records(data, 0, len(data), 199, "batch")
