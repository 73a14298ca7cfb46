"""Transactional offsets in the group coordinator: TxnOffsetCommit's pending offsets, the
markers that complete them (``complete_transaction``), their replay after a restart or a crash,
and deletion (Kafka's OffsetMetadataManager: pendingTransactionalOffsets,
replayEndTransactionMarker)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from samsa.broker.group import GroupCoordinator, PartitionCommit
from samsa.broker.group.offsets import OffsetAndMetadata
from samsa.broker.group.store import GROUP_METADATA_TOPIC, StoredMarker, StoredRecord
from samsa.broker.group.txn_offsets import PendingOffset, PendingTxnOffsets
from samsa.broker.log import LogManager
from samsa.records import iter_batches

from .conftest import Harness

ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
INVALID_PRODUCER_EPOCH = 47
INVALID_GROUP_ID = 24
FENCED_INSTANCE_ID = 82
PID, EPOCH = 1000, 0


def commit(partition: int, offset: int, metadata: str = "", topic: str = "t") -> PartitionCommit:
    return PartitionCommit(topic, partition, offset, -1, metadata)


def txn_commit(c: GroupCoordinator, group: str, *commits: PartitionCommit, pid: int = PID,
               epoch: int = EPOCH, generation: int = -1, member: str = "",
               instance: str | None = None) -> list[int]:
    return c.commit_transactional_offsets(group, pid, epoch, generation, member, instance,
                                          list(commits))


def committed(c: GroupCoordinator, group: str, partition: int, topic: str = "t") -> int | None:
    found = c.fetch_offsets(group, [(topic, partition)])[1][(topic, partition)]
    return None if found is None else found.offset


def pending(c: GroupCoordinator, group: str) -> frozenset[tuple[str, int]]:
    return c.fetch_offsets_and_pending(group, None)[2] | \
        c.fetch_offsets_and_pending(group, [("t", p) for p in range(4)])[2]


@pytest.fixture
def h(harness: Harness) -> Harness:
    harness.logs.create_topic("t", 4)
    return harness


def crash_and_restart(h: Harness) -> GroupCoordinator:
    """Abandon every log as a SIGKILL would (no clean close, no producer-state snapshot, no
    checkpoint) and start a coordinator over the reopened data directory."""
    h.coordinator.close()
    for plog in h.logs.logs().values():
        plog.abandon()
    h.logs._closed = True  # what close() would do, minus flushing and checkpoints
    os.close(h.logs._lock_fd)
    h.logs = LogManager(h.data_dir)
    h.coordinator = GroupCoordinator(h.logs, h.config)
    return h.coordinator


# -- the pending set ------------------------------------------------------------------------------


def test_pending_set_take_discard_and_open_partitions() -> None:
    p = PendingTxnOffsets()
    o = OffsetAndMetadata(5, -1, "", 0)
    p.add(1, 7, "g", ("t", 0), PendingOffset(o, 10))
    p.add(1, 7, "g", ("t", 0), PendingOffset(o, 12))  # same txn, same partition: replaced
    p.add(1, 7, "h", ("t", 1), PendingOffset(o, 13))
    p.add(2, 7, "g", ("t", 2), PendingOffset(o, 14))  # same producer, other partition
    p.add(1, 8, "g", ("t", 0), PendingOffset(o, 15))  # another producer
    assert len(p) == 4
    assert p.pending_partitions("g") == {("t", 0), ("t", 2)}
    assert (p.has_open(1), p.has_open(2), p.has_open(3)) == (True, True, False)
    taken = p.take(1, 7)
    assert {k: v.record_offset for k, v in taken.items()} == {("g", "t", 0): 12, ("h", "t", 1): 13}
    assert p.pending_partitions("g") == {("t", 0), ("t", 2)}  # producer 8's and partition 2's
    assert p.pending_partitions("h") == frozenset()
    p.discard("g", [("t", 0)])
    assert p.pending_partitions("g") == {("t", 2)} and not p.has_open(1)
    p.discard("g")
    assert len(p) == 0 and p.groups() == set() and p.take(2, 7) == {}


# -- pending until the marker --------------------------------------------------------------------


def test_txn_offsets_are_pending_until_commit_marker(h: Harness) -> None:
    c = h.coordinator
    assert c.commit_offsets("g", -1, "", None, [commit(0, 3)]) == [0]
    assert txn_commit(c, "g", commit(0, 10, "m"), commit(1, 20)) == [0, 0]
    # Invisible to a fetch; seen as pending by require_stable.
    assert (committed(c, "g", 0), committed(c, "g", 1)) == (3, None)
    assert pending(c, "g") == {("t", 0), ("t", 1)}
    assert c.fetch_offsets_and_pending("g", None)[2] == {("t", 0)}  # only committed ones listed
    c.complete_transaction(c.partition_for("g"), PID, EPOCH, True, 0)
    assert (committed(c, "g", 0), committed(c, "g", 1)) == (10, 20)
    assert c.fetch_offsets("g", [("t", 0)])[1][("t", 0)].metadata == "m"  # type: ignore[union-attr]
    assert pending(c, "g") == frozenset()


def test_abort_marker_drops_the_pending_offsets(h: Harness) -> None:
    c = h.coordinator
    assert c.commit_offsets("g", -1, "", None, [commit(0, 3)]) == [0]
    assert txn_commit(c, "g", commit(0, 10), commit(1, 20)) == [0, 0]
    c.complete_transaction(c.partition_for("g"), PID, EPOCH, False, 0)
    assert (committed(c, "g", 0), committed(c, "g", 1)) == (3, None)
    assert pending(c, "g") == frozenset()


def test_markers_are_written_to_the_groups_partition(h: Harness) -> None:
    c = h.coordinator
    partition = c.partition_for("g")
    assert txn_commit(c, "g", commit(0, 10)) == [0]
    c.complete_transaction(partition, PID, EPOCH, True, 4)
    plog = h.logs.get_log(GROUP_METADATA_TOPIC, partition)
    batches = list(iter_batches(plog.read(0, 1 << 20).records.read()))
    data, marker = batches
    assert (data.is_transactional, data.is_control, data.producer_id, data.producer_epoch) == \
        (True, False, PID, EPOCH)
    assert (marker.is_control, marker.producer_id, marker.control_marker()) == \
        (True, PID, (1, 0, 4))
    assert not plog.has_open_transaction(PID)


def test_a_later_plain_commit_wins_over_the_committed_transaction(h: Harness) -> None:
    c = h.coordinator
    assert txn_commit(c, "g", commit(0, 10), commit(1, 20)) == [0, 0]
    # A consumer's plain commit is accepted while the offset is pending, and is written after.
    assert c.commit_offsets("g", -1, "", None, [commit(0, 5)]) == [0]
    c.complete_transaction(c.partition_for("g"), PID, EPOCH, True, 0)
    assert (committed(c, "g", 0), committed(c, "g", 1)) == (5, 20)
    # The same after a replay.
    c = h.restart()
    assert (committed(c, "g", 0), committed(c, "g", 1)) == (5, 20)


def test_each_producer_completes_only_its_own_offsets(h: Harness) -> None:
    c = h.coordinator
    assert txn_commit(c, "g", commit(0, 10), pid=1) == [0]
    assert txn_commit(c, "g", commit(1, 20), pid=2) == [0]
    c.complete_transaction(c.partition_for("g"), 2, EPOCH, True, 0)
    assert (committed(c, "g", 0), committed(c, "g", 1)) == (None, 20)
    assert pending(c, "g") == {("t", 0)}
    c.complete_transaction(c.partition_for("g"), 1, EPOCH, False, 0)
    assert pending(c, "g") == frozenset() and committed(c, "g", 0) is None


def test_a_fenced_producer_epoch_is_refused_by_the_log(h: Harness) -> None:
    c = h.coordinator
    assert txn_commit(c, "g", commit(0, 10), epoch=0) == [0]
    c.complete_transaction(c.partition_for("g"), PID, 1, False, 0)  # fenced: aborted at epoch 1
    assert txn_commit(c, "g", commit(0, 11), epoch=0) == [INVALID_PRODUCER_EPOCH]
    assert pending(c, "g") == frozenset()
    # The new epoch's transactions go on, batch after batch.
    for offset in (12, 13, 14):
        assert txn_commit(c, "g", commit(0, offset), commit(1, offset), epoch=1) == [0, 0]
    c.complete_transaction(c.partition_for("g"), PID, 1, True, 0)
    assert (committed(c, "g", 0), committed(c, "g", 1)) == (14, 14)


# -- group validation (ClassicGroup.validateOffsetCommit, transactional) --------------------------


def test_group_validation_of_transactional_commits(h: Harness) -> None:
    c = h.coordinator
    assert txn_commit(c, "", commit(0, 1)) == [INVALID_GROUP_ID]
    assert txn_commit(c, "nope", commit(0, 1), generation=3, member="m") == [ILLEGAL_GENERATION]
    assert "nope" not in c.groups
    (member,) = h.stable_group("g", members=1)
    gen, mid = member.generation_id, member.member_id
    # No generation and no member: accepted even by an active group (TxnOffsetCommit v0-2).
    assert txn_commit(c, "g", commit(0, 1)) == [0]
    assert txn_commit(c, "g", commit(0, 2), generation=gen, member=mid) == [0]
    assert txn_commit(c, "g", commit(0, 3), generation=gen + 1, member=mid) == \
        [ILLEGAL_GENERATION]
    assert txn_commit(c, "g", commit(0, 4), generation=gen, member="other") == [UNKNOWN_MEMBER_ID]
    assert txn_commit(c, "g", commit(0, 5), generation=gen, member=mid, instance="i") == \
        [UNKNOWN_MEMBER_ID]
    # Metadata too long fails only its partition.
    c.settings["offset.metadata.max.bytes"] = 3
    assert txn_commit(c, "g", commit(0, 6, "long"), commit(1, 6, "ok")) == [12, 0]


def test_a_simple_group_is_created_by_a_transactional_commit(h: Harness) -> None:
    c = h.coordinator
    assert txn_commit(c, "solo", commit(0, 1)) == [0]
    assert "solo" in c.groups
    c = h.restart()
    assert pending(c, "solo") == {("t", 0)}


# -- replay ---------------------------------------------------------------------------------------


def _three_transactions(c: GroupCoordinator) -> None:
    """Producer 1 commits, 2 aborts, 3 stays open; each wrote partition 0..2 of group g."""
    part = c.partition_for("g")
    assert c.commit_offsets("g", -1, "", None, [commit(p, 1) for p in range(4)]) == [0] * 4
    assert txn_commit(c, "g", commit(0, 10), pid=1) == [0]
    assert txn_commit(c, "g", commit(1, 20), pid=2) == [0]
    assert txn_commit(c, "g", commit(2, 30), pid=3) == [0]
    assert txn_commit(c, "g", commit(3, 40), pid=1) == [0]
    c.complete_transaction(part, 1, EPOCH, True, 0)
    c.complete_transaction(part, 2, EPOCH, False, 0)


@pytest.mark.parametrize("crash", [False, True], ids=["restart", "crash"])
def test_replay_commits_aborts_and_keeps_open_transactions_pending(h: Harness,
                                                                   crash: bool) -> None:
    _three_transactions(h.coordinator)
    c = crash_and_restart(h) if crash else h.restart()
    assert [committed(c, "g", p) for p in range(4)] == [10, 1, 1, 40]
    assert pending(c, "g") == {("t", 2)}
    # The coordinator completes the open transaction after the restart.
    c.complete_transaction(c.partition_for("g"), 3, EPOCH, True, 0)
    assert [committed(c, "g", p) for p in range(4)] == [10, 1, 30, 40]
    c = crash_and_restart(h) if crash else h.restart()
    assert [committed(c, "g", p) for p in range(4)] == [10, 1, 30, 40]
    assert pending(c, "g") == frozenset()


def test_store_load_yields_records_and_markers_in_log_order(h: Harness) -> None:
    c = h.coordinator
    part = c.partition_for("g")
    assert c.commit_offsets("g", -1, "", None, [commit(0, 1)]) == [0]
    assert txn_commit(c, "g", commit(1, 2)) == [0]
    c.complete_transaction(part, PID, EPOCH, False, 0)
    items: list[Any] = list(c.store.load())
    assert [type(i) for i in items] == [StoredRecord, StoredRecord, StoredMarker]
    assert [(i.partition, i.offset) for i in items] == [(part, 0), (part, 1), (part, 2)]
    assert (items[0].producer_id, items[1].producer_id) == (-1, PID)
    assert (items[2].producer_id, items[2].commit) == (PID, False)


def test_the_cleaner_stops_at_an_open_transaction_of_the_offsets_topic(h: Harness) -> None:
    c = h.coordinator
    part = c.partition_for("g")
    for i in range(20):
        assert c.commit_offsets("g", -1, "", None, [commit(0, i)]) == [0]
    assert txn_commit(c, "g", commit(1, 99)) == [0]
    plog = h.logs.get_log(GROUP_METADATA_TOPIC, part)
    plog.roll()
    assert c.commit_offsets("g", -1, "", None, [commit(0, 20)]) == [0]
    # Below the LSO (the open transaction's first offset) only: its record stays pending.
    found = h.logs.cleaner.dirtiness((GROUP_METADATA_TOPIC, part), plog)
    assert found.first_uncleanable == plog.last_stable_offset == 20
    cleaner = h.logs.cleaner.new_cleaner()
    cleaner.clean(plog, 0, found.first_uncleanable, found_now())
    offsets = [item.offset for item in c.store.load() if item.partition == part]
    assert offsets == [19, 20, 21]  # superseded commits gone; the transaction's record kept
    c = h.restart()
    assert pending(c, "g") == frozenset({("t", 1)})
    c.complete_transaction(part, PID, EPOCH, True, 0)
    c = h.restart()
    assert (committed(c, "g", 0), committed(c, "g", 1)) == (20, 99)


def found_now() -> int:
    import time

    return time.time_ns() // 1_000_000


# -- deletion -------------------------------------------------------------------------------------


def test_deleting_a_group_drops_its_pending_offsets(h: Harness) -> None:
    c = h.coordinator
    assert txn_commit(c, "g", commit(0, 10)) == [0]
    assert c.delete_groups(["g"]) == [0]
    assert pending(c, "g") == frozenset()
    c.complete_transaction(c.partition_for("g"), PID, EPOCH, True, 0)
    assert committed(c, "g", 0) is None
    c = h.restart()
    assert committed(c, "g", 0) is None and "g" not in c.groups


def test_offset_delete_drops_pending_offsets_of_its_partitions(h: Harness) -> None:
    c = h.coordinator
    assert c.commit_offsets("g", -1, "", None, [commit(2, 1)]) == [0]
    assert txn_commit(c, "g", commit(0, 10), commit(1, 11)) == [0, 0]
    assert c.delete_offsets("g", [("t", 0)]) == (0, {("t", 0): 0})
    assert pending(c, "g") == {("t", 1)}
    c.complete_transaction(c.partition_for("g"), PID, EPOCH, True, 0)
    assert [committed(c, "g", p) for p in range(3)] == [None, 11, 1]
    c = h.restart()
    assert [committed(c, "g", p) for p in range(3)] == [None, 11, 1]
