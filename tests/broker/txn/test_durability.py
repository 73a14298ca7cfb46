"""The coordinator's state lives in __transaction_state: rebuilt after a crash, PREPARE_*
transactions found at start complete their markers, tombstones forget ids."""

from __future__ import annotations

from samsa.broker.txn import TRANSACTION_STATE_TOPIC, TransactionState
from samsa.broker.txn.log_records import decode_key, decode_value, encode_key, encode_value
from samsa.broker.txn.state import TxnTransit
from tests.broker.txn.conftest import Harness, wait_for
from tests.broker.txn.test_coordinator import completed, markers, ongoing

S = TransactionState


def test_records_round_trip_in_kafkas_layout() -> None:
    key = encode_key("tx")
    # int16 record type 0, then the id as an int16-length string.
    assert key == b"\x00\x00\x00\x02tx" and decode_key(key) == "tx"
    transit = TxnTransit(7, -1, -1, 3, -1, 60_000, S.ONGOING,
                         frozenset({("t", 1), ("t", 0), ("u", 2)}), 100, 200)
    value = encode_value(transit)
    assert value[:2] == b"\x00\x01"  # value version 1 (flexible)
    assert decode_value(value) == transit
    empty = encode_value(TxnTransit(7, -1, -1, 4, -1, 60_000, S.EMPTY, frozenset(), -1, 300))
    assert decode_value(empty).partitions == frozenset()
    assert decode_key(b"\x00\x01\x00\x02tx") is None  # another coordinator's record type


def test_the_topic_is_created_on_first_use_compacted(harness: Harness) -> None:
    c = harness.coordinator({"transaction.state.log.num.partitions": 3})
    assert harness.logs.topic(TRANSACTION_STATE_TOPIC) is None
    c.init_producer_id("tx", 60_000)
    info = harness.logs.topic(TRANSACTION_STATE_TOPIC)
    assert info is not None and info.partitions == 3
    assert info.configs["cleanup.policy"] == "compact"


def test_state_is_rebuilt_after_a_crash(harness: Harness) -> None:
    c = harness.coordinator()
    pid, epoch = ongoing(harness, c, "open")
    done = c.init_producer_id("done", 30_000)
    c.add_partitions("done", done.producer_id, done.producer_epoch, [("t", 1)])
    c.end_transaction("done", done.producer_id, done.producer_epoch, False)
    completed(c, "done")
    c2 = harness.crash_and_restart()
    meta = c2.txns["open"]
    assert (meta.state, meta.producer_id, meta.producer_epoch, meta.partitions) == (
        S.ONGOING, pid, epoch, frozenset({("t", 0), ("t", 1)}))
    assert c2.txns["done"].state == S.COMPLETE_ABORT
    assert c2.txns["done"].timeout_ms == 30_000
    # The producer goes on: a new InitProducerId fences the open transaction.
    assert c2.init_producer_id("open", 60_000).error == 51
    assert completed(c2, "open") == S.COMPLETE_ABORT


def test_a_prepare_commit_found_at_start_completes_its_markers(harness: Harness) -> None:
    c = harness.coordinator()
    pid, epoch = ongoing(harness, c, partitions=(("t", 0), ("t", 1), ("__consumer_offsets", 3)))
    meta = c.txns["tx"]
    # PREPARE_COMMIT written, then the broker died before any marker.
    prepared = TxnTransit(pid, -1, -1, epoch, -1, 60_000, S.PREPARE_COMMIT, meta.partitions,
                          meta.start_timestamp, meta.last_update_timestamp)
    c.store.append("tx", encode_key("tx"), encode_value(prepared))
    c2 = harness.crash_and_restart()
    assert completed(c2, "tx") == S.COMPLETE_COMMIT
    for p in (0, 1):
        assert markers(harness.logs.get_log("t", p)) == [(pid, epoch, "COMMIT")]
    assert harness.groups.completed[-1] == (3, pid, epoch, True, 0)
    # COMPLETE_COMMIT is durable too.
    c3 = harness.crash_and_restart()
    assert c3.txns["tx"].state == S.COMPLETE_COMMIT


def test_expired_ids_get_a_tombstone(harness: Harness) -> None:
    c = harness.coordinator({"transactional.id.expiration.ms": 1,
                             "transaction.remove.expired.transaction.cleanup.interval.ms": 20})
    c.init_producer_id("idle", 60_000)
    wait_for(lambda: "idle" not in c.txns, "the idle id expires")
    c2 = harness.crash_and_restart()
    assert "idle" not in c2.txns
    assert c2.describe("idle").error == 105


def test_an_ongoing_transaction_is_not_expired(harness: Harness) -> None:
    c = harness.coordinator({"transactional.id.expiration.ms": 1})
    ongoing(harness, c)
    assert c.expire_transactional_ids() == 0
    assert "tx" in c.txns


def test_a_timed_out_transaction_is_fenced_and_aborted(harness: Harness) -> None:
    c = harness.coordinator(
        {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 20})
    pid, _ = ongoing(harness, c)
    pid2 = c.init_producer_id("short", 50).producer_id
    assert c.add_partitions("short", pid2, 0, [("t", 1)]) == 0
    assert completed(c, "short") == S.COMPLETE_ABORT
    assert c.txns["short"].producer_epoch == 1  # fenced
    assert markers(harness.logs.get_log("t", 1)) == [(pid2, 1, "ABORT")]
    assert c.add_partitions("short", pid2, 0, [("t", 1)]) == 90
    assert c.txns["tx"].state == S.ONGOING and c.txns["tx"].producer_id == pid
