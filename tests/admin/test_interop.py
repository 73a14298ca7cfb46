"""Cross-checks with clients nobody here wrote: topics samsa's admin creates look the same to
confluent-kafka (librdkafka) and kafka-python, and topics they create look right to samsa."""

from __future__ import annotations

import base64

import confluent_kafka
import confluent_kafka.admin as ck
import kafka.admin
import pytest

from samsa.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewTopic,
    format_topic_id,
)
from samsa.broker import Broker


@pytest.fixture
def topic(admin: AdminClient) -> str:
    admin.create_topics([NewTopic("shared", 3, configs={"retention.ms": "123456"})])
    return "shared"


def test_confluent_kafka_sees_what_samsa_created(broker: Broker, admin: AdminClient,
                                                 topic: str) -> None:
    ours = admin.describe_topics([topic])[topic]
    client = ck.AdminClient({"bootstrap.servers": broker.bootstrap_servers})

    metadata = client.list_topics(timeout=10)
    assert topic in metadata.topics
    partitions = metadata.topics[topic].partitions
    assert sorted(partitions) == [p.partition for p in ours.partitions]  # type: ignore[union-attr]
    for p in ours.partitions:  # type: ignore[union-attr]
        theirs = partitions[p.partition]
        assert (theirs.leader, theirs.replicas, theirs.isrs) == (
            p.leader, list(p.replicas), list(p.isr))

    described = client.describe_topics(
        confluent_kafka.TopicCollection([topic]))[topic].result(timeout=10)
    # librdkafka prints ids in standard base64; Kafka (and format_topic_id) in URL-safe base64.
    theirs_id = base64.b64decode(str(described.topic_id) + "==")
    assert theirs_id == ours.topic_id.bytes  # type: ignore[union-attr]
    assert format_topic_id(ours.topic_id) == base64.urlsafe_b64encode(  # type: ignore[union-attr]
        theirs_id).decode().rstrip("=")
    assert [p.id for p in described.partitions] == [0, 1, 2]
    assert not described.is_internal

    [future] = client.describe_configs([ck.ConfigResource("topic", topic)]).values()
    entry = future.result(timeout=10)["retention.ms"]
    assert entry.value == "123456" and not entry.is_default
    assert entry.source == ck.ConfigSource.DYNAMIC_TOPIC_CONFIG.value


def test_kafka_python_sees_what_samsa_created(broker: Broker, admin: AdminClient,
                                              topic: str) -> None:
    ours = admin.describe_topics([topic])[topic]
    client = kafka.admin.KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        assert topic in client.list_topics()
        [described] = client.describe_topics([topic])
    finally:
        client.close()
    assert described["error_code"] == 0 and described["name"] == topic
    assert described["topic_id"] == str(ours.topic_id)  # type: ignore[union-attr]
    assert [(p["partition_index"], p["leader_id"], p["replica_nodes"], p["isr_nodes"])
            for p in sorted(described["partitions"], key=lambda p: p["partition_index"])] == [
        (p.partition, p.leader, list(p.replicas), list(p.isr))
        for p in ours.partitions]  # type: ignore[union-attr]


def test_samsa_sees_what_confluent_kafka_created(broker: Broker, admin: AdminClient) -> None:
    client = ck.AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    [future] = client.create_topics([ck.NewTopic("from-librdkafka", 2, 1,
                                                  config={"cleanup.policy": "compact"})]).values()
    future.result(timeout=10)
    assert "from-librdkafka" in admin.list_topics()
    described = admin.describe_topics(["from-librdkafka"])["from-librdkafka"]
    assert len(described.partitions) == 2  # type: ignore[union-attr]
    configs = admin.describe_configs(["from-librdkafka"])[
        ConfigResource.topic("from-librdkafka")]
    assert configs["cleanup.policy"].value == "compact"  # type: ignore[index]
    assert configs["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG  # type: ignore[index]
