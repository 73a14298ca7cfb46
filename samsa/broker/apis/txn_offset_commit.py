"""TxnOffsetCommit (key 28), versions 0-5: a transactional producer's consumed positions,
committed with its transaction (KIP-98; the consumer's group metadata from v3, KIP-447).

As Kafka's KafkaApis.handleTxnOffsetCommitRequest: WRITE on the transactional id and READ on
the group are checked before the handler (authorization.py); here READ per topic
(TOPIC_AUTHORIZATION_FAILED) and unknown topics or partitions (UNKNOWN_TOPIC_OR_PARTITION)
fail their partitions, the rest go to the group coordinator.  First the group's
``__consumer_offsets`` partition must be in the producer's ongoing transaction (KIP-890
verification; v5, the transaction-version-2 form, adds it instead, as AddOffsetsToTxn would);
a failure fails every partition sent (Kafka's AddPartitionsToTxnManager error mapping):
a fenced producer gets INVALID_PRODUCER_EPOCH, a partition not in the transaction
TRANSACTION_ABORTABLE (v4+) or INVALID_TXN_STATE (clients that do not know that code).  The
offsets are then written in one transactional batch and stay pending until EndTxn's marker.
"""

from __future__ import annotations

from typing import Any

from samsa.broker.apis.context import RequestContext
from samsa.broker.apis.services import BrokerServices
from samsa.broker.group import GROUP_METADATA_TOPIC, PartitionCommit
from samsa.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidGroupIdError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
    TransactionAbortableError,
    UnknownTopicOrPartitionError,
)
from samsa.protocol import TxnOffsetCommitResponse
from samsa.security.acl import AclOperation

TopicResponse = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
PartitionResponse = TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition

# The first version whose clients know TRANSACTION_ABORTABLE, and the first that adds the
# group's partition to the transaction itself (AddPartitionsToTxnManager
# .txnOffsetCommitRequestVersionToTransactionSupportedOperation).
_ABORTABLE_VERSION = 4
_ADD_PARTITION_VERSION = 5


def verification_error(code: int, version: int) -> int:
    """What the client is told when the transaction's verification answered ``code``."""
    if code == ProducerFencedError.code:
        return InvalidProducerEpochError.code  # producers expect it here
    if code == TransactionAbortableError.code and version < _ABORTABLE_VERSION:
        return InvalidTxnStateError.code
    return code


def _commit(services: BrokerServices, version: int, req: Any,
            commits: list[PartitionCommit]) -> list[int]:
    if not req.group_id:
        return [InvalidGroupIdError.code] * len(commits)
    groups = services.groups
    partition = groups.partition_for(req.group_id)
    txns = services.transactions
    if version >= _ADD_PARTITION_VERSION:
        error = txns.add_partitions(req.transactional_id, req.producer_id, req.producer_epoch,
                                    [(GROUP_METADATA_TOPIC, partition)], client_tv2=True)
    else:
        error = txns.verify_partition(req.transactional_id, req.producer_id,
                                      req.producer_epoch, GROUP_METADATA_TOPIC, partition)
    error = verification_error(error, version)
    if error:
        return [error] * len(commits)
    return groups.commit_transactional_offsets(
        req.group_id, req.producer_id, req.producer_epoch, req.generation_id, req.member_id,
        req.group_instance_id, commits)


def handle_txn_offset_commit(services: BrokerServices,
                             ctx: RequestContext) -> TxnOffsetCommitResponse:
    version = ctx.header.request_api_version
    req = ctx.body
    readable = services.authorized_topics(ctx, AclOperation.READ, {t.name for t in req.topics})
    codes: list[int] = []
    commits: list[PartitionCommit] = []
    sent: list[int] = []  # where each commit's code goes in ``codes``
    for t in req.topics:
        for p in t.partitions:
            if t.name not in readable:
                codes.append(TopicAuthorizationFailedError.code)
            elif services.get_log(t.name, p.partition_index) is None:
                codes.append(UnknownTopicOrPartitionError.code)
            else:
                sent.append(len(codes))
                codes.append(0)
                commits.append(PartitionCommit(
                    t.name, p.partition_index, p.committed_offset,
                    p.committed_leader_epoch if version >= 2 else -1, p.committed_metadata))
    if commits:
        for index, code in zip(sent, _commit(services, version, req, commits), strict=True):
            if code == CoordinatorLoadInProgressError.code and version < 2:
                code = CoordinatorNotAvailableError.code  # KAFKA-7296: older clients crash
            codes[index] = code
    it = iter(codes)
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        TopicResponse(name=t.name, partitions=[
            PartitionResponse(partition_index=p.partition_index, error_code=next(it))
            for p in t.partitions])
        for t in req.topics])
