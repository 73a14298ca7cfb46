"""AdminClient against samsa's broker: every operation, its errors, version choice and retries."""

from __future__ import annotations

import socket
import uuid
from typing import Any

import confluent_kafka
import pytest

from samsa.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    TopicPartition,
)
from samsa.broker import Broker
from samsa.errors import (
    BrokerNotAvailableError,
    IllegalStateError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    KafkaError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from samsa.protocol import APIS
from samsa.protocol.schema import ZERO_UUID

from .conftest import FaultyApis

CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, METADATA = 19, 20, 21, 3


# -- topics ---------------------------------------------------------------------------------


def test_create_list_describe_delete(admin: AdminClient, broker: Broker) -> None:
    created = admin.create_topics([
        NewTopic("orders", num_partitions=3, configs={"retention.ms": "60000"}),
        "plain",  # a bare name: broker defaults
    ])
    assert list(created) == ["orders", "plain"]
    orders = created["orders"]
    assert orders.num_partitions == 3 and orders.replication_factor == 1
    assert isinstance(orders.topic_id, uuid.UUID)
    assert orders.configs is not None
    assert orders.configs["retention.ms"].value == "60000"
    assert orders.configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert orders.configs["cleanup.policy"].is_default
    assert created["plain"].num_partitions == 1  # the broker's num.partitions

    assert admin.list_topics() == ["orders", "plain"]

    described = admin.describe_topics(["orders"])["orders"]
    node_id = broker.node.node_id
    assert described.name == "orders" and not described.internal
    assert described.topic_id == orders.topic_id
    assert [p.partition for p in described.partitions] == [0, 1, 2]
    for p in described.partitions:
        assert p.leader == node_id
        assert p.replicas == (node_id,) and p.isr == (node_id,)
    assert described.replication_factor == 1

    deleted = admin.delete_topics(["orders", "plain"])
    assert deleted == {"orders": orders.topic_id, "plain": created["plain"].topic_id}
    assert admin.list_topics() == []


def test_validate_only_creates_nothing(admin: AdminClient) -> None:
    result = admin.create_topics([NewTopic("checked", 2)], validate_only=True)
    assert result["checked"].num_partitions == 2
    assert admin.list_topics() == []


def test_create_errors_name_the_topic_and_what_to_do(admin: AdminClient) -> None:
    admin.create_topics(["taken"])
    cases: list[tuple[NewTopic, type[KafkaError], str]] = [
        (NewTopic("taken"), TopicAlreadyExistsError, "already exists"),
        (NewTopic("bad name!"), InvalidTopicError, "ASCII letters"),
        (NewTopic("too-many-replicas", 1, 3), InvalidReplicationFactorError,
         "number of brokers"),
        (NewTopic("no-partitions", 0), InvalidPartitionsError, "at least 1 partition"),
    ]
    for topic, error, hint in cases:
        with pytest.raises(error) as info:
            admin.create_topics([topic])
        text = str(info.value)
        assert repr(topic.name) in text and "What to do:" in text and hint in text, text
        assert info.value.topic == topic.name  # type: ignore[attr-defined]
    assert admin.list_topics() == ["taken"]


def test_partial_failure_keeps_every_outcome(admin: AdminClient) -> None:
    admin.create_topics(["exists"])
    outcome = admin.create_topics(["exists", "fresh"], raise_errors=False)
    assert isinstance(outcome["exists"], TopicAlreadyExistsError)
    assert outcome["fresh"].name == "fresh"  # type: ignore[union-attr]

    with pytest.raises(TopicAlreadyExistsError) as info:
        admin.create_topics(["exists", "another"])
    assert list(info.value.errors) == ["exists"]  # type: ignore[attr-defined]
    assert list(info.value.results) == ["another"]  # type: ignore[attr-defined]
    assert admin.list_topics() == ["another", "exists", "fresh"]


def test_duplicate_names_are_refused_before_sending(admin: AdminClient) -> None:
    with pytest.raises(ValueError, match="'t' is listed more than once"):
        admin.create_topics(["t", NewTopic("t", 2)])
    with pytest.raises(ValueError, match="more than once"):
        admin.delete_topics(["t", "t"])


def test_missing_topics(admin: AdminClient) -> None:
    with pytest.raises(UnknownTopicOrPartitionError, match="cannot delete topic 'ghost'"):
        admin.delete_topics(["ghost"])
    with pytest.raises(UnknownTopicOrPartitionError, match="cannot describe topic 'ghost'"):
        admin.describe_topics(["ghost"])
    with pytest.raises(UnknownTopicOrPartitionError, match="topic 'ghost'"):
        admin.create_partitions({"ghost": 2})
    # Describing a missing topic must not create it (Metadata auto-creation is off).
    assert admin.list_topics() == []


# -- partitions ------------------------------------------------------------------------------


def test_create_partitions_grows_and_refuses_to_shrink(admin: AdminClient) -> None:
    admin.create_topics([NewTopic("grow", 2)])
    assert admin.create_partitions({"grow": 5}) == {"grow": 5}
    assert len(admin.describe_topics(["grow"])["grow"].partitions) == 5
    assert admin.create_partitions({"grow": NewPartitions(6)}, validate_only=True) == {"grow": 6}
    assert len(admin.describe_topics(["grow"])["grow"].partitions) == 5

    with pytest.raises(InvalidPartitionsError) as info:
        admin.create_partitions({"grow": 3})
    assert "cannot add partitions to topic 'grow'" in str(info.value)
    assert "can only grow" in str(info.value)


# -- configs ---------------------------------------------------------------------------------


def test_describe_topic_and_broker_configs(admin: AdminClient, broker: Broker) -> None:
    admin.create_topics([NewTopic("conf", 1, configs={"cleanup.policy": "compact"})])
    node_id = broker.node.node_id
    configs = admin.describe_configs(["conf"], broker=node_id)
    topic = configs[ConfigResource.topic("conf")]
    assert topic["cleanup.policy"].value == "compact"
    assert topic["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert not topic["cleanup.policy"].is_default
    assert topic["retention.ms"].is_default
    assert topic["retention.ms"].source == ConfigSource.DEFAULT_CONFIG
    brokers = configs[ConfigResource.broker(node_id)]
    assert brokers["node.id"].value == str(node_id)
    # Only Kafka's dynamic broker configs that this node applies may be altered.
    assert brokers["node.id"].read_only and brokers["log.retention.check.interval.ms"].read_only
    assert not brokers["log.retention.ms"].read_only


def test_describe_configs_errors(admin: AdminClient) -> None:
    with pytest.raises(UnknownTopicOrPartitionError, match="configs of topic 'ghost'"):
        admin.describe_configs(["ghost"])
    with pytest.raises(BrokerNotAvailableError, match="broker 99: no such broker"):
        admin.describe_configs(broker=99)


# -- records ---------------------------------------------------------------------------------


def _produce(bootstrap: str, topic: str, partition: int, count: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), partition=partition)
    assert producer.flush(30) == 0


def test_delete_records(admin: AdminClient, broker: Broker) -> None:
    admin.create_topics([NewTopic("recs", 2)])
    _produce(broker.bootstrap_servers, "recs", 0, 10)
    _produce(broker.bootstrap_servers, "recs", 1, 3)

    low = admin.delete_records({("recs", 0): 4, TopicPartition("recs", 1): -1})
    assert low == {TopicPartition("recs", 0): 4, TopicPartition("recs", 1): 3}

    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers,
                                         "group.id": "unused"})
    try:
        tp = confluent_kafka.TopicPartition("recs", 0)
        assert consumer.get_watermark_offsets(tp, timeout=10) == (4, 10)
    finally:
        consumer.close()

    with pytest.raises(OffsetOutOfRangeError, match="use -1"):
        admin.delete_records({("recs", 0): 11})
    with pytest.raises(UnknownTopicOrPartitionError, match="partition 'recs-7'"):
        admin.delete_records({("recs", 7): 0})
    with pytest.raises(UnknownTopicOrPartitionError, match="topic 'ghost'"):
        admin.delete_records({("ghost", 0): 0})


