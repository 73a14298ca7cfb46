"""The transactional producer's requests and how each answer is classified (Java's
``TransactionManager.TxnRequestHandler`` subclasses).

One handler per request; the TransactionManager queues them by priority and the Sender sends
one at a time.  Each ``handle`` applies Kafka 4.x's error table for its API: retriable errors
re-enqueue the request, NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE look the coordinator up
again first, fencing is fatal (PRODUCER_FENCED, also for INVALID_PRODUCER_EPOCH from older
coordinators), and the rest is abortable or fatal as Java decides.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from samsa.errors import (
    BrokerResponseError,
    ClusterAuthorizationFailedError,
    ConcurrentTransactionsError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    IllegalGenerationError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    KafkaError,
    NotCoordinatorError,
    OperationNotAttemptedError,
    ProducerFencedError,
    RequestTimedOutError,
    TopicAuthorizationFailedError,
    TransactionAbortableError,
    TransactionalIdAuthorizationFailedError,
    UnknownMemberIdError,
    UnknownProducerIdError,
    UnsupportedForMessageFormatError,
    for_code,
)
from samsa.net.cluster import TopicPartition
from samsa.producer.txn_state import TransactionalRequestResult
from samsa.protocol import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    Message,
    TxnOffsetCommitRequest,
)
from samsa.protocol.api_keys import ApiKey

if TYPE_CHECKING:
    from samsa.producer.transaction_manager import TransactionManager

__all__ = [
    "AddOffsetsHandler", "AddPartitionsHandler", "CoordinatorType", "EndTxnHandler",
    "FindCoordinatorHandler", "InitProducerIdHandler", "Priority", "TxnOffsetCommitHandler",
    "TxnRequestHandler",
]

log = logging.getLogger(__name__)

# Java retries the first AddPartitionsToTxn of a transaction this soon after
# CONCURRENT_TRANSACTIONS: the previous transaction is still writing its markers.
ADD_PARTITIONS_RETRY_BACKOFF_MS = 20


class CoordinatorType(enum.IntEnum):
    """FindCoordinator's key_type (FindCoordinatorRequest.CoordinatorType)."""

    GROUP = 0
    TRANSACTION = 1


class Priority(enum.IntEnum):
    """Lower goes first (Java's TransactionManager.Priority)."""

    FIND_COORDINATOR = 0
    INIT_PRODUCER_ID = 1
    ADD_PARTITIONS_OR_OFFSETS = 2
    END_TXN = 3
    EPOCH_BUMP = 4


def _error(code: int, detail: str) -> BrokerResponseError:
    cls = for_code(code)
    return cls(f"{detail}: {cls.message}")


class TxnRequestHandler:
    """One queued transactional request and the result its caller waits on."""

    api = ""
    api_key = ApiKey.FIND_COORDINATOR
    priority = Priority.ADD_PARTITIONS_OR_OFFSETS
    min_version: int | None = None
    max_version: int | None = None  # None: the codec's highest
    is_end_txn = False

    def __init__(self, tm: TransactionManager, result: TransactionalRequestResult | None = None) -> None:
        self.tm = tm
        self.result = result if result is not None else TransactionalRequestResult(self.api)
        self.is_retry = False
        self.not_before_ms = 0
        self.retry_backoff_ms = tm.retry_backoff_ms

    # -- where it goes ------------------------------------------------------------------

    @property
    def coordinator_type(self) -> CoordinatorType | None:
        return CoordinatorType.TRANSACTION

    @property
    def coordinator_key(self) -> str:
        return self.tm.transactional_id or ""

    def build(self, version: int) -> Message:
        raise NotImplementedError

    def describe(self) -> str:
        return self.api

    # -- outcomes ---------------------------------------------------------------------

    def handle(self, body: Any, version: int) -> None:
        raise NotImplementedError

    def fatal(self, error: BaseException) -> None:
        self.result.fail(error)
        self.tm.transition_to_fatal_error(error)

    def abortable(self, error: BaseException) -> None:
        self.result.fail(error)
        self.tm.transition_to_abortable_error(error)

    def abortable_if_possible(self, error: BaseException) -> None:
        """Abortable when the coordinator can bump the epoch afterwards (KIP-360), else fatal."""
        tm = self.tm
        if tm.coordinator_supports_epoch_bump:
            tm.client_side_epoch_bump_required = True
            self.abortable(error)
        else:
            self.fatal(error)

    def reenqueue(self) -> None:
        self.tm.retry(self)

    def lookup_and_reenqueue(self, kind: CoordinatorType = CoordinatorType.TRANSACTION,
                             key: str | None = None) -> None:
        self.tm.lookup_coordinator(kind, self.coordinator_key if key is None else key)
        self.reenqueue()

    def fenced(self) -> None:
        tm = self.tm
        self.fatal(ProducerFencedError(
            f"transactional.id {tm.transactional_id!r}, producer id {tm.producer_id_and_epoch().producer_id} "
            f"epoch {tm.producer_id_and_epoch().epoch}: the coordinator answered {self.api} saying a newer "
            "producer with the same transactional.id fenced this one; close this producer (it cannot "
            "send or commit any more)"
        ))

    def common(self, code: int, what: str) -> bool:
        """The classification every coordinator API shares; True if it handled ``code``."""
        cls = for_code(code)
        if cls in (NotCoordinatorError, CoordinatorNotAvailableError):
            self.lookup_and_reenqueue()
        elif cls.retriable:
            self.reenqueue()
        elif cls in (InvalidProducerEpochError, ProducerFencedError):
            self.fenced()
        elif cls in (TransactionalIdAuthorizationFailedError, InvalidTxnStateError, InvalidProducerIdMappingError):
            self.fatal(_error(code, what))
        elif cls is UnknownProducerIdError:
            self.abortable_if_possible(_error(code, what))
        else:
            return False
        return True


