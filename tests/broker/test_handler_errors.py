"""A request handler that raises: the broker answers the request's error response over the wire.

Kafka's KafkaApis.handle catches whatever a handler throws and answers with
AbstractRequest.getErrorResponse: UNKNOWN_SERVER_ERROR (-1) in every error field of the
response -- each topic, partition or group the request named, and the top-level code where the
version has one -- and the connection stays open; only a Produce with acks=0 (no response due)
closes it.  Here a real handler of a running broker is replaced by one that raises, each request
goes over a socket, and the same connection and a new one go on working.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from samsa.broker import Broker
from samsa.broker.apis import kafka_apis
from samsa.protocol import (
    ApiKey,
    ApiVersionsRequest,
    CreateTopicsRequest,
    DeleteGroupsRequest,
    DescribeClusterRequest,
    DescribeGroupsRequest,
    FetchRequest,
    JoinGroupRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    ProduceRequest,
)
from samsa.protocol.message import Message
from samsa.records import RecordBatchBuilder

RawClient = Any  # tests/broker/conftest.py's RawClient, from the raw_client fixture


UNKNOWN_SERVER_ERROR = -1
T1, T2 = "handler-errors-a", "handler-errors-b"


class InjectedFailure(RuntimeError):
    pass


def _raise(services: Any, ctx: Any) -> Any:
    raise InjectedFailure("injected into the handler")


@pytest.fixture
def failing(monkeypatch: pytest.MonkeyPatch) -> Callable[[ApiKey], None]:
    """failing(key): the broker's handler for ``key`` raises from now until the test ends."""

    def fail(key: ApiKey) -> None:
        low, high, _ = kafka_apis._ROUTES[int(key)]
        monkeypatch.setitem(kafka_apis._ROUTES, int(key), (low, high, _raise))

    return fail


@pytest.fixture
def client(broker: Broker, raw_client: Callable[[int], RawClient]) -> Iterator[RawClient]:
    c = raw_client(broker.port)
    for topic in (T1, T2):
        assert c.create_topic(topic, 2) in (0, 36)  # created, or already there
    yield c


def error_codes(message: Any, version: int, path: str = "") -> list[tuple[str, int]]:
    """Every ``error_code`` field the response has at ``version``, with where it is."""
    found: list[tuple[str, int]] = []
    if isinstance(message, Message):
        for field in message._schema.fields:
            if version not in field.versions:
                continue
            value = getattr(message, field.name)
            if field.name == "error_code":
                found.append((path or "top", value))
            else:
                found += error_codes(value, version, f"{path}.{field.name}" if path else field.name)
    elif isinstance(message, list):
        for i, item in enumerate(message):
            found += error_codes(item, version, f"{path}[{i}]")
    return found


def _batch() -> bytes:
    builder = RecordBatchBuilder()
    builder.append(None, b"k", b"v")
    return bytes(builder.build())


def _produce(acks: int = -1) -> Any:
    P = ProduceRequest
    return P(acks=acks, timeout_ms=5000, topic_data=[
        P.TopicProduceData(name=T1, partition_data=[
            P.PartitionProduceData(index=0, records=_batch()),
            P.PartitionProduceData(index=1, records=_batch())]),
        P.TopicProduceData(name=T2, partition_data=[
            P.PartitionProduceData(index=1, records=_batch())])])


def _fetch() -> Any:
    F = FetchRequest
    return F(max_wait_ms=0, min_bytes=1, topics=[
        F.FetchTopic(topic=T1, partitions=[F.FetchPartition(partition=0, partition_max_bytes=1024),
                                           F.FetchPartition(partition=1, partition_max_bytes=1024)]),
        F.FetchTopic(topic=T2, partitions=[F.FetchPartition(partition=1, partition_max_bytes=1024)])])


def _list_offsets() -> Any:
    L = ListOffsetsRequest
    return L(replica_id=-1, topics=[L.ListOffsetsTopic(name=T1, partitions=[
        L.ListOffsetsPartition(partition_index=0, timestamp=-1),
        L.ListOffsetsPartition(partition_index=1, timestamp=-2)])])


def _offset_commit() -> Any:
    C = OffsetCommitRequest
    return C(group_id="handler-errors", generation_id_or_member_epoch=-1, member_id="", topics=[
        C.OffsetCommitRequestTopic(name=T1, partitions=[
            C.OffsetCommitRequestPartition(partition_index=0, committed_offset=1),
            C.OffsetCommitRequestPartition(partition_index=1, committed_offset=2)]),
        C.OffsetCommitRequestTopic(name=T2, partitions=[
            C.OffsetCommitRequestPartition(partition_index=0, committed_offset=3)])])


def _offset_fetch(version: int) -> Any:
    F = OffsetFetchRequest
    if version >= 8:
        return F(groups=[F.OffsetFetchRequestGroup(group_id=g, topics=None)
                         for g in ("handler-errors", "handler-errors-2")])
    return F(group_id="handler-errors", topics=[
        F.OffsetFetchRequestTopic(name=T1, partition_indexes=[0, 1]),
        F.OffsetFetchRequestTopic(name=T2, partition_indexes=[0])])


def _create_topics() -> Any:
    C = CreateTopicsRequest
    return C(timeout_ms=5000, topics=[
        C.CreatableTopic(name=name, num_partitions=1, replication_factor=1, assignments=[],
                         configs=[]) for name in ("handler-errors-new-1", "handler-errors-new-2")])


def _join_group() -> Any:
    return JoinGroupRequest(group_id="handler-errors", session_timeout_ms=10_000,
                            rebalance_timeout_ms=10_000, member_id="", protocol_type="consumer",
                            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                                name="range", metadata=b"")])


