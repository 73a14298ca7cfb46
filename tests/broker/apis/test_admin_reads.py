"""OffsetDelete (47), DescribeLogDirs (35), DescribeProducers (61), DescribeTopicPartitions
(75) and DescribeConfigs of a group (32) against KafkaApis."""

from __future__ import annotations

import os
from typing import Any

from samsa.broker.apis import BrokerNode, KafkaApis
from samsa.broker.group import GroupState, PartitionCommit
from samsa.broker.log import LogManager
from samsa.protocol import (
    DescribeConfigsRequest,
    DescribeLogDirsRequest,
    DescribeProducersRequest,
    DescribeTopicPartitionsRequest,
    OffsetDeleteRequest,
)

from .conftest import Client

GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, UNKNOWN_TOPIC, INVALID_REQUEST = 69, 68, 3, 42


def _commit(apis: Any, group: str, *tps: tuple[str, int]) -> None:
    codes = apis.services.groups.commit_offsets(
        group, -1, "", None, [PartitionCommit(t, p, 5, -1, "") for t, p in tps])
    assert codes == [0] * len(tps)


def _offset_delete(client: Any, group: str, topics: dict[str, list[int]]) -> Any:
    R = OffsetDeleteRequest
    return client.call(R(group_id=group, topics=[
        R.OffsetDeleteRequestTopic(name=t, partitions=[
            R.OffsetDeleteRequestPartition(partition_index=p) for p in ps])
        for t, ps in topics.items()]), 0)


def test_offset_delete_of_an_empty_group(client: Any, apis: Any, log_manager: Any) -> None:
    log_manager.create_topic("a", 2)
    log_manager.create_topic("b", 1)
    _commit(apis, "g", ("a", 0), ("a", 1), ("b", 0))
    response = _offset_delete(client, "g", {"a": [0, 7], "ghost": [0]})
    assert response.error_code == 0
    codes = {(t.name, p.partition_index): p.error_code
             for t in response.topics for p in t.partitions}
    assert codes == {("a", 0): 0, ("a", 7): UNKNOWN_TOPIC, ("ghost", 0): UNKNOWN_TOPIC}
    groups = apis.services.groups
    assert set(groups.fetch_offsets("g", None)[1]) == {("a", 1), ("b", 0)}
    # The last offsets gone: the group itself is gone (Kafka's cleanupGroupMetadata).
    assert _offset_delete(client, "g", {"a": [1], "b": [0]}).error_code == 0
    assert "g" not in groups.groups
    assert _offset_delete(client, "g", {"a": [0]}).error_code == GROUP_ID_NOT_FOUND
    assert _offset_delete(client, "", {"a": [0]}).error_code == 24  # INVALID_GROUP_ID


def test_offset_delete_is_durable(tmp_path: Any) -> None:
    with LogManager(tmp_path / "d") as logs:
        logs.create_topic("a", 2)
        apis = KafkaApis(logs, node=BrokerNode(node_id=1), config={})
        _commit(apis, "g", ("a", 0), ("a", 1))
        assert _offset_delete(Client(apis), "g", {"a": [0]}).error_code == 0
        apis.close()
    with LogManager(tmp_path / "d") as logs:
        apis = KafkaApis(logs, node=BrokerNode(node_id=1), config={})
        try:
            assert set(apis.services.groups.fetch_offsets("g", None)[1]) == {("a", 1)}
        finally:
            apis.close()


def test_offset_delete_of_an_active_non_consumer_group(client: Any, apis: Any,
                                                       log_manager: Any) -> None:
    log_manager.create_topic("a", 1)
    _commit(apis, "connect", ("a", 0))
    group = apis.services.groups.groups["connect"]
    group.protocol_type, group.state = "connect", GroupState.STABLE  # as if members joined
    response = _offset_delete(client, "connect", {"a": [0]})
    assert (response.error_code, response.topics) == (NON_EMPTY_GROUP, [])


