"""The transaction coordinator's state machine (Kafka's TransactionCoordinator): InitProducerId,
AddPartitionsToTxn and its verification, EndTxn's table, markers, Describe/ListTransactions."""

from __future__ import annotations

from typing import Any

import pytest

from samsa.broker.log import Log
from samsa.broker.txn import TransactionCoordinator, TransactionState
from samsa.records import iter_batches, parse_control_record
from tests.broker.txn.conftest import Harness, wait_for

NONE = 0
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
INVALID_REQUEST = 42
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105
TRANSACTION_ABORTABLE = 120


def markers(plog: Log) -> list[tuple[int, int, str]]:
    """(producer id, epoch, COMMIT/ABORT) of every control batch in the log."""
    data = plog.read(plog.log_start_offset, 1 << 20).records
    raw = data.read() if hasattr(data, "read") else bytes(data)  # type: ignore[union-attr]
    found = []
    for batch in iter_batches(raw):
        if batch.is_control:
            record = next(iter(batch))
            marker = parse_control_record(record.key, record.value)
            found.append((batch.producer_id, batch.producer_epoch,
                          "COMMIT" if marker.is_commit else "ABORT"))
    return found


def state_of(coordinator: TransactionCoordinator, txn_id: str) -> TransactionState:
    return coordinator.txns[txn_id].state


def ongoing(harness: Harness, coordinator: TransactionCoordinator, txn_id: str = "tx",
            partitions: tuple[tuple[str, int], ...] = (("t", 0), ("t", 1))) -> tuple[int, int]:
    """An id with an ONGOING transaction over ``partitions``; its (producer id, epoch)."""
    if harness.logs.topic("t") is None:
        harness.logs.create_topic("t", 2)
    init = coordinator.init_producer_id(txn_id, 60_000)
    assert init.error == NONE
    assert coordinator.add_partitions(txn_id, init.producer_id, init.producer_epoch,
                                      partitions) == NONE
    return init.producer_id, init.producer_epoch


def completed(coordinator: TransactionCoordinator, txn_id: str) -> TransactionState:
    return wait_for(lambda: coordinator.txns[txn_id].pending_state is None
                    and coordinator.txns[txn_id].state in (TransactionState.COMPLETE_COMMIT,
                                                           TransactionState.COMPLETE_ABORT)
                    and coordinator.txns[txn_id].state, f"{txn_id} completes")


# -- InitProducerId -------------------------------------------------------------------------------


def test_init_producer_id_gives_a_new_id_epoch_0_then_bumps(harness: Harness) -> None:
    c = harness.coordinator()
    first = c.init_producer_id("tx", 60_000)
    assert (first.error, first.producer_epoch) == (NONE, 0) and first.producer_id >= 0
    second = c.init_producer_id("tx", 60_000)
    assert (second.error, second.producer_id, second.producer_epoch) == (
        NONE, first.producer_id, 1)
    assert c.init_producer_id("other", 60_000).producer_id != first.producer_id


def test_init_producer_id_kip360_checks(harness: Harness) -> None:
    c = harness.coordinator()
    pid = c.init_producer_id("tx", 60_000).producer_id  # epoch 0
    bumped = c.init_producer_id("tx", 60_000, pid, 0)
    assert (bumped.error, bumped.producer_epoch) == (NONE, 1)
    # The same request again (its answer lost): the last epoch matches, nothing changes.
    retry = c.init_producer_id("tx", 60_000, pid, 0)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (NONE, pid, 1)
    assert c.init_producer_id("tx", 60_000, pid + 1000, 1).error == PRODUCER_FENCED
    assert c.init_producer_id("tx", 60_000, pid, 7).error == PRODUCER_FENCED


@pytest.mark.parametrize("timeout_ms", [0, -1, 900_001])
def test_init_producer_id_refuses_timeouts_out_of_range(harness: Harness, timeout_ms: int) -> None:
    c = harness.coordinator()
    assert c.init_producer_id("tx", timeout_ms).error == INVALID_TRANSACTION_TIMEOUT
    assert c.init_producer_id("tx", 900_000).error == NONE


def test_init_producer_id_refuses_an_empty_id(harness: Harness) -> None:
    assert harness.coordinator().init_producer_id("", 1000).error == INVALID_REQUEST


def test_init_producer_id_at_an_exhausted_epoch_rotates_the_producer_id(harness: Harness) -> None:
    c = harness.coordinator()
    pid = c.init_producer_id("tx", 60_000).producer_id
    c.txns["tx"].producer_epoch = 32766
    rotated = c.init_producer_id("tx", 60_000)
    assert rotated.error == NONE and rotated.producer_id != pid and rotated.producer_epoch == 0
    assert c.txns["tx"].prev_producer_id == pid


