"""Produce (key 0), versions 0-12: append each partition's batch to its log.

v0-2 may carry magic 0/1 message sets: they are converted to one v2 batch (up_conversion.py).

On one node ``acks=-1`` is satisfied once the local append returns (the log applies its flush
policy, ``flush.messages``/``flush.ms``); ``acks=0`` gets no response at all, and the connection
is closed if any partition failed so that the producer refreshes its metadata (as Kafka does).

Transactional batches need the request's transactional id (else, as Kafka,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED).  Before a producer's first transactional batch on a
partition (no transaction of it open there), the partition is verified with the transaction
coordinator (KIP-890 part 1, Kafka's ReplicaManager.handleProduceAppend): a partition not in
the transaction is refused with INVALID_TXN_STATE (Produce <= v10) or TRANSACTION_ABORTABLE
(v11+), a fenced producer with INVALID_PRODUCER_EPOCH, a busy or unavailable coordinator with
the retriable NOT_ENOUGH_REPLICAS; nothing of a refused partition is appended.  Produce v12
(KIP-890 part 2 clients) adds the partition to the transaction instead.
"""

from __future__ import annotations

import struct
import time

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.error_codes import code_for, message_for
from samsa.broker.apis.produce_response import success_frame
from samsa.broker.apis.services import BrokerServices
from samsa.broker.apis.topic_names import INTERNAL_TOPICS
from samsa.broker.log import AppendResult, Log
from samsa.broker.log.up_conversion import up_convert
from samsa.errors import (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidRequiredAcksError,
    InvalidTopicError,
    InvalidTxnStateError,
    KafkaError,
    NotCoordinatorError,
    NotEnoughReplicasError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
    TransactionAbortableError,
    TransactionalIdAuthorizationFailedError,
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
    PRODUCER_ID_OFFSET,
    TRANSACTIONAL_FLAG_MASK,
    Compression,
    read_produce_check_fields,
)
from samsa.records.conversion import is_legacy_message_set
from samsa.security.acl import AclOperation, ResourceType

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = ProduceResponse.PartitionProduceResponse
RecordError = ProduceResponse.BatchIndexAndErrorMessage
_PRODUCER = struct.Struct(">qh")  # ProducerId, ProducerEpoch
# Produce versions from here on mean a KIP-890 part 2 client: its partitions join the
# transaction with their first batch (Kafka infers the transaction version from the request).
TV2_PRODUCE_VERSION = 12
# Verification errors that tell a client to retry: Produce answers them NOT_ENOUGH_REPLICAS,
# which every client retries without a metadata refresh (ReplicaManager.handleProduceAppend).
_COORDINATOR_BUSY = frozenset({CoordinatorNotAvailableError.code, NotCoordinatorError.code,
                               CoordinatorLoadInProgressError.code})


def _failed(index: int, code: int, message: str | None,
            record_errors: list[tuple[int, str]] | None = None) -> PartitionResponse:
    return PartitionResponse(index=index, error_code=code, base_offset=-1,
                             log_append_time_ms=-1, log_start_offset=-1,
                             record_errors=[RecordError(batch_index=i, batch_index_error_message=m)
                                            for i, m in record_errors or ()],
                             error_message=message)


def _precheck(records: bytes | memoryview, version: int) -> tuple[int, int] | None:
    """The request-level checks Kafka makes before the log validates the batch itself
    (``ProduceRequest.validateRecords``); the (producer id, epoch) of a transactional batch,
    else None.  Record timestamps are the log's to check."""
    if len(records) < RECORD_BATCH_OVERHEAD or records[MAGIC_OFFSET] != MAGIC_V2:
        return None  # the log reports the precise problem (too short, wrong magic)
    # The few header fields needed here, without building a BatchHeader.
    batch_length, attributes = read_produce_check_fields(records)[:2]
    if version < 7 and attributes & COMPRESSION_CODEC_MASK == Compression.ZSTD:
        # KIP-110: zstd needs Produce v7; Kafka answers the partition UNSUPPORTED_COMPRESSION_TYPE.
        raise UnsupportedCompressionTypeError(
            f"zstd-compressed batches need Produce v7 or later, this request is v{version}")
    if batch_length + LOG_OVERHEAD < len(records):
        raise InvalidRecordError("produce requests of version 3 and later must carry exactly "
                                 "one record batch per partition")
    if attributes & TRANSACTIONAL_FLAG_MASK:
        producer_id, epoch = _PRODUCER.unpack_from(records, PRODUCER_ID_OFFSET)
        return producer_id, epoch
    return None


def _verify(services: BrokerServices, topic: str, index: int, log: Log,
            transactional_id: str | None, producer: tuple[int, int],
            version: int) -> PartitionResponse | None:
    """KIP-890's check of a transactional batch; the refused partition's response, or None
    to append it."""
    producer_id, epoch = producer
    if transactional_id is None:
        return _failed(index, TransactionalIdAuthorizationFailedError.code,
                       "a transactional batch needs the produce request's transactional_id")
    if log.has_open_transaction(producer_id):
        return None  # verified with the transaction's first batch here
    coordinator = services.transactions
    if version >= TV2_PRODUCE_VERSION:
        code = coordinator.add_partitions(transactional_id, producer_id, epoch, [(topic, index)],
                                          client_tv2=True)
    else:
        code = coordinator.verify_partition(transactional_id, producer_id, epoch, topic, index)
    if code == 0:
        return None
    message = (f"{topic}-{index} could not be verified to be in the transaction of "
               f"transactional id {transactional_id!r} (error {code})")
    if code == ProducerFencedError.code:
        code = InvalidProducerEpochError.code
    elif code == TransactionAbortableError.code and version <= 10:
        code = InvalidTxnStateError.code
    elif code in _COORDINATOR_BUSY or (code == ConcurrentTransactionsError.code
                                       and version < TV2_PRODUCE_VERSION):
        code = NotEnoughReplicasError.code
    if code in (InvalidTxnStateError.code, TransactionAbortableError.code):
        message = (f"{topic}-{index} was not added to the transaction of transactional id "
                   f"{transactional_id!r}; send AddPartitionsToTxn before producing to it")
    return _failed(index, code, message)


