from __future__ import annotations

import uuid
from typing import Any

import pytest

from samsa.protocol import MetadataRequest

Topic = MetadataRequest.MetadataRequestTopic


def _topics(response: Any) -> dict[str, Any]:
    return {t.name: t for t in response.topics}


@pytest.mark.parametrize("version", range(13))
def test_brokers_cluster_and_controller(client: Any, apis: Any, log_manager: Any,
                                        version: int) -> None:
    log_manager.create_topic("present", 1)
    response = client.call(MetadataRequest(topics=[Topic(name="present"), Topic(name="x y")],
                                           include_topic_authorized_operations=version >= 8),
                           version)
    assert [(t.name, t.error_code) for t in response.topics] == [("present", 0), ("x y", 17)]
    [broker] = response.brokers
    assert (broker.node_id, broker.host, broker.port) == (1, "127.0.0.1", 19092)
    if version >= 1:
        assert broker.rack is None
        assert response.controller_id == 1
    if version >= 2:
        assert response.cluster_id == apis.services.cluster_id
        assert len(response.cluster_id) == 22


def test_cluster_id_is_stable_across_restarts(log_manager: Any) -> None:
    from samsa.broker.apis import KafkaApis

    first = KafkaApis(log_manager)
    second = KafkaApis(log_manager)
    try:
        assert first.services.cluster_id == second.services.cluster_id
    finally:
        first.close()
        second.close()


def test_auto_create_and_partition_metadata(client: Any, log_manager: Any) -> None:
    response = client.call(MetadataRequest(topics=[Topic(name="events")],
                                           allow_auto_topic_creation=True), 12)
    [topic] = response.topics
    assert topic.error_code == 0 and topic.name == "events"
    assert topic.topic_id == log_manager.topic("events").topic_id != uuid.UUID(int=0)
    assert topic.is_internal is False
    assert [p.partition_index for p in topic.partitions] == [0, 1]  # num.partitions=2
    for p in topic.partitions:
        assert (p.error_code, p.leader_id, p.leader_epoch) == (0, 1, 0)
        assert p.replica_nodes == [1] and p.isr_nodes == [1] and p.offline_replicas == []


def test_no_auto_create_when_not_allowed(client: Any, log_manager: Any) -> None:
    response = client.call(MetadataRequest(topics=[Topic(name="nope")],
                                           allow_auto_topic_creation=False), 4)
    assert response.topics[0].error_code == 3
    assert log_manager.topic("nope") is None


def test_no_auto_create_when_disabled(make_client: Any, log_manager: Any) -> None:
    client = make_client({"auto.create.topics.enable": "false"})
    response = client.call(MetadataRequest(topics=[Topic(name="nope")]), 12)
    assert response.topics[0].error_code == 3
    assert log_manager.topic("nope") is None


def test_v0_empty_list_means_all_topics_and_v1_empty_means_none(client: Any,
                                                               log_manager: Any) -> None:
    log_manager.create_topic("a", 1)
    log_manager.create_topic("b", 3)
    assert sorted(_topics(client.call(MetadataRequest(topics=[]), 0))) == ["a", "b"]
    assert client.call(MetadataRequest(topics=[]), 1).topics == []
    everything = client.call(MetadataRequest(topics=None), 1)
    assert sorted(_topics(everything)) == ["a", "b"]
    assert len(_topics(everything)["b"].partitions) == 3


@pytest.mark.parametrize("name", ["bad name", ".", "..", "x" * 250, "ü"])
def test_invalid_topic_names(client: Any, log_manager: Any, name: str) -> None:
    response = client.call(MetadataRequest(topics=[Topic(name=name)]), 9)
    assert response.topics[0].error_code == 17
    assert log_manager.topics() == {}


def test_longest_legal_name_is_created(client: Any) -> None:
    name = "x" * 249
    assert client.call(MetadataRequest(topics=[Topic(name=name)]), 9).topics[0].error_code == 0


def test_internal_topic_is_not_auto_created(client: Any) -> None:
    response = client.call(MetadataRequest(topics=[Topic(name="__consumer_offsets")]), 9)
    assert response.topics[0].error_code == 3
    assert response.topics[0].is_internal is True


def test_topic_by_id(client: Any, log_manager: Any) -> None:
    info = log_manager.create_topic("by-id", 1)
    response = client.call(MetadataRequest(topics=[Topic(name=None, topic_id=info.topic_id)]),
                           12)
    assert response.topics[0].name == "by-id" and response.topics[0].error_code == 0
    response = client.call(MetadataRequest(topics=[Topic(name=None, topic_id=uuid.uuid4())]),
                           12)
    assert response.topics[0].error_code == 100  # UNKNOWN_TOPIC_ID
    assert response.topics[0].name is None


def test_authorized_operations_when_asked(client: Any, log_manager: Any) -> None:
    log_manager.create_topic("ops", 1)
    response = client.call(MetadataRequest(topics=[Topic(name="ops")],
                                           include_topic_authorized_operations=True,
                                           include_cluster_authorized_operations=True), 10)
    assert response.topics[0].topic_authorized_operations == 3576
    assert response.cluster_authorized_operations == 8096
    response = client.call(MetadataRequest(topics=[Topic(name="ops")]), 10)
    assert response.topics[0].topic_authorized_operations == -2147483648


def test_duplicate_requested_topics_answered_once(client: Any) -> None:
    response = client.call(MetadataRequest(topics=[Topic(name="d"), Topic(name="d")]), 9)
    assert [t.name for t in response.topics] == ["d"]


def test_a_topic_id_asked_twice_is_answered_once(client: Any, log_manager: Any) -> None:
    info = log_manager.create_topic("by-id", 1)
    response = client.call(MetadataRequest(topics=[Topic(name=None, topic_id=info.topic_id),
                                                   Topic(name=None, topic_id=info.topic_id)]), 12)
    assert [(t.name, t.topic_id) for t in response.topics] == [("by-id", info.topic_id)]


def test_auto_creating_a_colliding_name_answers_invalid_topic(client: Any,
                                                              log_manager: Any) -> None:
    # "a.b" and "a_b" collide in metric names; Kafka refuses the second (Topic.hasCollision).
    log_manager.create_topic("a_b", 1)
    response = client.call(MetadataRequest(topics=[Topic(name="a.b")],
                                           allow_auto_topic_creation=True), 9)
    assert [(t.name, t.error_code) for t in response.topics] == [("a.b", 17)]
    assert log_manager.topic("a.b") is None