def test_init_producer_id_fences_and_aborts_an_ongoing_transaction(harness: Harness) -> None:
    c = harness.coordinator()
    pid, epoch = ongoing(harness, c)
    assert c.init_producer_id("tx", 60_000).error == CONCURRENT_TRANSACTIONS
    assert completed(c, "tx") == TransactionState.COMPLETE_ABORT
    for p in (0, 1):
        assert markers(harness.logs.get_log("t", p)) == [(pid, epoch + 1, "ABORT")]
    # The fenced producer is refused; the retry bumps once more.
    assert c.add_partitions("tx", pid, epoch, [("t", 0)]) == PRODUCER_FENCED
    again = c.init_producer_id("tx", 60_000)
    assert (again.error, again.producer_id, again.producer_epoch) == (NONE, pid, epoch + 2)


# -- AddPartitionsToTxn and its verification -------------------------------------------------------


def test_add_partitions_errors(harness: Harness) -> None:
    c = harness.coordinator()
    assert c.add_partitions("nobody", 1, 0, [("t", 0)]) == INVALID_PRODUCER_ID_MAPPING
    pid, epoch = ongoing(harness, c, partitions=(("t", 0),))
    assert c.add_partitions("tx", pid + 1, epoch, [("t", 1)]) == INVALID_PRODUCER_ID_MAPPING
    assert c.add_partitions("tx", pid, epoch + 1, [("t", 1)]) == PRODUCER_FENCED
    assert c.add_partitions("tx", pid, epoch, [("t", 0)]) == NONE  # already in: no write
    assert c.add_partitions("tx", pid, epoch, [("t", 1)]) == NONE
    assert c.txns["tx"].partitions == {("t", 0), ("t", 1)}
    c.txns["tx"].state = TransactionState.PREPARE_COMMIT  # as while markers are written
    assert c.add_partitions("tx", pid, epoch, [("t", 1)]) == CONCURRENT_TRANSACTIONS
    c.txns["tx"].state = TransactionState.ONGOING
    c.txns["tx"].pending_state = TransactionState.PREPARE_ABORT  # a write in flight
    assert c.add_partitions("tx", pid, epoch, [("t", 1)]) == CONCURRENT_TRANSACTIONS
    c.txns["tx"].pending_state = None


def test_the_transaction_starts_with_its_first_partition(harness: Harness) -> None:
    clock = [1_000]
    c = harness.coordinator(clock=lambda: clock[0])
    init = c.init_producer_id("tx", 60_000)
    assert c.txns["tx"].start_timestamp == -1
    clock[0] = 5_000
    c.add_partitions("tx", init.producer_id, init.producer_epoch, [("t", 0)])
    clock[0] = 9_000
    c.add_partitions("tx", init.producer_id, init.producer_epoch, [("t", 1)])
    assert c.txns["tx"].start_timestamp == 5_000
    assert c.txns["tx"].last_update_timestamp == 9_000


def test_verify_partition(harness: Harness) -> None:
    c = harness.coordinator()
    assert c.verify_partition("nobody", 1, 0, "t", 0) == INVALID_PRODUCER_ID_MAPPING
    pid, epoch = ongoing(harness, c, partitions=(("t", 0),))
    assert c.verify_partition("tx", pid, epoch, "t", 0) == NONE
    assert c.verify_partition("tx", pid, epoch, "t", 1) == TRANSACTION_ABORTABLE
    assert c.verify_partition("tx", pid + 1, epoch, "t", 0) == INVALID_PRODUCER_ID_MAPPING
    assert c.verify_partition("tx", pid, epoch - 1, "t", 0) == PRODUCER_FENCED
    c.txns["tx"].state = TransactionState.PREPARE_ABORT
    assert c.verify_partition("tx", pid, epoch, "t", 0) == CONCURRENT_TRANSACTIONS


# -- EndTxn ------------------------------------------------------------------------------------------

S = TransactionState


@pytest.mark.parametrize(("state", "commit", "expected"), [
    (S.PREPARE_COMMIT, True, CONCURRENT_TRANSACTIONS),
    (S.PREPARE_COMMIT, False, INVALID_TXN_STATE),
    (S.PREPARE_ABORT, True, INVALID_TXN_STATE),
    (S.PREPARE_ABORT, False, CONCURRENT_TRANSACTIONS),
    (S.COMPLETE_COMMIT, True, NONE),
    (S.COMPLETE_COMMIT, False, INVALID_TXN_STATE),
    (S.COMPLETE_ABORT, True, INVALID_TXN_STATE),
    (S.COMPLETE_ABORT, False, NONE),
    (S.EMPTY, True, INVALID_TXN_STATE),
    (S.EMPTY, False, INVALID_TXN_STATE),
])
def test_end_txn_table(harness: Harness, state: TransactionState, commit: bool,
                       expected: int) -> None:
    c = harness.coordinator()
    init = c.init_producer_id("tx", 60_000)
    c.txns["tx"].state = state
    result = c.end_transaction("tx", init.producer_id, init.producer_epoch, commit)
    assert result.error == expected
    assert c.txns["tx"].state == state  # nothing written