def _topic_compression(services: BrokerServices, topic: str) -> str | None:
    info = services.topic(topic)
    codec = info.configs.get("compression.type") if info is not None else None
    return codec if codec is not None else services.config.get("compression.type")


def _append(services: BrokerServices, topic: str, index: int,
            records: bytes | memoryview | None, transactional_id: str | None,
            now: int, version: int) -> AppendResult | PartitionResponse:
    """The append's result, or the failed partition's response."""
    if topic in INTERNAL_TOPICS:  # the coordinators write these, never a client
        return _failed(index, InvalidTopicError.code, f"Cannot append to internal topic {topic}")
    log = services.logs.find_log(topic, index)  # (services.get_log, one call less)
    if log is None:
        return _failed(index, UnknownTopicOrPartitionError.code,
                       f"{topic}-{index} does not exist on this broker")
    return append_to(services, log, topic, index, records, transactional_id, now, version)


def append_to(services: BrokerServices, log: Log, topic: str, index: int,
              records: bytes | memoryview | None, transactional_id: str | None, now: int,
              version: int) -> AppendResult | PartitionResponse:
    """_append once the partition's log is found (produce_frame.py comes in here)."""
    try:
        data = records if records is not None else b""
        if version < 3 and is_legacy_message_set(data):
            # Produce v0-2 of magic 0/1 (Kafka 3.9 still takes them): one v2 batch, as its
            # LogValidator converts them (up_conversion.py).
            # (Its codec may be the topic's zstd: ProduceRequest.validateRecords checks v3+ only.)
            data = up_convert(data, log.config, now, _topic_compression(services, topic))
        else:
            producer = _precheck(data, version)
            if producer is not None:
                refused = _verify(services, topic, index, log, transactional_id, producer,
                                  version)
                if refused is not None:
                    return refused
        return log.append_as_leader(data, leader_epoch=services.leader_epoch(log), now_ms=now)
    except KafkaError as exc:
        return _failed(index, code_for(exc, f"produce to {topic}-{index}"), message_for(exc),
                       getattr(exc, "record_errors", None))


def append_partition(services: BrokerServices, topic: str, index: int,
                     records: bytes | memoryview | None, transactional_id: str | None,
                     now: int, version: int) -> PartitionResponse:
    result = _append(services, topic, index, records, transactional_id, now, version)
    if isinstance(result, PartitionResponse):
        return result
    return PartitionResponse(index=index, error_code=0, base_offset=result.base_offset,
                             log_append_time_ms=result.log_append_time_ms,
                             log_start_offset=result.log_start_offset, record_errors=[],
                             error_message=None)


def single_answer(services: BrokerServices, version: int, correlation_id: int, name: str,
                  index: int, result: AppendResult | PartitionResponse
                  ) -> bytes | ProduceResponse:
    """The answer to a request of one topic and one partition (v3+, acks 1 or -1): the
    response frame when it appended (fetches parked on the partition woken first), else the
    response to encode."""
    if isinstance(result, PartitionResponse):
        return ProduceResponse(throttle_time_ms=0, responses=[
            TopicResponse(name=name, partition_responses=[result])])
    services.fetch_purgatory.check_and_complete((name, index))
    return success_frame(version, correlation_id, name, index, result.base_offset,
                         result.log_append_time_ms, result.log_start_offset)


def _refuse_all(ctx: RequestContext, code: int) -> ProduceResponse | None:
    if ctx.body.acks == 0:
        ctx.close_connection("acks=0 produce refused; the client must refresh its metadata")
        return None
    return ProduceResponse(throttle_time_ms=0, responses=[
        TopicResponse(name=t.name, partition_responses=[
            _failed(d.index, code, None) for d in t.partition_data])
        for t in ctx.body.topic_data])


def produce_runs_inline(services: BrokerServices, ctx: RequestContext) -> bool:
    """True unless an append of this request fsyncs on the spot (a log with ``flush.messages``
    1), so that a network thread may handle it itself."""
    for topic in ctx.body.topic_data:
        for data in topic.partition_data:
            log = services.logs.find_log(topic.name, data.index)
            if log is not None and log.config.flush_messages <= 1:
                return False
    return True


def handle_produce(services: BrokerServices, ctx: RequestContext) -> ProduceResponse | None:
    req = ctx.body
    acks = req.acks
    transactional_id = req.transactional_id
    if transactional_id is not None and services.authorizer is not None and \
            not services.authorized(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                    transactional_id):
        # KafkaApis.handleProduceRequest: every partition refused.
        return _refuse_all(ctx, TransactionalIdAuthorizationFailedError.code)
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
            result = _append(services, name, data.index, data.records, transactional_id, now,
                             version)
        answer = single_answer(services, version, ctx.header.correlation_id, name, data.index,
                               result)
        if isinstance(answer, bytes):
            ctx.respond_frame([answer])
            return None
        return answer
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
                                            transactional_id, now, version)
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
