"""``__consumer_offsets`` belongs to the group coordinator: confluent-kafka (librdkafka) clients
may neither create it first (with one partition and retention.ms=1000, which would break every
group's commits), nor produce forged records into it, grow it, reconfigure it, delete records
from it or delete it; the coordinator creates it itself with offsets.topic.num.partitions and
the compacted config, and commits keep working through every refused attempt.  No authorizer
is configured: the protection holds without one."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from samsa.broker import Broker

OFFSETS = "__consumer_offsets"


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"offsets.topic.num.partitions": 3}


def _error(future: Any) -> KafkaError:
    with pytest.raises(KafkaException) as failure:
        future.result(timeout=30)
    error: KafkaError = failure.value.args[0]
    return error


def _commit_and_read(broker: Broker, group: str, offset: int) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition("data", 0, offset)], asynchronous=False)
        committed: list[TopicPartition] = consumer.committed([TopicPartition("data", 0)],
                                                             timeout=30)
        return int(committed[0].offset)
    finally:
        consumer.close()


def test_clients_cannot_create_write_or_change_the_offsets_topic(broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic("data", 1)])["data"].result(timeout=30)

    # Created first by a client, with settings that would wreck the groups: refused.
    early = NewTopic(OFFSETS, 1, config={"retention.ms": "1000"})
    error = _error(admin.create_topics([early], request_timeout=30)[OFFSETS])
    assert error.code() == KafkaError.INVALID_REQUEST
    assert "internal topic" in error.str()
    assert broker.log_manager.topic(OFFSETS) is None

    # The coordinator makes it on the first commit, with its own partition count and config.
    assert _commit_and_read(broker, "g1", 7) == 7
    info = broker.log_manager.topic(OFFSETS)
    assert info is not None and info.partitions == 3
    assert info.configs["cleanup.policy"] == "compact"

    # Forged records: every produce fails with Kafka's INVALID_TOPIC_EXCEPTION.
    reports: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                         "message.timeout.ms": 20_000, "enable.idempotence": False})
    for partition in range(3):
        producer.produce(OFFSETS, b"forged-value", key=b"forged-key", partition=partition,
                         on_delivery=lambda err, _msg: reports.append(err))
    assert producer.flush(30) == 0
    assert len(reports) == 3
    assert all(e is not None and e.code() == KafkaError.TOPIC_EXCEPTION for e in reports)

    # Grown, reconfigured, emptied or deleted: refused.
    grow = admin.create_partitions([NewPartitions(OFFSETS, 6)], request_timeout=30)
    assert _error(grow[OFFSETS]).code() == KafkaError.INVALID_REQUEST
    change = ConfigResource(ResourceType.TOPIC, OFFSETS, incremental_configs=[
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
    altered = admin.incremental_alter_configs([change], request_timeout=30)
    assert _error(altered[change]).code() == KafkaError.INVALID_REQUEST
    emptied = admin.delete_records([TopicPartition(OFFSETS, 0, -1)], request_timeout=30)
    assert _error(emptied[TopicPartition(OFFSETS, 0, -1)]).code() == KafkaError.TOPIC_EXCEPTION
    deleted = admin.delete_topics([OFFSETS], request_timeout=30)
    assert _error(deleted[OFFSETS]).code() == KafkaError.INVALID_REQUEST

    info = broker.log_manager.topic(OFFSETS)
    assert info is not None and info.partitions == 3
    assert "retention.ms" not in info.configs
    assert sum(broker.log_manager.get_log(OFFSETS, p).log_start_offset for p in range(3)) == 0
    # The groups' commits survived it all.
    assert _commit_and_read(broker, "g1", 9) == 9
