"""Admin requests built for a chosen version, and their responses read into admin values.

No I/O here: the client picks a version the broker supports, calls a ``*_request`` builder,
sends it, and hands the response to the matching ``parse_*`` function.  Parsers return a
value or a KafkaError per topic (or partition, or resource), so the client can retry the
retriable ones and report the rest.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from samsa.admin.errors import topic_error
from samsa.admin.types import (
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    ConfigSynonym,
    CreatedTopic,
    NewPartitions,
    NewTopic,
    PartitionDescription,
    TopicDescription,
)
from samsa.errors import KafkaError, UnknownTopicOrPartitionError, for_code
from samsa.net import Node, TopicPartition
from samsa.protocol import APIS, ApiKey, Message

# The version ranges the admin client uses (within the codec's).
METADATA_VERSIONS = (1, 12)  # v1: is_internal and controller id; v12: the net layer's max
METADATA_NO_AUTO_CREATE = 4  # the first version that can ask not to create named topics

# The codec's generated classes (typed Any: their fields are made at import time).
MetadataRequest: Any = APIS[ApiKey.METADATA].request_class
CreateTopicsRequest: Any = APIS[ApiKey.CREATE_TOPICS].request_class
DeleteTopicsRequest: Any = APIS[ApiKey.DELETE_TOPICS].request_class
DeleteRecordsRequest: Any = APIS[ApiKey.DELETE_RECORDS].request_class
DescribeConfigsRequest: Any = APIS[ApiKey.DESCRIBE_CONFIGS].request_class
CreatePartitionsRequest: Any = APIS[ApiKey.CREATE_PARTITIONS].request_class
DescribeClusterRequest: Any = APIS[ApiKey.DESCRIBE_CLUSTER].request_class

_ZERO_UUID = uuid.UUID(int=0)
_UNKNOWN_TOPIC = UnknownTopicOrPartitionError.code


def _topic_id(value: Any) -> uuid.UUID | None:
    return value if isinstance(value, uuid.UUID) and value != _ZERO_UUID else None


# -- CreateTopics ----------------------------------------------------------------------------


def create_topics_request(version: int, topics: Sequence[NewTopic], timeout_ms: int,
                          validate_only: bool) -> Message:
    R = CreateTopicsRequest
    creatable = []
    for t in topics:
        assignments = [
            R.CreatableReplicaAssignment(partition_index=p, broker_ids=list(brokers))
            for p, brokers in sorted((t.replica_assignment or {}).items())]
        creatable.append(R.CreatableTopic(
            name=t.name, num_partitions=t.num_partitions,
            replication_factor=t.replication_factor, assignments=assignments,
            configs=[R.CreatableTopicConfig(name=k, value=v) for k, v in t.configs.items()]))
    return R(topics=creatable, timeout_ms=timeout_ms, validate_only=validate_only)


def parse_create_topics(response: Any) -> dict[str, CreatedTopic | KafkaError]:
    out: dict[str, CreatedTopic | KafkaError] = {}
    for r in response.topics:
        if r.error_code:
            out[r.name] = topic_error(r.error_code, r.error_message, r.name, "create")
            continue
        configs = None
        if r.configs is not None and r.configs:
            configs = {c.name: ConfigEntry(
                c.name, c.value, ConfigSource.of(c.config_source),
                is_default=c.config_source == ConfigSource.DEFAULT_CONFIG,
                read_only=c.read_only, sensitive=c.is_sensitive) for c in r.configs}
        out[r.name] = CreatedTopic(r.name, _topic_id(r.topic_id), r.num_partitions,
                                   r.replication_factor, configs)
    return out


# -- DeleteTopics ----------------------------------------------------------------------------


def delete_topics_request(version: int, names: Sequence[str],
                          timeout_ms: int) -> Message:
    R = DeleteTopicsRequest
    if version >= 6:
        return R(topics=[R.DeleteTopicState(name=n, topic_id=_ZERO_UUID) for n in names],
                 timeout_ms=timeout_ms)
    return R(topic_names=list(names), timeout_ms=timeout_ms)


def parse_delete_topics(response: Any) -> dict[str, uuid.UUID | None | KafkaError]:
    out: dict[str, uuid.UUID | None | KafkaError] = {}
    for r in response.responses:
        name = r.name if r.name is not None else str(r.topic_id)
        if r.error_code:
            out[name] = topic_error(r.error_code, r.error_message, name, "delete")
        else:
            out[name] = _topic_id(getattr(r, "topic_id", None))
    return out


# -- CreatePartitions ------------------------------------------------------------------------


def create_partitions_request(version: int, counts: Mapping[str, NewPartitions],
                              timeout_ms: int, validate_only: bool) -> Message:
    R = CreatePartitionsRequest
    topics = []
    for name, new in counts.items():
        assignments = None
        if new.assignments is not None:
            assignments = [R.CreatePartitionsAssignment(broker_ids=list(b))
                           for b in new.assignments]
        topics.append(R.CreatePartitionsTopic(name=name, count=new.total_count,
                                              assignments=assignments))
    return R(topics=topics, timeout_ms=timeout_ms, validate_only=validate_only)


def parse_create_partitions(response: Any) -> dict[str, None | KafkaError]:
    out: dict[str, None | KafkaError] = {}
    for r in response.results:
        out[r.name] = topic_error(r.error_code, r.error_message, r.name,
                                  "add partitions to") if r.error_code else None
    return out


# -- Metadata --------------------------------------------------------------------------------


def metadata_request(version: int, topics: Iterable[str] | None) -> Message:
    """All topics (``topics`` None) or the named ones, never auto-creating any from v4 on
    (before v4 a broker may create the named topics; the client asks for v4+ then)."""
    R = MetadataRequest
    wanted = None if topics is None else [R.MetadataRequestTopic(name=t) for t in topics]
    return R(topics=wanted, allow_auto_topic_creation=version < 4)


def parse_topic_descriptions(response: Any) -> dict[str, TopicDescription | KafkaError]:
    """Descriptions per topic; a leader id that is not among the response's brokers (a
    broker that is down, as librdkafka's mock reports it) reads as no leader, as in Java."""
    out: dict[str, TopicDescription | KafkaError] = {}
    brokers = {b.node_id for b in response.brokers}
    for t in response.topics:
        if t.name is None:
            continue
        if t.error_code:
            text = "the topic does not exist" if t.error_code == _UNKNOWN_TOPIC else None
            out[t.name] = topic_error(t.error_code, text, t.name, "describe")
            continue
        partitions = tuple(sorted(
            (PartitionDescription(
                p.partition_index, p.leader_id if p.leader_id in brokers else None,
                tuple(p.replica_nodes), tuple(p.isr_nodes),
                tuple(getattr(p, "offline_replicas", None) or ()),
                getattr(p, "leader_epoch", -1))
             for p in t.partitions), key=lambda p: p.partition))
        out[t.name] = TopicDescription(t.name, _topic_id(getattr(t, "topic_id", None)),
                                       bool(getattr(t, "is_internal", False)), partitions)
    return out


