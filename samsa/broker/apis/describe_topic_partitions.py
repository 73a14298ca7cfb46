"""DescribeTopicPartitions (key 75), version 0 (KIP-966): topics and partitions a page at a
time, as Kafka's DescribeTopicPartitionsRequestHandler and
KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse answer.

No topics listed means every topic; topics are answered in name order from the cursor's topic
(and its partition) on, at most ``response_partition_limit`` partitions (clamped to
[1, max.request.partition.size.limit = 2000]); when a page is full ``next_cursor`` names where
the next one starts.  Unknown requested topics answer UNKNOWN_TOPIC_OR_PARTITION (or
INVALID_TOPIC_EXCEPTION for an illegal name); a cursor topic missing from the list or a
negative cursor partition fails the whole request with INVALID_REQUEST."""

from __future__ import annotations

from typing import Any

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.metadata import TOPIC_OPERATIONS
from samsa.broker.apis.services import BrokerServices
from samsa.broker.apis.topic_names import is_internal, topic_name_problem
from samsa.errors import (
    InvalidRequestError,
    InvalidTopicError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from samsa.protocol import DescribeTopicPartitionsResponse
from samsa.protocol.schema import ZERO_UUID
from samsa.security.acl import AclOperation, ResourceType

Response = DescribeTopicPartitionsResponse
TopicResult = Response.DescribeTopicPartitionsResponseTopic
PartitionResult = Response.DescribeTopicPartitionsResponsePartition
Cursor = Response.Cursor

MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000  # Kafka's max.request.partition.size.limit default


def _error_response(req: Any, code: int) -> Any:
    """DescribeTopicPartitionsRequest.getErrorResponse: every listed topic gets the error."""
    return Response(throttle_time_ms=0, topics=[
        TopicResult(error_code=code, name=t.name, topic_id=ZERO_UUID, is_internal=False,
                    partitions=[]) for t in req.topics], next_cursor=None)


def handle_describe_topic_partitions(services: BrokerServices,
                                     ctx: RequestContext) -> Any:
    req = ctx.body
    cursor = req.cursor
    start_name = cursor.topic_name if cursor is not None else ""
    fetch_all = not req.topics
    candidates = services.logs.topics().keys() if fetch_all else [t.name for t in req.topics]
    names = sorted({n for n in candidates if n >= start_name})
    describable = services.authorized_topics(ctx, AclOperation.DESCRIBE, names)
    if fetch_all:  # topics the principal may not describe are left out, as from Metadata
        names = [n for n in names if n in describable]
    if not fetch_all and cursor is not None and cursor.topic_name not in names:
        return _error_response(req, InvalidRequestError.code)
    if cursor is not None and cursor.partition_index < 0:
        return _error_response(req, InvalidRequestError.code)
    remaining = max(min(MAX_REQUEST_PARTITION_SIZE_LIMIT, req.response_partition_limit), 1)
    node = services.node.node_id
    topics: list[Any] = []
    next_cursor = None
    for name in names:
        if remaining == 0:
            next_cursor = Cursor(topic_name=name, partition_index=0)
            break
        if name not in describable:  # named: refused, whether it exists or not
            topics.append(TopicResult(error_code=TopicAuthorizationFailedError.code, name=name,
                                      topic_id=ZERO_UUID, is_internal=is_internal(name),
                                      partitions=[]))
            continue
        info = services.topic(name)
        if info is None:
            if not fetch_all:
                code = (InvalidTopicError.code if topic_name_problem(name)
                        else UnknownTopicOrPartitionError.code)
                topics.append(TopicResult(error_code=code, name=name, topic_id=ZERO_UUID,
                                          is_internal=is_internal(name), partitions=[]))
            continue
        start = cursor.partition_index if cursor is not None and name == start_name else 0
        upper = min(info.partitions, start + remaining)
        partitions = [PartitionResult(
            error_code=0, partition_index=i, leader_id=node,
            leader_epoch=services.leader_epoch(services.get_log(name, i)),
            replica_nodes=[node], isr_nodes=[node], eligible_leader_replicas=[],
            last_known_elr=[], offline_replicas=[]) for i in range(start, upper)]
        # Kafka always fills in the topic's authorized operations here (every topic operation
        # without an authorizer).
        topics.append(TopicResult(error_code=0, name=name, topic_id=info.topic_id,
                                  is_internal=is_internal(name), partitions=partitions,
                                  topic_authorized_operations=services.authorized_operations(
                                      ctx, ResourceType.TOPIC, name, TOPIC_OPERATIONS)))
        if upper < info.partitions:
            next_cursor = Cursor(topic_name=name, partition_index=upper)
            break
        remaining -= len(partitions)
    return Response(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)
