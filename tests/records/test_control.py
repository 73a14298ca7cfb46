import struct

import pytest

from samsa.errors import CorruptRecordError
from samsa.records import (
    ControlRecordType,
    MemoryRecords,
    RecordBatchBuilder,
    build_control_batch,
    iter_batches,
    parse_control_record,
    validate_batch,
)


@pytest.mark.parametrize("kind", [ControlRecordType.COMMIT, ControlRecordType.ABORT])
def test_marker_batch_layout(kind: ControlRecordType) -> None:
    buf = build_control_batch(kind, producer_id=4000, producer_epoch=2, coordinator_epoch=17, timestamp_ms=1_700_000_000_000, base_offset=9)
    assert len(buf) == 78  # the size librdkafka's mock writes too
    h = validate_batch(buf)
    assert h.attributes == 0x30 and h.is_control and h.is_transactional
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.records_count) == (4000, 2, -1, 1)
    batch = next(iter_batches(buf))
    (record,) = batch
    assert record.offset == 9
    assert record.key == struct.pack(">hh", 0, int(kind))
    assert record.value == struct.pack(">hi", 0, 17)
    marker = batch.control_marker()
    assert marker is not None
    assert (marker.type, marker.version, marker.coordinator_epoch) == (kind, 0, 17)
    assert marker.is_commit is (kind == ControlRecordType.COMMIT)
    assert marker.is_abort is (kind == ControlRecordType.ABORT)


def test_consumers_skip_control_batches_by_default() -> None:
    data = RecordBatchBuilder(producer_id=1, producer_epoch=0, base_sequence=0, is_transactional=True)
    data.append(1, b"k", b"v")
    buf = data.build() + build_control_batch(ControlRecordType.COMMIT, 1, 0, 0, 2, base_offset=1)
    assert [r.value for r in MemoryRecords(buf).records()] == [b"v"]
    assert len(list(MemoryRecords(buf).records(include_control=True))) == 2
    assert [b.control_marker() is None for b in MemoryRecords(buf)] == [True, False]


def test_parse_control_record_edge_cases() -> None:
    unknown = parse_control_record(struct.pack(">hh", 0, 42), None)
    assert unknown.type == 42 and unknown.coordinator_epoch == -1
    leader = parse_control_record(struct.pack(">hh", 0, 2), b"anything")
    assert leader.type is ControlRecordType.LEADER_CHANGE
    with pytest.raises(CorruptRecordError):
        parse_control_record(None, None)
    with pytest.raises(CorruptRecordError):
        parse_control_record(struct.pack(">hh", 0, 1), b"\x00")


def test_marker_batch_defaults_and_timestamp() -> None:
    buf = build_control_batch(ControlRecordType.ABORT, 5, 1, 3, timestamp_ms=1_700_000_000_123)
    h = validate_batch(buf)
    assert (h.base_offset, h.partition_leader_epoch) == (0, -1)
    assert h.base_timestamp == h.max_timestamp == 1_700_000_000_123
    (record,) = next(iter_batches(buf))
    assert (record.offset, record.timestamp) == (0, 1_700_000_000_123)
    epoch = validate_batch(build_control_batch(ControlRecordType.COMMIT, 5, 1, 3, 0, partition_leader_epoch=7))
    assert epoch.partition_leader_epoch == 7


@pytest.mark.parametrize(("key", "value", "message"), [
    (None, None, r"\): control record key is null, needs 4$"),
    (b"\x00\x00\x01", None, r"\): control record key is 3 bytes, needs 4$"),
    (struct.pack(">hh", 0, 1), b"\x00", r"\): transaction marker value is missing or shorter than 6 bytes$"),
    (struct.pack(">hh", 0, 0), None, r"\): transaction marker value is missing or shorter than 6 bytes$"),
], ids=["null key", "short key", "short marker", "no marker"])
def test_corrupt_control_records_say_what_is_wrong(key: bytes | None, value: bytes | None, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        parse_control_record(key, value)
