"""Idempotent-producer state: producer id and epoch, per-partition sequences.

What Java's ``TransactionManager`` does for an idempotent (non-transactional) producer:

* Before the first batch goes out, the Sender gets a producer id and epoch with
  InitProducerId (:meth:`init_producer_id_request` / :meth:`handle_init_producer_id`).
* Each partition's batches carry consecutive sequences starting at 0 for a (producer id,
  epoch); the Sender stamps a batch when it drains it for the first time (:meth:`assign`), and
  a retried batch keeps its sequence so that the broker can recognise a duplicate.
* When the broker says OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID, or a batch that
  may have been written fails for good (its sequence might leave a gap), the producer bumps its
  epoch locally, as Java's ``bumpIdempotentEpochAndResetIdIfNeeded`` (no request: the id is
  this producer's alone, and a partition accepts sequence 0 at a higher epoch); only once the
  epoch reaches Short.MAX_VALUE does it ask InitProducerId for a fresh id.  The partitions that
  asked for the bump restart at sequence 0 at once, their incomplete batches re-stamped
  (Java's ``startSequencesAtBeginning``); every other partition keeps its batches in flight
  under the old epoch (a retry of one of them must stay recognisable as a duplicate) and
  restarts at 0 when nothing of it is in flight any more.  (InitProducerId with the current
  id and epoch is no bump for an idempotent producer: Kafka answers a fresh id.)

The Sender mutes each partition while a batch of it is in flight (see ``sender.py``), so at
most one batch per partition carries an unacknowledged sequence; the in-flight bookkeeping
below still keeps all of them, lowest sequence first, so that a reader can check it.

With a ``transactional_id`` it is Java's transactional manager too (KIP-98, classic protocol):
the states of ``txn_state.py``; init/commit/abort/send_offsets queue requests
(``txn_requests.py``) that the Sender sends one at a time, in priority order, to the
transaction or group coordinator; a partition joins the transaction (AddPartitionsToTxn)
before its first batch is drained; EndTxn waits until every batch of the transaction
completed.  After an abortable error the abort is followed by InitProducerId with the current
id and epoch when the coordinator supports it (KIP-360: InitProducerId v3+), which restarts
every sequence.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Mapping
from typing import Any

from samsa.errors import (
    ClusterAuthorizationFailedError,
    IllegalStateError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    KafkaError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionalIdAuthorizationFailedError,
    UnknownProducerIdError,
    UnsupportedVersionError,
)
from samsa.net.clock import SYSTEM_CLOCK, Time
from samsa.net.cluster import Node
from samsa.producer.accumulator import ProducerIdAndEpoch
from samsa.producer.batch import ProducerBatch, TopicPartition
from samsa.producer.txn_requests import (
    AddOffsetsHandler,
    AddPartitionsHandler,
    CoordinatorType,
    EndTxnHandler,
    FindCoordinatorHandler,
    InitProducerIdHandler,
    TxnRequestHandler,
)
from samsa.producer.txn_state import (
    TransactionalRequestResult,
    TxnState,
    error_like,
    is_transition_valid,
)
from samsa.protocol import InitProducerIdRequest
from samsa.protocol.api_keys import ApiKey

__all__ = ["NO_PRODUCER_EPOCH", "NO_PRODUCER_ID", "NO_SEQUENCE", "ProducerIdAndEpoch", "TransactionManager"]

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
_INT32_MAX = 2**31 - 1
_INT16_MAX = 2**15 - 1


NONE = ProducerIdAndEpoch(NO_PRODUCER_ID, NO_PRODUCER_EPOCH)


class _PartitionEntry:
    """One partition's sequence state under the id/epoch it was last used with."""

    __slots__ = ("in_flight", "last_acked", "next_sequence", "producer")

    def __init__(self, producer: ProducerIdAndEpoch) -> None:
        self.producer = producer
        self.next_sequence = 0
        self.last_acked = NO_SEQUENCE
        # Batches with a sequence that are not yet complete (sent, or queued for a retry),
        # lowest sequence first.
        self.in_flight: list[ProducerBatch] = []


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequences wrap from Int32.MAX to 0, as on the broker."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