# -- cluster ---------------------------------------------------------------------------------


def test_describe_cluster(admin: AdminClient, broker: Broker) -> None:
    cluster = admin.describe_cluster()
    assert cluster.cluster_id == broker.cluster_id
    [node] = cluster.nodes
    assert node.id == broker.node.node_id and node.port == broker.port
    assert cluster.controller == node


# -- versions and retries --------------------------------------------------------------------


def test_highest_common_versions_are_used(admin: AdminClient, apis: FaultyApis) -> None:
    admin.create_topics([NewTopic("v", 1)])
    admin.create_partitions({"v": 2})
    admin.describe_configs(["v"])
    admin.delete_records({("v", 0): 0})
    admin.describe_cluster()
    admin.delete_topics(["v"])
    for key, version in [(19, 7), (37, 3), (32, 4), (21, 2), (60, 1), (20, 6)]:
        assert apis.versions(key) == [version], APIS[key].name


def _respond_with_error(code: int) -> Any:
    """A fault answering CreateTopics with ``code`` for every topic."""

    def fault(ctx: Any) -> bool:
        R = APIS[CREATE_TOPICS].response_class
        ctx.respond(R(throttle_time_ms=0, topics=[
            R.CreatableTopicResult(name=t.name, topic_id=ZERO_UUID, error_code=code,
                                   error_message="injected", configs=None)
            for t in ctx.body.topics]))
        return True

    return fault


