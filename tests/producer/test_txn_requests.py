"""The transactional TransactionManager without a network: its state machine (Java's
TransactionManager.State) and the error table of each request (Kafka 4.x's handlers): which
answers are retried, send the producer back to the coordinator lookup, are abortable or fatal."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from samsa.errors import (
    CoordinatorNotAvailableError,
    IllegalStateError,
    KafkaTimeoutError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
    TransactionAbortableError,
)
from samsa.net.cluster import TopicPartition
from samsa.producer.transaction_manager import TransactionManager
from samsa.producer.txn_requests import (
    AddPartitionsHandler,
    CoordinatorType,
    EndTxnHandler,
    FindCoordinatorHandler,
    InitProducerIdHandler,
    TxnOffsetCommitHandler,
)
from samsa.producer.txn_state import TransactionalRequestResult, TxnState, is_transition_valid

TP = TopicPartition("t", 0)


def ready_manager() -> TransactionManager:
    tm = TransactionManager(60_000, "tx", retry_backoff_ms=0)
    init = tm.initialize_transactions()
    tm.complete_init_producer_id(1000, 0, is_epoch_bump=False)
    init.done()
    init.wait(0, lambda: "init")  # the caller saw it: the next call may start
    tm.set_coordinator(CoordinatorType.TRANSACTION, 0, "h", 1)
    tm.set_coordinator(CoordinatorType.GROUP, 0, "h", 1)
    tm._queue.clear()
    return tm


def in_transaction(tm: TransactionManager | None = None) -> TransactionManager:
    tm = tm or ready_manager()
    tm.begin_transaction()
    tm.maybe_add_partition(TP)
    return tm


def queued(tm: TransactionManager) -> list[str]:
    return [h.api for _, _, h in sorted(tm._queue)]


def test_transitions_follow_java() -> None:
    S = TxnState
    assert is_transition_valid(S.READY, S.IN_TRANSACTION)
    assert not is_transition_valid(S.UNINITIALIZED, S.IN_TRANSACTION)
    assert is_transition_valid(S.ABORTABLE_ERROR, S.ABORTING_TRANSACTION)
    assert not is_transition_valid(S.ABORTABLE_ERROR, S.COMMITTING_TRANSACTION)
    assert is_transition_valid(S.ABORTING_TRANSACTION, S.INITIALIZING)  # the KIP-360 bump
    assert all(is_transition_valid(s, S.FATAL_ERROR) for s in S)


def test_invalid_calls_name_the_state_and_what_to_call() -> None:
    tm = TransactionManager(60_000, "tx")
    with pytest.raises(IllegalStateError, match=r"begin_transaction\(\).*UNINITIALIZED.*init_transactions\(\) first"):
        tm.begin_transaction()
    tm = ready_manager()
    with pytest.raises(IllegalStateError, match=r"commit_transaction\(\).*READY.*begin_transaction\(\) first"):
        tm.begin_commit()
    assert tm.state is TxnState.READY  # an invalid call changes nothing


def test_a_partition_is_drained_only_once_add_partitions_confirmed_it() -> None:
    tm = in_transaction()
    assert not tm.is_send_to_partition_allowed(TP)
    handler = tm.next_request(has_incomplete_batches=False)
    assert isinstance(handler, AddPartitionsHandler) and handler.partitions == [TP]
    handler.handle(_add_partitions_answer(0), 3)
    assert tm.is_send_to_partition_allowed(TP)
    assert handler.result.is_successful


def test_end_txn_waits_for_incomplete_batches_and_is_skipped_when_nothing_was_added() -> None:
    tm = in_transaction()
    tm.next_request(False).handle(_add_partitions_answer(0), 3)  # type: ignore[union-attr]
    result = tm.begin_commit()
    assert tm.next_request(has_incomplete_batches=True) is None
    end = tm.next_request(has_incomplete_batches=False)
    assert isinstance(end, EndTxnHandler) and end.commit
    end.handle(SimpleNamespace(error_code=0), 4)
    result.wait(0, lambda: "commit")
    assert tm.state is TxnState.READY
    tm.begin_transaction()
    empty = tm.begin_commit()
    assert tm.next_request(False) is None  # no EndTxn at all
    assert empty.is_successful and tm.state is TxnState.READY


def _add_partitions_answer(code: int) -> Any:
    return SimpleNamespace(results_by_topic_v3_and_below=[SimpleNamespace(
        name="t", results_by_partition=[SimpleNamespace(partition_index=0, partition_error_code=code)])])


# (code, outcome): retry = queued again; lookup = FindCoordinator queued first; abortable /
# fatal = the state the producer ends in.
ADD_PARTITIONS = [(51, "retry"), (14, "retry"), (15, "lookup"), (16, "lookup"), (47, "fatal"), (90, "fatal"),
                  (53, "fatal"), (48, "fatal"), (49, "fatal"), (120, "abortable"), (29, "abortable"),
                  (55, "abortable"), (59, "fatal"), (87, "abortable")]
END_TXN = [(51, "retry"), (7, "retry"), (15, "lookup"), (16, "lookup"), (47, "fatal"), (90, "fatal"),
           (48, "fatal"), (49, "fatal"), (120, "abortable"), (87, "fatal")]
INIT_PID = [(51, "retry"), (15, "lookup"), (53, "abortable"), (31, "abortable"), (90, "fatal"), (47, "fatal"),
            (120, "abortable"), (48, "fatal")]
TXN_OFFSET_COMMIT = [(15, "lookup-group"), (7, "lookup-group"), (14, "retry"), (25, "abortable"),
                     (22, "abortable"), (82, "abortable"), (30, "abortable"), (90, "fatal"), (53, "fatal"),
                     (87, "fatal")]


def _outcome(tm: TransactionManager, handler: Any) -> str:
    if tm.state is TxnState.FATAL_ERROR:
        assert handler.result.error is not None
        return "fatal"
    if tm.state is TxnState.ABORTABLE_ERROR:
        assert handler.result.error is not None
        return "abortable"
    names = queued(tm)
    if names and names[0] == "FindCoordinator":
        kind = next(h for _, _, h in tm._queue if isinstance(h, FindCoordinatorHandler)).kind
        return "lookup-group" if kind is CoordinatorType.GROUP else "lookup"
    assert handler in [h for _, _, h in tm._queue], "neither retried nor failed"
    return "retry"


@pytest.mark.parametrize(("code", "outcome"), ADD_PARTITIONS)
def test_add_partitions_error_table(code: int, outcome: str) -> None:
    tm = in_transaction()
    handler = tm.next_request(False)
    assert handler is not None
    handler.handle(_add_partitions_answer(code), 3)
    assert _outcome(tm, handler) == outcome


@pytest.mark.parametrize(("code", "outcome"), END_TXN)
def test_end_txn_commit_error_table(code: int, outcome: str) -> None:
    tm = in_transaction()
    tm.next_request(False).handle(_add_partitions_answer(0), 3)  # type: ignore[union-attr]
    tm.begin_commit()
    handler = tm.next_request(False)
    assert isinstance(handler, EndTxnHandler)
    handler.handle(SimpleNamespace(error_code=code), 4)
    assert _outcome(tm, handler) == outcome


def test_transaction_abortable_on_abort_is_fatal() -> None:
    tm = in_transaction()
    tm.next_request(False).handle(_add_partitions_answer(0), 3)  # type: ignore[union-attr]
    tm.begin_abort()
    handler = tm.next_request(False)
    assert isinstance(handler, EndTxnHandler) and not handler.commit
    handler.handle(SimpleNamespace(error_code=120), 4)
    assert tm.state is TxnState.FATAL_ERROR


@pytest.mark.parametrize(("code", "outcome"), INIT_PID)
def test_init_producer_id_error_table(code: int, outcome: str) -> None:
    tm = TransactionManager(60_000, "tx", retry_backoff_ms=0)
    tm.initialize_transactions()
    tm.set_coordinator(CoordinatorType.TRANSACTION, 0, "h", 1)
    handler = tm.next_request(False)
    assert isinstance(handler, InitProducerIdHandler)
    handler.handle(SimpleNamespace(error_code=code, producer_id=-1, producer_epoch=-1), 4)
    assert _outcome(tm, handler) == outcome


@pytest.mark.parametrize(("code", "outcome"), TXN_OFFSET_COMMIT)
def test_txn_offset_commit_error_table(code: int, outcome: str) -> None:
    tm = in_transaction()
    group = SimpleNamespace(group_id="g", generation_id=-1, member_id="", group_instance_id=None)
    handler = TxnOffsetCommitHandler(tm, TransactionalRequestResult("send_offsets"), {TP: (5, "", -1)}, group)
    body = SimpleNamespace(topics=[SimpleNamespace(name="t", partitions=[
        SimpleNamespace(partition_index=0, error_code=code)])])
    handler.handle(body, 3)
    if outcome.startswith("lookup") or outcome == "retry":
        assert handler in [h for _, _, h in tm._queue]  # the offset is sent again
    assert _outcome(tm, handler) == outcome


def test_unknown_producer_id_bumps_the_epoch_after_the_abort_when_the_coordinator_can() -> None:
    tm = in_transaction()
    tm.coordinator_supports_epoch_bump = True
    tm.next_request(False).handle(_add_partitions_answer(59), 3)  # type: ignore[union-attr]
    assert tm.state is TxnState.ABORTABLE_ERROR
    result = tm.begin_abort()
    # Nothing reached the coordinator (the partition was never added): no EndTxn; the bump
    # goes next, with the current id and epoch.
    bump = tm.next_request(False)
    assert isinstance(bump, InitProducerIdHandler) and bump.is_epoch_bump
    assert (bump.producer_id, bump.epoch) == (1000, 0)
    bump.handle(SimpleNamespace(error_code=0, producer_id=1000, producer_epoch=1), 4)
    assert result.is_successful and tm.state is TxnState.READY
    assert tm.producer_id_and_epoch().epoch == 1


def test_produce_errors_classify_the_transaction() -> None:
    tm = in_transaction()
    tm.maybe_transition_to_error_state(TopicAuthorizationFailedError("t"))
    assert tm.state is TxnState.ABORTABLE_ERROR
    tm = in_transaction()
    tm.maybe_transition_to_error_state(CoordinatorNotAvailableError("gave up"))
    assert isinstance(tm.last_error, TransactionAbortableError)  # retriable after retries: abortable
    tm = in_transaction()
    tm.maybe_transition_to_error_state(ProducerFencedError("fenced"))
    assert tm.state is TxnState.FATAL_ERROR
    with pytest.raises(ProducerFencedError, match="close it"):
        tm.fail_if_not_ready_for_send()


def test_a_timed_out_call_is_resumed_only_by_the_same_call() -> None:
    tm = in_transaction()
    first = tm.begin_commit()
    assert tm.begin_commit() is first  # the retried commit resumes
    with pytest.raises(IllegalStateError, match=r"previous commit_transaction\(\) timed out"):
        tm.begin_abort()
    with pytest.raises(KafkaTimeoutError, match="EndTxn"):
        first.wait(0, lambda: "EndTxn to answer")
    first.done()
    first.wait(0, lambda: "EndTxn to answer")
    # Seen: the pending call is forgotten, and a different call meets only the state check.
    with pytest.raises(IllegalStateError, match="not allowed in transaction state COMMITTING_TRANSACTION"):
        tm.begin_abort()
