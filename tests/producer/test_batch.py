"""ProducerBatch: appends, thunks, exactly-once completion, expiry/retry timing, split, sequences."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa.errors import (
    IllegalStateError,
    NotLeaderOrFollowerError,
    RecordListTooLargeError,
)
from samsa.producer.batch import (
    CompressionRatioEstimator,
    FinalState,
    ProducerBatch,
    TopicPartition,
    estimate_size_upper_bound,
)
from samsa.producer.future import RecordMetadata
from samsa.records.batch import RecordBatch
from samsa.records.batch_header import Compression
from samsa.records.builder import RecordBatchBuilder

TP = TopicPartition("t", 1)


def new_batch(
    limit: int = 16384, created: int = 1000, compression: Compression = Compression.NONE
) -> ProducerBatch:
    return ProducerBatch(
        TP, RecordBatchBuilder(compression=compression, batch_size_limit=limit), created
    )


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, Any]] = []

    def __call__(self, metadata: Any, error: Any) -> None:
        self.calls.append((metadata, error))


def test_append_returns_futures_with_relative_offsets_until_full() -> None:
    batch = new_batch(limit=400)
    futures = []
    while (f := batch.try_append(5000, b"k", b"v" * 50, None, None, 1001)) is not None:
        futures.append(f)
    assert [f.relative_offset for f in futures] == list(range(len(futures)))
    assert 1 < len(futures) < 8
    assert batch.record_count == len(futures)
    assert batch.last_append_ms == 1001
    assert batch.estimated_size_in_bytes() <= 400


def test_is_full_and_closed_for_appends() -> None:
    batch = new_batch(limit=200)
    assert batch.try_append(1, None, b"x" * 10, None, None, 0) is not None
    assert not batch.is_full()
    batch.close_for_record_appends()
    assert batch.is_full()
    assert batch.try_append(1, None, b"x", None, None, 0) is None
    big = new_batch(limit=100)
    assert (
        big.try_append(1, None, b"x" * 200, None, None, 0) is not None
    )  # first record always fits
    assert big.is_full()


def test_complete_fires_callbacks_in_order_then_wakes_futures() -> None:
    batch = new_batch()
    order: list[int] = []
    seen_done: list[bool] = []
    futures = []
    for i in range(3):

        def cb(md: Any, err: Any, i: int = i) -> None:
            order.append(md.offset)
            seen_done.append(futures[i].done())

        futures.append(batch.try_append(100 + i, b"key", b"value", None, cb, 0))
    batch.try_append(200, None, None, None, None, 0)  # no callback
    assert batch.complete(40, -1) is True
    assert order == [40, 41, 42]
    assert seen_done == [
        False,
        False,
        False,
    ]  # callbacks run before the result is marked done
    assert futures[1].get(0) == RecordMetadata("t", 1, 41, 101, 3, 5)
    assert batch.final_state is FinalState.SUCCEEDED and batch.is_done()


def test_failure_gives_each_callback_its_error() -> None:
    batch = new_batch()
    rec = Recorder()
    for _ in range(3):
        batch.try_append(1, None, b"v", None, rec, 0)
    top, specific = NotLeaderOrFollowerError(), ValueError("bad record")
    assert batch.complete_exceptionally(top, {2: specific})
    assert rec.calls == [(None, top), (None, top), (None, specific)]
    assert batch.final_state is FinalState.FAILED


def test_callback_errors_do_not_stop_other_callbacks() -> None:
    batch = new_batch()
    rec = Recorder()
    batch.try_append(1, None, b"v", None, lambda md, err: 1 / 0, 0)
    batch.try_append(1, None, b"v", None, rec, 0)
    batch.complete(0)
    assert len(rec.calls) == 1


def test_completes_exactly_once() -> None:
    batch = new_batch()
    rec = Recorder()
    batch.try_append(1, None, b"v", None, rec, 0)
    assert batch.complete_exceptionally(NotLeaderOrFollowerError())
    assert not batch.complete_exceptionally(
        NotLeaderOrFollowerError()
    )  # FAILED -> FAILED ignored
    assert not batch.complete(5)  # FAILED -> SUCCEEDED ignored
    assert len(rec.calls) == 1
    with pytest.raises(IllegalStateError):
        batch.abort(RuntimeError())

    ok = new_batch()
    ok.try_append(1, None, b"v", None, None, 0)
    ok.complete(1)
    with pytest.raises(IllegalStateError, match="SUCCEEDED"):
        ok.complete_exceptionally(RuntimeError())


def test_abort() -> None:
    batch = new_batch()
    rec = Recorder()
    future = batch.try_append(1, None, b"v", None, rec, 0)
    err = RuntimeError("closed")
    batch.abort(err)
    assert batch.final_state is FinalState.ABORTED
    assert rec.calls == [(None, err)]
    assert future is not None and future.exception() is err


def test_timing_and_retry_bookkeeping() -> None:
    batch = new_batch(created=1000)
    batch.try_append(1, None, b"v", None, None, 1500)
    assert not batch.has_reached_delivery_timeout(1999, 1000)
    assert batch.has_reached_delivery_timeout(2000, 1000)
    assert batch.waited_time_ms(1200) == 200
    assert batch.waited_time_ms(900) == 0
    batch.drained(3000)
    batch.drained(2500)
    assert batch.queue_time_ms() == 2000
    batch.reenqueued(4000)
    assert batch.attempts == 1 and batch.in_retry and batch.last_attempt_ms == 4000
    assert batch.waited_time_ms(4100) == 100


def test_leader_epoch_change_during_retry() -> None:
    batch = new_batch()
    batch.maybe_update_leader_epoch(3)
    assert not batch.has_leader_changed_for_the_ongoing_retry()  # first attempt
    batch.reenqueued(1)
    assert not batch.has_leader_changed_for_the_ongoing_retry()
    batch.maybe_update_leader_epoch(3)  # same epoch: no change
    assert not batch.has_leader_changed_for_the_ongoing_retry()
    batch.maybe_update_leader_epoch(4)
    assert batch.has_leader_changed_for_the_ongoing_retry()
    batch.maybe_update_leader_epoch(None)
    assert batch.current_leader_epoch == 4


def test_producer_state_lands_in_the_built_batch() -> None:
    batch = new_batch()
    for _ in range(4):
        batch.try_append(1, None, b"v", None, None, 0)
    assert not batch.has_sequence()
    batch.set_producer_state(77, 2, 10)
    assert batch.has_sequence() and batch.last_sequence == 13
    data = batch.close()
    header = RecordBatch(data).header
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
        77,
        2,
        10,
    )
    assert batch.is_closed
    batch.reset_producer_state(77, 3, 0)
    assert batch.sequence_has_been_reset()
    assert RecordBatch(batch.records()).header.producer_epoch == 3


def test_split_chains_futures_and_carries_sequences() -> None:
    batch = new_batch(limit=10_000)
    rec = Recorder()
    futures = [
        batch.try_append(100 + i, b"k%d" % i, b"v" * 100, [("h", b"x")], rec, 0)
        for i in range(20)
    ]
    batch.set_producer_state(5, 0, 40)
    batch.close()
    parts = batch.split(600)
    assert len(parts) > 3
    assert sum(p.record_count for p in parts) == 20
    assert all(p.is_split_batch and p.created_ms == batch.created_ms for p in parts)
    # Sequences continue across the new batches.
    seqs = [p.base_sequence for p in parts]
    assert seqs[0] == 40 and all(
        b - a == p.record_count for a, b, p in zip(seqs, seqs[1:], parts)
    )
    # The old result completed with an error the users never see.
    assert isinstance(batch.result.error, RecordListTooLargeError)
    assert not any(f.done() for f in futures)  # type: ignore[union-attr]
    offset = 1000
    for p in parts:
        records = RecordBatch(p.close()).records()
        assert all(r.headers == [("h", b"x")] for r in records)
        p.complete(offset)
        offset += p.record_count
    assert [f.get(0).offset for f in futures] == list(range(1000, 1020))  # type: ignore[union-attr]
    assert [f.get(0).timestamp for f in futures] == list(range(100, 120))  # type: ignore[union-attr]
    assert [md.offset for md, _ in rec.calls] == list(range(1000, 1020))


def test_only_records_with_callbacks_keep_a_thunk_and_split_moves_them() -> None:
    batch = new_batch(limit=10_000)
    rec = Recorder()
    # Every third record has a callback; the others' futures are held by nobody but us.
    futures = [
        batch.try_append(100 + i, None, b"v" * 100, None, rec if i % 3 == 0 else None, 0)
        for i in range(12)
    ]
    assert [f.relative_offset for _, f in batch.thunks] == [0, 3, 6, 9]  # type: ignore[union-attr]
    batch.close()
    parts = batch.split(600)
    assert len(parts) > 1 and sum(len(p.thunks) for p in parts) == 4
    # The first part succeeds, the second fails one record, the rest succeed.
    offset = 500
    for n, p in enumerate(parts):
        if n == 1:
            p.complete_exceptionally(RecordListTooLargeError("batch"), {0: ValueError("record 0 of part 1")})
        else:
            p.complete(offset)
        offset += p.record_count
    outcomes = [f.exception(0) for f in futures]  # type: ignore[union-attr]
    assert [type(e).__name__ if e else None for e in outcomes].count("ValueError") == 1
    called = {(md.offset if md else None, type(err).__name__ if err else None) for md, err in rec.calls}
    assert len(rec.calls) == 4
    for i in (0, 3, 6, 9):
        f = futures[i]
        err = f.exception(0)  # type: ignore[union-attr]
        expected = (None, type(err).__name__) if err else (f.get(0).offset, None)  # type: ignore[union-attr]
        assert expected in called


@given(
    st.one_of(st.none(), st.binary(max_size=300)),
    st.one_of(st.none(), st.binary(max_size=3000)),
    st.lists(
        st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=20))),
        max_size=3,
    ),
)
def test_size_upper_bound_covers_a_one_record_batch(
    key: bytes | None, value: bytes | None, headers: list
) -> None:
    builder = RecordBatchBuilder(batch_size_limit=1)
    builder.append(2**40, key, value, headers)
    assert len(builder.build()) <= estimate_size_upper_bound(key, value, headers)


def test_compression_ratio_estimator() -> None:
    est = CompressionRatioEstimator()
    assert est.estimation("t", 1) == 1.0
    assert est.update("t", 1, 0.5) == pytest.approx(0.995)  # improves slowly
    assert est.update("t", 1, 2.0) == 2.0  # deteriorates at once
    est.set_estimation("t", 1, 1.2)
    assert est.estimation("t", 1) == 1.2
    batch = ProducerBatch(
        TP, RecordBatchBuilder(compression=Compression.GZIP, batch_size_limit=10_000), 0
    )
    for _ in range(50):
        batch.try_append(1, None, b"a" * 50, None, None, 0)
    est2 = CompressionRatioEstimator()
    batch.close(est2)
    assert est2.estimation("t", int(Compression.GZIP)) < 1.0
