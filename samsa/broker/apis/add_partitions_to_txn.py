"""AddPartitionsToTxn (key 24), versions 0-5: partitions join a producer's transaction.

v0-3 come from producers (one transaction, the partitions it is about to write); v4-5 from
brokers (CLUSTER_ACTION, checked in authorization.py) and may carry several transactions, each
either added or, with ``verify_only``, only checked: KIP-890 part 1's verification that a
partition is in the transaction before a leader takes its first transactional batch.

As Kafka's ``KafkaApis.handleAddPartitionsToTxnRequest``: WRITE on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then for producers WRITE on each topic and every
partition known; if any of those fails, the failing partitions get their error
(TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION) and the others OPERATION_NOT_ATTEMPTED.
Otherwise the coordinator's one answer goes to every partition; producers before v2 know
INVALID_PRODUCER_EPOCH, not PRODUCER_FENCED.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.services import BrokerServices
from samsa.errors import (
    InvalidProducerEpochError,
    OperationNotAttemptedError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from samsa.protocol import AddPartitionsToTxnResponse
from samsa.security.acl import AclOperation, ResourceType

R = AddPartitionsToTxnResponse
TopicPartition = tuple[str, int]


def _partitions(topics: Iterable[Any]) -> list[TopicPartition]:
    return list(dict.fromkeys((t.name, p) for t in topics for p in t.partitions))


def topic_results(errors: dict[TopicPartition, int]) -> list[Any]:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), code in errors.items():
        by_topic.setdefault(topic, []).append(
            R.AddPartitionsToTxnPartitionResult(partition_index=partition,
                                                partition_error_code=code))
    return [R.AddPartitionsToTxnTopicResult(name=name, results_by_partition=results)
            for name, results in by_topic.items()]


def _prechecks(services: BrokerServices, ctx: RequestContext, transactional_id: str,
               partitions: list[TopicPartition], check_topics: bool
               ) -> dict[TopicPartition, int] | None:
    """Per-partition errors if the transaction may not go on, else None.  ``check_topics``
    (a producer's request): the principal's WRITE on the id and on each topic."""
    if check_topics and not services.authorized(
            ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return dict.fromkeys(partitions, TransactionalIdAuthorizationFailedError.code)
    writable = (services.authorized_topics(ctx, AclOperation.WRITE, {t for t, _ in partitions})
                if check_topics else {t for t, _ in partitions})
    failed: dict[TopicPartition, int] = {}
    for topic, partition in partitions:
        if topic not in writable:
            failed[(topic, partition)] = TopicAuthorizationFailedError.code
        elif services.get_log(topic, partition) is None:
            failed[(topic, partition)] = UnknownTopicOrPartitionError.code
    if not failed:
        return None
    return {tp: failed.get(tp, OperationNotAttemptedError.code) for tp in partitions}


def _add(services: BrokerServices, ctx: RequestContext, transactional_id: str,
         producer_id: int, producer_epoch: int, partitions: list[TopicPartition],
         verify_only: bool, check_topics: bool) -> dict[TopicPartition, int]:
    failed = _prechecks(services, ctx, transactional_id, partitions, check_topics)
    if failed is not None:
        return failed
    coordinator = services.transactions
    if verify_only:
        return coordinator.verify_partitions(transactional_id, producer_id, producer_epoch,
                                             partitions)
    code = coordinator.add_partitions(transactional_id, producer_id, producer_epoch, partitions,
                                      client_tv2=ctx.api_version > 3)
    if code == ProducerFencedError.code and ctx.api_version < 2:
        code = InvalidProducerEpochError.code
    return dict.fromkeys(partitions, code)


def handle_add_partitions_to_txn(services: BrokerServices,
                                 ctx: RequestContext) -> AddPartitionsToTxnResponse:
    req = ctx.body
    if ctx.api_version <= 3:
        partitions = _partitions(req.v3_and_below_topics)
        errors = _add(services, ctx, req.v3_and_below_transactional_id,
                      req.v3_and_below_producer_id, req.v3_and_below_producer_epoch,
                      partitions, False, True)
        return R(throttle_time_ms=0, results_by_topic_v3_and_below=topic_results(errors))
    results = []
    for txn in req.transactions:
        errors = _add(services, ctx, txn.transactional_id, txn.producer_id,
                      txn.producer_epoch, _partitions(txn.topics), txn.verify_only, False)
        results.append(R.AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                                  topic_results=topic_results(errors)))
    return R(throttle_time_ms=0, error_code=0, results_by_transaction=results)