def _close_connection(ctx: Any) -> bool:
    ctx.close_connection("injected")
    return True


def test_not_controller_is_retried(admin: AdminClient, apis: FaultyApis) -> None:
    apis.inject(CREATE_TOPICS, _respond_with_error(41), _respond_with_error(41))
    assert admin.create_topics(["retried"])["retried"].num_partitions == 1
    assert len(apis.versions(CREATE_TOPICS)) == 3


def test_lost_connection_is_retried(admin: AdminClient, apis: FaultyApis) -> None:
    admin.create_topics(["doomed"])
    apis.inject(DELETE_TOPICS, _close_connection)
    assert list(admin.delete_topics(["doomed"])) == ["doomed"]
    assert len(apis.versions(DELETE_TOPICS)) == 2
    assert admin.list_topics() == []


def test_unanswered_request_times_out_and_is_retried(broker: Broker, apis: FaultyApis) -> None:
    with AdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=300,
                     retry_backoff_ms=10) as admin:
        admin.describe_cluster()  # connected, metadata known
        apis.inject(DELETE_RECORDS, lambda ctx: ctx.no_response() or True)
        admin.create_topics(["slow"])
        assert admin.delete_records({("slow", 0): 0}) == {TopicPartition("slow", 0): 0}
    assert len(apis.versions(DELETE_RECORDS)) == 2


def test_not_leader_is_retried_for_delete_records(admin: AdminClient,
                                                    apis: FaultyApis) -> None:
    def not_leader(ctx: Any) -> bool:
        R = APIS[DELETE_RECORDS].response_class
        ctx.respond(R(throttle_time_ms=0, topics=[R.DeleteRecordsTopicResult(
            name=t.name, partitions=[R.DeleteRecordsPartitionResult(
                partition_index=p.partition_index, low_watermark=-1, error_code=6)
                for p in t.partitions]) for t in ctx.body.topics]))
        return True

    admin.create_topics(["moved"])
    apis.inject(DELETE_RECORDS, not_leader)
    assert admin.delete_records({("moved", 0): 0}) == {TopicPartition("moved", 0): 0}
    assert len(apis.versions(DELETE_RECORDS)) == 2


def test_retries_stop_at_the_time_limit(admin: AdminClient, apis: FaultyApis) -> None:
    admin.list_topics()  # metadata first: the time limit below is for the retries alone
    apis.inject(CREATE_TOPICS, *[_respond_with_error(41)] * 1000)
    # Long enough for at least one answer on a loaded machine: the error names the last
    # answer whether or not a try is in flight at the limit.
    with pytest.raises(KafkaTimeoutError) as info:
        admin.create_topics(["never"], timeout_ms=1500)
    text = str(info.value)
    assert "creating topics ['never']" in text and "NOT_CONTROLLER" in text, text


def test_a_try_in_flight_at_the_limit_names_what_the_previous_try_was_answered(
        admin: AdminClient, apis: FaultyApis) -> None:
    admin.list_topics()
    # NOT_CONTROLLER, then a try the broker never answers: the limit comes while it waits.
    apis.inject(CREATE_TOPICS, _respond_with_error(41), lambda ctx: True)
    with pytest.raises(KafkaTimeoutError) as info:
        admin.create_topics(["never"], timeout_ms=1500)
    text = str(info.value)
    assert "waiting for the CreateTopics response" in text, text
    assert "the previous try failed: " in text and "NOT_CONTROLLER" in text, text


def test_unreachable_bootstrap_server_times_out_with_the_reason() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with (AdminClient(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=300) as admin,
          pytest.raises(KafkaTimeoutError) as info):
        admin.list_topics(timeout_ms=300)
    text = str(info.value)
    assert f"127.0.0.1:{port} (bootstrap.servers)" in text and "Connection refused" in text
    assert "check that a broker is running" in text


def test_closed_client_refuses_calls(broker: Broker) -> None:
    admin = AdminClient(bootstrap_servers=broker.bootstrap_servers)
    admin.close()
    admin.close()
    assert admin.closed
    with pytest.raises(IllegalStateError, match="closed"):
        admin.list_topics()