class FindCoordinatorHandler(TxnRequestHandler):
    api = "FindCoordinator"
    api_key = ApiKey.FIND_COORDINATOR
    priority = Priority.FIND_COORDINATOR
    min_version = 1  # key_type appeared in v1

    def __init__(self, tm: TransactionManager, kind: CoordinatorType, key: str) -> None:
        super().__init__(tm)
        self.kind = kind
        self.key = key

    @property
    def coordinator_type(self) -> CoordinatorType | None:
        return None  # any broker answers

    def describe(self) -> str:
        what = "transaction" if self.kind is CoordinatorType.TRANSACTION else "group"
        return f"FindCoordinator for the {what} coordinator of {self.key!r}"

    def build(self, version: int) -> Message:
        if version >= 4:
            return FindCoordinatorRequest(key_type=int(self.kind), coordinator_keys=[self.key])
        return FindCoordinatorRequest(key=self.key, key_type=int(self.kind))

    def handle(self, body: Any, version: int) -> None:
        if version >= 4:
            if len(body.coordinators) != 1:
                self.fatal(KafkaError(f"FindCoordinator answered {len(body.coordinators)} coordinators for one key"))
                return
            found = body.coordinators[0]
            code, node_id, host, port = found.error_code, found.node_id, found.host, found.port
        else:
            code, node_id, host, port = body.error_code, body.node_id, body.host, body.port
        if code == 0:
            self.tm.set_coordinator(self.kind, node_id, host, port)
            self.result.done()
            return
        cls = for_code(code)
        what = f"finding the coordinator of {self.key!r}"
        if cls.retriable:
            self.reenqueue()
        elif cls is TransactionalIdAuthorizationFailedError:
            self.fatal(_error(code, what))
        elif cls in (GroupAuthorizationFailedError, TransactionAbortableError):
            self.abortable(_error(code, what))
        else:
            self.fatal(_error(code, what))


class InitProducerIdHandler(TxnRequestHandler):
    api = "InitProducerId"
    api_key = ApiKey.INIT_PRODUCER_ID
    max_version = 5  # v5 adds TRANSACTION_ABORTABLE; v6 is KIP-939's two-phase commit

    def __init__(self, tm: TransactionManager, producer_id: int, epoch: int, is_epoch_bump: bool) -> None:
        super().__init__(tm)
        self.producer_id = producer_id
        self.epoch = epoch
        self.is_epoch_bump = is_epoch_bump
        self.priority = Priority.EPOCH_BUMP if is_epoch_bump else Priority.INIT_PRODUCER_ID

    def build(self, version: int) -> Message:
        return InitProducerIdRequest(
            transactional_id=self.tm.txn_id,
            transaction_timeout_ms=self.tm.transaction_timeout_ms,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
        )

    def handle(self, body: Any, version: int) -> None:
        code = body.error_code
        if code == 0:
            self.tm.complete_init_producer_id(body.producer_id, body.producer_epoch, self.is_epoch_bump)
            self.result.done()
            return
        cls = for_code(code)
        what = f"InitProducerId for transactional.id {self.tm.transactional_id!r}"
        if cls in (NotCoordinatorError, CoordinatorNotAvailableError):
            self.lookup_and_reenqueue()
        elif cls.retriable:
            self.reenqueue()
        elif cls in (TransactionalIdAuthorizationFailedError, ClusterAuthorizationFailedError, TransactionAbortableError):
            self.abortable(_error(code, what))
        elif cls in (InvalidProducerEpochError, ProducerFencedError):
            self.fenced()
        else:
            self.fatal(_error(code, f"unexpected answer to {what}"))


