"""The request versions Kafka 3.9 serves and 4.0 removed (KIP-896): each handler answers the
old layout (every request and response goes through the codec at that version)."""

from __future__ import annotations

import gzip
import time
from typing import Any

import pytest

from samsa.protocol import (
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    FetchRequest,
    FindCoordinatorRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
)
from samsa.records import MemoryRecords, iter_batches
from tests.records.legacy_data import entry, message, message_set, wrapper

NOW = int(time.time() * 1000)


def produce(client: Any, version: int, records: bytes, topic: str = "t",
            partition: int = 0) -> Any:
    request = ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=partition, records=records)])])
    return client.call(request, version).responses[0].partition_responses[0]


def fetch(client: Any, version: int, offset: int = 0, max_bytes: int = 1 << 20,
          topic: str = "t") -> Any:
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, topics=[
        FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchPartition(partition=0, fetch_offset=offset,
                                        partition_max_bytes=max_bytes)])])
    return client.call(request, version).responses[0].partitions[0]


@pytest.fixture
def topic(log_manager: Any) -> Any:
    log_manager.create_topic("t", 1)
    return log_manager.get_log("t", 0)


# --- Produce v0-2 with magic 0/1 -------------------------------------------------------------------

@pytest.mark.parametrize(("version", "magic"), [(0, 0), (1, 0), (2, 1)])
def test_produce_legacy_sets_are_stored_as_v2(client: Any, topic: Any, version: int,
                                              magic: int) -> None:
    plain = message_set(magic, [(b"a", b"1", NOW), (None, b"2", NOW + 1)])
    inner = message_set(magic, [(b"c", b"3", NOW + 2), (b"d", b"4", NOW + 3)])
    compressed = wrapper(magic, 1, gzip.compress(inner), 1, NOW + 3)
    first = produce(client, version, plain)
    second = produce(client, version, compressed)
    assert (first.error_code, first.base_offset) == (0, 0)
    assert (second.error_code, second.base_offset) == (0, 2)
    stored = topic.read(0, 1 << 20).records.read()
    batches = list(iter_batches(stored))
    assert [b.magic for b in batches] == [2, 2]  # one v2 batch per request
    assert [b.compression for b in batches] == [0, 1]
    records = list(MemoryRecords(stored).records())
    assert [(r.offset, r.key, r.value) for r in records] == [
        (0, b"a", b"1"), (1, None, b"2"), (2, b"c", b"3"), (3, b"d", b"4")]
    assert [r.timestamp for r in records] == (
        [-1] * 4 if magic == 0 else [NOW, NOW + 1, NOW + 2, NOW + 3])


def test_produce_legacy_corrupt_crc_is_corrupt_message(client: Any, topic: Any) -> None:
    data = bytearray(message_set(1, [(b"k", b"v", NOW)]))
    data[-1] ^= 0xFF
    assert produce(client, 2, bytes(data)).error_code == 2  # CORRUPT_MESSAGE
    inner = bytearray(entry(0, message(1, b"k", b"v", 0, NOW)))
    inner[-1] ^= 0xFF
    assert produce(client, 2, wrapper(1, 1, gzip.compress(bytes(inner)), 0, NOW)
                   ).error_code == 2
    assert topic.log_end_offset == 0


def test_produce_v3_with_old_magic_is_invalid_record(client: Any, topic: Any) -> None:
    # Kafka 3.9's ProduceRequest.validateRecords: v3+ carries exactly one magic-2 batch.
    assert produce(client, 3, message_set(1, [(b"k", b"v", NOW)])).error_code == 87


def test_produce_v2_with_a_v2_batch(client: Any, topic: Any, make_batch: Any) -> None:
    response = produce(client, 2, make_batch(b"x", b"y"))
    assert (response.error_code, response.base_offset, response.log_append_time_ms) == (0, 0, -1)


# --- Fetch v0-3: down-converted ----------------------------------------------------------------------

