"""DescribeProducers (key 61), version 0: the active idempotent/transactional producers of
partitions, from each log's producer state (Kafka's Partition.activeProducerState)."""

from __future__ import annotations

from typing import Any

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.services import BrokerServices
from samsa.errors import TopicAuthorizationFailedError, UnknownTopicOrPartitionError
from samsa.protocol import DescribeProducersResponse
from samsa.security.acl import AclOperation

TopicResult = DescribeProducersResponse.TopicResponse
PartitionResult = DescribeProducersResponse.PartitionResponse
ProducerState = DescribeProducersResponse.ProducerState


def _describe(services: BrokerServices, topic: str, index: int) -> Any:
    log = services.get_log(topic, index)
    if log is None:
        return PartitionResult(partition_index=index,
                               error_code=UnknownTopicOrPartitionError.code,
                               error_message=f"{topic}-{index} does not exist", active_producers=[])
    # A copy of the public state (dict() copies atomically); the entries are only read.
    entries = dict(log.producer_state.producers)
    return PartitionResult(partition_index=index, error_code=0, error_message=None,
                           active_producers=[
        ProducerState(producer_id=pid, producer_epoch=e.epoch, last_sequence=e.last_seq,
                      last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                      current_txn_start_offset=e.current_txn_first_offset)
        for pid, e in sorted(entries.items())])


def handle_describe_producers(services: BrokerServices,
                              ctx: RequestContext) -> DescribeProducersResponse:
    readable = services.authorized_topics(ctx, AclOperation.READ,
                                          {t.name for t in ctx.body.topics})
    return DescribeProducersResponse(throttle_time_ms=0, topics=[
        TopicResult(name=t.name, partitions=[
            _describe(services, t.name, p) if t.name in readable else PartitionResult(
                partition_index=p, error_code=TopicAuthorizationFailedError.code,
                error_message=None, active_producers=[])
            for p in t.partition_indexes])
        for t in ctx.body.topics])
