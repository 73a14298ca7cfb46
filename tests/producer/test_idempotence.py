"""The idempotent producer's state (samsa/producer/transaction_manager.py), without a network."""

from __future__ import annotations

from samsa.errors import (
    NotLeaderOrFollowerError,
    OutOfOrderSequenceNumberError,
    RequestTimedOutError,
    UnknownProducerIdError,
)
from samsa.producer.batch import ProducerBatch, TopicPartition
from samsa.producer.transaction_manager import TransactionManager, increment_sequence
from samsa.records import RecordBatch
from samsa.records.builder import RecordBatchBuilder

TP = TopicPartition("t", 0)


def batch(records: int, tp: TopicPartition = TP) -> ProducerBatch:
    b = ProducerBatch(tp, RecordBatchBuilder(batch_size_limit=1 << 20), 0)
    for i in range(records):
        assert b.try_append(1000 + i, None, b"v%d" % i, None, None, 0) is not None
    return b


def drain(tm: TransactionManager, b: ProducerBatch) -> None:
    """What RecordAccumulator.drain does for a batch without a sequence."""
    tp = b.topic_partition
    tm.maybe_update_producer_id_and_epoch(tp)
    pid = tm.producer_id_and_epoch()
    b.set_producer_state(pid.producer_id, pid.epoch, tm.sequence_number(tp))
    tm.increment_sequence_number(tp, b.record_count)
    tm.add_in_flight_batch(b)
    b.close()


def header(b: ProducerBatch) -> tuple[int, int, int]:
    parsed = RecordBatch(b.records())
    return parsed.producer_id, parsed.producer_epoch, parsed.base_sequence


def test_needs_producer_id_first_and_request_asks_for_new_id() -> None:
    tm = TransactionManager()
    assert tm.needs_init_producer_id()
    request = tm.init_producer_id_request()
    assert request.transactional_id is None
    assert (request.producer_id, request.producer_epoch) == (-1, -1)
    tm.handle_init_producer_id(1000, 0)
    assert not tm.needs_init_producer_id()
    assert tm.producer_id_and_epoch() == (1000, 0)


def test_sequences_per_partition_start_at_zero_and_follow_record_counts() -> None:
    tm = TransactionManager()
    tm.handle_init_producer_id(7, 0)
    a, b, c = batch(3), batch(5), batch(2, TopicPartition("t", 1))
    for x in (a, b, c):
        drain(tm, x)
    assert header(a) == (7, 0, 0)
    assert header(b) == (7, 0, 3)
    assert header(c) == (7, 0, 0)
    assert tm.first_in_flight_sequence(TP) == 0
    tm.handle_completed_batch(a)
    assert tm.first_in_flight_sequence(TP) == 3
    assert tm.last_acked_sequence(TP) == 2


def test_in_flight_batches_stay_in_sequence_order_whatever_order_they_come_and_go() -> None:
    # A retried or split batch comes back with its old sequence: the first in flight is the
    # lowest sequence however the batches were added, and any of them may complete.
    tm = TransactionManager()
    tm.handle_init_producer_id(7, 0)
    batches = [batch(2) for _ in range(4)]
    for b in batches:
        drain(tm, b)  # sequences 0, 2, 4, 6
    for b in batches:
        tm.remove_in_flight_batch(b)
    for i in (2, 0, 3, 1):
        tm.add_in_flight_batch(batches[i])
    tm.add_in_flight_batch(batches[0])  # already there: not twice
    assert tm.first_in_flight_sequence(TP) == 0
    tm.handle_completed_batch(batches[1])  # not the first in flight
    assert tm.first_in_flight_sequence(TP) == 0 and tm.last_acked_sequence(TP) == 3
    tm.handle_completed_batch(batches[0])
    assert tm.first_in_flight_sequence(TP) == 4
    tm.handle_completed_batch(batches[2])
    tm.handle_completed_batch(batches[3])
    assert not tm.has_inflight_batches(TP) and tm.last_acked_sequence(TP) == 7


def test_sequence_wraps_at_int32_max() -> None:
    assert increment_sequence(2**31 - 1, 1) == 0
    assert increment_sequence(2**31 - 2, 3) == 1
    assert increment_sequence(5, 3) == 8


def test_out_of_order_sequence_bumps_the_epoch_locally_and_restamps_retries() -> None:
    tm = TransactionManager()
    tm.handle_init_producer_id(7, 0)
    a, b = batch(3), batch(4)
    drain(tm, a)
    drain(tm, b)
    tm.handle_completed_batch(a)
    # b fails with OUT_OF_ORDER_SEQUENCE_NUMBER: retriable after an epoch bump.
    assert tm.can_retry(b, OutOfOrderSequenceNumberError())
    assert tm.needs_init_producer_id() and tm.epoch_bump_required
    assert not tm.is_send_to_partition_allowed(TP)
    # Java's bumpIdempotentEpochAndResetIdIfNeeded: same id, next epoch, no InitProducerId.
    tm.bump_idempotent_epoch_and_reset_id_if_needed()
    assert not tm.needs_init_producer_id()
    assert tm.producer_id_and_epoch() == (7, 1)
    # The retried batch (still tracked) restarts at sequence 0 under the new epoch.
    assert header(b) == (7, 1, 0)
    assert tm.sequence_number(TP) == 4
    assert tm.epoch_bumps == 1
    later = batch(2)
    drain(tm, later)
    assert header(later) == (7, 1, 4)