@pytest.mark.parametrize(("version", "magic"), [(0, 0), (1, 0), (2, 1), (3, 1)])
def test_fetch_old_versions_get_old_magic(client: Any, topic: Any, make_batch: Any,
                                          version: int, magic: int) -> None:
    topic.append_as_leader(make_batch(b"a", b"b", b"c", timestamp=NOW), leader_epoch=0)
    part = fetch(client, version, offset=1)
    assert part.error_code == 0 and part.high_watermark == 3
    batches = list(iter_batches(part.records))
    assert {b.magic for b in batches} == {magic}
    records = list(MemoryRecords(part.records).records())
    assert [(r.offset, r.value) for r in records] == [(1, b"b"), (2, b"c")]
    assert [r.timestamp for r in records] == ([-1, -1] if magic == 0 else [NOW, NOW])


def test_fetch_v0_2_limits_are_hard(client: Any, topic: Any, make_batch: Any) -> None:
    topic.append_as_leader(make_batch(b"x" * 500), leader_epoch=0)
    # The only batch is larger than the limit: v2 gets nothing whole (and so nothing at all,
    # as Kafka's conversion finds no complete batch); v3 gets it whole (KIP-74).
    assert fetch(client, 2, max_bytes=100).records == b""
    assert [r.value for r in MemoryRecords(fetch(client, 3, max_bytes=100).records).records()
            ] == [b"x" * 500]


# --- ListOffsets v0 ---------------------------------------------------------------------------------

def list_offsets_v0(client: Any, timestamp: int, max_num: int, replica_id: int = -1) -> Any:
    request = ListOffsetsRequest(replica_id=replica_id, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name="t", partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=timestamp,
                                                    max_num_offsets=max_num)])])
    return client.call(request, 0).topics[0].partitions[0]


def test_list_offsets_v0_old_style_offsets(client: Any, topic: Any, make_batch: Any) -> None:
    topic.append_as_leader(make_batch(b"a", b"b"), leader_epoch=0)
    topic.roll()
    topic.append_as_leader(make_batch(b"c"), leader_epoch=0)
    # Candidates: segment bases 0 and 2 (file times), then the log end 3 (now).
    assert list_offsets_v0(client, -1, 10).old_style_offsets == [3, 2, 0]
    assert list_offsets_v0(client, -1, 1).old_style_offsets == [3]
    assert list_offsets_v0(client, -2, 10).old_style_offsets == [0]
    assert list_offsets_v0(client, int(time.time() * 1000) + 60_000, 2).old_style_offsets == [
        3, 2]
    assert list_offsets_v0(client, 1, 10).old_style_offsets == []  # older than every file
    assert list_offsets_v0(client, -3, 10).error_code == 35  # v0 knows only -1 and -2


def test_special_timestamps_need_their_version(client: Any, topic: Any) -> None:
    def code(timestamp: int, version: int) -> int:
        request = ListOffsetsRequest(replica_id=-1, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name="t", partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=0,
                                                        timestamp=timestamp)])])
        return int(client.call(request, version).topics[0].partitions[0].error_code)

    assert code(-3, 6) == 35 and code(-3, 7) == 0  # MAX_TIMESTAMP: KIP-734
    assert code(-4, 7) == 35 and code(-4, 8) == 0
    assert code(-5, 8) == 35 and code(-5, 9) == 0
    assert code(-6, 9) == 35 and code(-1, 1) == 0


# --- OffsetCommit v0-1, OffsetFetch v0 ---------------------------------------------------------------

def commit(client: Any, version: int, topic: str = "t", timestamp: int = -1) -> Any:
    request = OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="",
                                  topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                                      name=topic, partitions=[
                                          OffsetCommitRequest.OffsetCommitRequestPartition(
                                              partition_index=0, committed_offset=7,
                                              commit_timestamp=timestamp,
                                              committed_metadata="m")])])
    return client.call(request, version).topics[0].partitions[0]


def offset_fetch(client: Any, version: int) -> Any:
    request = OffsetFetchRequest(group_id="g", topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0])])
    return client.call(request, version).topics[0].partitions[0]


