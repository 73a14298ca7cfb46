"""Batch timestamps over the wire: a batch as sarama 1.22 sends it (MaxTimestamp -1) is found by
time, its rewritten header reads back through a real consumer, and confluent-kafka's
AdminClient finds the record with the largest timestamp (ListOffsets MAX_TIMESTAMP).

Requests are size-prefixed frames from samsa.protocol over a plain socket (RawClient), with
batches built byte by byte (handmade_batches); confluent-kafka must be installed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from handmade_batches import handmade_batch

from samsa.broker import Broker
from samsa.protocol import FetchRequest, ListOffsetsRequest
from samsa.records import validate_batch
from samsa.records.memory_records import iter_batches

T = int(time.time() * 1000) - 60_000


def offset_for(client: Any, topic: str, timestamp: int, version: int = 1) -> tuple[int, int]:
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])])
    part = client.call(request, version).topics[0].partitions[0]
    assert part.error_code == 0
    return part.offset, part.timestamp


def fetch_bytes(client: Any, topic: str) -> bytes:
    request = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                           topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                               FetchRequest.FetchPartition(partition=0, fetch_offset=0,
                                                           partition_max_bytes=1 << 20)])])
    part = client.call(request, 12).responses[0].partitions[0]
    assert part.error_code == 0
    return bytes(part.records)


def test_sarama_style_batch_is_found_by_timestamp(broker: Broker,
                                                  raw_client: Callable[[int], Any]) -> None:
    client = raw_client(broker.port)
    assert client.create_topic("sarama-ts", 1) == 0
    sent = handmade_batch([T, T + 20, T + 10], max_timestamp=-1)
    assert client.produce("sarama-ts", 0, sent, version=7).error_code == 0
    # The first record at or after the time, by offset.
    assert offset_for(client, "sarama-ts", T + 15) == (1, T + 20)
    assert offset_for(client, "sarama-ts", T) == (0, T)
    assert offset_for(client, "sarama-ts", T + 21) == (-1, -1)
    assert offset_for(client, "sarama-ts", -3, version=7) == (1, T + 20)
    # Stored with the broker's MaxTimestamp and a CRC that matches it.
    data = fetch_bytes(client, "sarama-ts")
    header = validate_batch(data, 0)
    assert header.max_timestamp == T + 20
    assert header.crc != int.from_bytes(sent[17:21], "big")


def test_rewritten_headers_read_back_through_librdkafka(broker: Broker,
                                                        raw_client: Callable[[int], Any]) -> None:
    """librdkafka with check.crcs verifies every batch's CRC-32C: the rewrite must be valid."""
    from confluent_kafka import Consumer, TopicPartition

    client = raw_client(broker.port)
    assert client.create_topic("rewritten", 1) == 0
    batches = [handmade_batch([T, T + 5], max_timestamp=-1),
               handmade_batch([T + 9, T + 1], max_timestamp=T)]  # too small
    for batch in batches:
        assert client.produce("rewritten", 0, batch, version=7).error_code == 0
    assert [b.max_timestamp for b in iter_batches(fetch_bytes(client, "rewritten"))] == \
        [T + 5, T + 9]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "rewritten",
                         "enable.auto.commit": False, "check.crcs": True})
    got: list[tuple[int | None, int, bytes | None]] = []
    try:
        consumer.assign([TopicPartition("rewritten", 0, 0)])
        deadline = time.monotonic() + 30
        while len(got) < 4 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got.append((message.offset(), message.timestamp()[1], message.value()))
    finally:
        consumer.close()
    assert got == [(0, T, b"v0"), (1, T + 5, b"v1"), (2, T + 9, b"v0"), (3, T + 1, b"v1")]


def test_confluent_admin_list_offsets_max_timestamp(broker: Broker,
                                                    raw_client: Callable[[int], Any]) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    client = raw_client(broker.port)
    for topic in ("max-ts", "max-ts-tie"):
        assert client.create_topic(topic, 1) == 0
    # The largest timestamp sits in the middle of the first batch (offset 1 of 0-3).
    first = handmade_batch([T, T + 30, T + 10, T + 20], max_timestamp=T + 30)
    assert client.produce("max-ts", 0, first).error_code == 0
    assert client.produce("max-ts", 0, handmade_batch([T + 1, T + 2])).error_code == 0
    # On ties, the earliest record (Kafka's RecordBatch.offsetOfMaxTimestamp).
    tie = handmade_batch([T, T + 30, T + 30], max_timestamp=T + 30)
    assert client.produce("max-ts-tie", 0, tie).error_code == 0

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    wanted = {TopicPartition(t, 0): OffsetSpec.max_timestamp() for t in ("max-ts", "max-ts-tie")}
    results = {tp.topic: future.result(30) for tp, future in admin.list_offsets(wanted).items()}
    assert (results["max-ts"].offset, results["max-ts"].timestamp) == (1, T + 30)
    assert (results["max-ts-tie"].offset, results["max-ts-tie"].timestamp) == (1, T + 30)
