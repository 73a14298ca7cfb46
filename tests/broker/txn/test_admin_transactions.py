"""ListTransactions and DescribeTransactions (KIP-664) through an admin client: an ongoing
transaction of confluent-kafka's producer is listed with its state and producer id, filtered by
state and producer id, and described with its partitions (data and ``__consumer_offsets``),
timeout and epoch; once committed it is CompleteCommit with no partitions.

confluent-kafka 2.16's AdminClient has neither call (it has no list_transactions or
describe_transactions), so kafka-python's KafkaAdminClient, which has both, asks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition as KTopicPartition

from tests.broker.conftest import BrokerProcess
from tests.broker.txn.exactly_once import TIMEOUT, create_topics
from tests.broker.txn.test_crash_mid_transaction import CONFIG

# Where the group's offsets live: its partition of __consumer_offsets (Kafka's
# GroupCoordinator.partitionFor: the Java hash of the id modulo the partition count).
GROUP = "admin-group"


def java_hash_partition(key: str, partitions: int) -> int:
    h = 0
    for ch in key:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    if h & 0x80000000:
        h -= 1 << 32
    return (h & 0x7FFFFFFF) % partitions if h != -(1 << 31) else 0


def listings(admin: KafkaAdminClient, **filters: Any) -> list[Any]:
    """ListTransactions of every broker (kafka-python answers per node id), one list."""
    return [t for per_node in admin.list_transactions(**filters).values() for t in per_node]


@pytest.fixture
def servers(broker_process: Callable[..., BrokerProcess]) -> str:
    servers = broker_process(CONFIG).start().bootstrap_servers
    create_topics(servers, "listed")
    return servers


@pytest.fixture
def admin(servers: str) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=servers)
    yield client
    client.close()


def test_an_ongoing_transaction_is_listed_and_described(servers: str,
                                                        admin: KafkaAdminClient) -> None:
    producer = Producer({"bootstrap.servers": servers, "transactional.id": "admin-tx",
                         "transaction.timeout.ms": 45_000, "linger.ms": 1})
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    producer.produce("listed", b"a", partition=0)
    producer.produce("listed", b"b", partition=2)
    assert producer.flush(TIMEOUT) == 0
    group = Consumer({"bootstrap.servers": servers, "group.id": GROUP})
    producer.send_offsets_to_transaction([TopicPartition("listed", 1, 3)],
                                         group.consumer_group_metadata(), TIMEOUT)
    group.close()

    (listed,) = [t for t in listings(admin) if t.transactional_id == "admin-tx"]
    assert listed.state == "Ongoing"
    assert [t.transactional_id for t in listings(admin, state_filters=["Ongoing"])] \
        == ["admin-tx"]
    assert listings(admin, state_filters=["CompleteCommit"]) == []
    assert [t.transactional_id for t in listings(
        admin, producer_id_filters=[listed.producer_id])] == ["admin-tx"]
    assert listings(admin, producer_id_filters=[listed.producer_id + 1000]) == []

    described = admin.describe_transactions(["admin-tx"])["admin-tx"]
    assert described.state == "Ongoing"
    assert described.producer_id == listed.producer_id and described.producer_epoch >= 0
    assert described.transaction_timeout_ms == 45_000
    assert described.transaction_start_time_ms > 0
    offsets_partition = java_hash_partition(GROUP, CONFIG["offsets.topic.num.partitions"])
    assert described.topic_partitions == {KTopicPartition("listed", 0),
                                          KTopicPartition("listed", 2),
                                          KTopicPartition("__consumer_offsets",
                                                          offsets_partition)}

    producer.commit_transaction(TIMEOUT)
    committed = admin.describe_transactions(["admin-tx"])["admin-tx"]
    assert committed.state in ("PrepareCommit", "CompleteCommit")
    (listed,) = listings(admin, state_filters=["CompleteCommit", "PrepareCommit"])
    assert listed.transactional_id == "admin-tx"
