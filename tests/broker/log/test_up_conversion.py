"""Produced v0/v1 message sets -> one v2 batch, with LogValidator's checks (up_conversion.py)."""

from __future__ import annotations

import gzip

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from samsa.broker.log.config import LogConfig
from samsa.broker.log.up_conversion import target_compression, up_convert
from samsa.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
)
from samsa.records import Compression, RecordBatch, TimestampType, iter_batches
from tests.records.legacy_data import entry, message, message_set, wrapper

NOW = 1_700_000_000_000
CONFIG = LogConfig()


def kafka_python_set(magic: int, codec: int, rows: list[tuple]) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, (ts, key, value) in enumerate(rows):
        builder.append(i, ts, key, value)
    return bytes(builder.build())


def only_batch(data: bytes) -> RecordBatch:
    (batch,) = list(iter_batches(data))
    assert isinstance(batch, RecordBatch)
    batch.ensure_valid()
    return batch


ROWS = [(NOW - 5, b"a", b"1"), (NOW - 9, None, b"2"), (NOW - 1, b"c", None)]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 2, 3], ids=["none", "gzip", "snappy", "lz4"])
def test_kafka_python_sets_become_one_v2_batch(magic: int, codec: int) -> None:
    data = kafka_python_set(magic, codec, ROWS)
    batch = only_batch(up_convert(data, CONFIG, NOW))
    assert batch.magic == 2 and batch.compression == codec  # compression.type=producer
    assert (batch.base_offset, batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        0, -1, -1, -1)
    assert not batch.is_transactional and batch.timestamp_type == TimestampType.CREATE_TIME
    records = list(batch)
    assert [(r.offset, r.key, r.value, r.headers) for r in records] == [
        (0, b"a", b"1", []), (1, None, b"2", []), (2, b"c", None, [])]
    expected = [ts for ts, _, _ in ROWS] if magic == 1 else [-1, -1, -1]
    assert [r.timestamp for r in records] == expected
    assert batch.max_timestamp == max(expected)


def test_topic_compression_type_recompresses() -> None:
    data = message_set(1, [(b"k", b"v", NOW), (b"k2", b"v2", NOW)])
    assert only_batch(up_convert(data, CONFIG, NOW, "gzip")).compression == Compression.GZIP
    gz = kafka_python_set(1, 1, ROWS)
    assert only_batch(up_convert(gz, CONFIG, NOW, "uncompressed")).compression == 0
    assert only_batch(up_convert(gz, CONFIG, NOW, "producer")).compression == Compression.GZIP
    assert target_compression("producer", Compression.LZ4) == Compression.LZ4
    assert target_compression("zstd", Compression.NONE) == Compression.ZSTD


def test_log_append_time_wrapper_timestamps_reach_the_records() -> None:
    inner = entry(0, message(1, b"k", b"v", 0x08, NOW - 50))
    data = wrapper(1, 1, gzip.compress(inner), 0, NOW - 10, log_append_time=True)
    # A producer must not set LogAppendTime: rejected whatever the topic's type...
    with pytest.raises(InvalidTimestampError):
        up_convert(data, LogConfig(log_append_time=True), NOW)
    # ...except that a CreateTime topic only range-checks a record that has a timestamp
    # (LogValidator.validateTimestamp): the wrapper's time is the record's.
    batch = only_batch(up_convert(data, CONFIG, NOW))
    assert [r.timestamp for r in batch] == [NOW - 10]


def test_two_compressed_wrappers_are_invalid() -> None:
    one = kafka_python_set(1, 1, ROWS)
    with pytest.raises(InvalidRecordError, match="more than one batch"):
        up_convert(one + one, CONFIG, NOW)


def test_mixed_magics_are_invalid() -> None:
    data = message_set(0, [(b"k", b"v", 0)]) + message_set(1, [(b"k", b"v", NOW)], 1)
    with pytest.raises(InvalidRecordError, match="magic"):
        up_convert(data, CONFIG, NOW)


