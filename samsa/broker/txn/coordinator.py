"""The transaction coordinator: Kafka's TransactionCoordinator for one node (KIP-98, KIP-360,
KIP-664, KIP-890).

Per transactional id it keeps a TransactionMetadata (state.py); every transition is prepared
under the coordinator's lock (the id then has a pending state, and any other request for it
gets CONCURRENT_TRANSACTIONS), written to ``__transaction_state`` outside the lock, and applied
once written.  The API handlers (samsa/broker/apis/*_txn.py, init_producer_id.py) call it and
answer with the Kafka error codes it returns.

* EndTxn: PREPARE_COMMIT/PREPARE_ABORT is written, the client answered, and the markers are
  written on the marker thread (markers.py), after which COMPLETE_* is written.  Until then the
  id's pending state answers retries, InitProducerId and AddPartitionsToTxn with
  CONCURRENT_TRANSACTIONS.
* InitProducerId on an ONGOING transaction fences its producer: the transaction is aborted at
  epoch+1 and the caller gets CONCURRENT_TRANSACTIONS; its retry bumps the epoch again.
* Timers: ONGOING transactions older than their timeout are fenced and aborted the same way
  every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``; ids idle for
  ``transactional.id.expiration.ms`` in EMPTY/COMPLETE_* get a tombstone every
  ``transaction.remove.expired.transaction.cleanup.interval.ms``.
* Start-up: the state is rebuilt from ``__transaction_state`` (last record per id wins, a
  tombstone deletes); ids found in PREPARE_* get their markers written again and complete.

One node is the leader of every ``__transaction_state`` partition forever, so the coordinator
epoch is always 0 and no partition is ever loading.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from samsa.broker.group.timer import KeyedTimer
from samsa.broker.log import LogManager
from samsa.broker.txn.log_records import decode_key, decode_value, encode_key, encode_value
from samsa.broker.txn.markers import GroupTransactions, MarkerJob, MarkerWriter
from samsa.broker.txn.state import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransitionError,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TxnTransit,
    is_epoch_exhausted,
)
from samsa.broker.txn.store import TransactionStore
from samsa.errors import (
    ConcurrentTransactionsError,
    CoordinatorNotAvailableError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    KafkaError,
    KafkaStorageError,
    MessageTooLargeError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    ProducerFencedError,
    RecordListTooLargeError,
    RequestTimedOutError,
    TransactionAbortableError,
    TransactionalIdNotFoundError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)

log = logging.getLogger(__name__)

# Settings the coordinator reads, with Kafka's defaults (TransactionStateManagerConfig,
# TransactionLogConfig).
TXN_DEFAULTS: dict[str, int] = {
    "transaction.max.timeout.ms": 900_000,
    "transaction.state.log.num.partitions": 50,
    "transaction.state.log.segment.bytes": 104_857_600,
    "transactional.id.expiration.ms": 604_800_000,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10_000,
    "transaction.remove.expired.transaction.cleanup.interval.ms": 3_600_000,
}
COORDINATOR_EPOCH = 0
NONE = 0
_S = TransactionState
_COMPLETE_OR_EMPTY = (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)
# How a failed __transaction_state write is reported (TransactionStateManager
# .appendTransactionToLog).
_APPEND_ERRORS: dict[int, int] = {
    UnknownTopicOrPartitionError.code: CoordinatorNotAvailableError.code,
    NotEnoughReplicasError.code: CoordinatorNotAvailableError.code,
    NotEnoughReplicasAfterAppendError.code: CoordinatorNotAvailableError.code,
    RequestTimedOutError.code: CoordinatorNotAvailableError.code,
    NotLeaderOrFollowerError.code: NotCoordinatorError.code,
    KafkaStorageError.code: NotCoordinatorError.code,
    MessageTooLargeError.code: UnknownServerError.code,
    RecordListTooLargeError.code: UnknownServerError.code,
}


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    """An answer carrying a producer id and epoch (InitProducerId, EndTxn v5)."""

    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    error: int
    transactional_id: str
    state: str = ""
    timeout_ms: int = 0
    start_time_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: frozenset[TopicPartition] = frozenset()


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


class ProducerIds(Protocol):
    """Where new producer ids come from (samsa/broker/apis/producer_ids.py)."""

    def generate(self) -> int: ...


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class TransactionCoordinator:
    def __init__(self, logs: LogManager, config: Mapping[str, Any] | None,
                 producer_ids: ProducerIds, groups: GroupTransactions, *,
                 on_marker: Callable[[str, int], object] | None = None,
                 clock: Callable[[], int] = _now_ms) -> None:
        given = dict(config or {})
        self.settings: dict[str, int] = {
            name: default if given.get(name) is None else int(given[name])
            for name, default in TXN_DEFAULTS.items()}
        self._logs = logs
        self._producer_ids = producer_ids
        self._groups = groups
        self._clock = clock
        self.store = TransactionStore(
            logs, num_partitions=self.settings["transaction.state.log.num.partitions"],
            segment_bytes=self.settings["transaction.state.log.segment.bytes"])
        self._lock = threading.Lock()
        self.txns: dict[str, TransactionMetadata] = {}
        self._closed = False
        self.markers = MarkerWriter(logs, groups, on_marker, self._markers_written)
        self.timer = KeyedTimer("txn-timer")
        self._load()
        self._schedule("abort-timed-out",
                       "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                       self.abort_timed_out_transactions)
        self._schedule("expire-ids", "transaction.remove.expired.transaction.cleanup.interval.ms",
                       self.expire_transactional_ids)

    # -- plumbing -------------------------------------------------------------------------------

    def _schedule(self, key: str, setting: str, task: Callable[[], object]) -> None:
        interval = self.settings[setting]

        def run() -> None:
            try:
                task()
            finally:
                self.timer.schedule(key, interval, run)

        self.timer.schedule(key, interval, run)

    def _write(self, meta: TransactionMetadata, transit: TxnTransit) -> int:
        """Write a prepared transition and apply it; the Kafka error code (0 when written).
        Called without the lock; ``meta`` has the transition pending."""
        try:
            value = None if transit.state == _S.DEAD else encode_value(transit)
            self.store.append(meta.transactional_id, encode_key(meta.transactional_id), value)
        except Exception as exc:  # reported to the client; the pending state is undone
            code = exc.code if isinstance(exc, KafkaError) else CoordinatorNotAvailableError.code
            if not isinstance(exc, KafkaError):
                log.exception("writing %s of transactional id %r to __transaction_state failed",
                              transit.state.name, meta.transactional_id)
            else:
                log.warning("writing %s of transactional id %r to __transaction_state failed: %s",
                            transit.state.name, meta.transactional_id, exc)
            with self._lock:
                meta.abort_pending()
            return _APPEND_ERRORS.get(code, code)
        with self._lock:
            meta.complete(transit)
        return NONE

    def _start_markers(self, meta: TransactionMetadata) -> None:
        """Queue the markers of a transaction whose PREPARE_* is durable.  Under the lock."""
        commit = meta.state == _S.PREPARE_COMMIT
        complete = meta.prepare_complete(self._clock())
        self.markers.submit(MarkerJob(meta.transactional_id, meta.producer_id,
                                      meta.producer_epoch, commit, COORDINATOR_EPOCH,
                                      meta.partitions, complete))

    def _markers_written(self, job: MarkerJob) -> None:
        """Every marker of ``job`` is in: write COMPLETE_* (retried while it fails, as Kafka
        retries it; a close leaves PREPARE_* for the next start to complete)."""
        meta = self.txns.get(job.transactional_id)
        if meta is None or meta.pending_state != job.complete.state:
            log.error("transactional id %r changed while its markers were written",
                      job.transactional_id)
            return
        while True:
            if self._write(meta, job.complete) == NONE:
                return
            with self._lock:
                if self._closed:
                    return
                meta.pending_state = job.complete.state  # _write cleared it: try again
            time.sleep(0.1)

    # -- InitProducerId (TransactionCoordinator.handleInitProducerId) ---------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int,
                         expected_producer_id: int = NO_PRODUCER_ID,
                         expected_epoch: int = NO_PRODUCER_EPOCH) -> ProducerIdAndEpoch:
        if not transactional_id:
            return ProducerIdAndEpoch(InvalidRequestError.code)
        if not 0 < timeout_ms <= self.settings["transaction.max.timeout.ms"]:
            return ProducerIdAndEpoch(InvalidTransactionTimeoutError.code)
        expected = expected_producer_id != NO_PRODUCER_ID
        now = self._clock()
        fencing = False
        with self._lock:
            meta = self.txns.get(transactional_id)
            if meta is None:
                try:
                    producer_id = self._producer_ids.generate()
                except KafkaError as exc:
                    return ProducerIdAndEpoch(exc.code)
                meta = TransactionMetadata(transactional_id, producer_id, NO_PRODUCER_EPOCH,
                                           timeout_ms, last_update_timestamp=now)
                self.txns[transactional_id] = meta
            if meta.pending:
                return ProducerIdAndEpoch(ConcurrentTransactionsError.code)
            if expected and not (
                    meta.producer_epoch == NO_PRODUCER_EPOCH
                    or expected_producer_id == meta.producer_id
                    or (expected_producer_id == meta.prev_producer_id
                        and is_epoch_exhausted(expected_epoch))):
                return ProducerIdAndEpoch(ProducerFencedError.code)
            if meta.state.is_prepare:
                return ProducerIdAndEpoch(ConcurrentTransactionsError.code)
            if meta.state == _S.ONGOING:
                transit = meta.prepare_fence_and_abort(now)
                fencing = True
            elif meta.state in _COMPLETE_OR_EMPTY:
                if meta.epoch_exhausted and (not expected or expected_epoch == meta.producer_epoch):
                    try:
                        new_id = self._producer_ids.generate()
                    except KafkaError as exc:
                        return ProducerIdAndEpoch(exc.code)
                    transit = meta.prepare_producer_id_rotation(new_id, timeout_ms, now, expected)
                else:
                    bumped = meta.producer_epoch + 1
                    if not expected:
                        epoch, last = bumped, NO_PRODUCER_EPOCH
                    elif meta.producer_epoch == NO_PRODUCER_EPOCH \
                            or expected_epoch == meta.producer_epoch:
                        epoch, last = bumped, meta.producer_epoch
                    elif expected_epoch == meta.last_producer_epoch:
                        # A retry of a bump whose answer was lost.
                        epoch, last = meta.producer_epoch, meta.last_producer_epoch
                    else:
                        return ProducerIdAndEpoch(ProducerFencedError.code)
                    transit = meta.prepare_epoch_bump(timeout_ms, epoch, last, now)
            else:
                raise IllegalTransitionError(
                    f"transactional id {transactional_id!r} is in state {meta.state.name}")
        error = self._write(meta, transit)
        if error:
            return ProducerIdAndEpoch(error)
        if fencing:
            log.info("transactional id %r: InitProducerId fenced epoch %d and aborts its "
                     "ongoing transaction", transactional_id, transit.producer_epoch - 1)
            with self._lock:
                self._start_markers(meta)
            return ProducerIdAndEpoch(ConcurrentTransactionsError.code)
        return ProducerIdAndEpoch(NONE, transit.producer_id, transit.producer_epoch)

    # -- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------------

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition], *, client_tv2: bool = False) -> int:
        """Add partitions to the id's transaction (TransactionCoordinator
        .handleAddPartitionsToTransaction): one error code for all of them."""
        if not transactional_id:
            return InvalidRequestError.code
        added = frozenset(partitions)
        with self._lock:
            meta = self.txns.get(transactional_id)
            if meta is None:
                return InvalidProducerIdMappingError.code
            if meta.pending:
                return ConcurrentTransactionsError.code
            if meta.producer_id != producer_id:
                return InvalidProducerIdMappingError.code
            if meta.producer_epoch != producer_epoch:
                return ProducerFencedError.code
            if meta.state.is_prepare:
                return ConcurrentTransactionsError.code
            if meta.state == _S.ONGOING and added <= meta.partitions:
                return NONE
            transit = meta.prepare_add_partitions(added, self._clock(), client_tv2)
        return self._write(meta, transit)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """KIP-890's verification (TransactionCoordinator.handleVerifyPartitionsInTransaction):
        per partition 0 if it is in the ongoing transaction, else the reason."""
        wanted = list(partitions)
        if not transactional_id:
            return dict.fromkeys(wanted, InvalidRequestError.code)
        with self._lock:
            meta = self.txns.get(transactional_id)
            if meta is None or meta.producer_id != producer_id:
                error = InvalidProducerIdMappingError.code
            elif meta.producer_epoch != producer_epoch:
                error = ProducerFencedError.code
            elif meta.state.is_prepare:
                error = ConcurrentTransactionsError.code
            else:
                return {tp: NONE if tp in meta.partitions else TransactionAbortableError.code
                        for tp in wanted}
        return dict.fromkeys(wanted, error)

    def verify_partition(self, transactional_id: str, producer_id: int, producer_epoch: int,
                         topic: str, partition: int) -> int:
        """One partition's verification error code (0 when it is in the transaction)."""
        tp = (topic, partition)
        return self.verify_partitions(transactional_id, producer_id, producer_epoch, [tp])[tp]

    # -- EndTxn ---------------------------------------------------------------------------------

    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        commit: bool, *, client_tv2: bool = False) -> ProducerIdAndEpoch:
        """EndTxn (TransactionCoordinator.endTransactionWithTV1, and endTransaction for v5)."""
        if not transactional_id:
            return ProducerIdAndEpoch(InvalidRequestError.code)
        with self._lock:
            meta = self.txns.get(transactional_id)
            if meta is None:
                return ProducerIdAndEpoch(InvalidProducerIdMappingError.code)
            if client_tv2:
                outcome = self._prepare_end_tv2(meta, producer_id, producer_epoch, commit)
            else:
                outcome = self._prepare_end_tv1(meta, producer_id, producer_epoch, commit)
            if isinstance(outcome, ProducerIdAndEpoch):
                return outcome
            transit = outcome
        error = self._write(meta, transit)
        if error:
            return ProducerIdAndEpoch(error)
        with self._lock:
            self._start_markers(meta)
            pending = meta.pending_state
        if not client_tv2:
            return ProducerIdAndEpoch(NONE)
        # The epoch (or, at an exhausted epoch, the id) the producer goes on with.
        if meta.next_producer_id != NO_PRODUCER_ID and pending is not None:
            return ProducerIdAndEpoch(NONE, meta.next_producer_id, 0)
        return ProducerIdAndEpoch(NONE, meta.producer_id, meta.producer_epoch)

    @staticmethod
    def _invalid_state(meta: TransactionMetadata, commit: bool) -> ProducerIdAndEpoch:
        log.info("transactional id %r: %s in state %s refused", meta.transactional_id,
                 "commit" if commit else "abort", meta.state.display_name)
        return ProducerIdAndEpoch(InvalidTxnStateError.code)

    def _prepare_end_tv1(self, meta: TransactionMetadata, producer_id: int, producer_epoch: int,
                         commit: bool) -> TxnTransit | ProducerIdAndEpoch:
        if meta.producer_id != producer_id:
            return ProducerIdAndEpoch(InvalidProducerIdMappingError.code)
        if producer_epoch != meta.producer_epoch:
            return ProducerIdAndEpoch(ProducerFencedError.code)
        if meta.pending:
            return ProducerIdAndEpoch(ConcurrentTransactionsError.code)
        state = meta.state
        if state == _S.ONGOING:
            return meta.prepare_abort_or_commit(
                _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT, False, NO_PRODUCER_ID,
                self._clock(), False)
        if (state == _S.COMPLETE_COMMIT and commit) or (state == _S.COMPLETE_ABORT and not commit):
            return ProducerIdAndEpoch(NONE)  # a retry of a completed EndTxn
        if (state == _S.PREPARE_COMMIT and commit) or (state == _S.PREPARE_ABORT and not commit):
            return ProducerIdAndEpoch(ConcurrentTransactionsError.code)
        return self._invalid_state(meta, commit)

    def _prepare_end_tv2(self, meta: TransactionMetadata, producer_id: int, producer_epoch: int,
                         commit: bool) -> TxnTransit | ProducerIdAndEpoch:
        state = meta.state
        retry_on_overflow = (meta.prev_producer_id == producer_id
                             and producer_epoch == 32767 - 1 and meta.producer_epoch == 0)
        retry_on_bump = meta.producer_epoch == producer_epoch + 1
        if state in (_S.ONGOING, _S.EMPTY):
            valid_epoch = producer_epoch == meta.producer_epoch
        elif state.is_prepare:
            valid_epoch = retry_on_bump
        else:
            valid_epoch = retry_on_bump or retry_on_overflow or producer_epoch == meta.producer_epoch
        retry = retry_on_bump or retry_on_overflow
        if meta.pending:
            return ProducerIdAndEpoch(ConcurrentTransactionsError.code)
        if meta.producer_id != producer_id and not retry_on_overflow:
            return ProducerIdAndEpoch(InvalidProducerIdMappingError.code)
        if not valid_epoch:
            return ProducerIdAndEpoch(ProducerFencedError.code)
        current = ProducerIdAndEpoch(NONE, meta.producer_id, meta.producer_epoch)

        def complete(target: TransactionState, nothing_added: bool) -> TxnTransit:
            next_id = NO_PRODUCER_ID
            if meta.epoch_exhausted:
                next_id = self._producer_ids.generate()
            return meta.prepare_abort_or_commit(target, True, next_id, self._clock(),
                                                nothing_added)

        try:
            if state == _S.ONGOING:
                return complete(_S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT, False)
            if state == _S.COMPLETE_COMMIT:
                if commit:
                    return current if retry else self._invalid_state(meta, commit)
                return self._invalid_state(meta, commit) if retry else complete(
                    _S.PREPARE_ABORT, True)
            if state == _S.COMPLETE_ABORT:
                if not commit:
                    return current if retry else complete(_S.PREPARE_ABORT, True)
                return self._invalid_state(meta, commit)
            if state.is_prepare:
                if (state == _S.PREPARE_COMMIT) == commit:
                    return ProducerIdAndEpoch(ConcurrentTransactionsError.code)
                return self._invalid_state(meta, commit)
            if state == _S.EMPTY and not commit:
                return complete(_S.PREPARE_ABORT, True)
        except KafkaError as exc:  # no producer id could be allocated
            return ProducerIdAndEpoch(exc.code)
        return self._invalid_state(meta, commit)

    # -- timeouts and expiry ----------------------------------------------------------------------

    def abort_timed_out_transactions(self) -> int:
        """Fence and abort every ONGOING transaction older than its timeout
        (TransactionCoordinator.abortTimedOutTransactions); returns how many."""
        now = self._clock()
        with self._lock:
            due = [m for m in self.txns.values()
                   if m.state == _S.ONGOING and not m.pending
                   and m.start_timestamp + m.timeout_ms < now]
            transits = [(m, m.prepare_fence_and_abort(now)) for m in due]
        aborted = 0
        for meta, transit in transits:
            log.info("transactional id %r: transaction of producer %d epoch %d timed out after "
                     "%d ms; aborting it at epoch %d", meta.transactional_id, meta.producer_id,
                     meta.producer_epoch, meta.timeout_ms, transit.producer_epoch)
            if self._write(meta, transit) == NONE:
                with self._lock:
                    self._start_markers(meta)
                aborted += 1
        return aborted

    def expire_transactional_ids(self) -> int:
        """Forget ids idle past transactional.id.expiration.ms in EMPTY/COMPLETE_*: a
        tombstone, then out of memory (TransactionStateManager.removeExpiredTransactionalIds)."""
        horizon = self._clock() - self.settings["transactional.id.expiration.ms"]
        with self._lock:
            due = [m for m in self.txns.values()
                   if m.state.expiration_allowed and not m.pending
                   and m.last_update_timestamp <= horizon]
            transits = [(m, m.prepare_dead()) for m in due]
        expired = 0
        for meta, transit in transits:
            if self._write(meta, transit) == NONE:
                with self._lock:
                    if self.txns.get(meta.transactional_id) is meta:
                        del self.txns[meta.transactional_id]
                log.info("transactional id %r expired", meta.transactional_id)
                expired += 1
        return expired

    # -- DescribeTransactions / ListTransactions --------------------------------------------------

    def describe(self, transactional_id: str) -> TransactionDescription:
        if not transactional_id:
            return TransactionDescription(InvalidRequestError.code, transactional_id)
        with self._lock:
            meta = self.txns.get(transactional_id)
            if meta is None or meta.state == _S.DEAD:
                return TransactionDescription(TransactionalIdNotFoundError.code, transactional_id)
            return TransactionDescription(NONE, transactional_id, meta.state.display_name,
                                          meta.timeout_ms, meta.start_timestamp,
                                          meta.producer_id, meta.producer_epoch, meta.partitions)

    def list_transactions(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                          duration_ms: int = -1) -> tuple[list[TransactionListing], list[str]]:
        """The ids matching every filter given, and the state names not known."""
        wanted_states: set[TransactionState] = set()
        unknown: list[str] = []
        names = list(states)
        for name in names:
            state = TransactionState.from_name(name)
            if state is None:
                unknown.append(name)
            else:
                wanted_states.add(state)
        pids = set(producer_ids)
        now = self._clock()
        with self._lock:
            listed = [TransactionListing(m.transactional_id, m.producer_id,
                                         m.state.display_name)
                      for m in self.txns.values()
                      if m.state != _S.DEAD
                      and (not pids or m.producer_id in pids)
                      and (not names or m.state in wanted_states)
                      and (duration_ms < 0 or now - m.start_timestamp > duration_ms)]
        return listed, unknown

    # -- start-up ---------------------------------------------------------------------------------

    def _load(self) -> None:
        """Rebuild the metadata from __transaction_state; complete PREPARE_* transactions
        (TransactionStateManager.loadTransactionsForTxnTopicPartition)."""
        latest: dict[str, TxnTransit | None] = {}
        for key, value in self.store.load():
            transactional_id = decode_key(key)
            if transactional_id is None:
                log.warning("skipping a __transaction_state record of an unknown type")
                continue
            latest[transactional_id] = None if value is None else decode_value(value)
        for transactional_id, t in latest.items():
            if t is None:
                continue
            meta = TransactionMetadata(
                transactional_id, t.producer_id, t.producer_epoch, t.timeout_ms, t.state,
                t.partitions, t.start_timestamp, t.last_update_timestamp, t.prev_producer_id,
                t.next_producer_id, NO_PRODUCER_EPOCH, t.client_tv2)
            self.txns[transactional_id] = meta
            if meta.state.is_prepare:
                log.info("transactional id %r was in %s: writing its markers again",
                         transactional_id, meta.state.display_name)
                with self._lock:
                    self._start_markers(meta)
        if self.txns:
            log.info("loaded %d transactional id(s) from __transaction_state", len(self.txns))

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self.timer.close()
        self.markers.close()
