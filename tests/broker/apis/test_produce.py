from __future__ import annotations

import time
from typing import Any

import pytest

from samsa.protocol import FetchRequest, ProduceRequest

TopicData = ProduceRequest.TopicProduceData
PartitionData = ProduceRequest.PartitionProduceData


def produce(client: Any, topic: str, partition: int, records: bytes | None, *, acks: int = -1,
            version: int = 9, transactional_id: str | None = None) -> Any:
    request = ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=5000,
                             topic_data=[TopicData(name=topic, partition_data=[
                                 PartitionData(index=partition, records=records)])])
    return client.send(request, version)


def only_partition(ctx: Any) -> Any:
    assert ctx.outcome == "respond"
    [topic] = ctx.response.responses
    [partition] = topic.partition_responses
    return partition


@pytest.mark.parametrize("version", [3, 5, 7, 8, 9, 12])
def test_offsets_are_assigned_in_order(client: Any, log_manager: Any, make_batch: Any,
                                       version: int) -> None:
    log_manager.create_topic("t", 1)
    first = only_partition(produce(client, "t", 0, make_batch(b"a", b"b"), version=version))
    second = only_partition(produce(client, "t", 0, make_batch(b"c"), version=version))
    assert (first.error_code, first.base_offset) == (0, 0)
    assert (second.error_code, second.base_offset) == (0, 2)
    if version >= 2:
        assert second.log_append_time_ms == -1  # CreateTime topic
    if version >= 5:
        assert second.log_start_offset == 0
    assert log_manager.get_log("t", 0).high_watermark == 3


