"""Produce (key 0), versions 3-12: append each partition's batch to its log.

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
from samsa.broker.apis.topic_configs import LONG_MAX
from samsa.broker.log import AppendResult, Log
from samsa.errors import (
    InvalidRecordError,
    InvalidRequiredAcksError,
    InvalidTimestampError,
    InvalidTxnStateError,
    KafkaError,
    UnknownTopicOrPartitionError,
)
from samsa.protocol import ProduceResponse
from samsa.records import (
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    RECORD_BATCH_OVERHEAD,
)
from samsa.records.batch_header import (
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    read_produce_check_fields,
)

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = ProduceResponse.PartitionProduceResponse


def _failed(index: int, code: int, message: str | None) -> PartitionResponse:
    return PartitionResponse(index=index, error_code=code, base_offset=-1,
                             log_append_time_ms=-1, log_start_offset=-1, record_errors=[],
                             error_message=message)


def _precheck(log: Log, records: bytes | memoryview, transactional: bool, now: int) -> None:
    """The request-level checks Kafka makes before the log validates the batch itself."""
    if transactional:
        raise InvalidTxnStateError(
            "transactions are not supported by this broker yet; use an idempotent producer "
            "(enable.idempotence) without transactional.id"
        )
    if len(records) < RECORD_BATCH_OVERHEAD or records[MAGIC_OFFSET] != MAGIC_V2:
        return  # the log reports the precise problem (too short, wrong magic)
    # The few header fields needed here, without building a BatchHeader.
    batch_length, attributes, base_timestamp, max_timestamp = read_produce_check_fields(records)
    if attributes & TRANSACTIONAL_FLAG_MASK:
        raise InvalidTxnStateError("transactional batches need a transaction, and transactions "
                                   "are not supported by this broker yet")
    if batch_length + LOG_OVERHEAD < len(records):
        raise InvalidRecordError("produce requests of version 3 and later must carry exactly "
                                 "one record batch per partition")
    config = log.config
    if not attributes & TIMESTAMP_TYPE_MASK and not config.log_append_time:  # CreateTime
        # message.timestamp.after/before.max.ms: the topic's, else the broker's log.* setting.
        after, before = config.timestamp_after_max_ms, config.timestamp_before_max_ms
        if max_timestamp > now + after:
            raise InvalidTimestampError(
                f"timestamp {max_timestamp} of a record in the batch is more than "
                f"{after} ms ahead of the broker's clock (message.timestamp.after.max.ms)"
            )
        if before < LONG_MAX and 0 <= base_timestamp < now - before:
            raise InvalidTimestampError(
                f"timestamp {base_timestamp} of the batch is more than {before} ms "
                f"behind the broker's clock (message.timestamp.before.max.ms)"
            )


def _append(services: BrokerServices, topic: str, index: int,
            records: bytes | memoryview | None, transactional: bool,
            now: int) -> AppendResult | PartitionResponse:
    """The append's result, or the failed partition's response."""
    log = services.get_log(topic, index)
    if log is None:
        return _failed(index, UnknownTopicOrPartitionError.code,
                       f"{topic}-{index} does not exist on this broker")
    try:
        data = records if records is not None else b""
        _precheck(log, data, transactional, now)
        return log.append_as_leader(data, leader_epoch=services.leader_epoch(log), now_ms=now)
    except KafkaError as exc:
        return _failed(index, code_for(exc, f"produce to {topic}-{index}"), message_for(exc))


def append_partition(services: BrokerServices, topic: str, index: int,
                     records: bytes | memoryview | None, transactional: bool,
                     now: int) -> PartitionResponse:
    result = _append(services, topic, index, records, transactional, now)
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
    if len(topics) == 1 and len(topics[0].partition_data) == 1 and (acks == 1 or acks == -1):
        # The usual request (librdkafka sends one per partition batch): no response objects,
        # the answer comes from a template (produce_response.py).
        name = topics[0].name
        data = topics[0].partition_data[0]
        result = _append(services, name, data.index, data.records, transactional, now)
        if not isinstance(result, PartitionResponse):
            services.fetch_purgatory.check_and_complete((name, data.index))
            header = ctx.header
            ctx.respond_frame([success_frame(
                header.request_api_version, header.correlation_id, name, data.index,
                result.base_offset, result.log_append_time_ms, result.log_start_offset)])
            return None
        return ProduceResponse(throttle_time_ms=0, responses=[
            TopicResponse(name=name, partition_responses=[result])])
    responses: list[TopicResponse] = []
    appended: list[tuple[str, int]] = []
    failed = False
    for topic in req.topic_data:
        partitions = []
        for data in topic.partition_data:
            if acks not in (-1, 0, 1):
                response = _failed(data.index, InvalidRequiredAcksError.code,
                                   f"acks must be -1 (all), 0 or 1, not {acks}")
            else:
                response = append_partition(services, topic.name, data.index, data.records,
                                            transactional, now)
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
