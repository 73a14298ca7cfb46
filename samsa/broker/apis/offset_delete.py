"""OffsetDelete (key 47), version 0: delete a group's committed offsets for some partitions.

As Kafka's KafkaApis.handleOffsetDeleteRequest: partitions of unknown topics (or beyond a
topic's partition count) answer UNKNOWN_TOPIC_OR_PARTITION and are not passed on; the rest go
to the group coordinator (GroupCoordinator.delete_offsets).  A group-level error replaces the
whole answer (OffsetDeleteResponse.Builder.merge): the error code and no topics."""

from __future__ import annotations

from typing import Any

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.services import BrokerServices
from samsa.errors import TopicAuthorizationFailedError, UnknownTopicOrPartitionError
from samsa.protocol import OffsetDeleteResponse
from samsa.security.acl import AclOperation

TopicResult = OffsetDeleteResponse.OffsetDeleteResponseTopic
PartitionResult = OffsetDeleteResponse.OffsetDeleteResponsePartition


def handle_offset_delete(services: BrokerServices, ctx: RequestContext) -> OffsetDeleteResponse:
    req = ctx.body
    errors: dict[tuple[str, int], int] = {}
    valid: list[tuple[str, int]] = []
    readable = services.authorized_topics(ctx, AclOperation.READ, {t.name for t in req.topics})
    for topic in req.topics:
        info = services.topic(topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if topic.name not in readable:
                errors[tp] = TopicAuthorizationFailedError.code
            elif info is None or not 0 <= p.partition_index < info.partitions:
                errors[tp] = UnknownTopicOrPartitionError.code
            else:
                valid.append(tp)
    group_error, deleted = services.groups.delete_offsets(req.group_id, valid)
    if group_error:
        return OffsetDeleteResponse(error_code=group_error, throttle_time_ms=0, topics=[])
    errors.update(deleted)
    by_topic: dict[str, list[Any]] = {}
    for (name, index), code in errors.items():
        by_topic.setdefault(name, []).append(PartitionResult(partition_index=index,
                                                             error_code=code))
    return OffsetDeleteResponse(error_code=0, throttle_time_ms=0, topics=[
        TopicResult(name=name, partitions=parts) for name, parts in by_topic.items()])
