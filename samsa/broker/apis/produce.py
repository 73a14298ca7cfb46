"""Produce (key 0), versions 0-12: append each partition's batch to its log.

v0-2 may carry magic 0/1 message sets: they are converted to one v2 batch (up_conversion.py).

On one node ``acks=-1`` is satisfied once the local append returns (the log applies its flush
policy, ``flush.messages``/``flush.ms``); ``acks=0`` gets no response at all, and the connection
is closed if any partition failed so that the producer refreshes its metadata (as Kafka does).

Transactions are not implemented yet: a transactional produce is refused with
INVALID_TXN_STATE rather than appended without a coordinator to commit or abort it.
"""

from __future__ import annotations

import time

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.error_codes import code_for, message_for
from samsa.broker.apis.produce_response import success_frame
from samsa.broker.apis.services import BrokerServices
from samsa.broker.apis.topic_names import INTERNAL_TOPICS
from samsa.broker.log import AppendResult
from samsa.broker.log.up_conversion import up_convert
from samsa.errors import (
    InvalidRecordError,
    InvalidRequiredAcksError,
    InvalidTopicError,
    InvalidTxnStateError,
    KafkaError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
    UnsupportedCompressionTypeError,
)
from samsa.protocol import ProduceResponse
from samsa.records import (
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    RECORD_BATCH_OVERHEAD,
)
from samsa.records.batch_header import (
    COMPRESSION_CODEC_MASK,
    TRANSACTIONAL_FLAG_MASK,
    Compression,
    read_produce_check_fields,
)
from samsa.records.conversion import is_legacy_message_set
from samsa.security.acl import AclOperation, ResourceType

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = ProduceResponse.PartitionProduceResponse
RecordError = ProduceResponse.BatchIndexAndErrorMessage


def _failed(index: int, code: int, message: str | None,
            record_errors: list[tuple[int, str]] | None = None) -> PartitionResponse:
    return PartitionResponse(index=index, error_code=code, base_offset=-1,
                             log_append_time_ms=-1, log_start_offset=-1,
                             record_errors=[RecordError(batch_index=i, batch_index_error_message=m)
                                            for i, m in record_errors or ()],
                             error_message=message)


def _precheck(records: bytes | memoryview, transactional: bool, version: int) -> None:
    """The request-level checks Kafka makes before the log validates the batch itself
    (``ProduceRequest.validateRecords``).  Record timestamps are the log's to check."""
    if transactional:
        raise InvalidTxnStateError(
            "transactions are not supported by this broker yet; use an idempotent producer "
            "(enable.idempotence) without transactional.id"
        )
    if len(records) < RECORD_BATCH_OVERHEAD or records[MAGIC_OFFSET] != MAGIC_V2:
        return  # the log reports the precise problem (too short, wrong magic)
    # The few header fields needed here, without building a BatchHeader.
    batch_length, attributes = read_produce_check_fields(records)[:2]
    if attributes & TRANSACTIONAL_FLAG_MASK:
        raise InvalidTxnStateError("transactional batches need a transaction, and transactions "
                                   "are not supported by this broker yet")
    if version < 7 and attributes & COMPRESSION_CODEC_MASK == Compression.ZSTD:
        # KIP-110: zstd needs Produce v7; Kafka answers the partition UNSUPPORTED_COMPRESSION_TYPE.
        raise UnsupportedCompressionTypeError(
            f"zstd-compressed batches need Produce v7 or later, this request is v{version}")
    if batch_length + LOG_OVERHEAD < len(records):
        raise InvalidRecordError("produce requests of version 3 and later must carry exactly "
                                 "one record batch per partition")


def _topic_compression(services: BrokerServices, topic: str) -> str | None:
    info = services.topic(topic)
    codec = info.configs.get("compression.type") if info is not None else None
    return codec if codec is not None else services.config.get("compression.type")


