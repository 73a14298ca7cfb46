"""Transaction states and the metadata the coordinator keeps per transactional id.

As Kafka's ``TransactionState`` and ``TransactionMetadata``: every change is first *prepared*
(a ``TxnTransit``, the whole new metadata, with ``pending_state`` set so that any other request
for the id gets CONCURRENT_TRANSACTIONS), then written to ``__transaction_state``, and only then
*completed* (applied).  A failed write clears the pending state and leaves the metadata as it
was.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

NO_PRODUCER_ID = -1  # RecordBatch.NO_PRODUCER_ID
NO_PRODUCER_EPOCH = -1  # RecordBatch.NO_PRODUCER_EPOCH
# An epoch at or above this is exhausted: one more bump (a fence) must always fit in an int16
# (TransactionMetadata.isEpochExhausted).
EPOCH_EXHAUSTED = 32767 - 1

TopicPartition = tuple[str, int]


class TransactionState(enum.IntEnum):
    """The state ids are those of ``__transaction_state`` records (TransactionState.java)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use ("Ongoing", ...)."""
        return _NAMES[self]

    @property
    def expiration_allowed(self) -> bool:
        return self in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT,
                        TransactionState.COMPLETE_ABORT)

    @property
    def is_prepare(self) -> bool:
        return self in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)


_S = TransactionState
_NAMES = {
    _S.EMPTY: "Empty", _S.ONGOING: "Ongoing", _S.PREPARE_COMMIT: "PrepareCommit",
    _S.PREPARE_ABORT: "PrepareAbort", _S.COMPLETE_COMMIT: "CompleteCommit",
    _S.COMPLETE_ABORT: "CompleteAbort", _S.DEAD: "Dead", _S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}
_COMPLETE = frozenset({_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
# Which states a state may be entered from (TransactionState.validPreviousStates).
VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY}) | _COMPLETE,
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY}) | _COMPLETE,
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    # EMPTY and COMPLETE_*: an EndTxn v5 (TV2) abort with nothing added.
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY}) | _COMPLETE,
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY}) | _COMPLETE,
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


class IllegalTransitionError(RuntimeError):
    """A transition the state machine forbids: a coordinator bug, never a client error."""


def is_epoch_exhausted(epoch: int) -> bool:
    return epoch >= EPOCH_EXHAUSTED


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The whole metadata after a prepared transition (Kafka's TxnTransitMetadata)."""

    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    start_timestamp: int
    last_update_timestamp: int
    client_tv2: bool = False


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState = TransactionState.EMPTY
    partitions: frozenset[TopicPartition] = frozenset()
    start_timestamp: int = -1
    last_update_timestamp: int = -1
    prev_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    client_tv2: bool = False
    # The target of the one transition in flight (its record is being written); in memory only.
    pending_state: TransactionState | None = None

    @property
    def pending(self) -> bool:
        return self.pending_state is not None

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def snapshot(self) -> TxnTransit:
        return TxnTransit(self.producer_id, self.prev_producer_id, self.next_producer_id,
                          self.producer_epoch, self.last_producer_epoch, self.timeout_ms,
                          self.state, self.partitions, self.start_timestamp,
                          self.last_update_timestamp, self.client_tv2)

    # -- prepared transitions (TransactionMetadata.prepare*) ----------------------------------

    def _prepare(self, state: TransactionState, **changes: object) -> TxnTransit:
        if self.pending_state is not None:
            raise IllegalTransitionError(
                f"transactional id {self.transactional_id!r}: transition to {state.name} "
                f"prepared while {self.pending_state.name} is pending")
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransitionError(
                f"transactional id {self.transactional_id!r}: {self.state.name} -> {state.name} "
                f"is not a valid transition")
        transit = replace(self.snapshot(), state=state, **changes)  # type: ignore[arg-type]
        if transit.state != TransactionState.DEAD and transit.producer_epoch < 0:
            raise IllegalTransitionError(f"transactional id {self.transactional_id!r}: epoch "
                                         f"{transit.producer_epoch} is not a valid epoch")
        self.pending_state = state
        return transit

    def prepare_epoch_bump(self, timeout_ms: int, epoch: int, last_epoch: int,
                           now_ms: int) -> TxnTransit:
        """InitProducerId on EMPTY/COMPLETE_*: a new epoch, no partitions."""
        return self._prepare(TransactionState.EMPTY, producer_epoch=epoch,
                             last_producer_epoch=last_epoch, timeout_ms=timeout_ms,
                             partitions=frozenset(), start_timestamp=-1,
                             last_update_timestamp=now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransit:
        """InitProducerId at an exhausted epoch: a new producer id at epoch 0."""
        return self._prepare(TransactionState.EMPTY, producer_id=new_producer_id,
                             prev_producer_id=self.producer_id, producer_epoch=0,
                             last_producer_epoch=(self.producer_epoch if record_last_epoch
                                                  else NO_PRODUCER_EPOCH),
                             timeout_ms=timeout_ms, partitions=frozenset(),
                             start_timestamp=-1, last_update_timestamp=now_ms)

    def prepare_fence_and_abort(self, now_ms: int) -> TxnTransit:
        """InitProducerId or the timeout scan on an ONGOING transaction: PREPARE_ABORT at the
        next epoch, so that the producer of the current epoch is fenced (Kafka passes through
        PREPARE_EPOCH_FENCE, never persisted: TransactionMetadata.prepareFenceProducerEpoch,
        then TransactionCoordinator.endTransactionWithTV1).  Nothing changes until the record
        is written, so a failed write leaves the epoch as it was."""
        return self._prepare(TransactionState.PREPARE_ABORT,
                             producer_epoch=min(self.producer_epoch + 1, 32767),
                             last_producer_epoch=NO_PRODUCER_EPOCH,
                             last_update_timestamp=now_ms)

    def prepare_add_partitions(self, added: frozenset[TopicPartition], now_ms: int,
                               client_tv2: bool) -> TxnTransit:
        start = now_ms if self.state in (TransactionState.EMPTY, *_COMPLETE) \
            else self.start_timestamp
        return self._prepare(TransactionState.ONGOING, partitions=self.partitions | added,
                             start_timestamp=start, last_update_timestamp=now_ms,
                             client_tv2=client_tv2)

    def prepare_abort_or_commit(self, state: TransactionState, client_tv2: bool,
                                next_producer_id: int, now_ms: int,
                                no_partition_added: bool) -> TxnTransit:
        if client_tv2:  # KIP-890 part 2: every transaction ends with an epoch bump
            epoch, last_epoch = self.producer_epoch + 1, self.producer_epoch
        else:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        return self._prepare(state, next_producer_id=next_producer_id, producer_epoch=epoch,
                             last_producer_epoch=last_epoch,
                             start_timestamp=now_ms if no_partition_added
                             else self.start_timestamp,
                             last_update_timestamp=now_ms, client_tv2=client_tv2)

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        state = (TransactionState.COMPLETE_COMMIT if self.state == TransactionState.PREPARE_COMMIT
                 else TransactionState.COMPLETE_ABORT)
        if self.client_tv2 and self.next_producer_id != NO_PRODUCER_ID:
            producer_id, epoch = self.next_producer_id, 0  # the epoch overflowed: a new id
            prev = self.producer_id
        else:
            producer_id, epoch, prev = self.producer_id, self.producer_epoch, self.prev_producer_id
        return self._prepare(state, producer_id=producer_id, prev_producer_id=prev,
                             next_producer_id=NO_PRODUCER_ID, producer_epoch=epoch,
                             partitions=frozenset(), last_update_timestamp=now_ms)

    def prepare_dead(self) -> TxnTransit:
        return self._prepare(TransactionState.DEAD, partitions=frozenset())

    # -- completing ----------------------------------------------------------------------------

    def complete(self, transit: TxnTransit) -> None:
        """Apply a transition whose record is durable (TransactionMetadata.completeTransitionTo)."""
        if self.pending_state != transit.state:
            raise IllegalTransitionError(
                f"transactional id {self.transactional_id!r}: completing {transit.state.name} "
                f"but {self.pending_state} is pending")
        self.producer_id = transit.producer_id
        self.prev_producer_id = transit.prev_producer_id
        self.next_producer_id = transit.next_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.timeout_ms = transit.timeout_ms
        self.state = transit.state
        self.partitions = transit.partitions
        self.start_timestamp = transit.start_timestamp
        self.last_update_timestamp = transit.last_update_timestamp
        self.client_tv2 = transit.client_tv2
        self.pending_state = None

    def abort_pending(self) -> None:
        """The write of the pending transition failed: forget it."""
        self.pending_state = None
