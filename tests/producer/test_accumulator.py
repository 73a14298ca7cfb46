"""RecordAccumulator: append, ready, drain, expiry, retries, ordering, sticky/adaptive, memory, close."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from samsa.errors import (
    IllegalStateError,
    KafkaTimeoutError,
    NotLeaderOrFollowerError,
    ProducerClosedError,
)
from samsa.net.clock import MockClock
from samsa.producer.accumulator import (
    MAX_DELAY_MS,
    ExponentialBackoff,
    ProducerIdAndEpoch,
    RecordAccumulator,
)
from samsa.producer.batch import ProducerBatch, TopicPartition
from samsa.producer.buffer_pool import BufferExhaustedError, BufferPool
from samsa.producer.config import ProducerConfig
from samsa.producer.partitioner import UNKNOWN_PARTITION
from samsa.records.batch import RecordBatch
from samsa.records.batch_header import NO_SEQUENCE, Compression
from tests.producer.fakes import FakeCluster

VALUE = b"v" * 100


def make(
    batch_size: int = 1024,
    memory: int = 1 << 20,
    linger_ms: int = 10,
    backoff_ms: int = 100,
    delivery_timeout_ms: int = 5000,
    clock: MockClock | None = None,
    **kwargs: Any,
) -> RecordAccumulator:
    clock = clock or MockClock()
    acc = RecordAccumulator(
        batch_size,
        BufferPool(memory, batch_size),
        linger_ms=linger_ms,
        retry_backoff_ms=backoff_ms,
        retry_backoff_max_ms=backoff_ms,  # no exponential growth, no jitter: deterministic
        delivery_timeout_ms=delivery_timeout_ms,
        clock=clock,
        **kwargs,
    )
    acc.test_clock = clock  # type: ignore[attr-defined]
    return acc


def append(
    acc: RecordAccumulator,
    cluster: FakeCluster,
    partition: int = 0,
    now: int = 0,
    topic: str = "t",
    value: bytes = VALUE,
    callback: Any = None,
    key: bytes | None = None,
) -> Any:
    acc.test_clock.set_ms(now)  # type: ignore[attr-defined]
    return acc.append(
        topic,
        partition,
        1_700_000_000_000,
        key,
        value,
        None,
        callback,
        0,
        False,
        now,
        cluster,
    )


CLUSTER = {"t": [1, 1, 2, 2]}  # partitions 0,1 led by node 1; 2,3 by node 2


# -- append ---------------------------------------------------------------------------------


def test_append_fills_a_batch_then_starts_the_next() -> None:
    acc, cluster = make(), FakeCluster(CLUSTER)
    first = append(acc, cluster)
    assert first.new_batch_created and not first.batch_is_full and first.partition == 0
    results = [append(acc, cluster) for _ in range(20)]
    created = [i for i, r in enumerate(results) if r.new_batch_created]
    assert created, "a second batch must be started"
    # The append that opened the second batch reports the deque as full (more than one batch).
    assert results[created[0]].batch_is_full
    dq = acc.get_deque("t", 0)
    assert dq is not None and len(dq) == len(created) + 1
    assert (
        all(b.is_full() for b in list(dq)[:-1])
        and sum(b.record_count for b in dq) == 21
    )
    assert [r.future.relative_offset for r in results[:3]] == [1, 2, 3]
    assert acc.has_incomplete() and acc.incomplete_count() == len(dq)


def append_fast(
    acc: RecordAccumulator, cluster: FakeCluster, wakes: list[int], partition: int = 0, callback: Any = None
) -> Any:
    """send()'s route: append_to_last, else append (waking where append's result says so)."""
    future = acc.append_to_last(
        "t", partition, 1_700_000_000_000, None, VALUE, None, callback, 0, cluster, lambda: wakes.append(1)
    )
    if future is not None:
        return future
    result = append(acc, cluster, partition=partition, callback=callback)
    if result.batch_is_full or result.new_batch_created:
        wakes.append(1)
    return result.future


def test_append_to_last_needs_an_open_batch() -> None:
    acc, cluster = make(), FakeCluster(CLUSTER)
    args = ("t", 0, 1, None, VALUE, None, None, 0, cluster, lambda: None)
    assert acc.append_to_last(*args) is None  # no topic, no deque
    first = append(acc, cluster).future
    future = acc.append_to_last(*args)
    assert future is not None and future.relative_offset == 1
    assert acc.append_to_last("t", UNKNOWN_PARTITION, 1, None, VALUE, None, None, 0, cluster, lambda: None) is None
    acc.get_deque("t", 0)[-1].close_for_record_appends()  # type: ignore[index]
    assert acc.append_to_last(*args) is None
    acc.close()
    assert acc.append_to_last(*args) is None
    assert first.relative_offset == 0


def test_append_to_last_matches_append() -> None:
    """Same batches, offsets, callbacks and wakeups as append() alone, keyed and sticky."""
    for partition in (0, UNKNOWN_PARTITION):
        slow, fast = make(batch_size=1024), make(batch_size=1024)
        cluster = FakeCluster({"t": [1, 1, 1, 1]})
        # Same "random" partition choices for both accumulators.
        for acc in (slow, fast):
            acc.built_in_partitioner("t").random_partition = iter(  # type: ignore[method-assign]
                [2, 0, 3, 1, 2, 2, 0, 1] * 10
            ).__next__
        calls: dict[str, list[int]] = {"slow": [], "fast": []}
        slow_wakes: list[int] = []
        fast_wakes: list[int] = []
        for i in range(60):
            result = append(slow, cluster, partition=partition, callback=lambda m, e, i=i, c=calls: c["slow"].append(i))
            if result.batch_is_full or result.new_batch_created:
                slow_wakes.append(1)
            append_fast(fast, cluster, fast_wakes, partition, callback=lambda m, e, i=i, c=calls: c["fast"].append(i))
        layout = [
            [
                [(b.record_count, b.size, b.is_full()) for b in (acc.get_deque("t", p) or ())]
                for p in range(4)
            ]
            for acc in (slow, fast)
        ]
        assert layout[0] == layout[1]
        assert len(slow_wakes) == len(fast_wakes)
        for acc, name in ((slow, "slow"), (fast, "fast")):
            for p in range(4):
                for batch in acc.get_deque("t", p) or ():
                    batch.complete(0)
            assert sorted(calls[name]) == list(range(60))


def test_batch_memory_comes_from_the_pool_and_goes_back() -> None:
    acc, cluster = make(batch_size=1024, memory=10_000), FakeCluster(CLUSTER)
    append(acc, cluster)
    append(
        acc, cluster, partition=1, value=b"x" * 3000
    )  # larger than batch.size: own size
    pool = acc.buffer_pool
    dq0, dq1 = acc.get_deque("t", 0), acc.get_deque("t", 1)
    assert dq0 is not None and dq1 is not None
    big = dq1[0]
    assert big.initial_capacity > 3000
    assert pool.available_memory() == 10_000 - 1024 - big.initial_capacity
    drained = acc.drain(cluster, [1], 1 << 20, 100)[1]
    for batch in drained:
        batch.complete(0)
        acc.deallocate(batch)
    assert pool.available_memory() == 10_000
    with pytest.raises(IllegalStateError):
        acc.deallocate(drained[0])  # twice is a bug


def test_blocks_for_memory_then_times_out() -> None:
    acc, cluster = make(batch_size=1024, memory=2048), FakeCluster(CLUSTER)
    append(acc, cluster, partition=0)
    append(acc, cluster, partition=1)
    with pytest.raises(BufferExhaustedError, match="max.block.ms"):
        acc.append("t", 2, 0, None, VALUE, None, None, 10, False, 0, cluster)
    assert acc.get_deque("t", 2) is not None and not acc.get_deque("t", 2)


def test_ready_treats_everything_as_sendable_while_threads_wait_for_memory() -> None:
    acc, cluster = (
        make(batch_size=1024, memory=1024, linger_ms=1000),
        FakeCluster(CLUSTER),
    )
    append(acc, cluster, partition=0)
    assert acc.ready(cluster, 0).ready_nodes == set()
    started = threading.Event()
    errors: list[BaseException] = []

    def blocked() -> None:
        started.set()
        try:
            acc.append("t", 2, 0, None, VALUE, None, None, 60_000, False, 0, cluster)
        except ProducerClosedError as exc:
            errors.append(exc)

    t = threading.Thread(target=blocked)
    t.start()
    started.wait(10)
    while acc.buffer_pool.queued() == 0:
        t.join(0.001)
    assert acc.ready(cluster, 0).ready_nodes == {1}
    acc.close()  # wakes the waiter
    t.join(30)
    assert isinstance(errors[0], ProducerClosedError)


def test_abort_on_new_batch_returns_before_allocating() -> None:
    acc, cluster = make(), FakeCluster(CLUSTER)
    r = acc.append("t", 0, 0, None, VALUE, None, None, 0, True, 0, cluster)
    assert r.abort_for_new_batch and r.future is None
    assert acc.buffer_pool.available_memory() == 1 << 20
    append(acc, cluster)
    r2 = acc.append("t", 0, 0, None, VALUE, None, None, 0, True, 0, cluster)
    assert r2.future is not None and not r2.abort_for_new_batch


def test_append_after_close_fails() -> None:
    acc, cluster = make(), FakeCluster(CLUSTER)
    append(acc, cluster)
    acc.close()
    with pytest.raises(ProducerClosedError):
        append(acc, cluster)


def test_concurrent_appends_keep_every_record_and_per_thread_order() -> None:
    acc, cluster = make(batch_size=2048), FakeCluster(CLUSTER)
    per_thread = 300

    def worker(n: int) -> None:
        for i in range(per_thread):
            append(acc, cluster, value=b"%d:%d" % (n, i))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    acc.begin_flush()
    values: list[bytes] = []
    while True:
        drained = acc.drain(cluster, [1], 1 << 30, 0)[1]
        if not drained:
            break
        for batch in drained:
            values.extend(r.value for r in RecordBatch(batch.records()).records())  # type: ignore[misc]
    assert len(values) == 4 * per_thread
    for n in range(4):
        mine = [int(v.split(b":")[1]) for v in values if v.startswith(b"%d:" % n)]
        assert mine == list(range(per_thread))



def test_draining_while_threads_append_loses_and_duplicates_nothing() -> None:
    # ready() and drain() read and take first batches without the deque lock when a later
    # batch follows (the appending threads fill only the last): drained concurrently with
    # record-at-a-time and run appends, every record comes out once, in each thread's order.
    acc, cluster = make(batch_size=1024, memory=16 << 20, linger_ms=0), FakeCluster({"t": [1]})
    per_thread = 3000
    done = threading.Event()

    def one_at_a_time() -> None:
        for i in range(per_thread):
            append(acc, cluster, value=b"a:%d" % i)

    def in_runs() -> None:
        for start in range(0, per_thread, 50):
            acc.append_many("t", 0, 1_700_000_000_000, None, [b"b:%d" % i for i in range(start, start + 50)],
                            None, 0, 0, cluster, lambda: None)

    threads = [threading.Thread(target=one_at_a_time), threading.Thread(target=in_runs)]

    def wait_for_the_appenders() -> None:
        for t in threads:
            t.join(120)
        done.set()

    for t in threads:
        t.start()
    threading.Thread(target=wait_for_the_appenders).start()
    values: list[bytes] = []
    while True:
        finished = done.is_set()  # read before the last drain: nothing is appended after it
        if acc.ready(cluster, 0).ready_nodes:
            for batch in acc.drain(cluster, [1], 1 << 30, 0)[1]:
                assert RecordBatch(batch.records()).is_valid()
                values.extend(r.value for r in RecordBatch(batch.records()).records())  # type: ignore[misc]
        if finished and not acc.has_undrained():
            break
    assert len(values) == 2 * per_thread
    for name in (b"a", b"b"):
        assert [int(v.split(b":")[1]) for v in values if v.startswith(name + b":")] == list(range(per_thread))


# -- ready ----------------------------------------------------------------------------------


def test_ready_waits_for_linger_then_reports_the_leader() -> None:
    acc, cluster = make(linger_ms=10), FakeCluster(CLUSTER)
    append(acc, cluster, partition=2, now=100)
    r = acc.ready(cluster, 104)
    assert r.ready_nodes == set() and r.next_ready_check_delay_ms == 6
    r = acc.ready(cluster, 110)
    assert r.ready_nodes == {2} and r.unknown_leader_topics == set()


def test_ready_when_full_without_waiting() -> None:
    acc, cluster = make(linger_ms=10_000), FakeCluster(CLUSTER)
    while len(acc.get_deque("t", 0) or ()) < 2:
        append(acc, cluster)
    assert acc.ready(cluster, 0).ready_nodes == {1}


def test_ready_reports_unknown_leaders() -> None:
    acc, cluster = make(linger_ms=0), FakeCluster({"t": [None, 1]})
    append(acc, cluster, partition=0)
    r = acc.ready(cluster, 0)
    assert r.ready_nodes == set() and r.unknown_leader_topics == {"t"}
    assert r.next_ready_check_delay_ms == MAX_DELAY_MS


def test_ready_when_flushing_or_closed() -> None:
    acc, cluster = make(linger_ms=10_000), FakeCluster(CLUSTER)
    append(acc, cluster)
    assert acc.ready(cluster, 0).ready_nodes == set()
    acc.begin_flush()
    assert acc.flush_in_progress()
    assert acc.ready(cluster, 0).ready_nodes == {1}
    acc2 = make(linger_ms=10_000)
    append(acc2, cluster)
    acc2.close()
    assert acc2.ready(cluster, 0).ready_nodes == {1}


def test_muted_partitions_are_neither_ready_nor_drained() -> None:
    acc, cluster = make(linger_ms=0), FakeCluster(CLUSTER)
    append(acc, cluster, partition=0)
    acc.mute_partition(TopicPartition("t", 0))
    assert acc.is_muted(("t", 0))
    assert acc.ready(cluster, 0).ready_nodes == set()
    assert acc.drain(cluster, [1], 1 << 20, 0) == {1: []}
    acc.unmute_partition(("t", 0))
    assert acc.ready(cluster, 0).ready_nodes == {1}
    assert len(acc.drain(cluster, [1], 1 << 20, 0)[1]) == 1


# -- drain ----------------------------------------------------------------------------------


def test_drain_groups_by_node_and_respects_max_size() -> None:
    acc, cluster = make(linger_ms=0), FakeCluster(CLUSTER)
    for p in range(4):
        for _ in range(3):
            append(acc, cluster, partition=p)
    out = acc.drain(cluster, [1, 2], 1 << 20, 7)
    assert sorted(b.partition for b in out[1]) == [0, 1]
    assert sorted(b.partition for b in out[2]) == [2, 3]
    for batch in out[1] + out[2]:
        assert batch.is_closed and batch.drained_ms == 7
    assert not acc.has_undrained()

    for p in range(2):
        append(acc, cluster, partition=p)
    small = acc.drain(cluster, [1], 10, 0)[1]
    assert len(small) == 1  # one batch always goes even if larger than max_size


def test_drain_rotates_start_partition_between_calls() -> None:
    acc, cluster = make(linger_ms=0), FakeCluster({"t": [1, 1, 1]})
    firsts = []
    for _ in range(3):
        for p in range(3):
            append(acc, cluster, partition=p)
        drained = acc.drain(cluster, [1], 1, 0)[1]  # room for one batch per call
        firsts.append(drained[0].partition)
        for p in range(3):
            acc.drain(cluster, [1], 1 << 20, 0)
    assert len(set(firsts)) > 1


def test_a_full_batch_is_built_as_it_fills_without_idempotence() -> None:
    # Uncompressed and without a transaction manager nothing is stamped at drain, so the
    # appending thread builds a batch when a record no longer fits (its bytes still in cache);
    # drain sends those same bytes, and the batch counts as closed only once drained.
    acc, cluster = make(linger_ms=0, batch_size=1024), FakeCluster({"t": [1]})
    for _ in range(15):
        append(acc, cluster)
    dq = acc.get_deque("t", 0)
    full, last = dq[0], dq[-1]
    assert full.builder.is_built and not full.is_closed
    assert not last.builder.is_built  # still open for appends
    built = full.builder.build_buffer()
    [drained] = acc.drain(cluster, [1], 1, 0)[1]
    assert drained is full and drained.is_closed and drained.records() is built
    batch = RecordBatch(bytes(built))
    assert batch.is_valid() and batch.header.producer_id == -1
    assert [r.value for r in batch.records()] == [VALUE] * full.record_count


class _HeldByAnAppender:
    """A deque lock an appending thread holds: acquiring it would wait, so count instead."""

    def __init__(self) -> None:
        self.acquired = 0

    def acquire(self) -> bool:
        self.acquired += 1
        return True

    def release(self) -> None:
        pass

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        pass


def test_ready_and_drain_take_a_completed_head_without_the_appenders_lock() -> None:
    # The Sender reads the head without the deque lock, and takes a head that is not the last
    # batch (appending threads fill only the last) without it too: blocking on a lock the
    # appending thread holds costs the Sender the GIL as well.  A lone batch, which may be
    # being filled, is still drained under the lock.
    acc, cluster = make(linger_ms=10_000, batch_size=1024), FakeCluster({"t": [1]})
    while len(acc.get_deque("t", 0) or ()) < 2:
        append(acc, cluster)
    dq = acc.get_deque("t", 0)
    held = _HeldByAnAppender()
    dq.lock = held  # type: ignore[union-attr]
    head, last = dq[0], dq[-1]
    assert acc.ready(cluster, 0).ready_nodes == {1}
    assert acc.drain(cluster, [1], 1 << 20, 0) == {1: [head]} and held.acquired == 0
    assert list(dq) == [last] and not last.is_closed
    acc.begin_flush()  # the lone, open batch is ready now
    assert acc.ready(cluster, 0).ready_nodes == {1} and held.acquired == 0
    assert acc.drain(cluster, [1], 1 << 20, 0) == {1: [last]} and held.acquired == 1


@pytest.mark.parametrize("setup", ["gzip", "idempotent"])
def test_a_full_batch_waits_for_drain_to_be_built(setup: str) -> None:
    # Compressed (the codec runs once, on the Sender) or idempotent (drain stamps the producer
    # id and sequence, which the CRC covers): built when drained, as before.
    kwargs: dict[str, Any] = ({"compression": Compression.GZIP} if setup == "gzip"
                              else {"transaction_manager": FakeTransactionManager()})
    acc, cluster = make(linger_ms=0, batch_size=1024, **kwargs), FakeCluster({"t": [1]})
    for _ in range(15):
        append(acc, cluster)
    assert not any(b.builder.is_built for b in acc.get_deque("t", 0))


def test_abort_undrained_batches_aborts_a_queued_batch_built_early() -> None:
    acc, cluster = make(linger_ms=0, batch_size=1024), FakeCluster({"t": [1]})
    errors: list[Any] = []
    for _ in range(15):
        append(acc, cluster, callback=lambda md, err: errors.append(err))
    queued = list(acc.get_deque("t", 0))
    assert queued[0].builder.is_built
    acc.abort_undrained_batches(NotLeaderOrFollowerError())
    assert all(b.is_done() for b in queued) and not acc.has_incomplete()
    assert len(errors) == 15 and all(isinstance(e, NotLeaderOrFollowerError) for e in errors)


def test_drain_assigns_producer_state_with_a_transaction_manager() -> None:
    tm = FakeTransactionManager()
    acc, cluster = make(linger_ms=0, transaction_manager=tm), FakeCluster({"t": [1]})
    for _ in range(15):
        append(acc, cluster)
    batches = (
        acc.drain(cluster, [1], 1 << 30, 0)[1] + acc.drain(cluster, [1], 1 << 30, 0)[1]
    )
    assert len(batches) >= 2
    seq = 0
    for batch in batches:
        header = RecordBatch(batch.records()).header
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
            42,
            1,
            seq,
        )
        seq += batch.record_count
    assert tm.in_flight == batches


def test_drain_waits_for_a_producer_id() -> None:
    tm = FakeTransactionManager(pid=ProducerIdAndEpoch(-1, -1))
    acc, cluster = make(linger_ms=0, transaction_manager=tm), FakeCluster({"t": [1]})
    append(acc, cluster)
    assert acc.drain(cluster, [1], 1 << 30, 0) == {1: []}


# -- expiry, retries, ordering --------------------------------------------------------------


def test_expired_batches_are_removed_head_first() -> None:
    acc, cluster = make(delivery_timeout_ms=1000), FakeCluster(CLUSTER)
    append(acc, cluster, partition=0, now=0)
    append(acc, cluster, partition=1, now=500)
    assert acc.expired_batches(999) == []
    assert acc.next_expiry_time_ms() == 1000
    expired = acc.expired_batches(1000)
    assert [b.partition for b in expired] == [0]
    assert expired[0].is_full()  # no more appends
    acc.reset_next_batch_expiry_time()
    assert acc.next_expiry_time_ms() == MAX_DELAY_MS
    assert [b.partition for b in acc.expired_batches(1500)] == [1]


def test_reenqueue_puts_batch_at_head_and_backs_off() -> None:
    acc, cluster = make(linger_ms=0, backoff_ms=100), FakeCluster(CLUSTER)
    append(acc, cluster, now=0)
    [batch] = acc.drain(cluster, [1], 1 << 20, 0)[1]
    append(acc, cluster, now=10)  # a newer batch queues behind
    acc.reenqueue(batch, 50)
    dq = acc.get_deque("t", 0)
    assert dq is not None and dq[0] is batch and batch.attempts == 1
    r = acc.ready(cluster, 100)
    assert r.ready_nodes == set() and r.next_ready_check_delay_ms == 50
    assert acc.drain(cluster, [1], 1 << 20, 100) == {1: []}
    assert acc.ready(cluster, 150).ready_nodes == {1}
    drained = acc.drain(cluster, [1], 1 << 20, 150)[1]
    assert drained[0] is batch


def test_leader_change_skips_retry_backoff() -> None:
    acc, cluster = make(linger_ms=0, backoff_ms=10_000), FakeCluster(CLUSTER)
    cluster.epochs[("t", 0)] = 1
    append(acc, cluster)
    [batch] = acc.drain(cluster, [1], 1 << 20, 0)[1]
    acc.reenqueue(batch, 0)
    assert acc.ready(cluster, 1).ready_nodes == set()
    cluster.epochs[("t", 0)] = 2  # new leader: retry at once (KIP-951)
    assert acc.ready(cluster, 1).ready_nodes == {1}


def test_reenqueue_keeps_sequence_order_with_idempotence() -> None:
    tm = FakeTransactionManager()
    acc, cluster = (
        make(linger_ms=0, batch_size=300, transaction_manager=tm),
        FakeCluster({"t": [1]}),
    )
    for _ in range(6):
        append(acc, cluster)
    batches = acc.drain(cluster, [1], 1 << 30, 0)[1]
    batches += acc.drain(cluster, [1], 1 << 30, 0)[1]
    batches += acc.drain(cluster, [1], 1 << 30, 0)[1]
    assert len(batches) == 3
    append(acc, cluster)  # an unsequenced batch in the queue
    # Responses come back out of order: 2nd, then 1st, then 3rd.
    for batch in (batches[1], batches[0], batches[2]):
        acc.reenqueue(batch, 0)
    dq = acc.get_deque("t", 0)
    assert dq is not None
    assert [b.base_sequence for b in dq] == [b.base_sequence for b in batches] + [
        NO_SEQUENCE
    ]


def test_split_and_reenqueue() -> None:
    # A too-optimistic compression estimate packs far more than batch.size into one batch.
    acc, cluster = (
        make(linger_ms=0, batch_size=1024, compression="gzip"),
        FakeCluster({"t": [1]}),
    )
    acc.compression_ratio_estimator.set_estimation("t", int(Compression.GZIP), 0.05)
    futures = [append(acc, cluster, value=os.urandom(100)).future for _ in range(60)]
    [big] = acc.drain(cluster, [1], 1 << 30, 0)[1]
    assert big.record_count == 60 and len(big.records()) > 3 * 1024
    n = acc.split_and_reenqueue(big)
    acc.deallocate(big)
    assert n >= 4
    assert acc.compression_ratio_estimator.estimation("t", int(Compression.GZIP)) >= 1.0
    offset = 0
    while acc.has_undrained():
        for batch in acc.drain(cluster, [1], 1 << 30, 0)[1]:
            assert batch.is_split_batch and len(batch.records()) <= 1024 + 200
            batch.complete(offset)
            offset += batch.record_count
            acc.deallocate(batch)
    assert [f.get(0).offset for f in futures] == list(range(60))
    assert not acc.has_incomplete()
    assert acc.buffer_pool.available_memory() == 1 << 20


# -- sticky and adaptive partitioning ---------------------------------------------------------


def test_keyless_records_stick_to_one_partition_then_switch() -> None:
    acc, cluster = make(batch_size=1024), FakeCluster({"t": [1, 1, 1, 1]})
    partitioner = acc.built_in_partitioner("t")
    periods: list[Any] = []  # StickyPartitionInfo objects, one per sticky period
    placed: list[tuple[int, int]] = []  # (period index, partition the record went to)
    for _ in range(100):
        before = partitioner.peek_current_partition_info(cluster)
        if not periods or periods[-1] is not before:
            periods.append(before)
        result = append(acc, cluster, partition=UNKNOWN_PARTITION)
        placed.append((len(periods) - 1, result.partition))
    assert len(periods) >= 4
    for index, partition in placed:
        # The append that completes a postponed switch already lands on the new partition.
        allowed = {info.partition for info in periods[index : index + 2]}
        assert partition in allowed
    # Each finished period produced at least batch.size bytes, and (waiting for the batch to
    # fill) less than twice that.
    for info in periods[:-1]:
        assert 1024 <= info.produced_bytes < 2048
    assert (
        sum(b.record_count for p in range(4) for b in (acc.get_deque("t", p) or ()))
        == 100
    )
    # Switching never left a fractional batch behind.
    for p in range(4):
        dq = acc.get_deque("t", p)
        if dq:
            assert all(b.is_full() for b in list(dq)[:-1])


def test_adaptive_stats_built_once_every_partition_has_a_deque() -> None:
    acc, cluster = make(linger_ms=10_000), FakeCluster({"t": [1, 1, 2]})
    append(acc, cluster, partition=0)
    append(acc, cluster, partition=0)
    acc.ready(cluster, 0)
    assert (
        acc.built_in_partitioner("t").load_stats_range_end() is None
    )  # partition 1, 2 unknown yet
    for _ in range(12):
        append(acc, cluster, partition=0)  # two batches on partition 0
    append(acc, cluster, partition=1)
    append(acc, cluster, partition=2)
    acc.ready(cluster, 0)
    # queue sizes 2,1,1 -> weights 1,2,2 -> range end 5
    assert acc.built_in_partitioner("t").load_stats_range_end() == 5


def test_adaptive_disabled_keeps_uniform() -> None:
    acc, cluster = make(enable_adaptive_partitioning=False), FakeCluster({"t": [1, 1]})
    for _ in range(12):
        append(acc, cluster, partition=0)
    append(acc, cluster, partition=1)
    acc.ready(cluster, 0)
    assert acc.built_in_partitioner("t").load_stats_range_end() is None


def test_availability_timeout_drops_slow_nodes_from_the_table() -> None:
    acc, cluster = (
        make(linger_ms=10_000, partition_availability_timeout_ms=100),
        FakeCluster({"t": [1, 2]}),
    )
    append(acc, cluster, partition=0)
    append(acc, cluster, partition=1)
    acc.update_node_latency_stats(2, 0, True)
    acc.update_node_latency_stats(
        2, 500, False
    )  # node 2 had data but could not take it
    acc.update_node_latency_stats(1, 500, True)
    stats = acc.node_latency_stats(2)
    assert stats is not None and stats.ready_time_ms - stats.drain_time_ms == 500
    acc.ready(cluster, 0)
    partitioner = acc.built_in_partitioner("t")
    assert partitioner.load_stats_range_end() == 1  # only partition 0 remains
    assert {partitioner.next_partition(cluster) for _ in range(20)} == {0}


# -- flush and close ------------------------------------------------------------------------


def test_flush_waits_for_incomplete_batches() -> None:
    acc, cluster = make(linger_ms=10_000), FakeCluster(CLUSTER)
    append(acc, cluster)
    acc.begin_flush()
    with pytest.raises(KafkaTimeoutError, match="flush"):
        acc.await_flush_completion(0.01)
    assert not acc.flush_in_progress()
    acc.begin_flush()
    [batch] = acc.drain(cluster, [1], 1 << 20, 0)[1]
    t = threading.Thread(target=lambda: (batch.complete(0), acc.deallocate(batch)))
    t.start()
    acc.await_flush_completion(30)
    t.join(30)
    assert not acc.flush_in_progress() and not acc.has_incomplete()


def test_abort_incomplete_batches_fails_everything_and_frees_memory() -> None:
    acc, cluster = make(), FakeCluster(CLUSTER)
    calls: list[tuple[Any, Any]] = []
    for p in range(4):
        append(
            acc, cluster, partition=p, callback=lambda md, err: calls.append((md, err))
        )
    [in_flight, _] = acc.drain(cluster, [1], 1 << 20, 0)[1]
    acc.close()
    acc.abort_incomplete_batches()
    assert len(calls) == 4 and all(
        md is None and isinstance(err, ProducerClosedError) for md, err in calls
    )
    assert in_flight.is_done()
    assert not acc.has_incomplete() and not acc.has_undrained()
    assert acc.buffer_pool.available_memory() == 1 << 20


def test_abort_undrained_batches_leaves_in_flight_alone() -> None:
    acc, cluster = make(), FakeCluster(CLUSTER)
    append(acc, cluster, partition=0)
    append(acc, cluster, partition=2)
    [sent] = acc.drain(cluster, [1], 1 << 20, 0)[1]
    acc.abort_undrained_batches(NotLeaderOrFollowerError())
    assert not sent.is_done() and acc.incomplete_count() == 1


# -- helpers --------------------------------------------------------------------------------


def test_exponential_backoff() -> None:
    b = ExponentialBackoff(100, 2, 1000, 0.0)
    assert [b.backoff(n) for n in range(6)] == [100, 200, 400, 800, 1000, 1000]
    assert (
        ExponentialBackoff(500, 2, 100, 0.2).backoff(3) == 100
    )  # initial above max: static
    jittered = {ExponentialBackoff(100, 2, 1000, 0.2).backoff(1) for _ in range(50)}
    assert all(160 <= v <= 240 for v in jittered) and len(jittered) > 1


def test_from_config() -> None:
    acc = RecordAccumulator.from_config(
        ProducerConfig(batch_size=0, buffer_memory=5000, compression_type="gzip")
    )
    assert acc.batch_size == 1 and acc.buffer_pool.total_memory == 5000
    assert acc.delivery_timeout_ms == 120000


class FakeTransactionManager:
    """Idempotent-producer bookkeeping, just enough for drain()/reenqueue()."""

    def __init__(self, pid: ProducerIdAndEpoch | None = None) -> None:
        self.pid = ProducerIdAndEpoch(42, 1) if pid is None else pid
        self.sequences: dict[TopicPartition, int] = {}
        self.in_flight: list[ProducerBatch] = []

    def producer_id_and_epoch(self) -> ProducerIdAndEpoch:
        return self.pid

    def is_transactional(self) -> bool:
        return False

    def is_completing(self) -> bool:
        return False

    def is_send_to_partition_allowed(self, tp: TopicPartition) -> bool:
        return True

    def has_inflight_batches(self, tp: TopicPartition) -> bool:
        return any(b.topic_partition == tp for b in self.in_flight)

    def has_stale_producer_id_and_epoch(self, tp: TopicPartition) -> bool:
        return False

    def has_unresolved_sequence(self, tp: TopicPartition) -> bool:
        return False

    def first_in_flight_sequence(self, tp: TopicPartition) -> int:
        return NO_SEQUENCE

    def maybe_update_producer_id_and_epoch(self, tp: TopicPartition) -> None:
        pass

    def sequence_number(self, tp: TopicPartition) -> int:
        return self.sequences.get(tp, 0)

    def increment_sequence_number(self, tp: TopicPartition, increment: int) -> None:
        self.sequences[tp] = self.sequences.get(tp, 0) + increment

    def add_in_flight_batch(self, batch: ProducerBatch) -> None:
        self.in_flight.append(batch)