def _append(services: BrokerServices, topic: str, index: int,
            records: bytes | memoryview | None, transactional: bool,
            now: int, version: int) -> AppendResult | PartitionResponse:
    """The append's result, or the failed partition's response."""
    if topic in INTERNAL_TOPICS:  # the coordinators write these, never a client
        return _failed(index, InvalidTopicError.code, f"Cannot append to internal topic {topic}")
    log = services.get_log(topic, index)
    if log is None:
        return _failed(index, UnknownTopicOrPartitionError.code,
                       f"{topic}-{index} does not exist on this broker")
    try:
        data = records if records is not None else b""
        if version < 3 and is_legacy_message_set(data):
            # Produce v0-2 of magic 0/1 (Kafka 3.9 still takes them): one v2 batch, as its
            # LogValidator converts them (up_conversion.py).
            # (Its codec may be the topic's zstd: ProduceRequest.validateRecords checks v3+ only.)
            data = up_convert(data, log.config, now, _topic_compression(services, topic))
        else:
            _precheck(data, transactional, version)
        return log.append_as_leader(data, leader_epoch=services.leader_epoch(log), now_ms=now)
    except KafkaError as exc:
        return _failed(index, code_for(exc, f"produce to {topic}-{index}"), message_for(exc),
                       getattr(exc, "record_errors", None))


def append_partition(services: BrokerServices, topic: str, index: int,
                     records: bytes | memoryview | None, transactional: bool,
                     now: int, version: int) -> PartitionResponse:
    result = _append(services, topic, index, records, transactional, now, version)
    if isinstance(result, PartitionResponse):
        return result
    return PartitionResponse(index=index, error_code=0, base_offset=result.base_offset,
                             log_append_time_ms=result.log_append_time_ms,
                             log_start_offset=result.log_start_offset, record_errors=[],
                             error_message=None)


def produce_runs_inline(services: BrokerServices, ctx: RequestContext) -> bool:
    """True unless an append of this request fsyncs on the spot (a log with ``flush.messages``
    1), so that a network thread may handle it itself."""
    for topic in ctx.body.topic_data:
        for data in topic.partition_data:
            log = services.get_log(topic.name, data.index)
            if log is not None and log.config.flush_messages <= 1:
                return False
    return True


def handle_produce(services: BrokerServices, ctx: RequestContext) -> ProduceResponse | None:
    req = ctx.body
    acks = req.acks
    transactional = req.transactional_id is not None
    now = time.time_ns() // 1_000_000
    topics = req.topic_data
    version = ctx.api_version
    if len(topics) == 1 and len(topics[0].partition_data) == 1 and (acks == 1 or acks == -1) \
            and version >= 3:
        # The usual request (librdkafka sends one per partition batch): no response objects,
        # the answer comes from a template (produce_response.py).
        name = topics[0].name
        data = topics[0].partition_data[0]
        if services.authorizer is not None and not services.authorized(
                ctx, AclOperation.WRITE, ResourceType.TOPIC, name):
            result: AppendResult | PartitionResponse = _failed(
                data.index, TopicAuthorizationFailedError.code, None)
        else:
            result = _append(services, name, data.index, data.records, transactional, now,
                             version)
        if not isinstance(result, PartitionResponse):
            services.fetch_purgatory.check_and_complete((name, data.index))
            ctx.respond_frame([success_frame(
                version, ctx.header.correlation_id, name, data.index,
                result.base_offset, result.log_append_time_ms, result.log_start_offset)])
            return None
        return ProduceResponse(throttle_time_ms=0, responses=[
            TopicResponse(name=name, partition_responses=[result])])
    responses: list[TopicResponse] = []
    appended: list[tuple[str, int]] = []
    failed = False
    # WRITE on each topic, checked before the topic's existence (KafkaApis.handleProduceRequest).
    writable = services.authorized_topics(ctx, AclOperation.WRITE,
                                          {topic.name for topic in req.topic_data})
    for topic in req.topic_data:
        partitions = []
        for data in topic.partition_data:
            if topic.name not in writable:
                response = _failed(data.index, TopicAuthorizationFailedError.code, None)
            elif acks not in (-1, 0, 1):
                response = _failed(data.index, InvalidRequiredAcksError.code,
                                   f"acks must be -1 (all), 0 or 1, not {acks}")
            else:
                response = append_partition(services, topic.name, data.index, data.records,
                                            transactional, now, version)
            if response.error_code:
                failed = True
            else:
                appended.append((topic.name, data.index))
            partitions.append(response)
        responses.append(TopicResponse(name=topic.name, partition_responses=partitions))
    # Wake fetches parked on the partitions that just grew.
    for key in dict.fromkeys(appended):
        services.fetch_purgatory.check_and_complete(key)
    if acks == 0:
        if failed:
            ctx.close_connection("acks=0 produce failed; the client must refresh its metadata")
        else:
            ctx.no_response()
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=0)