class TransactionManager:
    """Producer id/epoch and sequence bookkeeping of one idempotent producer.

    Implements the accumulator's ``TransactionManagerView`` (drain() stamps batches through
    it) plus what the Sender needs.  Mutated by the Sender thread only (drain runs there too);
    the lock guards readers on other threads (metrics, tests).
    """

    def __init__(self, transaction_timeout_ms: int = _INT32_MAX, transactional_id: str | None = None,
                 retry_backoff_ms: int = 100, clock: Time = SYSTEM_CLOCK) -> None:
        self._lock = threading.RLock()
        self.clock = clock
        self._transaction_timeout_ms = transaction_timeout_ms
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._init_transactional()
        self._producer = NONE
        self._partitions: dict[TopicPartition, _PartitionEntry] = {}
        self._epoch_bump_required = False
        # Partitions whose sequences restart at 0 with the bump (Java's
        # partitionsToRewriteSequences); kept until a fresh id arrives if the epoch ran out.
        self._partitions_to_rewrite: set[TopicPartition] = set()
        self.epoch_bumps = 0  # for metrics and tests

    # --- producer id and epoch --------------------------------------------------------

    def producer_id_and_epoch(self) -> ProducerIdAndEpoch:
        return self._producer

    def has_producer_id(self) -> bool:
        return self._producer.producer_id >= 0

    def is_transactional(self) -> bool:
        return self.transactional_id is not None

    def is_completing(self) -> bool:
        return self._state in (TxnState.COMMITTING_TRANSACTION, TxnState.ABORTING_TRANSACTION)

    def is_send_to_partition_allowed(self, tp: TopicPartition) -> bool:
        if self.transactional_id is not None:
            # Java's isSendToPartitionAllowed: only once AddPartitionsToTxn confirmed it.
            return self._state is not TxnState.FATAL_ERROR and tp in self.partitions_in_transaction
        return not self._epoch_bump_required

    def needs_init_producer_id(self) -> bool:
        """True while the Sender must get a (new) id or epoch before sending batches (an
        idempotent producer's; a transactional one's comes from init_transactions())."""
        if self.transactional_id is not None:
            return False
        return not self.has_producer_id() or self._epoch_bump_required

    @property
    def epoch_bump_required(self) -> bool:
        return self._epoch_bump_required

    def request_epoch_bump(self, tp: Any, reason: str) -> None:
        """Java's requestEpochBumpForPartition: bump before sending more, restart ``tp``."""
        with self._lock:
            if not self._epoch_bump_required:
                log.info("Bumping the producer epoch of %s because %s on %s", self._producer, reason, tp)
            self._epoch_bump_required = True
            self._partitions_to_rewrite.add(tp)

    def bump_idempotent_epoch_and_reset_id_if_needed(self) -> None:
        """Java's bumpIdempotentEpochAndResetIdIfNeeded: the next epoch of the same id, or no
        id at all (an InitProducerId for a fresh one follows) once the epoch is Short.MAX."""
        with self._lock:
            if not self._epoch_bump_required:
                return
            self._epoch_bump_required = False
            self.epoch_bumps += 1
            old = self._producer
            if old.epoch >= _INT16_MAX or not old.is_valid():
                self._producer = NONE  # handle_init_producer_id restarts the partitions
                log.info("Producer epoch of %s exhausted; asking for a new producer id", old)
                return
            self._producer = ProducerIdAndEpoch(old.producer_id, old.epoch + 1)
            self._restart_partitions()
        log.info("Producer id and epoch now %d/%d (bumped locally)", old.producer_id, old.epoch + 1)

    def _restart_partitions(self) -> None:
        """Java's startSequencesAtBeginning for the partitions that asked for the bump: their
        incomplete batches get the current id/epoch and sequences from 0, in their order."""
        new = self._producer
        for tp in self._partitions_to_rewrite:
            entry = self._entry(tp)
            sequence = 0
            for batch in entry.in_flight:
                batch.reset_producer_state(new.producer_id, new.epoch, sequence)
                sequence = increment_sequence(sequence, batch.record_count)
            entry.producer = new
            entry.next_sequence = sequence
            entry.last_acked = NO_SEQUENCE
        self._partitions_to_rewrite.clear()

    def init_producer_id_request(self) -> Any:
        """The InitProducerId request to send now: always for a fresh id (an idempotent
        producer bumps its epoch without asking; Kafka answers a fresh id anyway).  The same
        fields for every version: the client encodes it with the version it picked."""
        return InitProducerIdRequest(
            transactional_id=None,
            transaction_timeout_ms=self._transaction_timeout_ms,
            producer_id=NO_PRODUCER_ID,
            producer_epoch=NO_PRODUCER_EPOCH,
        )

    def handle_init_producer_id(self, producer_id: int, epoch: int) -> None:
        """A new id/epoch arrived.  Partitions waiting for a bump when the epoch ran out
        restart at sequence 0 now; every other partition restarts when next drained with
        nothing in flight (``maybe_update_producer_id_and_epoch``)."""
        with self._lock:
            old = self._producer
            self._producer = ProducerIdAndEpoch(producer_id, epoch)
            self._restart_partitions()
        log.info("Producer id and epoch now %d/%d (was %d/%d)", producer_id, epoch, old.producer_id, old.epoch)

    # --- sequences (drain) ------------------------------------------------------------

    def _entry(self, tp: TopicPartition) -> _PartitionEntry:
        entry = self._partitions.get(tp)
        if entry is None:
            entry = self._partitions[tp] = _PartitionEntry(self._producer)
        return entry

    def sequence_number(self, tp: TopicPartition) -> int:
        return self._entry(tp).next_sequence

    def increment_sequence_number(self, tp: TopicPartition, increment: int) -> None:
        with self._lock:
            entry = self._entry(tp)
            entry.next_sequence = increment_sequence(entry.next_sequence, increment)

    def has_stale_producer_id_and_epoch(self, tp: TopicPartition) -> bool:
        return self._entry(tp).producer != self._producer

    def maybe_update_producer_id_and_epoch(self, tp: TopicPartition) -> None:
        with self._lock:
            entry = self._entry(tp)
            if entry.producer != self._producer and not entry.in_flight:
                entry.producer = self._producer
                entry.next_sequence = 0
                entry.last_acked = NO_SEQUENCE

    def has_unresolved_sequence(self, tp: TopicPartition) -> bool:
        return False

    def add_in_flight_batch(self, batch: ProducerBatch) -> None:
        with self._lock:
            batches = self._entry(batch.topic_partition).in_flight
            if batch not in batches:
                batches.append(batch)
                # The list is kept in sequence order: sorting is needed only when the new batch
                # does not come last (a retried or split batch); drain() adds them in order.
                if len(batches) > 1 and batches[-2].base_sequence > batch.base_sequence:
                    batches.sort(key=lambda b: b.base_sequence)

    def remove_in_flight_batch(self, batch: ProducerBatch) -> None:
        with self._lock:
            entry = self._partitions.get(batch.topic_partition)
            if entry is not None and batch in entry.in_flight:
                entry.in_flight.remove(batch)

    def first_in_flight_sequence(self, tp: TopicPartition) -> int:
        entry = self._partitions.get(tp)
        return entry.in_flight[0].base_sequence if entry is not None and entry.in_flight else NO_SEQUENCE

    def has_inflight_batches(self, tp: TopicPartition) -> bool:
        entry = self._partitions.get(tp)
        return bool(entry is not None and entry.in_flight)

    def last_acked_sequence(self, tp: TopicPartition) -> int:
        entry = self._partitions.get(tp)
        return entry.last_acked if entry is not None else NO_SEQUENCE

    def is_current(self, batch: ProducerBatch) -> bool:
        """Was ``batch`` stamped with the id/epoch its partition's sequences now run under?
        (Per partition: another partition's bump leaves this one's batches current.)"""
        entry = self._partitions.get(batch.topic_partition)
        producer = entry.producer if entry is not None else self._producer
        return batch.producer_id == producer.producer_id and batch.producer_epoch == producer.epoch

    # --- outcomes (Sender) -------------------------------------------------------------

    def handle_completed_batch(self, batch: ProducerBatch) -> None:
        # remove_in_flight_batch and is_current, inline: this runs for every acknowledged batch.
        with self._lock:
            tp = batch.topic_partition
            entry = self._partitions.get(tp)
            if entry is not None:
                in_flight = entry.in_flight
                if in_flight and in_flight[0] is batch:  # acknowledged in sequence order
                    del in_flight[0]
                elif batch in in_flight:
                    in_flight.remove(batch)
            producer = entry.producer if entry is not None else self._producer
            if (batch.producer_id == producer.producer_id and batch.producer_epoch == producer.epoch
                    and batch.has_sequence()):
                if entry is None:
                    entry = self._entry(tp)
                entry.last_acked = increment_sequence(batch.base_sequence, batch.record_count - 1)

    def can_retry(self, batch: ProducerBatch, error: BaseException) -> bool:
        """Whether an idempotence-related error is retriable for this batch (Java's
        ``TransactionManager.canRetry``).  A transactional producer lets a batch with a
        sequence error fail: the transaction aborts and the epoch bump restarts sequences."""
        if batch.has_sequence() and not self.is_current(batch):
            # Sent under an older id/epoch: re-stamped by the bump, sent again.
            return True
        if self.transactional_id is not None:
            return False
        if isinstance(error, (OutOfOrderSequenceNumberError, UnknownProducerIdError)):
            self.request_epoch_bump(batch.topic_partition, error.name)
            return True
        return False

    def handle_failed_batch(self, batch: ProducerBatch, error: BaseException, maybe_written: bool) -> None:
        """A batch failed for good.  If it may have been written, or the broker complained
        about sequences, or later sequences were already handed out, only a new epoch keeps
        the partition's sequences contiguous; otherwise step the next sequence back."""
        with self._lock:
            if self.transactional_id is not None:
                self.maybe_transition_to_error_state(error)
            self.remove_in_flight_batch(batch)
            if not batch.has_sequence() or not self.is_current(batch):
                return
            if self.transactional_id is not None and (maybe_written or self._state is TxnState.FATAL_ERROR):
                return  # the abort's epoch bump restarts the sequences (KIP-360)
            tp = batch.topic_partition
            entry = self._entry(tp)
            if (
                not maybe_written
                and not isinstance(error, (OutOfOrderSequenceNumberError, UnknownProducerIdError))
                and increment_sequence(batch.base_sequence, batch.record_count) == entry.next_sequence
            ):
                entry.next_sequence = batch.base_sequence
                return
        if self.transactional_id is None:
            self.request_epoch_bump(tp, f"a batch with sequence {batch.base_sequence} failed ({type(error).__name__})")

    # --- transactions: state ------------------------------------------------------------

    def _init_transactional(self) -> None:
        self._state = TxnState.UNINITIALIZED
        self.last_error: BaseException | None = None
        self._queue: list[tuple[int, int, TxnRequestHandler]] = []
        self._queue_order = itertools.count()
        self._in_flight_request: TxnRequestHandler | None = None
        self._coordinators: dict[CoordinatorType, Node | None] = {
            CoordinatorType.TRANSACTION: None, CoordinatorType.GROUP: None,
        }
        # Partitions sent to but not yet in AddPartitionsToTxn / in one in flight / confirmed.
        self.new_partitions: set[TopicPartition] = set()
        self.pending_partitions: set[TopicPartition] = set()
        self.partitions_in_transaction: set[TopicPartition] = set()
        self.transaction_started = False  # a partition or offsets were added: EndTxn needed
        self.client_side_epoch_bump_required = False
        self.coordinator_supports_epoch_bump = False
        # (result, target state, operation) of the last init/commit/abort (Java's
        # PendingStateTransition): a timed-out call leaves it for the same call to resume.
        self._pending_transition: tuple[TransactionalRequestResult, TxnState, str] | None = None

    @property
    def txn_id(self) -> str:
        """The transactional id (only called for a transactional producer)."""
        return self.transactional_id or ""

    @property
    def state(self) -> TxnState:
        return self._state

    def has_fatal_error(self) -> bool:
        return self._state is TxnState.FATAL_ERROR

    def has_abortable_error(self) -> bool:
        return self._state is TxnState.ABORTABLE_ERROR

    def is_aborting(self) -> bool:
        return self._state is TxnState.ABORTING_TRANSACTION

    def has_ongoing_transaction(self) -> bool:
        return self._state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION,
                               TxnState.ABORTING_TRANSACTION, TxnState.ABORTABLE_ERROR)

    def _transition(self, target: TxnState, error: BaseException | None = None) -> None:
        if not is_transition_valid(self._state, target):
            raise IllegalStateError(
                f"transactional.id {self.transactional_id!r}: cannot go from state {self._state.name} "
                f"to {target.name}")
        if target in (TxnState.FATAL_ERROR, TxnState.ABORTABLE_ERROR):
            self.last_error = error
        else:
            self.last_error = None
        log.debug("Transaction state %s -> %s", self._state.name, target.name)
        self._state = target

    def transition_to_abortable_error(self, error: BaseException) -> None:
        with self._lock:
            if self._state is TxnState.ABORTING_TRANSACTION:
                return  # already aborting
            if self._state is TxnState.FATAL_ERROR:
                return
            log.info("Transaction of %r must be aborted: %s", self.transactional_id, error)
            self._transition(TxnState.ABORTABLE_ERROR, error)

    def transition_to_fatal_error(self, error: BaseException) -> None:
        with self._lock:
            log.error("Transactional producer %r failed for good: %s", self.transactional_id, error)
            self._transition(TxnState.FATAL_ERROR, error)
            if self._pending_transition is not None:
                self._pending_transition[0].fail(error)

    def maybe_transition_to_error_state(self, error: BaseException) -> None:
        """A produce batch failed: fatal for authorization, fencing and version errors, else the
        transaction must be aborted (Java's maybeTransitionToErrorState)."""
        if isinstance(error, (ClusterAuthorizationFailedError, TransactionalIdAuthorizationFailedError,
                              ProducerFencedError, UnsupportedVersionError, InvalidProducerIdMappingError)):
            self.transition_to_fatal_error(error)
            return
        if getattr(error, "retriable", False) or isinstance(error, InvalidTxnStateError):
            wrapped = TransactionAbortableError(
                f"a record batch of the transaction failed after its retries ({error}); "
                "call abort_transaction()")
            wrapped.__cause__ = error
            error = wrapped
        if self.coordinator_supports_epoch_bump and not self.is_completing():
            self.client_side_epoch_bump_required = True
        self.transition_to_abortable_error(error)

    def _maybe_fail_with_error(self) -> None:
        """Raise from a call made in an error state (Java's maybeFailWithError)."""
        if self._state is TxnState.FATAL_ERROR:
            raise error_like(self.last_error, (
                f"transactional producer {self.transactional_id!r} failed earlier and can do nothing "
                f"more: {self.last_error}; close it and create a new producer"))
        if self._state is TxnState.ABORTABLE_ERROR:
            raise error_like(self.last_error, (
                f"the transaction of {self.transactional_id!r} hit an error and must be aborted: "
                f"{self.last_error}; call abort_transaction(), then begin a new transaction"))

    def _ensure_transactional(self, operation: str) -> None:
        if self.transactional_id is None:
            raise IllegalStateError(
                f"{operation}() needs a transactional producer; set transactional.id in the producer's config")

    def _throw_if_pending(self, operation: str) -> None:
        pending = self._pending_transition
        if pending is not None:
            if pending[0].acked:
                self._pending_transition = None
            else:
                raise IllegalStateError(
                    f"cannot call {operation}(): the previous {pending[2]}() timed out and must be "
                    f"called again (it resumes where it stopped)")

    def _cached_result(self, operation: str, target: TxnState, start: Any) -> TransactionalRequestResult:
        """Java's handleCachedTransactionRequestResult: resume a timed-out call of the same
        kind, refuse a different one, else start the call."""
        self._ensure_transactional(operation)
        pending = self._pending_transition
        if pending is not None:
            if pending[0].acked:
                self._pending_transition = None
            elif pending[1] is not target:
                raise IllegalStateError(
                    f"cannot call {operation}(): the previous {pending[2]}() timed out and must be "
                    f"called again (it resumes where it stopped)")
            else:
                return pending[0]
        result: TransactionalRequestResult = start()
        self._pending_transition = (result, target, operation)
        return result

    # --- transactions: the application's calls ------------------------------------------

    def initialize_transactions(self) -> TransactionalRequestResult:
        with self._lock:
            self._maybe_fail_with_error()

            def start() -> TransactionalRequestResult:
                self._transition_checked(TxnState.INITIALIZING, "init_transactions")
                return self._enqueue(InitProducerIdHandler(self, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, False))

            return self._cached_result("init_transactions", TxnState.INITIALIZING, start)

    def begin_transaction(self) -> None:
        with self._lock:
            self._ensure_transactional("begin_transaction")
            self._throw_if_pending("begin_transaction")
            self._maybe_fail_with_error()
            self._transition_checked(TxnState.IN_TRANSACTION, "begin_transaction")

    def begin_commit(self) -> TransactionalRequestResult:
        with self._lock:
            def start() -> TransactionalRequestResult:
                self._maybe_fail_with_error()
                self._transition_checked(TxnState.COMMITTING_TRANSACTION, "commit_transaction")
                return self._begin_completing(commit=True)

            return self._cached_result("commit_transaction", TxnState.COMMITTING_TRANSACTION, start)

    def begin_abort(self) -> TransactionalRequestResult:
        with self._lock:
            def start() -> TransactionalRequestResult:
                if self._state is not TxnState.ABORTABLE_ERROR:
                    self._maybe_fail_with_error()
                self._transition_checked(TxnState.ABORTING_TRANSACTION, "abort_transaction")
                self.new_partitions.clear()  # nothing more joins a transaction being aborted
                return self._begin_completing(commit=False)

            return self._cached_result("abort_transaction", TxnState.ABORTING_TRANSACTION, start)

    def _begin_completing(self, commit: bool) -> TransactionalRequestResult:
        if self.new_partitions:
            self._enqueue(self._add_partitions_handler())
        end = self._enqueue(EndTxnHandler(self, commit))
        if self.client_side_epoch_bump_required:
            # KIP-360: after the abort, InitProducerId with the current id and epoch; the
            # caller waits for that one.
            pid = self._producer
            return self._enqueue(InitProducerIdHandler(self, pid.producer_id, pid.epoch, True))
        return end

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, tuple[int, str | None, int]],
                                    group: Any) -> TransactionalRequestResult:
        with self._lock:
            self._ensure_transactional("send_offsets_to_transaction")
            self._throw_if_pending("send_offsets_to_transaction")
            self._maybe_fail_with_error()
            if self._state is not TxnState.IN_TRANSACTION:
                raise IllegalStateError(
                    f"send_offsets_to_transaction() needs a transaction in progress, but the producer is "
                    f"in state {self._state.name}; call begin_transaction() first")
            return self._enqueue(AddOffsetsHandler(self, offsets, group))

    def fail_if_not_ready_for_send(self) -> None:
        """send() of a transactional producer: only inside a transaction (Java's
        failIfNotReadyForSend)."""
        state = self._state
        if state is TxnState.IN_TRANSACTION:
            return
        with self._lock:
            self._maybe_fail_with_error()
            if not self.has_producer_id():
                raise IllegalStateError(
                    "send() on a transactional producer before init_transactions() completed; call "
                    "init_transactions() first, then begin_transaction()")
            raise IllegalStateError(
                f"send() on a transactional producer outside a transaction (state {self._state.name}); "
                "call begin_transaction() first")

    def _transition_checked(self, target: TxnState, operation: str) -> None:
        if not is_transition_valid(self._state, target):
            hint = {
                TxnState.UNINITIALIZED: "call init_transactions() first",
                TxnState.INITIALIZING: "wait for init_transactions() to complete",
                TxnState.READY: "call begin_transaction() first",
                TxnState.IN_TRANSACTION: "call commit_transaction() or abort_transaction() first",
                TxnState.COMMITTING_TRANSACTION: "the transaction is being committed",
                TxnState.ABORTING_TRANSACTION: "the transaction is being aborted",
                TxnState.ABORTABLE_ERROR: "call abort_transaction() first",
            }.get(self._state, "close the producer")
            raise IllegalStateError(
                f"{operation}() is not allowed in transaction state {self._state.name} "
                f"(transactional.id {self.transactional_id!r}); {hint}")
        self._transition(target)

    def maybe_add_partition(self, tp: TopicPartition) -> None:
        """A batch for ``tp`` was opened: it joins the transaction with the next
        AddPartitionsToTxn (Java's maybeAddPartition)."""
        if self.transactional_id is None or tp in self.partitions_in_transaction:
            return
        with self._lock:
            if self._state is TxnState.IN_TRANSACTION and tp not in self.pending_partitions:
                self.new_partitions.add(tp)

    def close(self) -> None:
        """Forced close: every queued request and the pending call fail."""
        with self._lock:
            error = KafkaError("the producer was closed forcefully before the transactional request completed")
            for _, _, handler in self._queue:
                handler.result.fail(error)
            self._queue.clear()
            if self._in_flight_request is not None:
                self._in_flight_request.result.fail(error)
            if self._pending_transition is not None:
                self._pending_transition[0].fail(error)

    # --- transactions: the Sender's side ---------------------------------------------

    def _enqueue(self, handler: TxnRequestHandler) -> TransactionalRequestResult:
        heapq.heappush(self._queue, (int(handler.priority), next(self._queue_order), handler))
        log.debug("Queued transactional request %s", handler.describe())
        return handler.result

    def _add_partitions_handler(self) -> AddPartitionsHandler:
        self.pending_partitions |= self.new_partitions
        self.new_partitions = set()
        return AddPartitionsHandler(self, sorted(self.pending_partitions))

    def has_in_flight_request(self) -> bool:
        return self._in_flight_request is not None

    def has_pending_requests(self) -> bool:
        return bool(self._queue) or self._in_flight_request is not None

    def next_request(self, has_incomplete_batches: bool) -> TxnRequestHandler | None:
        """The request to send now, or None (Java's nextRequest)."""
        with self._lock:
            if self.new_partitions:
                self._enqueue(self._add_partitions_handler())
            if not self._queue:
                return None
            handler = self._queue[0][2]
            if handler.is_end_txn and has_incomplete_batches:
                return None  # EndTxn only once every batch of the transaction completed
            heapq.heappop(self._queue)
            # In an error state only a FindCoordinator may still go (to abort with it later).
            if self._state is TxnState.FATAL_ERROR or (
                    self._state is TxnState.ABORTABLE_ERROR and not isinstance(handler, FindCoordinatorHandler)):
                handler.result.fail(self.last_error or KafkaError("the transaction failed"))
                return None
            if handler.is_end_txn and not self.transaction_started:
                # Nothing reached the coordinator: nothing to end.
                handler.result.done()
                if self._state is not TxnState.FATAL_ERROR:
                    log.debug("No EndTxn: no partition or offsets were added to the transaction")
                    self._reset_transaction_state()
                return heapq.heappop(self._queue)[2] if self._queue else None
            return handler

    def retry(self, handler: TxnRequestHandler) -> None:
        """Queue ``handler`` again, not to be sent before its backoff passed (Java's Sender
        sleeps it; ours skips it until then)."""
        with self._lock:
            handler.is_retry = True
            handler.not_before_ms = self.clock.milliseconds() + handler.retry_backoff_ms
            self._enqueue(handler)

    def requeue(self, handler: TxnRequestHandler) -> None:
        """Put ``handler`` back unchanged (its node was not ready yet)."""
        with self._lock:
            self._enqueue(handler)

    def coordinator(self, kind: CoordinatorType) -> Node | None:
        return self._coordinators[kind]

    def lookup_coordinator(self, kind: CoordinatorType, key: str) -> None:
        with self._lock:
            self._coordinators[kind] = None
            if not any(isinstance(h, FindCoordinatorHandler) and h.kind is kind and h.key == key
                       for _, _, h in self._queue):
                self._enqueue(FindCoordinatorHandler(self, kind, key))

    def set_coordinator(self, kind: CoordinatorType, node_id: int, host: str, port: int) -> None:
        self._coordinators[kind] = Node(node_id, host, port)
        log.info("Found the %s coordinator: node %d (%s:%d)", kind.name.lower(), node_id, host, port)

    def handle_coordinator_ready(self, api_versions: Any) -> None:
        """KIP-360: the coordinator can bump an epoch if it has InitProducerId v3+."""
        if api_versions is None:
            return
        entry = api_versions.version_range(ApiKey.INIT_PRODUCER_ID)
        self.coordinator_supports_epoch_bump = entry is not None and entry[1] >= 3

    def set_in_flight(self, handler: TxnRequestHandler) -> None:
        self._in_flight_request = handler

    def in_flight_request(self) -> TxnRequestHandler | None:
        return self._in_flight_request

    def handle_response(self, handler: TxnRequestHandler, response: Any) -> None:
        """A transactional request's answer (Java's TxnRequestHandler.onComplete)."""
        with self._lock:
            if self._in_flight_request is handler:
                self._in_flight_request = None
            if response.version_mismatch is not None:
                handler.fatal(response.version_mismatch)
            elif response.disconnected or response.body is None:
                log.info("%s to node %s failed (%s); retrying", handler.describe(), response.destination,
                         response.error or "disconnected")
                if handler.coordinator_type is not None:
                    self.lookup_coordinator(handler.coordinator_type, handler.coordinator_key)
                self.retry(handler)
            else:
                handler.handle(response.body, response.api_version)

    # --- transactions: outcomes the handlers report ----------------------------------

    def complete_init_producer_id(self, producer_id: int, epoch: int, is_epoch_bump: bool) -> None:
        self._producer = ProducerIdAndEpoch(producer_id, epoch)
        self._transition(TxnState.READY)
        self.last_error = None
        if is_epoch_bump:
            # Nothing is in flight after EndTxn: every partition restarts at sequence 0.
            self._partitions.clear()
            self.epoch_bumps += 1
        log.info("Transactional producer %r has producer id %d epoch %d", self.transactional_id, producer_id, epoch)

    def partitions_added(self, partitions: set[TopicPartition], ok: bool) -> None:
        self.pending_partitions -= partitions
        if ok:
            self.partitions_in_transaction |= partitions
            self.transaction_started = True

    def offsets_added(self, commit: TxnRequestHandler) -> None:
        self.transaction_started = True
        self._enqueue(commit)

    def transaction_completed(self) -> None:
        self._reset_transaction_state()

    def _reset_transaction_state(self) -> None:
        self._transition(TxnState.INITIALIZING if self.client_side_epoch_bump_required else TxnState.READY)
        self.last_error = None
        self.client_side_epoch_bump_required = False
        self.transaction_started = False
        self.new_partitions.clear()
        self.pending_partitions.clear()
        self.partitions_in_transaction.clear()

    def waiting_for(self, operation: str, describe_node: Any) -> str:
        """What a timed-out call was waiting for, for its error message."""
        with self._lock:
            handler = self._in_flight_request
            if handler is not None:
                kind = handler.coordinator_type
                node = self._coordinators.get(kind) if kind is not None else None
                where = (f"the {kind.name.lower()} coordinator {describe_node(node)}"
                         if kind is not None and node is not None else "a broker")
                return (f"{operation}(): {handler.describe()} sent to {where} to be answered; check that "
                        f"the broker is reachable, then call {operation}() again (it resumes)")
            if self._queue:
                handler = self._queue[0][2]
                if handler.is_end_txn:
                    return (f"{operation}(): the record batches of the transaction to be acknowledged "
                            f"before EndTxn; check that the partitions' leaders are reachable, then call "
                            f"{operation}() again (it resumes)")
                kind = handler.coordinator_type
                if kind is not None and self._coordinators.get(kind) is None:
                    return (f"{operation}(): the {kind.name.lower()} coordinator of {handler.coordinator_key!r} "
                            f"to be found before {handler.describe()}; check that the brokers are reachable "
                            f"and serve transactions, then call {operation}() again (it resumes)")
                return (f"{operation}(): {handler.describe()} to be sent; check that the brokers are "
                        f"reachable, then call {operation}() again (it resumes)")
            return f"{operation}() to complete"
