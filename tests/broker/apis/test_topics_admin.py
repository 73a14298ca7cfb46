"""CreateTopics, DeleteTopics, CreatePartitions."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from samsa.protocol import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
)

Creatable = CreateTopicsRequest.CreatableTopic
Config = CreateTopicsRequest.CreatableTopicConfig
Assignment = CreateTopicsRequest.CreatableReplicaAssignment


def create(client: Any, *topics: Any, version: int = 7, validate_only: bool = False) -> Any:
    response = client.call(CreateTopicsRequest(topics=list(topics), timeout_ms=1000,
                                               validate_only=validate_only), version)
    return {t.name: t for t in response.topics}


def topic(name: str, partitions: int = 1, replication: int = 1, configs: dict | None = None,
          assignments: list[Any] | None = None) -> Any:
    return Creatable(name=name, num_partitions=partitions, replication_factor=replication,
                     assignments=assignments or [],
                     configs=[Config(name=k, value=v) for k, v in (configs or {}).items()])


@pytest.mark.parametrize("version", [2, 3, 4, 5, 6, 7])
def test_create_topic(client: Any, log_manager: Any, version: int) -> None:
    result = create(client, topic("t", 3, configs={"retention.ms": "1000"}),
                    version=version)["t"]
    assert result.error_code == 0
    info = log_manager.topic("t")
    assert info.partitions == 3 and info.configs == {"retention.ms": "1000"}
    if version >= 5:
        assert (result.num_partitions, result.replication_factor) == (3, 1)
        configs = {c.name: c for c in result.configs}
        assert configs["retention.ms"].value == "1000"
        assert configs["retention.ms"].config_source == 1  # TOPIC_CONFIG
        assert configs["segment.bytes"].config_source == 5  # DEFAULT_CONFIG
    if version >= 7:
        assert result.topic_id == info.topic_id


def test_defaults_and_validate_only(client: Any, log_manager: Any) -> None:
    assert create(client, topic("v", -1, -1), validate_only=True)["v"].error_code == 0
    assert log_manager.topic("v") is None
    assert create(client, topic("d", -1, -1))["d"].num_partitions == 2  # num.partitions


def test_create_errors(client: Any, log_manager: Any) -> None:
    log_manager.create_topic("exists", 1)
    log_manager.create_topic("a.b", 1)
    results = create(
        client,
        topic("exists"),
        topic("bad name"),
        topic("zero", 0),
        topic("rf3", 1, 3),
        topic("rf0", 1, 0),
        topic("cfg", 1, configs={"no.such.config": "1"}),
        topic("val", 1, configs={"retention.ms": "soon"}),
        topic("ts", 1, configs={"message.timestamp.type": "Yesterday"}),
        topic("a_b"),
        topic("asg", -1, -1, assignments=[Assignment(partition_index=0, broker_ids=[2])]),
        topic("both", 2, 1, assignments=[Assignment(partition_index=0, broker_ids=[1])]),
    )
    codes = {name: r.error_code for name, r in results.items()}
    assert codes == {"exists": 36, "bad name": 17, "zero": 37, "rf3": 38, "rf0": 38, "cfg": 40,
                     "val": 40, "ts": 40, "a_b": 17, "asg": 39, "both": 42}
    assert all(r.error_message for r in results.values())
    assert sorted(log_manager.topics()) == ["a.b", "exists"]


def test_assignment_to_this_node(client: Any, log_manager: Any) -> None:
    result = create(client, topic("asg", -1, -1, assignments=[
        Assignment(partition_index=0, broker_ids=[1]),
        Assignment(partition_index=1, broker_ids=[1])]))["asg"]
    assert result.error_code == 0 and log_manager.topic("asg").partitions == 2


def test_duplicate_names_in_one_request(client: Any, log_manager: Any) -> None:
    response = client.call(CreateTopicsRequest(topics=[topic("dup"), topic("dup")],
                                               timeout_ms=1000), 5)
    assert [(t.name, t.error_code) for t in response.topics] == [("dup", 42)]
    assert log_manager.topic("dup") is None


@pytest.mark.parametrize("version", [1, 3, 4, 5])
def test_delete_topics_by_name(client: Any, log_manager: Any, version: int) -> None:
    log_manager.create_topic("gone", 1)
    response = client.call(DeleteTopicsRequest(topic_names=["gone", "never"], timeout_ms=1000),
                           version)
    assert {r.name: r.error_code for r in response.responses} == {"gone": 0, "never": 3}
    assert log_manager.topic("gone") is None


def test_delete_topics_by_id(client: Any, log_manager: Any) -> None:
    info = log_manager.create_topic("gone", 1)
    State = DeleteTopicsRequest.DeleteTopicState
    response = client.call(DeleteTopicsRequest(topics=[
        State(name=None, topic_id=info.topic_id), State(name=None, topic_id=uuid.uuid4()),
        State(name="never", topic_id=uuid.UUID(int=0))], timeout_ms=1000), 6)
    got = [(r.name, r.error_code) for r in response.responses]
    assert got == [("gone", 0), (None, 100), ("never", 3)]
    assert log_manager.topic("gone") is None


def test_delete_disabled(make_client: Any, log_manager: Any) -> None:
    client = make_client({"delete.topic.enable": False})
    log_manager.create_topic("keep", 1)
    response = client.call(DeleteTopicsRequest(topic_names=["keep"], timeout_ms=1000), 4)
    assert response.responses[0].error_code == 73
    assert log_manager.topic("keep") is not None


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_create_partitions(client: Any, log_manager: Any, version: int) -> None:
    log_manager.create_topic("t", 2)
    log_manager.create_topic("u", 2)
    Topic = CreatePartitionsRequest.CreatePartitionsTopic
    Assign = CreatePartitionsRequest.CreatePartitionsAssignment
    request = CreatePartitionsRequest(timeout_ms=1000, validate_only=False, topics=[
        Topic(name="t", count=4, assignments=None),
        Topic(name="u", count=1, assignments=None),
        Topic(name="nope", count=3, assignments=None),
    ])
    results = {r.name: r for r in client.call(request, version).results}
    assert {n: r.error_code for n, r in results.items()} == {"t": 0, "u": 37, "nope": 3}
    assert results["u"].error_message
    assert log_manager.topic("t").partitions == 4
    request = CreatePartitionsRequest(timeout_ms=1000, validate_only=False, topics=[
        Topic(name="t", count=4, assignments=None),
        Topic(name="u", count=3, assignments=[Assign(broker_ids=[5])]),
    ])
    results = {r.name: r.error_code for r in client.call(request, version).results}
    assert results == {"t": 37, "u": 39}
    request = CreatePartitionsRequest(timeout_ms=1000, validate_only=True, topics=[
        Topic(name="u", count=3, assignments=[Assign(broker_ids=[1])])])
    assert client.call(request, version).results[0].error_code == 0
    assert log_manager.topic("u").partitions == 2
