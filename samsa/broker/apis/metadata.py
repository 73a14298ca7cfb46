"""Metadata (key 3): this one node, the topics asked for (or all), auto-creation."""

from __future__ import annotations

import uuid

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.error_codes import code_for
from samsa.broker.apis.services import BrokerServices
from samsa.broker.apis.topic_names import is_internal, topic_name_problem
from samsa.broker.log import TopicInfo
from samsa.errors import (
    InvalidTopicError,
    KafkaError,
    TopicAuthorizationFailedError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from samsa.protocol import MetadataResponse
from samsa.protocol.schema import ZERO_UUID
from samsa.security.acl import CLUSTER_NAME, AclOperation, ResourceType

# Without an authorizer every operation is allowed: Kafka reports all operations the resource
# type supports (AclOperation codes as bits).
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
NOT_REQUESTED = -2147483648

Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponsePartition


def topic_metadata(services: BrokerServices, info: TopicInfo, with_operations: bool,
                   ctx: RequestContext) -> MetadataResponse.MetadataResponseTopic:
    node = services.node.node_id
    partitions = []
    for index in range(info.partitions):
        partitions.append(Partition(
            error_code=0, partition_index=index, leader_id=node,
            leader_epoch=services.leader_epoch(services.get_log(info.name, index)),
            replica_nodes=[node], isr_nodes=[node], offline_replicas=[],
        ))
    operations = NOT_REQUESTED
    if with_operations:
        operations = services.authorized_operations(ctx, ResourceType.TOPIC, info.name,
                                                    TOPIC_OPERATIONS)
    return Topic(error_code=0, name=info.name, topic_id=info.topic_id,
                 is_internal=is_internal(info.name), partitions=partitions,
                 topic_authorized_operations=operations)


def _may_create(services: BrokerServices, ctx: RequestContext, name: str) -> bool:
    # Kafka's AuthHelper: CREATE on the cluster, else CREATE on the topic.
    return services.authorized(ctx, AclOperation.CREATE, ResourceType.CLUSTER) or \
        services.authorized(ctx, AclOperation.CREATE, ResourceType.TOPIC, name)


def _error_topic(code: int, name: str | None, topic_id: uuid.UUID = ZERO_UUID) -> Topic:
    return Topic(error_code=code, name=name, topic_id=topic_id,
                 is_internal=bool(name) and is_internal(name or ""), partitions=[])


def handle_metadata(services: BrokerServices, ctx: RequestContext) -> MetadataResponse:
    version = ctx.header.request_api_version
    req = ctx.body
    with_ops = version >= 8 and bool(req.include_topic_authorized_operations)
    allow_auto = req.allow_auto_topic_creation if version >= 4 else True
    topics: list[Topic] = []
    if req.topics is None or (version == 0 and not req.topics):
        # Topics the principal may not describe are left out without a word (Kafka).
        existing_topics = services.logs.topics()
        visible = services.authorized_topics(ctx, AclOperation.DESCRIBE, existing_topics)
        for name, existing in sorted(existing_topics.items()):
            if name in visible:
                topics.append(topic_metadata(services, existing, with_ops, ctx))
    else:
        seen: set[object] = set()
        for requested in req.topics:
            name = requested.name
            if name is None:
                # v10+: by topic id only.
                topic_id = requested.topic_id
                if topic_id in seen:
                    continue
                seen.add(topic_id)
                by_id = services.logs.topic_by_id(topic_id)
                if by_id is not None and not services.authorized(
                        ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, by_id.name):
                    topics.append(_error_topic(TopicAuthorizationFailedError.code,
                                               None if version >= 12 else "", topic_id))
                elif by_id is None:
                    topics.append(_error_topic(UnknownTopicIdError.code,
                                               None if version >= 12 else "", topic_id))
                else:
                    topics.append(topic_metadata(services, by_id, with_ops, ctx))
                continue
            if name in seen:
                continue
            seen.add(name)
            if not services.authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                # Whether or not it exists: existence is not disclosed.
                topics.append(_error_topic(TopicAuthorizationFailedError.code, name))
                continue
            if topic_name_problem(name) is not None:
                topics.append(_error_topic(InvalidTopicError.code, name))
                continue
            info: TopicInfo | None = services.topic(name)
            if info is None and allow_auto and services.auto_create_topics \
                    and not is_internal(name):
                if not _may_create(services, ctx, name):
                    topics.append(_error_topic(TopicAuthorizationFailedError.code, name))
                    continue
                try:
                    info = services.auto_create(name)
                except KafkaError as exc:
                    topics.append(_error_topic(code_for(exc, f"auto-creating {name}"), name))
                    continue
            if info is None:
                topics.append(_error_topic(UnknownTopicOrPartitionError.code, name))
            else:
                topics.append(topic_metadata(services, info, with_ops, ctx))
    node = services.node
    host, port = node.address(ctx.listener)
    include_cluster_ops = 8 <= version <= 10 and bool(req.include_cluster_authorized_operations)
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=node.node_id, host=host,
                                                         port=port, rack=node.rack)],
        cluster_id=services.cluster_id,
        controller_id=node.node_id,
        topics=topics,
        cluster_authorized_operations=services.authorized_operations(
            ctx, ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS) if include_cluster_ops
        else NOT_REQUESTED,
        error_code=0,
    )