# (API, version, request, what names the response's error entries, the names expected)
PARTITIONS_1_2 = [(T1, 0), (T1, 1), (T2, 1)]
CASES: list[tuple[ApiKey, int, Callable[[], Any], Callable[[Any], Any], Any]] = [
    (ApiKey.PRODUCE, 3, _produce,
     lambda r: [(t.name, p.index, p.base_offset) for t in r.responses
                for p in t.partition_responses],
     [(t, p, -1) for t, p in PARTITIONS_1_2]),
    (ApiKey.PRODUCE, 9, _produce,
     lambda r: [(t.name, p.index, p.base_offset) for t in r.responses
                for p in t.partition_responses],
     [(t, p, -1) for t, p in PARTITIONS_1_2]),
    (ApiKey.FETCH, 4, _fetch,
     lambda r: [(t.topic, p.partition_index) for t in r.responses for p in t.partitions],
     PARTITIONS_1_2),
    (ApiKey.FETCH, 12, _fetch,
     lambda r: [(t.topic, p.partition_index) for t in r.responses for p in t.partitions],
     PARTITIONS_1_2),
    (ApiKey.LIST_OFFSETS, 1, _list_offsets,
     lambda r: [(t.name, p.partition_index) for t in r.topics for p in t.partitions],
     [(T1, 0), (T1, 1)]),
    (ApiKey.METADATA, 1,
     lambda: MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n)
                                     for n in (T1, T2)]),
     lambda r: [t.name for t in r.topics], [T1, T2]),
    (ApiKey.METADATA, 12,
     lambda: MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n)
                                     for n in (T1, T2)]),
     lambda r: [t.name for t in r.topics], [T1, T2]),
    (ApiKey.CREATE_TOPICS, 4, _create_topics, lambda r: [t.name for t in r.topics],
     ["handler-errors-new-1", "handler-errors-new-2"]),
    (ApiKey.CREATE_TOPICS, 7, _create_topics, lambda r: [t.name for t in r.topics],
     ["handler-errors-new-1", "handler-errors-new-2"]),
    (ApiKey.OFFSET_COMMIT, 2, _offset_commit,
     lambda r: [(t.name, p.partition_index) for t in r.topics for p in t.partitions],
     [(T1, 0), (T1, 1), (T2, 0)]),
    (ApiKey.OFFSET_COMMIT, 8, _offset_commit,
     lambda r: [(t.name, p.partition_index) for t in r.topics for p in t.partitions],
     [(T1, 0), (T1, 1), (T2, 0)]),
    (ApiKey.OFFSET_FETCH, 1, lambda: _offset_fetch(1),
     lambda r: [(t.name, p.partition_index, p.committed_offset) for t in r.topics
                for p in t.partitions],
     [(T1, 0, -1), (T1, 1, -1), (T2, 0, -1)]),
    (ApiKey.OFFSET_FETCH, 5, lambda: _offset_fetch(5), lambda r: r.topics, []),
    (ApiKey.OFFSET_FETCH, 8, lambda: _offset_fetch(8), lambda r: [g.group_id for g in r.groups],
     ["handler-errors", "handler-errors-2"]),
    (ApiKey.JOIN_GROUP, 5, _join_group, lambda r: (r.generation_id, r.member_id), (-1, "")),
    (ApiKey.DESCRIBE_GROUPS, 5,
     lambda: DescribeGroupsRequest(groups=["handler-errors", "handler-errors-2"]),
     lambda r: [g.group_id for g in r.groups], ["handler-errors", "handler-errors-2"]),
    (ApiKey.DELETE_GROUPS, 2,
     lambda: DeleteGroupsRequest(groups_names=["handler-errors", "handler-errors-2"]),
     lambda r: [g.group_id for g in r.results], ["handler-errors", "handler-errors-2"]),
]


def assert_serving(broker: Broker, client: RawClient, raw_client: Callable[[int], RawClient]
                   ) -> None:
    """The failed request's connection and a new one both get answers (ApiVersions runs on the
    network thread, DescribeCluster on a request handler thread)."""
    for c in (client, raw_client(broker.port)):
        assert c.call(ApiVersionsRequest(client_software_name="samsa-tests",
                                         client_software_version="1"), 3).error_code == 0
        cluster = c.call(DescribeClusterRequest(), 0)
        assert (cluster.error_code, [b.port for b in cluster.brokers]) == (0, [broker.port])


@pytest.mark.parametrize(("key", "version", "request_", "entries", "expected"), CASES,
                         ids=[f"{key.name}-v{version}" for key, version, *_ in CASES])
def test_a_failing_handler_answers_unknown_server_error_everywhere(
        broker: Broker, client: RawClient, raw_client: Callable[[int], RawClient],
        failing: Callable[[ApiKey], None], key: ApiKey, version: int,
        request_: Callable[[], Any], entries: Callable[[Any], Any], expected: Any) -> None:
    failing(key)
    response = client.call(request_(), version)
    codes = error_codes(response, version)
    assert codes, f"{key.name} v{version}: the response has no error field"
    assert {code for _, code in codes} == {UNKNOWN_SERVER_ERROR}, codes
    assert entries(response) == expected  # every topic/partition/group of the request
    assert_serving(broker, client, raw_client)


def test_a_failing_produce_with_acks_0_closes_the_connection(
        broker: Broker, client: RawClient, raw_client: Callable[[int], RawClient],
        failing: Callable[[ApiKey], None]) -> None:
    # ProduceRequest.getErrorResponse is null for acks=0: Kafka closes the connection.
    failing(ApiKey.PRODUCE)
    client.send(_produce(acks=0), 7)
    assert client.is_closed_by_peer()
    assert_serving(broker, raw_client(broker.port), raw_client)
