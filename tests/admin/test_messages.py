"""Admin requests per version and responses read into values, without a network."""

from __future__ import annotations

import uuid

import pytest

from samsa.admin import (
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    NewPartitions,
    NewTopic,
    TopicPartition,
    format_topic_id,
)
from samsa.admin import messages as m
from samsa.admin.errors import topic_error
from samsa.errors import (
    InvalidPartitionsError,
    NotControllerError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from samsa.protocol import APIS, ApiKey, decode_body, encode_body


def roundtrip(message: object, version: int) -> object:
    cls = type(message)
    return decode_body(cls, version, encode_body(message, version))  # type: ignore[arg-type]


def test_topic_id_prints_as_kafka_does() -> None:
    # Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding.
    tid = uuid.UUID(bytes=bytes(range(16)))
    assert format_topic_id(tid) == "AAECAwQFBgcICQoLDA0ODw"
    assert format_topic_id(uuid.UUID(bytes=b"\xff" * 16)) == "_____________________w"
    assert format_topic_id(None) == "AAAAAAAAAAAAAAAAAAAAAA"


def test_new_topic_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        NewTopic("")
    with pytest.raises(ValueError, match="not both"):
        NewTopic("t", 3, replica_assignment={0: [1]})


@pytest.mark.parametrize("version", range(8))
def test_create_topics_request_every_version(version: int) -> None:
    topics = [NewTopic("a", 3, 1, {"retention.ms": "1000"}),
              NewTopic("b", replica_assignment={1: [2], 0: [1]})]
    request = m.create_topics_request(version, topics, 5000, validate_only=version >= 1)
    decoded = roundtrip(request, version)
    a, b = decoded.topics  # type: ignore[attr-defined]
    assert (a.name, a.num_partitions, a.replication_factor) == ("a", 3, 1)
    assert [(c.name, c.value) for c in a.configs] == [("retention.ms", "1000")]
    assert [(x.partition_index, x.broker_ids) for x in b.assignments] == [(0, [1]), (1, [2])]
    assert (b.num_partitions, b.replication_factor) == (-1, -1)
    assert decoded.timeout_ms == 5000  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", range(7))
def test_delete_topics_request_uses_names_or_states_by_version(version: int) -> None:
    decoded = roundtrip(m.delete_topics_request(version, ["x", "y"], 100), version)
    if version >= 6:
        assert [t.name for t in decoded.topics] == ["x", "y"]  # type: ignore[attr-defined]
    else:
        assert decoded.topic_names == ["x", "y"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", range(4))
def test_create_partitions_request(version: int) -> None:
    request = m.create_partitions_request(
        version, {"t": NewPartitions(4), "u": NewPartitions(3, [[1], [1]])}, 100, False)
    t, u = roundtrip(request, version).topics  # type: ignore[attr-defined]
    assert (t.name, t.count, t.assignments) == ("t", 4, None)
    assert [a.broker_ids for a in u.assignments] == [[1], [1]]


@pytest.mark.parametrize("version", range(1, 13))
def test_metadata_request_never_auto_creates(version: int) -> None:
    decoded = roundtrip(m.metadata_request(version, ["t"]), version)
    assert [t.name for t in decoded.topics] == ["t"]  # type: ignore[attr-defined]
    if version >= 4:
        assert decoded.allow_auto_topic_creation is False  # type: ignore[attr-defined]
    else:  # the field does not exist; the client asks for v4+ when naming topics
        assert decoded.allow_auto_topic_creation is True  # type: ignore[attr-defined]
    assert roundtrip(m.metadata_request(version, None), version).topics is None  # type: ignore[attr-defined]


def test_delete_records_request_groups_by_topic() -> None:
    request = m.delete_records_request(
        2, {TopicPartition("a", 0): 5, TopicPartition("b", 1): -1, TopicPartition("a", 2): 7}, 9)
    decoded = roundtrip(request, 2)
    assert {t.name: [(p.partition_index, p.offset) for p in t.partitions]
            for t in decoded.topics} == {"a": [(0, 5), (2, 7)], "b": [(1, -1)]}  # type: ignore[attr-defined]


def test_parse_create_topics_keeps_errors_per_topic() -> None:
    R = APIS[ApiKey.CREATE_TOPICS].response_class
    tid = uuid.uuid4()
    response = R(throttle_time_ms=0, topics=[
        R.CreatableTopicResult(name="ok", topic_id=tid, error_code=0, num_partitions=2,
                               replication_factor=1, configs=None),
        R.CreatableTopicResult(name="dup", error_code=36, error_message="Topic 'dup' exists"),
        R.CreatableTopicResult(name="moved", error_code=41, error_message=None),
    ])
    parsed = m.parse_create_topics(response)
    ok = parsed["ok"]
    assert (ok.topic_id, ok.num_partitions, ok.configs) == (tid, 2, None)  # type: ignore[union-attr]
    assert isinstance(parsed["dup"], TopicAlreadyExistsError)
    assert "cannot create topic 'dup': Topic 'dup' exists." in str(parsed["dup"])
    assert isinstance(parsed["moved"], NotControllerError)
    assert "not the controller" in str(parsed["moved"])  # the code's own message


def test_parse_describe_configs_v0_and_v1() -> None:
    R = APIS[ApiKey.DESCRIBE_CONFIGS].response_class

    def response(**entry: object) -> object:
        return R(throttle_time_ms=0, results=[R.DescribeConfigsResult(
            error_code=0, error_message=None, resource_type=2, resource_name="t",
            configs=[R.DescribeConfigsResourceResult(name="retention.ms", value="5",
                                                     read_only=False, is_sensitive=False,
                                                     **entry)])])

    [(resource, v0)] = m.parse_describe_configs(0, response(is_default=True)).items()
    assert resource == ConfigResource(ConfigResourceType.TOPIC, "t")
    assert v0["retention.ms"].is_default and v0["retention.ms"].source == ConfigSource.DEFAULT_CONFIG
    [v1] = m.parse_describe_configs(1, response(config_source=1)).values()
    entry = v1["retention.ms"]  # type: ignore[index]
    assert not entry.is_default and entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG


def test_parse_topic_descriptions() -> None:
    R = APIS[ApiKey.METADATA].response_class
    response = R(brokers=[R.MetadataResponseBroker(node_id=2, host="h", port=1)], topics=[
        R.MetadataResponseTopic(error_code=0, name="t", topic_id=uuid.UUID(int=0),
                                is_internal=True, partitions=[
            # Broker 3 leads but is not among the brokers (down): no leader.
            R.MetadataResponsePartition(error_code=0, partition_index=1, leader_id=3,
                                        replica_nodes=[2, 3], isr_nodes=[]),
            R.MetadataResponsePartition(error_code=0, partition_index=0, leader_id=2,
                                        replica_nodes=[2, 3], isr_nodes=[2, 3])]),
        R.MetadataResponseTopic(error_code=3, name="gone", partitions=[]),
    ])
    parsed = m.parse_topic_descriptions(response)
    t = parsed["t"]
    assert t.internal and t.topic_id is None  # type: ignore[union-attr]
    assert [(p.partition, p.leader, p.isr) for p in t.partitions] == [  # type: ignore[union-attr]
        (0, 2, (2, 3)), (1, None, ())]
    assert t.replication_factor == 2  # type: ignore[union-attr]
    assert isinstance(parsed["gone"], UnknownTopicOrPartitionError)
    assert "the topic does not exist" in str(parsed["gone"])


def test_hints_depend_on_the_operation() -> None:
    create = topic_error(37, "Number of partitions must be larger than 0.", "t", "create")
    grow = topic_error(37, "Topic currently has 3 partitions", "t", "add partitions to")
    assert isinstance(create, InvalidPartitionsError) and isinstance(grow, InvalidPartitionsError)
    assert "at least 1 partition" in str(create)
    assert "can only grow" in str(grow)
    assert create.topic == "t"  # type: ignore[attr-defined]
    unknown_code = topic_error(9999, None, "t", "create")
    assert "cannot create topic 't'" in str(unknown_code)