class AddPartitionsHandler(TxnRequestHandler):
    api = "AddPartitionsToTxn"
    api_key = ApiKey.ADD_PARTITIONS_TO_TXN
    max_version = 3  # v4+ is the brokers' verification form (KIP-890)

    def __init__(self, tm: TransactionManager, partitions: list[TopicPartition]) -> None:
        super().__init__(tm)
        pid = tm.producer_id_and_epoch()
        self.producer_id, self.epoch = pid.producer_id, pid.epoch
        self.partitions = partitions

    def describe(self) -> str:
        return f"AddPartitionsToTxn ({len(self.partitions)} partition(s))"

    def build(self, version: int) -> Message:
        by_topic: dict[str, list[int]] = {}
        for tp in self.partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.tm.txn_id,
            v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.epoch,
            v3_and_below_topics=[
                AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=sorted(ps))
                for t, ps in by_topic.items()
            ],
        )

    def handle(self, body: Any, version: int) -> None:
        tm = self.tm
        errors: dict[TopicPartition, int] = {}
        for topic in body.results_by_topic_v3_and_below:
            for part in topic.results_by_partition:
                errors[TopicPartition(topic.name, part.partition_index)] = part.partition_error_code
        self.retry_backoff_ms = tm.retry_backoff_ms
        unauthorized: set[str] = set()
        failed = False
        for tp, code in errors.items():
            if code == 0:
                continue
            cls = for_code(code)
            what = f"adding {tp} to the transaction"
            if cls is ConcurrentTransactionsError:
                if not tm.partitions_in_transaction:
                    self.retry_backoff_ms = ADD_PARTITIONS_RETRY_BACKOFF_MS
                self.reenqueue()
                return
            if cls is TopicAuthorizationFailedError:
                unauthorized.add(tp.topic)
            elif cls is OperationNotAttemptedError:
                failed = True  # another partition's error stopped it
            elif cls is TransactionAbortableError:
                self.abortable(_error(code, what))
                return
            elif self.common(code, what):
                return
            else:
                log.error("Could not add %s to the transaction: %s", tp, cls.name)
                failed = True
        # Whatever happened, these are no longer pending: in an error state their batches are
        # aborted, and batches of partitions that were added must still be able to go out.
        tm.partitions_added(set(errors), ok=not (unauthorized or failed))
        if unauthorized:
            self.abortable(TopicAuthorizationFailedError(
                f"not allowed to write to topic(s) {sorted(unauthorized)} in a transaction; grant WRITE "
                "on them, then abort_transaction() and retry"))
        elif failed:
            text = ", ".join(f"{tp}: {for_code(c).name}" for tp, c in errors.items() if c)
            self.abortable(KafkaError(f"could not add partitions to the transaction ({text}); "
                                      "call abort_transaction() and retry"))
        else:
            self.result.done()


class AddOffsetsHandler(TxnRequestHandler):
    api = "AddOffsetsToTxn"
    api_key = ApiKey.ADD_OFFSETS_TO_TXN
    max_version = 4

    def __init__(self, tm: TransactionManager, offsets: Mapping[TopicPartition, tuple[int, str | None, int]],
                 group: Any) -> None:
        super().__init__(tm)
        pid = tm.producer_id_and_epoch()
        self.producer_id, self.epoch = pid.producer_id, pid.epoch
        self.offsets = offsets
        self.group = group

    def describe(self) -> str:
        return f"AddOffsetsToTxn for group {self.group.group_id!r}"

    def build(self, version: int) -> Message:
        return AddOffsetsToTxnRequest(
            transactional_id=self.tm.txn_id, producer_id=self.producer_id,
            producer_epoch=self.epoch, group_id=self.group.group_id,
        )

    def handle(self, body: Any, version: int) -> None:
        code = body.error_code
        if code == 0:
            # The caller's result completes only once TxnOffsetCommit succeeded.
            self.tm.offsets_added(TxnOffsetCommitHandler(self.tm, self.result, self.offsets, self.group))
            return
        what = f"adding the offsets of group {self.group.group_id!r} to the transaction"
        cls = for_code(code)
        if self.common(code, what):
            return
        if cls in (GroupAuthorizationFailedError, TransactionAbortableError):
            self.abortable(_error(code, what))
        else:
            self.fatal(_error(code, f"unexpected answer {cls.name} to AddOffsetsToTxn"))