def test_log_append_time_topic_reports_the_time(client: Any, log_manager: Any,
                                                make_batch: Any) -> None:
    log_manager.create_topic("lat", 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    response = only_partition(produce(client, "lat", 0, make_batch(b"x")))
    assert response.error_code == 0 and response.log_append_time_ms >= before


def test_unknown_topic_and_partition(client: Any, log_manager: Any, make_batch: Any) -> None:
    log_manager.create_topic("t", 1)
    assert only_partition(produce(client, "nope", 0, make_batch(b"x"))).error_code == 3
    assert only_partition(produce(client, "t", 5, make_batch(b"x"))).error_code == 3
    assert log_manager.topic("nope") is None  # produce never auto-creates


def test_invalid_acks(client: Any, log_manager: Any, make_batch: Any) -> None:
    log_manager.create_topic("t", 1)
    response = only_partition(produce(client, "t", 0, make_batch(b"x"), acks=2))
    assert response.error_code == 21
    assert log_manager.get_log("t", 0).log_end_offset == 0


def test_corrupt_batch(client: Any, log_manager: Any, make_batch: Any) -> None:
    log_manager.create_topic("t", 1)
    data = bytearray(make_batch(b"payload"))
    data[-1] ^= 0xFF  # breaks the CRC
    response = only_partition(produce(client, "t", 0, bytes(data)))
    assert response.error_code == 2
    assert response.base_offset == -1
    assert response.error_message


def test_two_batches_in_one_partition_is_invalid_record(client: Any, log_manager: Any,
                                                        make_batch: Any) -> None:
    log_manager.create_topic("t", 1)
    response = only_partition(produce(client, "t", 0, make_batch(b"a") + make_batch(b"b")))
    assert response.error_code == 87


def test_empty_and_null_records_are_invalid(client: Any, log_manager: Any) -> None:
    log_manager.create_topic("t", 1)
    assert only_partition(produce(client, "t", 0, b"")).error_code in (2, 87)
    assert only_partition(produce(client, "t", 0, None)).error_code in (2, 87)


def test_message_too_large(client: Any, log_manager: Any, make_batch: Any) -> None:
    log_manager.create_topic("small", 1, {"max.message.bytes": "100"})
    assert only_partition(produce(client, "small", 0, make_batch(b"x" * 200))).error_code == 10


def test_timestamp_too_far_in_the_future(client: Any, log_manager: Any,
                                         make_batch: Any) -> None:
    log_manager.create_topic("t", 1)
    future = int(time.time() * 1000) + 2 * 3_600_000
    assert only_partition(produce(client, "t", 0, make_batch(b"x", timestamp=future))) \
        .error_code == 32


def test_transactional_produce_of_an_unknown_transactional_id_is_refused(
        client: Any, log_manager: Any, make_batch: Any) -> None:
    log_manager.create_topic("t", 1)
    txn_batch = make_batch(b"x", producer_id=1, producer_epoch=0, base_sequence=0,
                           transactional=True)
    response = only_partition(produce(client, "t", 0, txn_batch, transactional_id="tx"))
    assert response.error_code == 49  # INVALID_PRODUCER_ID_MAPPING, from the verification
    assert log_manager.get_log("t", 0).log_end_offset == 0


def test_acks_zero_sends_no_response(client: Any, log_manager: Any, make_batch: Any) -> None:
    log_manager.create_topic("t", 1)
    ctx = produce(client, "t", 0, make_batch(b"x"), acks=0)
    assert ctx.outcome == "no_response"
    assert log_manager.get_log("t", 0).log_end_offset == 1


def test_acks_zero_failure_closes_the_connection(client: Any, make_batch: Any) -> None:
    ctx = produce(client, "missing", 0, make_batch(b"x"), acks=0)
    assert ctx.outcome == "close"


def test_idempotent_duplicate_answered_with_original_offsets(client: Any, log_manager: Any,
                                                             make_batch: Any) -> None:
    log_manager.create_topic("t", 1)
    first = make_batch(b"a", b"b", producer_id=7, producer_epoch=0, base_sequence=0)
    second = make_batch(b"c", producer_id=7, producer_epoch=0, base_sequence=2)
    assert only_partition(produce(client, "t", 0, first)).base_offset == 0
    assert only_partition(produce(client, "t", 0, second)).base_offset == 2
    retry = only_partition(produce(client, "t", 0, first))
    assert (retry.error_code, retry.base_offset) == (0, 0)
    assert log_manager.get_log("t", 0).log_end_offset == 3
    gap = make_batch(b"d", producer_id=7, producer_epoch=0, base_sequence=10)
    assert only_partition(produce(client, "t", 0, gap)).error_code == 45
    stale = make_batch(b"e", producer_id=7, producer_epoch=0, base_sequence=3)
    assert only_partition(produce(client, "t", 0, stale)).error_code == 0
    bumped = make_batch(b"f", producer_id=7, producer_epoch=1, base_sequence=0)
    assert only_partition(produce(client, "t", 0, bumped)).error_code == 0
    fenced = make_batch(b"g", producer_id=7, producer_epoch=0, base_sequence=4)
    assert only_partition(produce(client, "t", 0, fenced)).error_code == 47


def test_many_partitions_and_topics_in_one_request(client: Any, log_manager: Any,
                                                   make_batch: Any) -> None:
    log_manager.create_topic("a", 2)
    log_manager.create_topic("b", 1)
    request = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
        TopicData(name="a", partition_data=[PartitionData(index=0, records=make_batch(b"1")),
                                            PartitionData(index=1, records=make_batch(b"2")),
                                            PartitionData(index=2, records=make_batch(b"3"))]),
        TopicData(name="b", partition_data=[PartitionData(index=0, records=make_batch(b"4"))]),
    ])
    response = client.call(request, 8)
    codes = {(t.name, p.index): p.error_code for t in response.responses
             for p in t.partition_responses}
    assert codes == {("a", 0): 0, ("a", 1): 0, ("a", 2): 3, ("b", 0): 0}


def test_fetch_round_trip_after_produce(client: Any, log_manager: Any, make_batch: Any) -> None:
    # A quick end-to-end check; test_fetch.py covers Fetch itself.
    from samsa.records.memory_records import iter_batches

    log_manager.create_topic("t", 1)
    produce(client, "t", 0, make_batch(b"hello", b"world"))
    request = FetchRequest(max_wait_ms=0, min_bytes=1, topics=[FetchRequest.FetchTopic(
        topic="t", partitions=[FetchRequest.FetchPartition(partition=0, fetch_offset=0,
                                                           partition_max_bytes=1 << 20)])])
    response = client.call(request, 11)
    data = response.responses[0].partitions[0]
    values = [r.value for b in iter_batches(data.records) for r in b]
    assert values == [b"hello", b"world"]
    assert data.high_watermark == 2


def test_min_insync_replicas_above_the_replication_factor_is_met_as_kafka_does(
        client: Any, log_manager: Any, make_batch: Any) -> None:
    # Kafka 3.7+ checks an acks=all write against min(min.insync.replicas, replicas)
    # (Partition.effectiveMinIsr, KAFKA-15583): a one-broker Kafka accepts it, and so does this.
    log_manager.create_topic("isr2", 1, {"min.insync.replicas": "2"})
    for acks in (-1, 1):
        response = only_partition(produce(client, "isr2", 0, make_batch(b"x"), acks=acks))
        assert response.error_code == 0
    assert log_manager.get_log("isr2", 0).high_watermark == 2
