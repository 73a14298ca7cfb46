"""ProducerBatch: records for one partition on their way to the broker, as Kafka's Java class.

A batch wraps a :class:`samsa.records.RecordBatchBuilder`.  ``try_append`` encodes a record
into it and returns the record's :class:`~samsa.producer.future.RecordFuture`, or None when
the batch is full (the accumulator then starts a new batch).  The batch keeps no per-record
object unless the record has a callback: then a thunk ``(callback, future)``, run once when the
batch completes.  (A future the caller drops dies young, which keeps the garbage collector's
full collections away from the send path.)  ``size`` (the builder's estimated size after the last append) and ``size_limit``
are plain attributes so the accumulator's hot path reads fullness without calls.

Life cycle (who calls what):

* accumulator (caller's thread, under the partition's deque lock): ``try_append``,
  ``close_for_record_appends`` once an append failed, ``is_full``;
* accumulator ``drain()`` (Sender thread): ``set_producer_state`` for idempotence (producer
  id, epoch, base sequence), ``close()`` (builds the bytes: ``records()``), ``drained(now)``;
* Sender on a response: ``complete(base_offset, log_append_time)`` or
  ``complete_exceptionally(error, record_errors)``; for retriable errors
  ``reenqueued(now)`` via ``RecordAccumulator.reenqueue``; for MESSAGE_TOO_LARGE ``split()``;
* accumulator ``expired_batches`` / ``abort_*``: ``abort(error)``.

A batch reaches a final state exactly once (SUCCEEDED, FAILED or ABORTED); later attempts to
fail an already failed batch are ignored, and changing a SUCCEEDED batch is an error.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Mapping, Sequence

from samsa.errors import IllegalStateError, RecordListTooLargeError
from samsa.net.cluster import (
    TopicPartition,  # the one TopicPartition type (re-exported)
)
from samsa.producer.future import (
    INVALID_OFFSET,
    NO_TIMESTAMP,
    ProduceRequestResult,
    RecordCallback,
    RecordFuture,
)
from samsa.records.batch import Record, RecordBatch
from samsa.records.batch_header import NO_SEQUENCE, RECORD_BATCH_OVERHEAD, Compression
from samsa.records.builder import Header, RecordBatchBuilder

__all__ = [
    "CompressionRatioEstimator",
    "FinalState",
    "ProducerBatch",
    "TopicPartition",
    "estimate_size_upper_bound",
]

log = logging.getLogger(__name__)

# Completion is rare next to appends; one lock for all batches keeps batches small.
_STATE_LOCK = threading.Lock()


class FinalState(enum.Enum):
    ABORTED = "ABORTED"
    FAILED = "FAILED"
    SUCCEEDED = "SUCCEEDED"


def estimate_size_upper_bound(
    key: bytes | bytearray | memoryview | None,
    value: bytes | bytearray | memoryview | None,
    headers: Sequence[Header] | None = None,
) -> int:
    """Upper bound of a one-record v2 batch's size (Java's estimateSizeInBytesUpperBound).

    Varints at their widest: length 5, attributes 1, timestamp delta 10, offset delta 5,
    key/value lengths 5 each, header count 5.
    """
    size = RECORD_BATCH_OVERHEAD + 31
    if key is not None:
        size += len(key)
    if value is not None:
        size += len(value)
    if headers:
        for hkey, hvalue in headers:
            size += 10 + len(hkey.encode("utf-8") if isinstance(hkey, str) else hkey)
            if hvalue is not None:
                size += len(hvalue)
    return size


class CompressionRatioEstimator:
    """Per (topic, codec) running estimate of compressed/uncompressed size (Java's class).

    New builders start from the estimate so that compressed batches fill up to batch.size.
    Worse ratios are adopted quickly, better ones slowly.
    """

    IMPROVING_STEP = 0.005
    DETERIORATE_STEP = 0.05

    def __init__(self) -> None:
        self._estimates: dict[tuple[str, int], float] = {}

    def estimation(self, topic: str, compression: int) -> float:
        return self._estimates.get((topic, compression), 1.0)

    def update(self, topic: str, compression: int, observed: float) -> float:
        current = self._estimates.get((topic, compression), 1.0)
        if observed > current:
            current = max(current + self.DETERIORATE_STEP, observed)
        elif observed < current:
            current = max(current - self.IMPROVING_STEP, observed)
        self._estimates[(topic, compression)] = current
        return current

    def set_estimation(self, topic: str, compression: int, ratio: float) -> None:
        self._estimates[(topic, compression)] = ratio


class ProducerBatch:
    """One partition's batch: the records builder, per-record thunks and the batch's result."""

    __slots__ = (
        "_aborted",
        "appends_closed",
        "attempts",
        "attempts_when_leader_last_changed",
        "builder",
        "closed",
        "created_ms",
        "current_leader_epoch",
        "drained_ms",
        "final_state",
        "initial_capacity",
        "is_split_batch",
        "last_append_ms",
        "last_attempt_ms",
        "partition",
        "reopened",
        "result",
        "retry",
        "size",
        "size_limit",
        "thunks",
        "topic",
        "topic_partition",
    )

    def __init__(
        self,
        topic_partition: TopicPartition,
        builder: RecordBatchBuilder,
        created_ms: int,
        *,
        initial_capacity: int | None = None,
        is_split_batch: bool = False,
    ) -> None:
        self.topic, self.partition = topic_partition
        self.topic_partition = topic_partition
        self.created_ms = created_ms
        self.builder = builder
        self.result = ProduceRequestResult(
            topic_partition.topic, topic_partition.partition
        )
        # (callback, future) for the records sent with a callback, in record order.
        self.thunks: list[tuple[RecordCallback, RecordFuture]] = []
        # The builder's estimated size, refreshed on every append; is_full() compares it.
        self.size = builder.estimated_size
        self.size_limit = builder.batch_size_limit
        # buffer.memory reserved for this batch, given back by the accumulator.
        self.initial_capacity = (
            builder.batch_size_limit if initial_capacity is None else initial_capacity
        )
        self.is_split_batch = is_split_batch
        self.attempts = 0
        self.last_attempt_ms = created_ms
        self.last_append_ms = created_ms
        self.drained_ms = 0
        self.closed = False
        self.retry = False
        self.reopened = False
        self.final_state: FinalState | None = None
        self.current_leader_epoch: int | None = None
        self.attempts_when_leader_last_changed = 0
        self.appends_closed = False
        self._aborted = False

    # -- appending (caller's thread, under the deque lock) ------------------------------------

    def try_append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | None,
        callback: RecordCallback | None,
        now_ms: int,
    ) -> RecordFuture | None:
        """Append one record; its future, or None if the batch has no room."""
        if self.appends_closed:
            return None
        builder = self.builder
        delta = builder.append(timestamp, key, value, headers)
        if delta is None:
            return None
        future = self.result.record_future(delta, timestamp, key, value)
        if callback is not None:
            self.thunks.append((callback, future))
        self.last_append_ms = now_ms
        self.size = builder.estimated_size
        return future

    @property
    def record_count(self) -> int:
        return self.builder.record_count

    def estimated_size_in_bytes(self) -> int:
        return self.builder.estimated_size

    def is_full(self) -> bool:
        """No further record will be appended (an append failed, or the size limit is reached)."""
        return self.appends_closed or self.size >= self.size_limit

    def close_for_record_appends(self) -> None:
        self.appends_closed = True

    def abort_record_appends(self) -> None:
        """Stop appends for a batch being expired or aborted; its bytes will not be sent."""
        self.appends_closed = True
        self._aborted = True

    @property
    def is_closed(self) -> bool:
        """Closed for sending by :meth:`close` (drained).  Its bytes may have been built
        before that: the accumulator builds an uncompressed batch of a producer without
        idempotence as it fills up."""
        return self.closed

    def close(self, estimator: CompressionRatioEstimator | None = None) -> bytes | bytearray:
        """Build the batch's bytes (once) and feed the compression ratio back."""
        self.appends_closed = True
        self.closed = True
        was_built = self.builder.is_built
        data = self.builder.build_buffer()
        if (
            not was_built
            and estimator is not None
            and self.builder.compression != Compression.NONE
        ):
            uncompressed = self.builder.uncompressed_size
            if uncompressed:
                estimator.update(
                    self.topic, int(self.builder.compression), len(data) / uncompressed
                )
        self.reopened = False
        return data

    def records(self) -> bytes | bytearray:
        """The built batch (builds it if needed): the builder's buffer, sent from there (not
        copied into bytes; nothing writes to it once built)."""
        return self.builder.build_buffer()

    @property
    def compression(self) -> Compression:
        return self.builder.compression

    # -- idempotence ------------------------------------------------------------------------

    def set_producer_state(
        self,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        is_transactional: bool = False,
    ) -> None:
        self.builder.set_producer_state(
            producer_id, producer_epoch, base_sequence, is_transactional
        )

    def reset_producer_state(
        self, producer_id: int, producer_epoch: int, base_sequence: int
    ) -> None:
        """New id/epoch/sequence for a batch that was already sent (epoch bump)."""
        log.info(
            "Resetting sequence of batch for %s from %d to %d",
            self.topic_partition,
            self.base_sequence,
            base_sequence,
        )
        self.reopened = True
        self.builder.set_producer_state(
            producer_id, producer_epoch, base_sequence, self.is_transactional
        )

    @property
    def producer_id(self) -> int:
        return self.builder.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.builder.producer_epoch

    @property
    def base_sequence(self) -> int:
        return self.builder.base_sequence

    @property
    def last_sequence(self) -> int:
        return self.builder.base_sequence + self.builder.record_count - 1

    def has_sequence(self) -> bool:
        return self.builder.base_sequence != NO_SEQUENCE

    @property
    def is_transactional(self) -> bool:
        return self.builder.is_transactional

    def sequence_has_been_reset(self) -> bool:
        return self.reopened

    # -- timing and retries (Sender thread) ---------------------------------------------------

    def has_reached_delivery_timeout(
        self, now_ms: int, delivery_timeout_ms: int
    ) -> bool:
        return delivery_timeout_ms <= now_ms - self.created_ms

    def waited_time_ms(self, now_ms: int) -> int:
        return max(0, now_ms - self.last_attempt_ms)

    def queue_time_ms(self) -> int:
        return self.drained_ms - self.created_ms

    def drained(self, now_ms: int) -> None:
        self.drained_ms = max(self.drained_ms, now_ms)

    def reenqueued(self, now_ms: int) -> None:
        self.attempts += 1
        self.last_attempt_ms = max(self.last_append_ms, now_ms)
        self.last_append_ms = max(self.last_append_ms, now_ms)
        self.retry = True

    @property
    def in_retry(self) -> bool:
        return self.retry

    def maybe_update_leader_epoch(self, latest_leader_epoch: int | None) -> None:
        """Remember a newer leader epoch; a retry to a new leader skips the backoff (KIP-951)."""
        if latest_leader_epoch is not None and (
            self.current_leader_epoch is None
            or self.current_leader_epoch < latest_leader_epoch
        ):
            self.attempts_when_leader_last_changed = self.attempts
            self.current_leader_epoch = latest_leader_epoch

    def has_leader_changed_for_the_ongoing_retry(self) -> bool:
        attempts = self.attempts
        return attempts >= 1 and attempts == self.attempts_when_leader_last_changed

    # -- completion -------------------------------------------------------------------------

    def is_done(self) -> bool:
        return self.final_state is not None

    def complete(self, base_offset: int, log_append_time: int = NO_TIMESTAMP) -> bool:
        """Succeed the batch: ``done()`` without an error, inlined (the Sender's per-batch path)."""
        with _STATE_LOCK:
            first = self.final_state is None
            if first:
                self.final_state = FinalState.SUCCEEDED
        if not first:
            return self.done(base_offset, log_append_time, None)  # raises or logs, as done() does
        if self.thunks:
            self._complete_and_fire_callbacks(base_offset, log_append_time, None, None)
        else:
            result = self.result
            result.set(base_offset, log_append_time, None, None)
            result.mark_done()
        return True

    def complete_exceptionally(
        self,
        error: BaseException,
        record_errors: Mapping[int, BaseException] | None = None,
    ) -> bool:
        """Fail the batch; ``record_errors`` (index -> error) overrides ``error`` per record."""
        return self.done(INVALID_OFFSET, NO_TIMESTAMP, error, record_errors)

    def abort(self, error: BaseException) -> None:
        """Fail a batch that will not be sent (expired, producer closed); must not be done."""
        with _STATE_LOCK:
            if self.final_state is not None:
                raise IllegalStateError(
                    f"batch for {self.topic_partition} was already completed in state {self.final_state.value}"
                )
            self.final_state = FinalState.ABORTED
        self._complete_and_fire_callbacks(INVALID_OFFSET, NO_TIMESTAMP, error, None)

    def done(
        self,
        base_offset: int,
        log_append_time: int,
        error: BaseException | None,
        record_errors: Mapping[int, BaseException] | None = None,
    ) -> bool:
        """Complete the batch exactly once; True if this call completed it."""
        target = FinalState.SUCCEEDED if error is None else FinalState.FAILED
        with _STATE_LOCK:
            current = self.final_state
            if current is None:
                self.final_state = target
        if current is None:
            self._complete_and_fire_callbacks(
                base_offset, log_append_time, error, record_errors
            )
            return True
        if current is FinalState.SUCCEEDED:
            raise IllegalStateError(
                f"a SUCCEEDED batch for {self.topic_partition} must not change state to {target.value}"
            )
        log.debug(
            "Ignored state change %s -> %s for batch of %s (base offset %d)",
            current.value,
            target.value,
            self.topic_partition,
            base_offset,
        )
        return False

    def _complete_and_fire_callbacks(
        self,
        base_offset: int,
        log_append_time: int,
        error: BaseException | None,
        record_errors: Mapping[int, BaseException] | None,
    ) -> None:
        result = self.result
        # The result must be set before callbacks run: they read their metadata from it.
        result.set(base_offset, log_append_time, error, record_errors)
        failed = error is not None
        for callback, future in self.thunks:
            try:
                if failed:
                    callback(None, result.error_for(future.relative_offset))
                else:
                    callback(future.value(), None)
            except Exception:
                log.exception(
                    "Error in a send callback for a record sent to %s",
                    self.topic_partition,
                )
        result.mark_done()

    # -- splitting after MESSAGE_TOO_LARGE --------------------------------------------------

    def split(self, split_batch_size: int) -> list[ProducerBatch]:
        """Re-batch this batch's records into batches of at most ``split_batch_size`` bytes.

        The records' futures follow them to their new batches (``ProduceRequestResult.moved_to``,
        set before this batch's result completes), this batch's result completes
        with RecordListTooLargeError (followed by the chained futures, not seen by users), and
        sequences are carried over when this batch had one.  New batches are "split batches":
        their memory is not from the BufferPool.

        A split always makes progress: when every record would land in one batch again (they
        all fit in ``split_batch_size``, yet the broker refused them together, e.g. because of
        the topic's max.message.bytes), the limit is halved until they do not, and at worst
        each record gets a batch of its own.  (Java's ProducerBatch.split re-batches by
        batch.size only and then resends the same batch until delivery.timeout.ms.)
        """
        data = self.builder.build()
        records = RecordBatch(data).records()
        if len(records) != self.record_count:
            raise IllegalStateError(
                f"batch for {self.topic_partition} holds {len(records)} records but counted {self.record_count}"
            )
        if not records:
            raise IllegalStateError("cannot split an empty producer batch")
        callbacks = {future.relative_offset: callback for callback, future in self.thunks}
        batches, moved_to = self._split_records(records, callbacks, split_batch_size)
        limit = min(split_batch_size, len(data))
        while len(batches) == 1 and len(records) > 1:
            # No progress: the broker would refuse the same batch again.
            limit //= 2
            batches, moved_to = self._split_records(records, callbacks, limit, one_each=limit <= 1)

        self.result.moved_to = moved_to
        self.result.set(
            INVALID_OFFSET,
            NO_TIMESTAMP,
            RecordListTooLargeError(
                f"batch for {self.topic_partition} was too large for the broker and was split"
            ),
        )
        self.result.mark_done()

        if self.has_sequence():
            sequence = self.base_sequence
            for new_batch in batches:
                new_batch.set_producer_state(
                    self.producer_id,
                    self.producer_epoch,
                    sequence,
                    self.is_transactional,
                )
                sequence += new_batch.record_count
        return batches

    def _split_records(
        self,
        records: Sequence[Record],
        callbacks: dict[int, RecordCallback],
        split_batch_size: int,
        *,
        one_each: bool = False,
    ) -> tuple[list[ProducerBatch], list[RecordFuture]]:
        """New split batches of at most ``split_batch_size`` bytes (``one_each``: one record
        each) holding ``records``, and each record's future in them."""
        batches: list[ProducerBatch] = []
        batch: ProducerBatch | None = None
        moved_to: list[RecordFuture] = []
        for index, record in enumerate(records):
            callback = callbacks.get(index)
            future = None if batch is None or one_each else batch._append_for_split(
                record.timestamp, record.key, record.value, record.headers, callback
            )
            if future is None:
                if batch is not None:
                    batch.close_for_record_appends()
                    batches.append(batch)
                batch = self._new_split_batch(
                    record.key, record.value, record.headers, split_batch_size
                )
                future = batch._append_for_split(
                    record.timestamp, record.key, record.value, record.headers, callback
                )
                assert future is not None  # a new batch takes its first record
            moved_to.append(future)
        assert batch is not None
        batch.close_for_record_appends()
        batches.append(batch)
        return batches, moved_to

    def _new_split_batch(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | None,
        split_batch_size: int,
    ) -> ProducerBatch:
        size = max(estimate_size_upper_bound(key, value, headers), split_batch_size)
        builder = RecordBatchBuilder(
            compression=self.builder.compression,
            compression_level=self.builder.compression_level,
            timestamp_type=self.builder.timestamp_type,
            batch_size_limit=size,
        )
        # Keep the original creation time: delivery.timeout.ms counts from the first send().
        return ProducerBatch(
            self.topic_partition,
            builder,
            self.created_ms,
            is_split_batch=True,
            initial_capacity=size,
        )

    def _append_for_split(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | None,
        callback: RecordCallback | None,
    ) -> RecordFuture | None:
        """Move one record of a split batch here; its new future, None if it does not fit."""
        return self.try_append(timestamp, key, value, headers or None, callback, self.created_ms)

    def __repr__(self) -> str:
        return f"ProducerBatch({self.topic_partition}, records={self.record_count}, attempts={self.attempts})"