def test_offset_commit_v0_is_zookeeper_and_unsupported(client: Any, topic: Any) -> None:
    assert commit(client, 0).error_code == 35
    assert commit(client, 0, topic="nope").error_code == 3  # nothing left to commit
    fetched = offset_fetch(client, 0)
    assert (fetched.error_code, fetched.committed_offset, fetched.metadata) == (35, -1, "")
    assert offset_fetch(client, 1).committed_offset == -1  # nothing was stored


def test_offset_commit_v1_keeps_the_given_commit_time(client: Any, apis: Any,
                                                      topic: Any) -> None:
    assert commit(client, 1, timestamp=12345).error_code == 0
    fetched = offset_fetch(client, 1)
    assert (fetched.error_code, fetched.committed_offset, fetched.metadata) == (0, 7, "m")
    stored = apis.services.groups.groups["g"].offsets[("t", 0)]
    assert stored.commit_timestamp_ms == 12345
    assert commit(client, 1).error_code == 0
    assert apis.services.groups.groups["g"].offsets[("t", 0)].commit_timestamp_ms >= NOW


# --- the others' v0 layouts -----------------------------------------------------------------------------

def test_metadata_v0_empty_list_means_all_topics(client: Any, topic: Any) -> None:
    response = client.call(MetadataRequest(topics=[]), 0)
    assert [t.name for t in response.topics] == ["t"]
    assert response.brokers[0].node_id == 1


def test_find_coordinator_v0(client: Any) -> None:
    response = client.call(FindCoordinatorRequest(key="g"), 0)
    assert (response.error_code, response.node_id, response.port) == (0, 1, 19092)


def test_create_describe_delete_topics_v0(client: Any) -> None:
    created = client.call(CreateTopicsRequest(timeout_ms=1000, topics=[
        CreateTopicsRequest.CreatableTopic(name="old", num_partitions=2, replication_factor=1,
                                           assignments=[], configs=[])]), 0)
    assert created.topics[0].error_code == 0
    described = client.call(DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=2, resource_name="old",
            configuration_keys=["retention.ms"])]), 0).results[0]
    (entry_,) = described.configs
    assert (entry_.name, entry_.is_default, described.error_code) == ("retention.ms", True, 0)
    epochs = client.call(OffsetForLeaderEpochRequest(topics=[
        OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic="old", partitions=[
            OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                partition=0, leader_epoch=0)])]), 0).topics[0].partitions[0]
    assert (epochs.error_code, epochs.end_offset) == (0, 0)
    deleted = client.call(DeleteTopicsRequest(topic_names=["old"], timeout_ms=1000), 0)
    assert deleted.responses[0].error_code == 0


def test_produce_legacy_takes_the_topic_codec(client: Any, log_manager: Any) -> None:
    # compression.type=zstd: the converted batch is zstd even on Produce v2, which could not
    # carry zstd itself (the KIP-110 version check is ProduceRequest's, for v3+ only).
    log_manager.create_topic("z", 1, {"compression.type": "zstd"})
    response = produce(client, 2, message_set(1, [(b"k", b"v", NOW)]), topic="z")
    assert response.error_code == 0
    stored = log_manager.get_log("z", 0).read(0, 1 << 20).records.read()
    assert [b.compression for b in iter_batches(stored)] == [4]


def test_downconversion_can_be_disabled(client: Any, log_manager: Any, make_client: Any,
                                        make_batch: Any) -> None:
    """KIP-283: message.downconversion.enable=false (topic, or the broker's log.* default)
    answers Fetch v0-3 with UNSUPPORTED_VERSION; v4+ is unaffected."""
    log_manager.create_topic("nodown", 1, {"message.downconversion.enable": "false"})
    log_manager.get_log("nodown", 0).append_as_leader(make_batch(b"x"), leader_epoch=0)
    assert fetch(client, 2, topic="nodown").error_code == 35
    assert fetch(client, 4, topic="nodown").error_code == 0
    log_manager.create_topic("t", 1)
    off = make_client({"log.message.downconversion.enable": "false"})
    assert fetch(off, 0).error_code == 35
    assert fetch(client, 0).error_code == 0
