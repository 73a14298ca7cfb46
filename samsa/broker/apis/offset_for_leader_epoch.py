"""OffsetForLeaderEpoch (key 23), versions 0-4: where an epoch ended (consumer log truncation
detection).  One node leads every partition in one epoch, so for the current epoch the answer
is the log end offset, as Kafka's leader epoch cache gives once a leader is elected."""

from __future__ import annotations

from typing import Any

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.fetch import leader_epoch_error
from samsa.broker.apis.services import BrokerServices
from samsa.errors import TopicAuthorizationFailedError, UnknownTopicOrPartitionError
from samsa.protocol import OffsetForLeaderEpochResponse
from samsa.security.acl import AclOperation

TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEndOffset = OffsetForLeaderEpochResponse.EpochEndOffset


def _end_offset(services: BrokerServices, topic: str, p: Any) -> EpochEndOffset:
    index = p.partition
    log = services.get_log(topic, index)
    if log is None:
        return EpochEndOffset(error_code=UnknownTopicOrPartitionError.code, partition=index,
                              leader_epoch=-1, end_offset=-1)
    current = services.leader_epoch(log)
    error = leader_epoch_error(current, p.current_leader_epoch)
    if error:
        return EpochEndOffset(error_code=error, partition=index, leader_epoch=-1, end_offset=-1)
    requested = p.leader_epoch
    if requested == current:
        epoch, end = current, log.log_end_offset
    elif requested > current:
        epoch, end = -1, -1  # an epoch this partition never had
    else:
        epoch, end = log.end_offset_for_epoch(requested)
    return EpochEndOffset(error_code=0, partition=index, leader_epoch=epoch, end_offset=end)


def handle_offset_for_leader_epoch(services: BrokerServices,
                                   ctx: RequestContext) -> OffsetForLeaderEpochResponse:
    # DESCRIBE on each topic (a consumer; replicas would need CLUSTER_ACTION, none exist here).
    describable = services.authorized_topics(ctx, AclOperation.DESCRIBE,
                                             {t.topic for t in ctx.body.topics})
    denied = TopicAuthorizationFailedError.code
    topics = [TopicResult(topic=t.topic, partitions=[
        _end_offset(services, t.topic, p) if t.topic in describable else
        EpochEndOffset(error_code=denied, partition=p.partition, leader_epoch=-1, end_offset=-1)
        for p in t.partitions])
        for t in ctx.body.topics]
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