def test_corrupt_crcs_are_corrupt_message() -> None:
    data = bytearray(message_set(1, [(b"k", b"v", NOW)]))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        up_convert(bytes(data), CONFIG, NOW)
    inner = bytearray(entry(0, message(1, b"k", b"v", 0, NOW)))
    inner[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        up_convert(wrapper(1, 1, gzip.compress(bytes(inner)), 0, NOW), CONFIG, NOW)


def test_record_checks() -> None:
    compacted = LogConfig(cleanup_policy="compact")
    with pytest.raises(InvalidRecordError, match="without key"):
        up_convert(message_set(1, [(None, b"v", NOW)]), compacted, NOW)
    future = message_set(1, [(b"k", b"v", NOW + 3_600_001)])
    with pytest.raises(InvalidTimestampError, match="out of range"):
        up_convert(future, CONFIG, NOW)
    old = message_set(1, [(b"k", b"v", NOW - 1001)])
    with pytest.raises(InvalidTimestampError):
        up_convert(old, LogConfig(timestamp_before_max_ms=1000), NOW)
    # v0 has no timestamps to check.
    assert only_batch(up_convert(message_set(0, [(b"k", b"v", 0)]), CONFIG, NOW))
    with pytest.raises(MessageTooLargeError):
        up_convert(message_set(1, [(b"k", b"v" * 100, NOW)]), LogConfig(max_message_bytes=50),
                   NOW)


def test_record_errors_say_which_record_and_why() -> None:
    nested = wrapper(1, 1, gzip.compress(entry(0, message(1, b"k", b"v", 0x01, NOW))), 0, NOW)
    with pytest.raises(InvalidRecordError, match="record 0: compressed outer record should not have an "
                       "inner record with a compression attribute set"):
        up_convert(nested, CONFIG, NOW)
    old_inner = wrapper(1, 1, gzip.compress(entry(0, message(0, b"k", b"v"))), 0, NOW)
    with pytest.raises(InvalidRecordError, match="compressed message magic 0 does not match wrapper "
                       "magic 1"):
        up_convert(old_inner, CONFIG, NOW)
    both = LogConfig(cleanup_policy="delete,compact")
    with pytest.raises(InvalidRecordError, match="record 1: compacted topic cannot accept message "
                       "without key"):
        up_convert(wrapper(1, 1, gzip.compress(message_set(1, [(b"k", b"v", NOW), (None, b"v", NOW)])),
                           1, NOW), both, NOW)
    producer_set = wrapper(1, 1, gzip.compress(entry(0, message(1, b"k", b"v", 0, NOW))), 0, NOW,
                           log_append_time=True)
    with pytest.raises(InvalidTimestampError, match="record 0: invalid timestamp type in message; "
                       "producers must not set the timestamp type to LogAppendTime"):
        up_convert(producer_set, LogConfig(log_append_time=True), NOW)
    with pytest.raises(InvalidRecordError, match="the produce request has no complete message for "
                       "this partition"):
        up_convert(message_set(1, [(b"k", b"v", NOW)])[:-3], CONFIG, NOW)
    gz = kafka_python_set(1, 1, ROWS)
    with pytest.raises(InvalidRecordError, match=": Compressed outer record has more than one batch$"):
        up_convert(gz + gz, CONFIG, NOW)


def test_create_time_bounds_are_inclusive() -> None:
    """LogValidator.validateTimestamp: a timestamp exactly before.max/after.max away is accepted;
    -1 (no timestamp) is never range-checked."""
    bounded = LogConfig(timestamp_before_max_ms=1000, timestamp_after_max_ms=2000)
    edges = message_set(1, [(b"a", b"v", NOW - 1000), (b"b", b"v", NOW + 2000), (b"c", b"v", -1)])
    assert [r.timestamp for r in only_batch(up_convert(edges, bounded, NOW))] == [
        NOW - 1000, NOW + 2000, -1]
    for ts in (NOW - 1001, NOW + 2001, 1):
        with pytest.raises(InvalidTimestampError,
                           match=rf"timestamp {ts} of message with offset 0 is out of range; it must "
                                 rf"be within \[{NOW - 1000}, {NOW + 2000}\]"):
            up_convert(message_set(1, [(b"k", b"v", ts)]), bounded, NOW)


def test_only_the_first_three_record_errors_are_shown() -> None:
    data = wrapper(1, 1, gzip.compress(message_set(1, [(None, b"v", NOW)] * 4)), 3, NOW)
    with pytest.raises(InvalidRecordError) as raised:
        up_convert(data, LogConfig(cleanup_policy="compact"), NOW)
    text = str(raised.value)
    assert "rejected due to 4 record errors" in text
    assert "record 2: compacted topic cannot accept message without key; " not in text
    assert "record 1: compacted topic cannot accept message without key; record 2:" in text
    assert "record 3:" not in text


def test_large_sets_become_one_create_time_batch() -> None:
    """The rebuilt batch has no size limit of its own (max.message.bytes was checked on the
    legacy set) and is CreateTime until the log stamps LogAppendTime."""
    data = message_set(1, [(b"k%d" % i, b"v" * 1000, NOW) for i in range(40)])
    batch = only_batch(up_convert(data, CONFIG, NOW))
    assert len(list(batch)) == 40
    assert batch.timestamp_type == TimestampType.CREATE_TIME