def test_init_producer_id_never_carries_the_current_id() -> None:
    # Kafka answers InitProducerId without a transactional id with a fresh id whatever the
    # request carries (TransactionCoordinator.handleInitProducerId): no KIP-360 bump by request.
    tm = TransactionManager()
    tm.handle_init_producer_id(7, 0)
    tm.request_epoch_bump(TP, "test")
    request = tm.init_producer_id_request()
    assert (request.producer_id, request.producer_epoch) == (-1, -1)


def test_bump_leaves_other_partitions_in_flight_batches_alone() -> None:
    other = TopicPartition("t", 1)
    tm = TransactionManager()
    tm.handle_init_producer_id(7, 0)
    a, b = batch(2), batch(3, other)
    drain(tm, a)
    drain(tm, b)
    tm.request_epoch_bump(TP, "test")
    tm.bump_idempotent_epoch_and_reset_id_if_needed()
    assert header(a) == (7, 1, 0)
    # b may already be in the log: its retry must stay a duplicate there, so it keeps (7, 0, 0).
    assert header(b) == (7, 0, 0) and tm.is_current(b)
    assert tm.has_stale_producer_id_and_epoch(other) and tm.has_inflight_batches(other)
    tm.handle_completed_batch(b)
    assert tm.last_acked_sequence(other) == 2
    c = batch(1, other)
    drain(tm, c)  # nothing in flight any more: the partition restarts at 0 under the new epoch
    assert header(c) == (7, 1, 0)


def test_unknown_producer_id_is_retried_with_a_bump() -> None:
    tm = TransactionManager()
    tm.handle_init_producer_id(7, 0)
    a = batch(1)
    drain(tm, a)
    assert tm.can_retry(a, UnknownProducerIdError())
    assert tm.epoch_bump_required


def test_other_errors_are_not_idempotence_retries() -> None:
    tm = TransactionManager()
    tm.handle_init_producer_id(7, 0)
    a = batch(1)
    drain(tm, a)
    assert not tm.can_retry(a, NotLeaderOrFollowerError())
    assert not tm.epoch_bump_required


def test_batch_sent_under_an_older_epoch_is_always_retriable() -> None:
    tm = TransactionManager()
    tm.handle_init_producer_id(7, 0)
    a = batch(1)
    drain(tm, a)
    tm.remove_in_flight_batch(a)  # e.g. expired meanwhile
    tm.request_epoch_bump(TP, "test")
    tm.bump_idempotent_epoch_and_reset_id_if_needed()
    assert tm.can_retry(a, NotLeaderOrFollowerError())


def test_failed_batch_that_surely_was_not_written_gives_its_sequences_back() -> None:
    tm = TransactionManager()
    tm.handle_init_producer_id(7, 0)
    a = batch(3)
    drain(tm, a)
    tm.handle_failed_batch(a, NotLeaderOrFollowerError(), maybe_written=False)
    assert tm.sequence_number(TP) == 0
    assert not tm.epoch_bump_required


def test_failed_batch_that_may_have_been_written_bumps_the_epoch() -> None:
    tm = TransactionManager()
    tm.handle_init_producer_id(7, 0)
    a = batch(3)
    drain(tm, a)
    tm.handle_failed_batch(a, RequestTimedOutError(), maybe_written=True)
    assert tm.epoch_bump_required
    assert not tm.has_inflight_batches(TP)


def test_failed_batch_with_later_sequences_outstanding_bumps_the_epoch() -> None:
    tm = TransactionManager()
    tm.handle_init_producer_id(7, 0)
    a, b = batch(3), batch(3)
    drain(tm, a)
    drain(tm, b)
    tm.handle_failed_batch(a, NotLeaderOrFollowerError(), maybe_written=False)
    assert tm.epoch_bump_required


def test_exhausted_epoch_asks_for_a_fresh_producer_id() -> None:
    tm = TransactionManager()
    tm.handle_init_producer_id(7, 32767)  # Short.MAX_VALUE
    a = batch(2)
    drain(tm, a)
    tm.request_epoch_bump(TP, "test")
    tm.bump_idempotent_epoch_and_reset_id_if_needed()
    assert tm.needs_init_producer_id() and not tm.has_producer_id()
    assert (tm.init_producer_id_request().producer_id, tm.epoch_bumps) == (-1, 1)
    tm.handle_init_producer_id(8, 0)
    assert header(a) == (8, 0, 0)
    assert not tm.needs_init_producer_id()