def test_describe_log_dirs(client: Any, log_manager: Any, make_batch: Any) -> None:
    log_manager.create_topic("a", 2)
    log_manager.create_topic("b", 1)
    log_manager.get_log("a", 1).append_as_leader(make_batch(b"x" * 100), leader_epoch=0)
    R = DescribeLogDirsRequest
    for version in range(5):
        [result] = client.call(R(topics=None), version).results
        assert result.error_code == 0 and result.log_dir == os.path.abspath(log_manager.data_dir)
        sizes = {(t.name, p.partition_index): p.partition_size
                 for t in result.topics for p in t.partitions}
        assert set(sizes) == {("a", 0), ("a", 1), ("b", 0)}
        assert sizes[("a", 0)] == 0 and sizes[("a", 1)] > 100
        if version >= 4:
            assert result.total_bytes >= result.usable_bytes > 0
    [result] = client.call(R(topics=[R.DescribableLogDirTopic(topic="a", partitions=[1, 5])]),
                           2).results
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in result.topics] \
        == [("a", [1])]


def test_describe_producers(client: Any, log_manager: Any, make_batch: Any) -> None:
    log_manager.create_topic("p", 1)
    log = log_manager.get_log("p", 0)
    log.append_as_leader(make_batch(b"1", b"2", producer_id=42, producer_epoch=3,
                                    base_sequence=0, timestamp=1_700_000_000_000),
                         leader_epoch=0, now_ms=1_700_000_000_000)
    log.append_as_leader(make_batch(b"3"), leader_epoch=0)  # not idempotent: not listed
    R = DescribeProducersRequest
    response = client.call(R(topics=[R.TopicRequest(name="p", partition_indexes=[0, 3]),
                                     R.TopicRequest(name="ghost", partition_indexes=[0])]), 0)
    [p0, p3] = response.topics[0].partitions
    assert (p0.error_code, p3.error_code) == (0, UNKNOWN_TOPIC)
    [state] = p0.active_producers
    assert (state.producer_id, state.producer_epoch, state.last_sequence,
            state.last_timestamp, state.current_txn_start_offset) == (42, 3, 1,
                                                                       1_700_000_000_000, -1)
    assert response.topics[1].partitions[0].error_code == UNKNOWN_TOPIC


def _dtp(client: Any, topics: list[str], limit: int = 2000,
         cursor: tuple[str, int] | None = None) -> Any:
    R = DescribeTopicPartitionsRequest
    return client.call(R(topics=[R.TopicRequest(name=t) for t in topics],
                         response_partition_limit=limit,
                         cursor=None if cursor is None else R.Cursor(topic_name=cursor[0],
                                                                     partition_index=cursor[1])),
                       0)


def test_describe_topic_partitions_pages(client: Any, log_manager: Any) -> None:
    log_manager.create_topic("x", 3)
    log_manager.create_topic("y", 2)
    response = _dtp(client, ["y", "x", "nope", "bad/name"])
    by_name = {t.name: t for t in response.topics}
    assert [t.name for t in response.topics] == ["bad/name", "nope", "x", "y"]
    assert by_name["nope"].error_code == UNKNOWN_TOPIC
    assert by_name["bad/name"].error_code == 17  # INVALID_TOPIC_EXCEPTION
    x = by_name["x"]
    assert x.topic_id == log_manager.topic("x").topic_id
    assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in x.partitions] \
        == [(i, 1, [1], [1]) for i in range(3)]
    assert response.next_cursor is None
    # Every topic, two partitions a page, following the cursor.
    seen, cursor = [], None
    while True:
        page = _dtp(client, [], limit=2, cursor=cursor)
        seen += [(t.name, p.partition_index) for t in page.topics for p in t.partitions]
        if page.next_cursor is None:
            break
        cursor = (page.next_cursor.topic_name, page.next_cursor.partition_index)
    assert seen == [("x", 0), ("x", 1), ("x", 2), ("y", 0), ("y", 1)]
    # The cursor's topic must be among those asked for.
    response = _dtp(client, ["x"], cursor=("y", 0))
    assert [(t.name, t.error_code) for t in response.topics] == [("x", INVALID_REQUEST)]


def test_describe_configs_of_a_group(client: Any) -> None:
    R = DescribeConfigsRequest
    request = R(resources=[R.DescribeConfigsResource(resource_type=32, resource_name=name,
                                                     configuration_keys=None)
                           for name in ("any-group", "")], include_synonyms=False)
    group, empty = client.call(request, 4).results
    assert group.error_code == 0 and group.resource_type == 32
    configs = {c.name: (c.value, c.config_source, c.read_only, c.config_type)
               for c in group.configs}
    assert configs["consumer.session.timeout.ms"] == ("45000", 5, False, 3)
    assert configs["consumer.heartbeat.interval.ms"] == ("5000", 5, False, 3)
    assert empty.error_code == INVALID_REQUEST
