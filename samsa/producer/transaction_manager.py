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
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from samsa.errors import OutOfOrderSequenceNumberError, UnknownProducerIdError
from samsa.producer.accumulator import ProducerIdAndEpoch
from samsa.producer.batch import ProducerBatch, TopicPartition
from samsa.protocol import InitProducerIdRequest

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

    def __init__(self, transaction_timeout_ms: int = _INT32_MAX) -> None:
        self._lock = threading.RLock()
        self._transaction_timeout_ms = transaction_timeout_ms
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
        return False

    def is_completing(self) -> bool:
        return False

    def is_send_to_partition_allowed(self, tp: TopicPartition) -> bool:
        return not self._epoch_bump_required

    def needs_init_producer_id(self) -> bool:
        """True while the Sender must get a (new) id or epoch before sending batches."""
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
        with self._lock:
            self.remove_in_flight_batch(batch)
            if self.is_current(batch) and batch.has_sequence():
                entry = self._entry(batch.topic_partition)
                entry.last_acked = increment_sequence(batch.base_sequence, batch.record_count - 1)

    def can_retry(self, batch: ProducerBatch, error: BaseException) -> bool:
        """Whether an idempotence-related error is retriable for this batch (Java's
        ``TransactionManager.canRetry`` for a non-transactional producer)."""
        if batch.has_sequence() and not self.is_current(batch):
            # Sent under an older id/epoch: re-stamped by the bump, sent again.
            return True
        if isinstance(error, (OutOfOrderSequenceNumberError, UnknownProducerIdError)):
            self.request_epoch_bump(batch.topic_partition, error.name)
            return True
        return False

    def handle_failed_batch(self, batch: ProducerBatch, error: BaseException, maybe_written: bool) -> None:
        """A batch failed for good.  If it may have been written, or the broker complained
        about sequences, or later sequences were already handed out, only a new epoch keeps
        the partition's sequences contiguous; otherwise step the next sequence back."""
        with self._lock:
            self.remove_in_flight_batch(batch)
            if not batch.has_sequence() or not self.is_current(batch):
                return
            tp = batch.topic_partition
            entry = self._entry(tp)
            if (
                not maybe_written
                and not isinstance(error, (OutOfOrderSequenceNumberError, UnknownProducerIdError))
                and increment_sequence(batch.base_sequence, batch.record_count) == entry.next_sequence
            ):
                entry.next_sequence = batch.base_sequence
                return
        self.request_epoch_bump(tp, f"a batch with sequence {batch.base_sequence} failed ({type(error).__name__})")
