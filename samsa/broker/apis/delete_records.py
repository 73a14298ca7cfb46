"""DeleteRecords (key 21), versions 0-2: move a partition's log start offset forward."""

from __future__ import annotations

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.error_codes import code_for
from samsa.broker.apis.services import BrokerServices
from samsa.broker.apis.topic_names import refuse_internal_data
from samsa.errors import KafkaError, TopicAuthorizationFailedError, UnknownTopicOrPartitionError
from samsa.protocol import DeleteRecordsResponse
from samsa.security.acl import AclOperation

TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = DeleteRecordsResponse.DeleteRecordsPartitionResult


def _delete(services: BrokerServices, topic: str, index: int, offset: int) -> PartitionResult:
    try:
        refuse_internal_data(topic, "delete records of")
    except KafkaError as exc:
        return PartitionResult(partition_index=index, low_watermark=-1, error_code=exc.code)
    log = services.get_log(topic, index)
    if log is None:
        return PartitionResult(partition_index=index, low_watermark=-1,
                               error_code=UnknownTopicOrPartitionError.code)
    try:
        low = log.delete_records_before(offset)  # -1 means "up to the high watermark"
    except KafkaError as exc:
        return PartitionResult(partition_index=index, low_watermark=-1,
                               error_code=code_for(exc, f"DeleteRecords {topic}-{index}"))
    # Fetches parked below the new start now get OFFSET_OUT_OF_RANGE.
    services.fetch_purgatory.check_and_complete((topic, index))
    return PartitionResult(partition_index=index, low_watermark=low, error_code=0)


def _denied(index: int) -> PartitionResult:
    return PartitionResult(partition_index=index, low_watermark=-1,
                           error_code=TopicAuthorizationFailedError.code)


def handle_delete_records(services: BrokerServices,
                          ctx: RequestContext) -> DeleteRecordsResponse:
    deletable = services.authorized_topics(ctx, AclOperation.DELETE,
                                           {t.name for t in ctx.body.topics})
    topics = [TopicResult(name=t.name,
                          partitions=[_delete(services, t.name, p.partition_index, p.offset)
                                      if t.name in deletable else _denied(p.partition_index)
                                      for p in t.partitions])
              for t in ctx.body.topics]
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
