"""Produce: the broker computes each batch's MaxTimestamp from its records and checks every
record's timestamp (Kafka's LogValidator), and refuses zstd below Produce v7 (KIP-110)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from handmade_batches import LOG_APPEND_TIME_FLAG, handmade_batch

from samsa.protocol import ListOffsetsRequest, ProduceRequest
from samsa.records import Compression, RecordBatch, validate_batch
from samsa.records.batch_header import TIMESTAMP_TYPE_MASK

T = 1_700_000_000_000  # well in the past: inside the default bounds


def produce(client: Any, topic: str, records: bytes, version: int = 9) -> Any:
    request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=records)])])
    ctx = client.send(request, version)
    assert ctx.outcome == "respond"
    return ctx.response.responses[0].partition_responses[0]


def stored(log_manager: Any, topic: str) -> list[RecordBatch]:
    """Every batch of partition 0 as written to disk, CRC-checked."""
    log = log_manager.get_log(topic, 0)
    segment = log.segments[-1]
    data = segment.read_bytes(0, segment.size)
    batches = []
    pos = 0
    while pos < len(data):
        header = validate_batch(data, pos)  # raises on a bad CRC
        batches.append(RecordBatch(data, pos, header))
        pos += header.size
    return batches


def max_timestamp_offset(client: Any, topic: str) -> tuple[int, int]:
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-3)])])
    part = client.call(request, 7).topics[0].partitions[0]
    assert part.error_code == 0
    return part.offset, part.timestamp


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.ZSTD])
@pytest.mark.parametrize("header_max", [-1, T, T + 10_000])
def test_max_timestamp_is_recomputed_from_the_records(client: Any, log_manager: Any,
                                                      codec: Compression,
                                                      header_max: int) -> None:
    """sarama's -1, a value too small, a value too large: the header ends up with the records'
    largest timestamp, a valid CRC, and the records as they were."""
    log_manager.create_topic("t", 1)
    timestamps = [T, T + 20, T + 5]
    response = produce(client, "t", handmade_batch(timestamps, max_timestamp=header_max,
                                                   codec=codec))
    assert response.error_code == 0
    [batch] = stored(log_manager, "t")
    assert batch.max_timestamp == T + 20
    assert batch.compression == codec
    assert [(r.offset, r.timestamp, r.value) for r in batch] == [
        (0, T, b"v0"), (1, T + 20, b"v1"), (2, T + 5, b"v2")]
    assert max_timestamp_offset(client, "t") == (1, T + 20)


def test_an_honest_header_is_stored_as_sent(client: Any, log_manager: Any) -> None:
    log_manager.create_topic("t", 1)
    sent = handmade_batch([T, T + 3], max_timestamp=T + 3)
    assert produce(client, "t", sent).error_code == 0
    [batch] = stored(log_manager, "t")
    assert bytes(batch.raw())[17:] == sent[17:]  # from the CRC on: untouched


def test_wide_and_negative_deltas_of_varying_records(client: Any, log_manager: Any) -> None:
    """Deltas of more than one varint byte, below the base, and records of many sizes (the walk's
    one-record-at-a-time path)."""
    log_manager.create_topic("t", 1)
    timestamps = [T + 100, T + 100_000, T - 300, T + 70, T + 99_999, T + 100]
    values = [b"x" * n for n in (1, 300, 7, 60, 2, 129)]
    assert produce(client, "t", handmade_batch(timestamps, values=values)).error_code == 0
    [batch] = stored(log_manager, "t")
    assert batch.max_timestamp == T + 100_000
    assert max_timestamp_offset(client, "t") == (1, T + 100_000)


@pytest.mark.parametrize("version", [7, 8])
def test_a_record_too_far_ahead_is_refused_whatever_the_header_says(client: Any,
                                                                    log_manager: Any,
                                                                    version: int) -> None:
    """message.timestamp.after.max.ms applies to each record, not to the header's MaxTimestamp."""
    log_manager.create_topic("t", 1)
    now = int(time.time() * 1000)
    future = now + 2 * 3_600_000
    response = produce(client, "t", handmade_batch([now, future, now], max_timestamp=now),
                       version=version)
    assert response.error_code == 32
    if version >= 8:  # RecordErrors, KIP-467
        assert [e.batch_index for e in response.record_errors] == [1]
        assert str(future) in response.record_errors[0].batch_index_error_message
    assert log_manager.get_log("t", 0).log_end_offset == 0


def test_before_max_ms_checks_every_record_and_skips_missing_timestamps(client: Any,
                                                                        log_manager: Any) -> None:
    log_manager.create_topic("t", 1, {"message.timestamp.before.max.ms": "60000"})
    now = int(time.time() * 1000)
    old = handmade_batch([now, now - 120_000], max_timestamp=now)
    assert produce(client, "t", old).error_code == 32
    # A record timestamp of -1 means "none": Kafka does not range-check it.
    assert produce(client, "t", handmade_batch([-1], max_timestamp=-1)).error_code == 0
    assert produce(client, "t", handmade_batch([now, -1], base_timestamp=now)).error_code == 0


def test_log_append_time_topic(client: Any, log_manager: Any) -> None:
    log_manager.create_topic("lat", 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    response = produce(client, "lat", handmade_batch([T, T + 9, T + 2]))
    assert response.error_code == 0 and response.log_append_time_ms >= before
    [batch] = stored(log_manager, "lat")
    assert batch.attributes & TIMESTAMP_TYPE_MASK
    assert batch.max_timestamp == response.log_append_time_ms
    assert {r.timestamp for r in batch} == {response.log_append_time_ms}
    # Every record carries the append time: the first one holds the max (Kafka's rule).
    assert max_timestamp_offset(client, "lat") == (0, response.log_append_time_ms)


def test_producer_may_not_claim_log_append_time(client: Any, log_manager: Any) -> None:
    """LogValidator.validateTimestamp: refused on a LogAppendTime topic, and without a
    timestamp; on a CreateTime topic the header's timestamp becomes every record's CreateTime."""
    log_manager.create_topic("lat", 1, {"message.timestamp.type": "LogAppendTime"})
    log_manager.create_topic("ct", 1)
    claimed = handmade_batch([T, T + 1], max_timestamp=T + 50, flags=LOG_APPEND_TIME_FLAG)
    assert produce(client, "lat", claimed).error_code == 32
    no_time = handmade_batch([T], max_timestamp=-1, flags=LOG_APPEND_TIME_FLAG)
    assert produce(client, "ct", no_time).error_code == 32
    assert produce(client, "ct", claimed).error_code == 0
    [batch] = stored(log_manager, "ct")
    assert not batch.attributes & TIMESTAMP_TYPE_MASK
    assert batch.max_timestamp == T + 50


@pytest.mark.parametrize("version", [3, 6])
def test_zstd_below_produce_v7_is_unsupported_compression(client: Any, log_manager: Any,
                                                          version: int) -> None:
    log_manager.create_topic("t", 1)
    response = produce(client, "t", handmade_batch([T], codec=Compression.ZSTD), version=version)
    assert response.error_code == 76
    assert log_manager.get_log("t", 0).log_end_offset == 0
    # Other codecs are fine at the same version, and zstd from v7 on.
    assert produce(client, "t", handmade_batch([T], codec=Compression.LZ4),
                   version=version).error_code == 0
    assert produce(client, "t", handmade_batch([T], codec=Compression.ZSTD),
                   version=7).error_code == 0
    assert log_manager.get_log("t", 0).log_end_offset == 2