def cluster_from_metadata(response: Any) -> ClusterDescription:
    nodes = tuple(Node(b.node_id, b.host, b.port, b.rack) for b in response.brokers)
    by_id = {n.id: n for n in nodes}
    return ClusterDescription(getattr(response, "cluster_id", None),
                              by_id.get(getattr(response, "controller_id", -1)), nodes)


# -- DescribeCluster -------------------------------------------------------------------------


def describe_cluster_request(version: int) -> Message:
    return DescribeClusterRequest(include_cluster_authorized_operations=False)


def parse_describe_cluster(response: Any) -> ClusterDescription:
    if response.error_code:
        cls = for_code(response.error_code)
        raise cls(f"DescribeCluster failed: {response.error_message or cls.message}")
    nodes = tuple(Node(b.broker_id, b.host, b.port, b.rack) for b in response.brokers)
    by_id = {n.id: n for n in nodes}
    return ClusterDescription(response.cluster_id, by_id.get(response.controller_id), nodes)


# -- DescribeConfigs -------------------------------------------------------------------------


def describe_configs_request(version: int, resources: Sequence[ConfigResource],
                             include_synonyms: bool = False,
                             keys: Sequence[str] | None = None) -> Message:
    R = DescribeConfigsRequest
    wanted = None if keys is None else list(keys)
    return R(resources=[R.DescribeConfigsResource(resource_type=int(r.type),
                                                  resource_name=r.name, configuration_keys=wanted)
                        for r in resources],
             include_synonyms=include_synonyms)


def config_resource_result(r: Any, action: str) -> tuple[ConfigResource, KafkaError | None]:
    """The resource a per-resource configs answer names, and its error (None if it has none);
    ``action`` ends the error's sentence ("describe the configs of" the topic ...)."""
    try:
        rtype = ConfigResourceType(r.resource_type)
    except ValueError:
        rtype = ConfigResourceType.UNKNOWN
    resource = ConfigResource(rtype, r.resource_name)
    if not r.error_code:
        return resource, None
    what = rtype.name.lower().replace("_", " ")
    return resource, topic_error(r.error_code, r.error_message, r.resource_name, action,
                                 what=what)


def parse_describe_configs(
        version: int, response: Any) -> dict[ConfigResource, dict[str, ConfigEntry] | KafkaError]:
    out: dict[ConfigResource, dict[str, ConfigEntry] | KafkaError] = {}
    for r in response.results:
        resource, error = config_resource_result(r, "describe the configs of")
        if error is not None:
            out[resource] = error
            continue
        entries: dict[str, ConfigEntry] = {}
        for c in r.configs:
            if version == 0:
                # v0 has only is_default; where a non-default value came from is unknown.
                is_default = bool(c.is_default)
                source = ConfigSource.DEFAULT_CONFIG if is_default else ConfigSource.UNKNOWN
            else:
                source = ConfigSource.of(c.config_source)
                is_default = source == ConfigSource.DEFAULT_CONFIG
            synonyms = tuple(ConfigSynonym(s.name, s.value, ConfigSource.of(s.source))
                             for s in c.synonyms) if version >= 1 else ()
            entries[c.name] = ConfigEntry(c.name, c.value, source, is_default,
                                          bool(c.read_only), bool(c.is_sensitive), synonyms)
        out[resource] = entries
    return out


# -- DeleteRecords ---------------------------------------------------------------------------


def delete_records_request(version: int, offsets: Mapping[TopicPartition, int],
                           timeout_ms: int) -> Message:
    R = DeleteRecordsRequest
    by_topic: dict[str, list[Any]] = {}
    for tp, offset in offsets.items():
        by_topic.setdefault(tp.topic, []).append(
            R.DeleteRecordsPartition(partition_index=tp.partition, offset=offset))
    return R(topics=[R.DeleteRecordsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
             timeout_ms=timeout_ms)


def parse_delete_records(response: Any) -> dict[TopicPartition, int | KafkaError]:
    out: dict[TopicPartition, int | KafkaError] = {}
    for t in response.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            out[tp] = topic_error(p.error_code, None, str(tp), "delete records of",
                                  what="partition") if p.error_code else p.low_watermark
    return out