class TxnOffsetCommitHandler(TxnRequestHandler):
    api = "TxnOffsetCommit"
    api_key = ApiKey.TXN_OFFSET_COMMIT
    max_version = 4  # v5 implies AddOffsetsToTxn (KIP-890's transaction version 2)

    def __init__(self, tm: TransactionManager, result: TransactionalRequestResult,
                 offsets: Mapping[TopicPartition, tuple[int, str | None, int]], group: Any) -> None:
        super().__init__(tm, result)
        pid = tm.producer_id_and_epoch()
        self.producer_id, self.epoch = pid.producer_id, pid.epoch
        self.pending = dict(offsets)
        self.group = group

    @property
    def coordinator_type(self) -> CoordinatorType | None:
        return CoordinatorType.GROUP

    @property
    def coordinator_key(self) -> str:
        return str(self.group.group_id)

    def describe(self) -> str:
        return f"TxnOffsetCommit of {len(self.pending)} offset(s) for group {self.group.group_id!r}"

    def build(self, version: int) -> Message:
        by_topic: dict[str, list[Any]] = {}
        for tp, (offset, metadata, leader_epoch) in self.pending.items():
            by_topic.setdefault(tp.topic, []).append(TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=offset,
                committed_leader_epoch=leader_epoch, committed_metadata=metadata,
            ))
        group = self.group
        return TxnOffsetCommitRequest(
            transactional_id=self.tm.txn_id, group_id=group.group_id,
            producer_id=self.producer_id, producer_epoch=self.epoch,
            generation_id=group.generation_id, member_id=group.member_id,
            group_instance_id=group.group_instance_id,
            topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=t, partitions=ps)
                    for t, ps in by_topic.items()],
        )

    def handle(self, body: Any, version: int) -> None:
        group_id = self.group.group_id
        reloaded = False
        for topic in body.topics:
            for part in topic.partitions:
                tp = TopicPartition(topic.name, part.partition_index)
                code = part.error_code
                if code == 0:
                    self.pending.pop(tp, None)
                    continue
                cls = for_code(code)
                what = f"committing the offset of {tp} for group {group_id!r} in the transaction"
                if cls in (CoordinatorNotAvailableError, NotCoordinatorError, RequestTimedOutError):
                    if not reloaded:
                        reloaded = True
                        self.tm.lookup_coordinator(CoordinatorType.GROUP, group_id)
                elif cls.retriable:
                    continue
                elif cls in (GroupAuthorizationFailedError, FencedInstanceIdError, TransactionAbortableError):
                    self.abortable(_error(code, what))
                    break
                elif cls in (UnknownMemberIdError, IllegalGenerationError):
                    from samsa.consumer.errors import CommitFailedError

                    self.abortable(CommitFailedError(
                        f"{what}: the consumer group metadata no longer matches the group ({cls.name}); "
                        "the consumer was rebalanced out: call abort_transaction() and continue from the "
                        "committed offsets"))
                    break
                elif cls in (InvalidProducerEpochError, ProducerFencedError):
                    self.fenced()
                    break
                elif cls in (TransactionalIdAuthorizationFailedError, UnsupportedForMessageFormatError):
                    self.fatal(_error(code, what))
                    break
                else:
                    self.fatal(_error(code, f"unexpected answer {cls.name} to TxnOffsetCommit"))
                    break
            else:
                continue
            break
        if self.result.is_completed:
            self.pending.clear()
        elif not self.pending:
            self.result.done()
        else:
            self.reenqueue()  # the offsets that failed with a retriable error


class EndTxnHandler(TxnRequestHandler):
    api_key = ApiKey.END_TXN
    priority = Priority.END_TXN
    is_end_txn = True
    max_version = 4  # v5 is KIP-890's transaction version 2 (epoch bump per transaction)

    def __init__(self, tm: TransactionManager, commit: bool) -> None:
        self.api = "EndTxn(commit)" if commit else "EndTxn(abort)"
        super().__init__(tm)
        self.commit = commit
        pid = tm.producer_id_and_epoch()
        self.producer_id, self.epoch = pid.producer_id, pid.epoch

    def build(self, version: int) -> Message:
        return EndTxnRequest(transactional_id=self.tm.txn_id, producer_id=self.producer_id,
                             producer_epoch=self.epoch, committed=self.commit)

    def handle(self, body: Any, version: int) -> None:
        code = body.error_code
        if code == 0:
            self.tm.transaction_completed()
            self.result.done()
            return
        what = "committing the transaction" if self.commit else "aborting the transaction"
        if self.common(code, what):
            return
        cls = for_code(code)
        if cls is TransactionAbortableError:
            if self.commit:
                self.abortable(_error(code, what))
            else:
                # Aborting again could only loop (Java makes it fatal too).
                self.fatal(_error(code, what))
        else:
            self.fatal(_error(code, f"unexpected answer {cls.name} to EndTxn"))
