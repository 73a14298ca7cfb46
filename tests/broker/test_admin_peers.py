"""Issue 11's admin calls through real admin clients: confluent-kafka (librdkafka 2.16) for
IncrementalAlterConfigs / AlterConfigs / DescribeConfigs (topics, groups) and describe_topics,
kafka-python 3.0's KafkaAdminClient for OffsetDelete, DescribeLogDirs, DescribeProducers and
DescribeTopicPartitions.  The peers are imported directly: a missing one fails the test."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import pytest

from samsa.broker import Broker

HOST = "127.0.0.1"
OLD = 2 * 3_600_000  # records this much older than now


def _confluent_admin(broker: Broker) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def _result(futures: dict[Any, Any]) -> dict[Any, Any]:
    return {k: f.result(timeout=30) for k, f in futures.items()}


def _configs(admin: Any, resource: Any) -> dict[str, Any]:
    return _result(admin.describe_configs([resource], request_timeout=30))[resource]


def _topic(admin: Any, name: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import NewTopic

    _result(admin.create_topics([NewTopic(name, partitions)], request_timeout=30))


def test_confluent_alter_configs_apply_to_the_open_log(broker: Broker) -> None:
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        OffsetSpec,
        ResourceType,
    )

    admin, topic = _confluent_admin(broker), "cfg-retention"
    _topic(admin, topic)
    resource = ConfigResource(ResourceType.TOPIC, topic)
    # IncrementalAlterConfigs: tiny segments, and compaction appended to cleanup.policy.
    change = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("segment.bytes", "1024", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    ])
    _result(admin.incremental_alter_configs([change], request_timeout=30))
    configs = _configs(admin, resource)
    assert configs["segment.bytes"].value == "1024"
    assert configs["segment.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].value == "delete,compact"

    # Old records, one batch each: the 1 KiB segments roll between them.
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    now = int(time.time() * 1000)
    for i in range(5):
        producer.produce(topic, b"v" * 600, key=b"%d" % i, timestamp=now - OLD)
        assert producer.flush(30) == 0
    producer.produce(topic, b"n" * 600, key=b"new", timestamp=now)  # rolls too: alone
    assert producer.flush(30) == 0
    log = broker.log_manager.get_log(topic, 0)
    assert len(log.segments) == 6
    assert log.apply_retention(now) == 0  # seven days' retention keeps them

    # AlterConfigs replaces the whole set: cleanup.policy returns to its default.
    legacy = ConfigResource(ResourceType.TOPIC, topic,
                            set_config={"segment.bytes": "1024", "retention.ms": "3600000"})
    _result(admin.alter_configs([legacy], request_timeout=30))
    configs = _configs(admin, resource)
    assert configs["retention.ms"].value == "3600000"
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value

    assert log.apply_retention(now) == 5  # the old segments went at once
    earliest = TopicPartition(topic, 0)
    offsets = _result(admin.list_offsets({earliest: OffsetSpec.earliest()},
                                         request_timeout=30))
    assert offsets[earliest].offset == 5


def test_confluent_alter_configs_errors(broker: Broker) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = _confluent_admin(broker)
    _topic(admin, "cfg-errors")
    bad = ConfigResource(ResourceType.TOPIC, "cfg-errors", incremental_configs=[
        ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as info:
        _result(admin.incremental_alter_configs([bad], request_timeout=30))
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG
    ghost = ConfigResource(ResourceType.TOPIC, "cfg-ghost", incremental_configs=[
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as info:
        _result(admin.incremental_alter_configs([ghost], request_timeout=30))
    assert info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


@pytest.fixture
def own_broker(make_broker: Callable[..., Broker]) -> Broker:
    """A broker of its own: dynamic broker configs would leak into the shared one."""
    return make_broker()


def test_confluent_dynamic_broker_config(own_broker: Broker) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        ResourceType,
    )

    admin = _confluent_admin(own_broker)
    _topic(admin, "dyn")
    node = str(own_broker.node.node_id)
    change = ConfigResource(ResourceType.BROKER, node, incremental_configs=[
        ConfigEntry("log.retention.bytes", "4096", incremental_operation=AlterConfigOpType.SET)])
    _result(admin.incremental_alter_configs([change], request_timeout=30))
    entry = _configs(admin, ConfigResource(ResourceType.BROKER, node))["log.retention.bytes"]
    assert (entry.value, entry.source) == ("4096", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert not entry.is_read_only
    assert own_broker.log_manager.get_log("dyn", 0).config.retention_bytes == 4096
    static = ConfigResource(ResourceType.BROKER, node, incremental_configs=[
        ConfigEntry("log.dirs", "/tmp", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException, match="Cannot update these configs dynamically"):
        _result(admin.incremental_alter_configs([static], request_timeout=30))


def test_confluent_describe_group_configs(broker: Broker) -> None:
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

    configs = _configs(_confluent_admin(broker), ConfigResource(ResourceType.GROUP, "any"))
    entry = configs["consumer.session.timeout.ms"]
    assert (entry.value, entry.source) == ("45000", ConfigSource.DEFAULT_CONFIG.value)
    assert configs["consumer.heartbeat.interval.ms"].value == "5000"


def test_confluent_describe_topics(broker: Broker) -> None:
    from confluent_kafka import TopicCollection

    admin = _confluent_admin(broker)
    _topic(admin, "described", 3)
    [description] = _result(admin.describe_topics(TopicCollection(["described"]),
                                                  request_timeout=30)).values()
    assert description.name == "described"
    assert [p.id for p in description.partitions] == [0, 1, 2]
    assert {p.leader.id for p in description.partitions} == {broker.node.node_id}


# --- kafka-python 3.0 ---------------------------------------------------------------------------


def _kafka_python_admin(broker: Broker) -> Any:
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers,
                            request_timeout_ms=30000)


def test_kafka_python_delete_group_offsets(broker: Broker) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import GroupSubscribedToTopicError, NoError
    from kafka.structs import OffsetAndMetadata

    admin = _kafka_python_admin(broker)
    for name in ("od-sub", "od-other"):
        _topic(_confluent_admin(broker), name, 2)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="od",
                             enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        consumer.subscribe(["od-sub"])
        deadline = time.monotonic() + 60
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
        assert consumer.assignment(), "the consumer never got its partitions"
        sub, other = TopicPartition("od-sub", 0), TopicPartition("od-other", 1)
        consumer.commit({sub: OffsetAndMetadata(0, "", -1), other: OffsetAndMetadata(0, "", -1)})
        # The group is Stable and subscribed to od-sub: only od-other's offset may go.
        result = admin.delete_group_offsets("od", [sub, other])
        assert result == {sub: GroupSubscribedToTopicError, other: NoError}
        committed = admin.list_group_offsets({"od": None})["od"]
        assert set(committed) == {sub}
    finally:
        consumer.close()
    # Empty now: everything may go.
    assert admin.delete_group_offsets("od", [sub]) == {sub: NoError}
    admin.close()


def test_kafka_python_describe_log_dirs_producers_and_partitions(broker: Broker) -> None:
    from kafka import KafkaProducer, TopicPartition

    _topic(_confluent_admin(broker), "reads", 3)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=True)
    producer.send("reads", b"x" * 64, partition=1).get(timeout=30)
    producer.send("reads", b"y" * 64, partition=1).get(timeout=30)
    producer.close()
    admin = _kafka_python_admin(broker)
    try:
        [answer] = admin.describe_log_dirs({"reads": [0, 1]})
        [log_dir] = answer["log_dirs"]
        assert log_dir["error_code"] == 0
        assert log_dir["log_dir"] == os.path.abspath(broker.log_manager.data_dir)
        [topic] = log_dir["topics"]
        sizes = {p["partition_index"]: p["partition_size"] for p in topic["partitions"]}
        assert sizes[0] == 0 and sizes[1] > 128
        [state] = admin.describe_producers([TopicPartition("reads", 1)]).values()
        [producer] = state.active_producers
        assert (producer.producer_epoch, producer.last_sequence) == (0, 1)
        page = admin.describe_topic_partitions(["reads"], response_partition_limit=2)
        [topic] = page["topics"]
        assert [p["partition_index"] for p in topic["partitions"]] == [0, 1]
        assert page["next_cursor"] == {"topic_name": "reads", "partition_index": 2}
        rest = admin.describe_topic_partitions(["reads"], cursor=page["next_cursor"])
        assert [p["partition_index"] for p in rest["topics"][0]["partitions"]] == [2]
        assert rest["next_cursor"] is None
    finally:
        admin.close()
