"""The SyncGroup deadline: members that joined a generation must sync within the rebalance
timeout, or they are dropped and the group rebalances without them (Kafka's pending-sync
timeout, KIP-814)."""

from __future__ import annotations

from samsa.broker.group import GroupState

from .conftest import Harness, eventually, join_request, sync_request

REBALANCE_IN_PROGRESS = 27
SYNC_KEY = ("sync", "g")


def two_member_generation(h: Harness, rebalance_ms: int = 30_000) -> tuple[str, str]:
    """A joins alone (generation 1), then B joins and A rejoins: generation 2, nobody synced.
    Returns (leader, follower)."""
    a = h.join_new(rebalance_ms=rebalance_ms).wait()
    b_join = h.join_new(rebalance_ms=rebalance_ms)
    h.join(join_request(member_id=a.member_id, rebalance_ms=rebalance_ms)).wait()
    b = b_join.wait()
    assert b.generation_id == 2 and b.leader == a.member_id
    return a.member_id, b.member_id


def test_sync_deadline_armed_at_join_and_cleared_when_all_synced(harness: Harness) -> None:
    leader, follower = two_member_generation(harness)
    timer = harness.coordinator.timer
    assert timer.is_scheduled(SYNC_KEY)
    harness.sync(sync_request("g", 2, leader, {leader: b"L", follower: b"F"})).wait()
    assert timer.is_scheduled(SYNC_KEY)  # the follower still owes its sync
    assert harness.sync(sync_request("g", 2, follower)).wait().assignment == b"F"
    assert not timer.is_scheduled(SYNC_KEY)


def test_sync_deadline_cleared_when_the_group_rebalances_again(harness: Harness) -> None:
    _leader, follower = two_member_generation(harness)
    assert harness.coordinator.leave_group("g", [(follower, None)])[0] == 0
    assert harness.coordinator.groups["g"].state == GroupState.PREPARING_REBALANCE
    assert not harness.coordinator.timer.is_scheduled(SYNC_KEY)


def test_member_that_never_syncs_is_dropped_and_the_group_rebalances(harness: Harness) -> None:
    leader, follower = two_member_generation(harness, rebalance_ms=200)
    synced = harness.sync(sync_request("g", 2, leader, {leader: b"L", follower: b"F"})).wait()
    assert synced.error_code == 0 and synced.assignment == b"L"
    group = harness.coordinator.groups["g"]
    eventually(lambda: follower not in group.members)
    assert group.state == GroupState.PREPARING_REBALANCE
    assert list(group.members) == [leader]
    # No session deadline lingers for the dropped member.
    assert not harness.coordinator.timer.is_scheduled(("heartbeat", "g", follower))
    assert harness.coordinator.heartbeat("g", 2, leader) == REBALANCE_IN_PROGRESS
    # The leader rejoins alone: generation 3 without the silent follower.
    again = harness.join(join_request(member_id=leader, rebalance_ms=200)).wait()
    assert again.generation_id == 3 and [m[0] for m in again.members] == [leader]


def test_leader_that_never_syncs_is_dropped_and_parked_followers_told(harness: Harness) -> None:
    _leader, follower = two_member_generation(harness, rebalance_ms=200)
    parked = harness.sync(sync_request("g", 2, follower))  # waits for the leader's assignment
    assert not parked.done
    # Still CompletingRebalance at the deadline: the leader is dropped, the follower must rejoin.
    answer = parked.wait()
    assert answer.error_code == REBALANCE_IN_PROGRESS
    # An error answer carries no assignment and no protocol.
    assert answer.assignment == b"" and answer.protocol_type is None
    assert answer.protocol_name is None
    group = harness.coordinator.groups["g"]
    assert list(group.members) == [follower]
    assert group.state == GroupState.PREPARING_REBALANCE


def test_member_that_does_not_rejoin_in_time_is_dropped_with_its_session(
        harness: Harness) -> None:
    leader, follower = two_member_generation(harness, rebalance_ms=200)
    harness.sync(sync_request("g", 2, follower))
    harness.sync(sync_request("g", 2, leader, {leader: b"L", follower: b"F"})).wait()
    # The leader rejoins; the follower never does within the rebalance timeout.
    again = harness.join(join_request(member_id=leader, rebalance_ms=200)).wait()
    assert again.generation_id == 3 and [m[0] for m in again.members] == [leader]
    assert follower not in harness.coordinator.groups["g"].members
    assert not harness.coordinator.timer.is_scheduled(("heartbeat", "g", follower))


# A deadline the timer thread has already taken can still run after the group moved on (it waits
# for the coordinator's lock). These fire such late deadlines by hand, as the timer would.


def fire_sync_deadline(h: Harness, generation: int) -> None:
    h.coordinator._on_timer(h.coordinator._sync_expired, "g", generation)


def test_late_sync_deadline_of_an_older_generation_drops_nobody(harness: Harness) -> None:
    leader, follower = two_member_generation(harness)  # generation 2, nobody synced yet
    fire_sync_deadline(harness, 1)
    group = harness.coordinator.groups["g"]
    assert set(group.members) == {leader, follower}
    assert group.state == GroupState.COMPLETING_REBALANCE


def test_late_sync_deadline_after_everyone_synced_changes_nothing(harness: Harness) -> None:
    leader, follower = two_member_generation(harness)
    harness.sync(sync_request("g", 2, follower))
    harness.sync(sync_request("g", 2, leader, {leader: b"L", follower: b"F"})).wait()
    fire_sync_deadline(harness, 2)
    group = harness.coordinator.groups["g"]
    assert group.state == GroupState.STABLE and set(group.members) == {leader, follower}
