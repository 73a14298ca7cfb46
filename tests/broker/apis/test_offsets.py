"""ListOffsets, OffsetForLeaderEpoch, DeleteRecords."""

from __future__ import annotations

from typing import Any

import pytest

from samsa.protocol import (
    DeleteRecordsRequest,
    ListOffsetsRequest,
    OffsetForLeaderEpochRequest,
)


def list_offsets(client: Any, topic: str, partition: int, timestamp: int, *, version: int = 7,
                 isolation_level: int = 0, current_leader_epoch: int = -1) -> Any:
    request = ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=partition,
                                                    timestamp=timestamp,
                                                    current_leader_epoch=current_leader_epoch)])])
    return client.call(request, version).topics[0].partitions[0]


@pytest.fixture
def filled(log_manager: Any, make_batch: Any) -> Any:
    """Topic "t": offsets 0-1 at time 1000, 2 at 2000, 3-4 at 3000."""
    log_manager.create_topic("t", 1)
    log = log_manager.get_log("t", 0)
    log.append_as_leader(make_batch(b"a", b"b", timestamp=1000), leader_epoch=0)
    log.append_as_leader(make_batch(b"c", timestamp=2000), leader_epoch=0)
    log.append_as_leader(make_batch(b"d", b"e", timestamp=3000), leader_epoch=0)
    return log


@pytest.mark.parametrize("version", [1, 2, 4, 6, 9])
def test_earliest_and_latest(client: Any, filled: Any, version: int) -> None:
    latest = list_offsets(client, "t", 0, -1, version=version)
    assert (latest.error_code, latest.offset, latest.timestamp) == (0, 5, -1)
    earliest = list_offsets(client, "t", 0, -2, version=version)
    assert (earliest.error_code, earliest.offset) == (0, 0)
    if version >= 4:
        assert latest.leader_epoch == 0


def test_by_timestamp(client: Any, filled: Any) -> None:
    found = list_offsets(client, "t", 0, 1500)
    assert (found.offset, found.timestamp) == (2, 2000)
    found = list_offsets(client, "t", 0, 0)
    assert (found.offset, found.timestamp) == (0, 1000)
    missing = list_offsets(client, "t", 0, 9999)
    assert (missing.error_code, missing.offset, missing.timestamp) == (0, -1, -1)


def test_max_timestamp_and_tiered(client: Any, filled: Any) -> None:
    found = list_offsets(client, "t", 0, -3, version=7)
    assert found.timestamp == 3000 and found.offset in (3, 4)
    assert list_offsets(client, "t", 0, -4, version=8).offset == 0
    tiered = list_offsets(client, "t", 0, -5, version=9)
    assert (tiered.offset, tiered.timestamp) == (-1, -1)


def test_after_delete_records(client: Any, filled: Any) -> None:
    request = DeleteRecordsRequest(timeout_ms=1000, topics=[
        DeleteRecordsRequest.DeleteRecordsTopic(name="t", partitions=[
            DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=3)])])
    result = client.call(request, 2).topics[0].partitions[0]
    assert (result.error_code, result.low_watermark) == (0, 3)
    assert list_offsets(client, "t", 0, -2).offset == 3
    assert list_offsets(client, "t", 0, 0).offset == 3


@pytest.mark.parametrize("version", [0, 1, 2])
def test_delete_records_errors(client: Any, filled: Any, version: int) -> None:
    request = DeleteRecordsRequest(timeout_ms=1000, topics=[
        DeleteRecordsRequest.DeleteRecordsTopic(name="t", partitions=[
            DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=99),
            DeleteRecordsRequest.DeleteRecordsPartition(partition_index=7, offset=1)]),
        DeleteRecordsRequest.DeleteRecordsTopic(name="nope", partitions=[
            DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=1)])])
    response = client.call(request, version)
    codes = [(t.name, p.partition_index, p.error_code, p.low_watermark)
             for t in response.topics for p in t.partitions]
    assert codes == [("t", 0, 1, -1), ("t", 7, 3, -1), ("nope", 0, 3, -1)]


def test_delete_records_to_high_watermark(client: Any, filled: Any) -> None:
    request = DeleteRecordsRequest(timeout_ms=1000, topics=[
        DeleteRecordsRequest.DeleteRecordsTopic(name="t", partitions=[
            DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=-1)])])
    assert client.call(request, 1).topics[0].partitions[0].low_watermark == 5


def test_list_offsets_errors(client: Any, filled: Any) -> None:
    assert list_offsets(client, "nope", 0, -1).error_code == 3
    assert list_offsets(client, "t", 3, -1).error_code == 3
    assert list_offsets(client, "t", 0, -1, current_leader_epoch=4).error_code == 75
    request = ListOffsetsRequest(replica_id=-1, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name="t", partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1),
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-2)])])
    codes = [p.error_code for p in client.call(request, 5).topics[0].partitions]
    assert codes == [42, 42]  # a partition listed twice


def test_read_committed_latest_is_the_lso(client: Any, filled: Any) -> None:
    assert list_offsets(client, "t", 0, -1, isolation_level=1, version=2).offset == 5


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch(client: Any, filled: Any, log_manager: Any,
                                 version: int) -> None:
    log_manager.create_topic("empty", 1)
    Topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    Partition = OffsetForLeaderEpochRequest.OffsetForLeaderPartition
    request = OffsetForLeaderEpochRequest(replica_id=-1, topics=[
        Topic(topic="t", partitions=[Partition(partition=0, leader_epoch=0,
                                               current_leader_epoch=0),
                                     Partition(partition=1, leader_epoch=0)]),
        Topic(topic="empty", partitions=[Partition(partition=0, leader_epoch=0)]),
        Topic(topic="t2", partitions=[Partition(partition=0, leader_epoch=0)])])
    response = client.call(request, version)
    got = {(t.topic, p.partition): (p.error_code, p.leader_epoch, p.end_offset)
           for t in response.topics for p in t.partitions}
    assert got == {("t", 0): (0, 0, 5), ("t", 1): (3, -1, -1), ("empty", 0): (0, 0, 0),
                   ("t2", 0): (3, -1, -1)}
    request = OffsetForLeaderEpochRequest(replica_id=-1, topics=[
        Topic(topic="t", partitions=[Partition(partition=0, leader_epoch=3)])])
    p = client.call(request, version).topics[0].partitions[0]
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, -1, -1)