def test_end_txn_identity_checks(harness: Harness) -> None:
    c = harness.coordinator()
    assert c.end_transaction("", 1, 0, True).error == INVALID_REQUEST
    assert c.end_transaction("nobody", 1, 0, True).error == INVALID_PRODUCER_ID_MAPPING
    pid, epoch = ongoing(harness, c)
    assert c.end_transaction("tx", pid + 1, epoch, True).error == INVALID_PRODUCER_ID_MAPPING
    assert c.end_transaction("tx", pid, epoch + 1, True).error == PRODUCER_FENCED
    c.txns["tx"].pending_state = TransactionState.PREPARE_ABORT
    assert c.end_transaction("tx", pid, epoch, True).error == CONCURRENT_TRANSACTIONS


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_writes_a_marker_in_every_partition_then_completes(harness: Harness,
                                                                   commit: bool) -> None:
    c = harness.coordinator()
    pid, epoch = ongoing(harness, c, partitions=(("t", 0), ("t", 1), ("__consumer_offsets", 7)))
    assert c.end_transaction("tx", pid, epoch, commit).error == NONE
    expected = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
    assert completed(c, "tx") == expected
    kind = "COMMIT" if commit else "ABORT"
    for p in (0, 1):
        assert markers(harness.logs.get_log("t", p)) == [(pid, epoch, kind)]
    assert harness.groups.completed == [(7, pid, epoch, commit, 0)]
    assert {("t", 0), ("t", 1)} <= set(harness.woken)
    assert c.txns["tx"].partitions == frozenset()
    # A retry of the same EndTxn is answered NONE; the next transaction starts afresh.
    assert c.end_transaction("tx", pid, epoch, commit).error == NONE
    assert c.add_partitions("tx", pid, epoch, [("t", 0)]) == NONE
    assert state_of(c, "tx") == S.ONGOING


def test_partitions_of_a_deleted_topic_are_dropped(harness: Harness) -> None:
    c = harness.coordinator()
    harness.logs.create_topic("gone", 1)
    pid, epoch = ongoing(harness, c, partitions=(("t", 0), ("gone", 0)))
    harness.logs.delete_topic("gone")
    assert c.end_transaction("tx", pid, epoch, True).error == NONE
    assert completed(c, "tx") == S.COMPLETE_COMMIT
    assert markers(harness.logs.get_log("t", 0)) == [(pid, epoch, "COMMIT")]


def test_end_txn_v5_bumps_the_epoch_per_transaction(harness: Harness) -> None:
    c = harness.coordinator()
    pid, epoch = ongoing(harness, c)
    result = c.end_transaction("tx", pid, epoch, True, client_tv2=True)
    assert (result.error, result.producer_id, result.producer_epoch) == (NONE, pid, epoch + 1)
    completed(c, "tx")
    assert markers(harness.logs.get_log("t", 0)) == [(pid, epoch + 1, "COMMIT")]
    # A retry with the old epoch is answered with the current id and epoch.
    retry = c.end_transaction("tx", pid, epoch, True, client_tv2=True)
    assert (retry.error, retry.producer_epoch) == (NONE, epoch + 1)
    # An abort with nothing added bumps again, without markers.
    empty_abort = c.end_transaction("tx", pid, epoch + 1, False, client_tv2=True)
    assert (empty_abort.error, empty_abort.producer_epoch) == (NONE, epoch + 2)
    assert completed(c, "tx") == S.COMPLETE_ABORT


# -- Describe / List ---------------------------------------------------------------------------------


def test_describe_transactions(harness: Harness) -> None:
    c = harness.coordinator()
    pid, epoch = ongoing(harness, c)
    d = c.describe("tx")
    assert (d.error, d.state, d.producer_id, d.producer_epoch, d.timeout_ms) == (
        NONE, "Ongoing", pid, epoch, 60_000)
    assert d.partitions == {("t", 0), ("t", 1)} and d.start_time_ms > 0
    assert c.describe("nobody").error == TRANSACTIONAL_ID_NOT_FOUND
    assert c.describe("").error == INVALID_REQUEST


def test_list_transactions_filters(harness: Harness) -> None:
    clock = [10_000]
    c = harness.coordinator(clock=lambda: clock[0])
    pid, _ = ongoing(harness, c, "a")
    other = c.init_producer_id("b", 60_000).producer_id

    def ids(**kwargs: Any) -> list[str]:
        return sorted(t.transactional_id for t in c.list_transactions(**kwargs)[0])

    assert ids() == ["a", "b"]
    assert ids(states=["Ongoing"]) == ["a"]
    assert ids(states=["Empty", "Ongoing"]) == ["a", "b"]
    assert ids(producer_ids=[other]) == ["b"]
    assert ids(producer_ids=[pid], states=["Empty"]) == []
    clock[0] = 15_000
    assert ids(states=["Ongoing"], duration_ms=4_000) == ["a"]
    assert ids(states=["Ongoing"], duration_ms=6_000) == []
    listed, unknown = c.list_transactions(states=["Ongoing", "Bogus"])
    assert unknown == ["Bogus"] and [t.state for t in listed] == ["Ongoing"]
