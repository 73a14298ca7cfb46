"""The classic group state machine, driven directly through GroupCoordinator."""

from __future__ import annotations

import struct
import time
from typing import Any

import pytest

from samsa.broker.group import GroupState, PartitionCommit
from samsa.broker.group import coordinator as coordinator_module
from samsa.broker.group.store import GROUP_METADATA_TOPIC, StoredRecord

from .conftest import Harness, eventually, join_request, sync_request

MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION = 79, 27, 22
UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL = 25, 82, 23


def state(h: Harness, group: str = "g") -> GroupState:
    return h.coordinator.groups[group].state


# -- JoinGroup ------------------------------------------------------------------------------------


def test_member_id_required_handshake_then_first_generation(harness: Harness) -> None:
    first = harness.join(join_request(client_id="app")).wait()
    assert first.error_code == MEMBER_ID_REQUIRED
    assert first.member_id.startswith("app-") and len(first.member_id) == len("app-") + 36
    assert state(harness) == GroupState.EMPTY  # a pending member does not start a rebalance
    joined = harness.join(join_request(member_id=first.member_id)).wait()
    assert joined.error_code == 0
    assert joined.generation_id == 1 and joined.leader == first.member_id
    assert joined.protocol_name == "range" and joined.protocol_type == "consumer"
    assert joined.members == [(first.member_id, None, b"m")]
    assert state(harness) == GroupState.COMPLETING_REBALANCE


def test_old_clients_join_without_the_handshake(harness: Harness) -> None:
    joined = harness.join(join_request(v4=False)).wait()
    assert joined.error_code == 0 and joined.generation_id == 1 and joined.member_id


def test_unknown_member_id_of_an_unknown_group(harness: Harness) -> None:
    result = harness.join(join_request(member_id="nobody")).wait()
    assert result.error_code == UNKNOWN_MEMBER_ID


def test_session_timeout_bounds(make_harness: Any) -> None:
    h = make_harness({"group.min.session.timeout.ms": 6000, "group.max.session.timeout.ms": 9000})
    assert h.join(join_request(session_ms=5999)).wait().error_code == 26
    assert h.join(join_request(session_ms=9001)).wait().error_code == 26
    assert h.join(join_request(session_ms=6000)).wait().error_code == MEMBER_ID_REQUIRED


def test_empty_group_id_is_invalid(harness: Harness) -> None:
    assert harness.join(join_request(group="")).wait().error_code == 24


def test_second_member_parks_until_the_first_rejoins(harness: Harness) -> None:
    (a,) = harness.stable_group(members=1)
    b_join = harness.join_new()
    assert not b_join.done  # parked: A has not rejoined yet
    assert state(harness) == GroupState.PREPARING_REBALANCE
    assert harness.coordinator.heartbeat("g", 1, a.member_id) == REBALANCE_IN_PROGRESS
    a_join = harness.join(join_request(member_id=a.member_id))
    a2, b2 = a_join.wait(), b_join.wait()
    assert a2.generation_id == b2.generation_id == 2
    assert a2.leader == b2.leader == a.member_id  # the leader rejoined: kept
    assert {m[0] for m in a2.members} == {a.member_id, b2.member_id}
    assert b2.members == []  # only the leader gets the member list


def test_protocol_chosen_by_votes_among_common_protocols(harness: Harness) -> None:
    a = harness.join_new(protocols=[("roundrobin", b"a"), ("range", b"a")])
    a_first = a.wait()
    assert a_first.protocol_name == "roundrobin"
    b = harness.join_new(protocols=[("range", b"b"), ("sticky", b"b"), ("roundrobin", b"b")])
    c = harness.join_new(protocols=[("range", b"c"), ("roundrobin", b"c")])
    a_again = harness.join(join_request(member_id=a_first.member_id,
                                        protocols=[("roundrobin", b"a"), ("range", b"a")]))
    results = [a_again.wait(), b.wait(), c.wait()]
    # Candidates: range and roundrobin; votes: roundrobin 1, range 2.
    assert {r.protocol_name for r in results} == {"range"}
    # The leader (A, which rejoined) sees each member's metadata for the chosen protocol.
    assert results[0].leader == a_first.member_id
    assert sorted(m[2] for m in results[0].members) == [b"a", b"b", b"c"]


def test_inconsistent_group_protocol(harness: Harness) -> None:
    harness.stable_group(members=1)
    assert harness.join(join_request(protocols=[("other", b"")])).wait().error_code == \
        INCONSISTENT_GROUP_PROTOCOL
    assert harness.join(join_request(protocol_type="connect")).wait().error_code == \
        INCONSISTENT_GROUP_PROTOCOL
    assert harness.join(join_request(group="h", protocols=[])).wait().error_code == \
        INCONSISTENT_GROUP_PROTOCOL


def test_members_that_do_not_rejoin_are_dropped_after_the_rebalance_timeout(
        harness: Harness) -> None:
    leader, follower = harness.stable_group(members=2)
    # A third member joins with a short rebalance timeout; the follower never rejoins.
    c = harness.join_new(rebalance_ms=50)
    harness.join(join_request(member_id=leader.member_id, rebalance_ms=50))
    # The group's rebalance timeout is the largest of its members' (30 s for the follower):
    # the follower leaving is what lets it complete here.
    assert not c.done
    harness.coordinator.leave_group("g", [(follower.member_id, None)])
    result = c.wait()
    assert result.generation_id == 3


def test_rebalance_timeout_removes_laggards(harness: Harness) -> None:
    a = harness.join_new(rebalance_ms=100).wait()
    harness.sync(sync_request("g", 1, a.member_id)).wait()
    b = harness.join_new(rebalance_ms=100)
    result = b.wait()  # A never rejoins: dropped when the 100 ms rebalance timeout passes
    assert result.generation_id == 2 and result.leader == result.member_id
    assert list(harness.coordinator.groups["g"].members) == [result.member_id]
    assert harness.coordinator.heartbeat("g", 2, a.member_id) == UNKNOWN_MEMBER_ID


def test_initial_rebalance_delay_collects_members(make_harness: Any) -> None:
    h = make_harness({"group.initial.rebalance.delay.ms": 300})
    answers = [h.join_new() for _ in range(3)]
    results = [a.wait() for a in answers]
    assert {r.generation_id for r in results} == {1}
    assert len(next(r for r in results if r.leader == r.member_id).members) == 3


def test_rejoin_during_completing_rebalance_repeats_the_answer(harness: Harness) -> None:
    first = harness.join_new().wait()
    again = harness.join(join_request(member_id=first.member_id)).wait()
    assert (again.generation_id, again.leader, again.members) == \
        (first.generation_id, first.leader, first.members)


def test_follower_rejoin_while_stable_without_changes(harness: Harness) -> None:
    leader, follower = harness.stable_group(members=2)
    again = harness.join(join_request(member_id=follower.member_id)).wait()
    assert again.generation_id == 2 and again.members == []
    assert state(harness) == GroupState.STABLE
    # New metadata forces a rebalance.
    changed = harness.join(join_request(member_id=follower.member_id,
                                        protocols=[("range", b"new")]))
    assert state(harness) == GroupState.PREPARING_REBALANCE
    harness.join(join_request(member_id=leader.member_id))
    assert changed.wait().generation_id == 3


# -- SyncGroup ------------------------------------------------------------------------------------


def test_followers_wait_for_the_leaders_assignment(harness: Harness) -> None:
    b = harness.join_new()
    first_b = b.wait()
    a = harness.join_new()
    # B was alone in generation 1; A's join started generation 2, which waits for B.
    harness.join(join_request(member_id=first_b.member_id))
    ra = a.wait()
    leader_id = ra.leader
    follower_id = ra.member_id if ra.member_id != leader_id else first_b.member_id
    follower_sync = harness.sync(sync_request("g", ra.generation_id, follower_id))
    assert not follower_sync.done
    leader_sync = harness.sync(sync_request("g", ra.generation_id, leader_id,
                                            {follower_id: b"for-follower"}))
    assert follower_sync.wait().assignment == b"for-follower"
    assert leader_sync.wait().assignment == b""  # no assignment given: empty
    assert follower_sync.value.protocol_name == "range"
    assert state(harness) == GroupState.STABLE
    # Stable: a repeated sync answers the stored assignment at once.
    again = harness.sync(sync_request("g", ra.generation_id, follower_id)).wait()
    assert again.assignment == b"for-follower"


def test_sync_errors(harness: Harness) -> None:
    (a,) = harness.stable_group(members=1)
    assert harness.sync(sync_request("nope", 1, a.member_id)).wait().error_code == \
        UNKNOWN_MEMBER_ID
    assert harness.sync(sync_request("g", 1, "stranger")).wait().error_code == UNKNOWN_MEMBER_ID
    assert harness.sync(sync_request("g", 7, a.member_id)).wait().error_code == \
        ILLEGAL_GENERATION
    wrong = sync_request("g", 1, a.member_id)
    wrong.protocol_name = "roundrobin"
    assert harness.sync(wrong).wait().error_code == INCONSISTENT_GROUP_PROTOCOL
    harness.join_new()  # starts a rebalance
    assert harness.sync(sync_request("g", 1, a.member_id)).wait().error_code == \
        REBALANCE_IN_PROGRESS


def test_a_new_rebalance_answers_parked_syncs(harness: Harness) -> None:
    b = harness.join_new().wait()
    a = harness.join_new()
    harness.join(join_request(member_id=b.member_id))
    gen2 = a.wait()
    follower = b.member_id if gen2.leader != b.member_id else gen2.member_id
    parked = harness.sync(sync_request("g", 2, follower))
    harness.join_new()  # a third member arrives before the leader synced
    assert parked.wait().error_code == REBALANCE_IN_PROGRESS


# -- Heartbeat, sessions, LeaveGroup -------------------------------------------------------------


def test_heartbeat_answers(harness: Harness) -> None:
    (a,) = harness.stable_group(members=1)
    hb = harness.coordinator.heartbeat
    assert hb("g", 1, a.member_id) == 0
    assert hb("g", 0, a.member_id) == ILLEGAL_GENERATION
    assert hb("g", 1, "stranger") == UNKNOWN_MEMBER_ID
    assert hb("unknown-group", 1, a.member_id) == UNKNOWN_MEMBER_ID


def test_session_expiry_removes_the_member_and_rebalances(harness: Harness) -> None:
    a = harness.join_new(session_ms=200).wait()
    harness.sync(sync_request("g", 1, a.member_id)).wait()
    b = harness.join_new()
    # A never heartbeats nor rejoins: its session ends and B's rebalance completes without it.
    result = b.wait()
    assert result.generation_id == 2 and result.leader == result.member_id
    assert a.member_id not in harness.coordinator.groups["g"].members


def test_last_session_expiry_empties_the_group(harness: Harness) -> None:
    a = harness.join_new(session_ms=100).wait()
    harness.sync(sync_request("g", 1, a.member_id)).wait()
    eventually(lambda: state(harness) == GroupState.EMPTY)
    assert harness.coordinator.groups["g"].generation_id == 2


def test_pending_members_expire(harness: Harness) -> None:
    first = harness.join(join_request(session_ms=50)).wait()
    assert first.error_code == MEMBER_ID_REQUIRED
    eventually(lambda: not harness.coordinator.groups["g"].pending_members)
    late = harness.join(join_request(member_id=first.member_id)).wait()
    assert late.error_code == UNKNOWN_MEMBER_ID


def test_leave_group_rebalances_and_empties(harness: Harness) -> None:
    leader, follower = harness.stable_group(members=2)
    error, errors = harness.coordinator.leave_group("g", [(leader.member_id, None),
                                                          ("stranger", None)])
    assert (error, errors) == (0, [0, UNKNOWN_MEMBER_ID])
    assert state(harness) == GroupState.PREPARING_REBALANCE
    rejoined = harness.join(join_request(member_id=follower.member_id)).wait()
    assert rejoined.generation_id == 3 and rejoined.leader == follower.member_id
    harness.sync(sync_request("g", 3, follower.member_id)).wait()
    assert harness.coordinator.leave_group("g", [(follower.member_id, None)]) == (0, [0])
    assert state(harness) == GroupState.EMPTY
    assert harness.coordinator.leave_group("nope", [("x", None)])[0] == UNKNOWN_MEMBER_ID


# -- static membership ---------------------------------------------------------------------------


def test_static_member_rejoins_without_a_rebalance(harness: Harness) -> None:
    a = harness.join(join_request(instance_id="node-a", client_id="c")).wait()
    assert a.error_code == 0  # static members skip MEMBER_ID_REQUIRED
    assert a.member_id.startswith("node-a-")
    b = harness.join(join_request(instance_id="node-b"))
    harness.join(join_request(member_id=a.member_id, instance_id="node-a"))
    b1 = b.wait()
    assert b1.generation_id == 2
    leader = b1.leader
    follower = b1.member_id if leader != b1.member_id else a.member_id
    harness.sync(sync_request("g", 2, leader, {follower: b"F", leader: b"L"},
                              instance_id="node-a" if leader == a.member_id else "node-b"))
    eventually(lambda: state(harness) == GroupState.STABLE)
    # node-b restarts: same instance id, no member id, same protocols.
    again = harness.join(join_request(instance_id="node-b")).wait()
    assert again.error_code == 0 and again.generation_id == 2
    assert again.member_id != b1.member_id
    assert state(harness) == GroupState.STABLE
    synced = harness.sync(sync_request("g", 2, again.member_id, instance_id="node-b")).wait()
    assert synced.assignment == (b"F" if b1.member_id == follower else b"L")
    # The old instance is fenced.
    assert harness.coordinator.heartbeat("g", 2, b1.member_id, "node-b") == FENCED_INSTANCE_ID
    assert harness.coordinator.heartbeat("g", 2, again.member_id, "node-b") == 0


def test_static_member_with_new_protocols_triggers_a_rebalance(harness: Harness) -> None:
    a = harness.join(join_request(instance_id="i", protocols=[("range", b"")])).wait()
    harness.sync(sync_request("g", 1, a.member_id, instance_id="i")).wait()
    # Still supports range (so it may join), but now prefers roundrobin: the choice changes.
    again = harness.join(join_request(instance_id="i", protocols=[("roundrobin", b""),
                                                                  ("range", b"")]))
    assert again.wait().generation_id == 2
    assert again.value.protocol_name == "roundrobin"


# -- offsets --------------------------------------------------------------------------------------


def commit(topic: str, partition: int, offset: int, metadata: str | None = "",
           epoch: int = -1) -> PartitionCommit:
    return PartitionCommit(topic, partition, offset, epoch, metadata)


@pytest.fixture
def topic(harness: Harness) -> str:
    harness.logs.create_topic("t", 3)
    return "t"


def test_standalone_commit_and_fetch(harness: Harness, topic: str) -> None:
    c = harness.coordinator
    assert c.commit_offsets("solo", -1, "", None, [commit(topic, 0, 10, "m", 3),
                                                    commit(topic, 1, 20)]) == [0, 0]
    error, found = c.fetch_offsets("solo", [(topic, 0), (topic, 2)])
    assert error == 0
    assert found[(topic, 0)] is not None and found[(topic, 0)].offset == 10
    assert found[(topic, 0)].metadata == "m" and found[(topic, 0)].leader_epoch == 3
    assert found[(topic, 2)] is None
    assert sorted(c.fetch_offsets("solo", None)[1]) == [(topic, 0), (topic, 1)]
    assert c.fetch_offsets("never", None) == (0, {})


def test_commit_checks(harness: Harness, topic: str) -> None:
    c = harness.coordinator
    assert c.commit_offsets("g", 1, "m", None, [commit(topic, 0, 1)]) == [ILLEGAL_GENERATION]
    assert c.commit_offsets("g", 1, "m", None, [commit(topic, 0, 1)], api_version=9) == [69]
    assert c.commit_offsets("s", -1, "", None, [commit(topic, 0, 1, "x" * 4097),
                                                commit("missing", 0, 1),
                                                commit(topic, 7, 1),
                                                commit(topic, 2, 5)]) == [12, 3, 3, 0]
    (a,) = harness.stable_group(members=1)
    assert c.commit_offsets("g", 1, a.member_id, None, [commit(topic, 0, 5)]) == [0]
    assert c.commit_offsets("g", 0, a.member_id, None, [commit(topic, 0, 5)]) == \
        [ILLEGAL_GENERATION]
    assert c.commit_offsets("g", 1, "other", None, [commit(topic, 0, 5)]) == [UNKNOWN_MEMBER_ID]
    assert c.commit_offsets("g", -1, "", None, [commit(topic, 0, 5)]) == [UNKNOWN_MEMBER_ID]
    # During PreparingRebalance the current generation may still commit ...
    b = harness.join_new()
    assert c.commit_offsets("g", 1, a.member_id, None, [commit(topic, 0, 6)]) == [0]
    # ... but not during CompletingRebalance.
    harness.join(join_request(member_id=a.member_id))
    b.wait()
    assert state(harness) == GroupState.COMPLETING_REBALANCE
    assert c.commit_offsets("g", 2, a.member_id, None, [commit(topic, 0, 7)]) == \
        [REBALANCE_IN_PROGRESS]
    assert c.fetch_offsets("g", [(topic, 0)])[1][(topic, 0)].offset == 6  # type: ignore[union-attr]


# -- durability and admin ------------------------------------------------------------------------


def test_offsets_and_groups_survive_a_restart(harness: Harness, topic: str) -> None:
    leader, follower = harness.stable_group(members=2)
    c = harness.coordinator
    assert c.commit_offsets("g", 2, leader.member_id, None,
                            [commit(topic, 0, 42, "meta", 5)]) == [0]
    assert c.commit_offsets("solo", -1, "", None, [commit(topic, 1, 7)]) == [0]
    assert c.commit_offsets("solo", -1, "", None, [commit(topic, 1, 8)]) == [0]
    c = harness.restart()
    found = c.fetch_offsets("g", [(topic, 0)])[1][(topic, 0)]
    assert found is not None and (found.offset, found.metadata, found.leader_epoch) == \
        (42, "meta", 5)
    assert c.fetch_offsets("solo", [(topic, 1)])[1][(topic, 1)].offset == 8  # type: ignore[union-attr]
    group = c.groups["g"]
    assert group.state == GroupState.STABLE and group.generation_id == 2
    assert set(group.members) == {leader.member_id, follower.member_id}
    assert group.leader_id == leader.member_id
    # Members carry on with their generation: heartbeats and commits still work.
    assert c.heartbeat("g", 2, follower.member_id) == 0
    assert c.commit_offsets("g", 2, follower.member_id, None, [commit(topic, 2, 1)]) == [0]
    synced = harness.sync(sync_request("g", 2, follower.member_id)).wait()
    assert synced.assignment == follower.member_id.encode()
    assert {o.group_id for o in c.list_groups()} == {"g", "solo"}


def test_restored_members_expire_without_heartbeats(harness: Harness) -> None:
    a = harness.join_new(session_ms=100).wait()
    harness.sync(sync_request("g", 1, a.member_id)).wait()
    c = harness.restart()
    eventually(lambda: c.groups["g"].state == GroupState.EMPTY)


def test_describe_list_and_delete_groups(harness: Harness, topic: str) -> None:
    c = harness.coordinator
    (a,) = harness.stable_group(members=1)
    c.commit_offsets("empty", -1, "", None, [commit(topic, 0, 3)])
    d = c.describe_group("g")
    assert (d.state, d.protocol_type, d.protocol) == ("Stable", "consumer", "range")
    assert d.members == [(a.member_id, None, "client", "/127.0.0.1", b"m",
                          a.member_id.encode())]
    assert c.describe_group("nope").state == "Dead"
    assert {(g.group_id, g.state) for g in c.list_groups()} == {("g", "Stable"),
                                                                ("empty", "Empty")}
    assert [g.group_id for g in c.list_groups(["empty"])] == ["empty"]
    assert c.delete_groups(["g", "nope", "", "empty"]) == [68, 69, 24, 0]
    assert "empty" not in c.groups
    c = harness.restart()
    assert "empty" not in c.groups
    assert c.fetch_offsets("empty", None) == (0, {})


def test_group_records_go_to_the_group_partition(harness: Harness, topic: str) -> None:
    from samsa.broker.group import partition_for

    harness.coordinator.commit_offsets("solo", -1, "", None, [commit(topic, 0, 1)])
    part = partition_for("solo", 3)
    plog = harness.logs.get_log(GROUP_METADATA_TOPIC, part)
    assert plog.log_end_offset == 1
    assert harness.logs.topic(GROUP_METADATA_TOPIC).configs["cleanup.policy"] == "compact"  # type: ignore[union-attr]


def compact_offsets(harness: Harness, partitions: int = 3) -> None:
    """Two log-cleaner rounds over every __consumer_offsets partition, the second past the
    tombstones' delete horizon (delete.retention.ms, one day by default)."""
    cleaner = harness.logs.cleaner.new_cleaner()
    now = time.time_ns() // 1_000_000
    for later in (0, 2 * 86_400_000):
        for part in range(partitions):
            plog = harness.logs.get_log(GROUP_METADATA_TOPIC, part)
            cleaner.clean(plog, 0, plog.active_segment.base_offset, now + later)


def test_start_up_leaves_a_long_history_to_the_cleaner(harness: Harness, topic: str) -> None:
    for i in range(50):
        harness.coordinator.commit_offsets("solo", -1, "", None, [commit(topic, 0, i)])
    from samsa.broker.group import partition_for

    plog = harness.logs.get_log(GROUP_METADATA_TOPIC, partition_for("solo", 3))
    plog.roll()
    c = harness.restart()
    plog = harness.logs.get_log(GROUP_METADATA_TOPIC, partition_for("solo", 3))
    assert plog.log_start_offset == 0 and plog.log_end_offset == 50  # not rewritten
    compact_offsets(harness)
    c = harness.restart()
    assert [item.offset for item in c.store.load()] == [49]
    assert c.fetch_offsets("solo", [(topic, 0)])[1][(topic, 0)].offset == 49  # type: ignore[union-attr]


def test_the_cleaner_keeps_every_live_offset_of_every_group(harness: Harness, topic: str) -> None:
    """Several groups per __consumer_offsets partition, each with commits of several partitions
    of several topics, overwritten many times, some deleted (OffsetDelete, DeleteGroups): the
    log cleaner keeps exactly the live records (the last value per key, no tombstoned key once
    its delete horizon passed), and they replay to the same state."""
    from samsa.broker.group import partition_for

    harness.logs.create_topic("u", 2)
    c = harness.coordinator
    tps = [(topic, p) for p in range(3)] + [("u", p) for p in range(2)]
    # Two standalone groups in each of the three offsets partitions.
    names = [f"g{i}" for i in range(40)]
    groups = [g for part in range(3) for g in [n for n in names if partition_for(n, 3) == part][:2]]
    assert sorted(partition_for(g, 3) for g in groups) == [0, 0, 1, 1, 2, 2]
    for rnd in range(6):
        for gi, g in enumerate(groups):
            assert c.commit_offsets(g, -1, "", None, [
                commit(t, p, 1000 * gi + 10 * rnd + p, f"{g}/{t}/{p}/{rnd}", rnd)
                for t, p in tps]) == [0] * len(tps)
    # A consumer group with a member: its group record must survive too.
    (member,) = harness.stable_group("live", members=1)
    for rnd in range(3):
        assert c.commit_offsets("live", member.generation_id, member.member_id, None,
                                [commit(topic, 1, rnd, f"live/{rnd}")]) == [0]
    dropped, dead, reborn = groups[0], groups[2], groups[4]
    assert c.delete_offsets(dropped, [(topic, 0), ("u", 1)]) == \
        (0, {(topic, 0): 0, ("u", 1): 0})
    assert c.delete_groups([dead, reborn]) == [0, 0]
    assert c.commit_offsets(reborn, -1, "", None, [commit("u", 0, 7, "again")]) == [0]

    expected = {g: c.fetch_offsets(g, None)[1] for g in [*groups, "live"]}
    assert expected[dead] == {}
    assert set(expected[dropped]) == set(tps) - {(topic, 0), ("u", 1)}
    assert set(expected[reborn]) == {("u", 0)} and expected[reborn][("u", 0)].offset == 7  # type: ignore[union-attr]
    for gi, g in enumerate(groups):
        if g in (dead, reborn):
            continue
        for (t, p), o in expected[g].items():
            assert o is not None and (o.offset, o.leader_epoch, o.metadata) == \
                (1000 * gi + 50 + p, 5, f"{g}/{t}/{p}/5")
    assert expected["live"][(topic, 1)].metadata == "live/2"  # type: ignore[union-attr]
    live_records = {part: 0 for part in range(3)}
    for g, offsets in expected.items():
        live_records[partition_for(g, 3)] += len(offsets) + (g == "live")
    ends = {}
    for part in range(3):
        plog = harness.logs.get_log(GROUP_METADATA_TOPIC, part)
        plog.roll()
        ends[part] = plog.log_end_offset
        assert ends[part] > 4 * live_records[part]
    compact_offsets(harness)

    for restart in range(2):
        c = harness.restart()
        for g, offsets in expected.items():
            assert c.fetch_offsets(g, None) == (0, offsets), (restart, g)
        assert dead not in c.groups
        d = c.describe_group("live")
        assert (d.state, [m[0] for m in d.members]) == ("Stable", [member.member_id])
        # Only the live records are left, each key once: superseded values and deleted keys
        # (with their tombstones) are gone.
        keys: dict[int, list[bytes]] = {part: [] for part in range(3)}
        for item in c.store.load():
            assert isinstance(item, StoredRecord), item
            assert item.value is not None, item
            keys[item.partition].append(item.key)
        for part in range(3):
            plog = harness.logs.get_log(GROUP_METADATA_TOPIC, part)
            assert plog.log_start_offset == 0 and plog.log_end_offset == ends[part], part
            assert len(keys[part]) == len(set(keys[part])) == live_records[part], part


# -- static membership in depth (Kafka's GroupCoordinator.updateStaticMemberAndRebalance) --------


def static_completing(h: Harness) -> tuple[Any, Any]:
    """Static members node-a (the leader) and node-b joined generation 2, not yet synced."""
    a = h.join(join_request(instance_id="node-a")).wait()
    b = h.join(join_request(instance_id="node-b"))
    a2 = h.join(join_request(member_id=a.member_id, instance_id="node-a")).wait()
    b2 = b.wait()
    assert (a2.generation_id, b2.generation_id, a2.leader) == (2, 2, a.member_id)
    assert state(h) == GroupState.COMPLETING_REBALANCE
    return a2, b2


def static_stable(h: Harness) -> tuple[Any, Any]:
    """static_completing, then both synced (node-a gets b"A", node-b gets b"B"): Stable."""
    a, b = static_completing(h)
    follower = h.sync(sync_request("g", 2, b.member_id, instance_id="node-b"))
    leader = h.sync(sync_request("g", 2, a.member_id, {a.member_id: b"A", b.member_id: b"B"},
                                 instance_id="node-a"))
    assert (leader.wait().assignment, follower.wait().assignment) == (b"A", b"B")
    assert state(h) == GroupState.STABLE
    return a, b


def hb_key(member_id: str, group: str = "g") -> tuple[str, str, str]:
    return ("heartbeat", group, member_id)


def test_static_restart_fences_the_old_instances_parked_join(harness: Harness) -> None:
    a, b = static_stable(harness)
    old = harness.join(join_request(member_id=a.member_id, instance_id="node-a"))  # the leader
    assert state(harness) == GroupState.PREPARING_REBALANCE and not old.done
    new = harness.join(join_request(instance_id="node-a"))
    fenced = old.wait()
    assert (fenced.error_code, fenced.member_id) == (FENCED_INSTANCE_ID, a.member_id)
    assert not harness.coordinator.timer.is_scheduled(hb_key(a.member_id))
    assert state(harness) == GroupState.PREPARING_REBALANCE and not new.done  # waits for node-b
    harness.join(join_request(member_id=b.member_id, instance_id="node-b"))
    result = new.wait()
    assert (result.error_code, result.generation_id) == (0, 3)
    assert result.member_id.startswith("node-a-") and result.member_id != a.member_id


def test_static_restart_mid_rebalance_fences_the_parked_sync_and_starts_over(
        harness: Harness) -> None:
    a, b = static_completing(harness)
    parked = harness.sync(sync_request("g", 2, b.member_id, instance_id="node-b"))
    new = harness.join(join_request(instance_id="node-b"))
    assert parked.wait().error_code == FENCED_INSTANCE_ID
    # The leader may be assigning to the old id: a new rebalance.
    assert state(harness) == GroupState.PREPARING_REBALANCE
    harness.join(join_request(member_id=a.member_id, instance_id="node-a"))
    result = new.wait()
    assert (result.error_code, result.generation_id) == (0, 3)
    assert result.member_id != b.member_id


def skip_assignment_request(**kwargs: Any) -> Any:
    req = join_request(**kwargs)
    req.supports_skip_assignment = True  # JoinGroup v9+ (KIP-814)
    return req


def test_static_restart_while_stable_answers_the_current_generation(harness: Harness) -> None:
    a, b = static_stable(harness)
    c = harness.coordinator
    # A follower, before and after v9: no member list, no skipping.
    follower = harness.join(skip_assignment_request(instance_id="node-b")).wait()
    assert (follower.error_code, follower.generation_id, follower.leader) == (0, 2, a.member_id)
    assert follower.member_id.startswith("node-b-") and follower.member_id != b.member_id
    assert (follower.members, follower.skip_assignment) == ([], False)
    # The leader without v9: no member list either (it must not reassign).
    leader = harness.join(join_request(instance_id="node-a")).wait()
    assert (leader.error_code, leader.leader, leader.members, leader.skip_assignment) == \
        (0, leader.member_id, [], False)
    # The leader with v9 gets the members, told to skip the assignment (KIP-814).
    again = harness.join(skip_assignment_request(instance_id="node-a")).wait()
    assert (again.error_code, again.generation_id, again.leader) == (0, 2, again.member_id)
    assert again.skip_assignment is True
    assert sorted(again.members) == sorted([(again.member_id, "node-a", b"m"),
                                            (follower.member_id, "node-b", b"m")])
    assert state(harness) == GroupState.STABLE
    # The new ids were stored: a restart restores them, the leader (not the first member any
    # more), the static instances, the protocol and the metadata.
    assert next(iter(c.groups["g"].members)) == follower.member_id
    c = harness.restart()
    group = c.groups["g"]
    assert group.leader_id == again.member_id
    assert c.heartbeat("g", 2, again.member_id, "node-a") == 0
    assert c.heartbeat("g", 2, follower.member_id, "node-b") == 0
    d = c.describe_group("g")
    assert (d.state, d.protocol_type, d.protocol) == ("Stable", "consumer", "range")
    assert sorted((m[0], m[1], m[4], m[5]) for m in d.members) == sorted(
        [(again.member_id, "node-a", b"m", b"A"), (follower.member_id, "node-b", b"m", b"B")])


def test_static_restart_rolls_back_when_the_group_cannot_be_stored(
        harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    from samsa.errors import KafkaStorageError

    a, b = static_stable(harness)
    c = harness.coordinator
    group = c.groups["g"]
    new_ids: list[str] = []
    new_member_id = group.new_member_id

    def recording_new_member_id(client_id: str, instance_id: str | None) -> str:
        new_ids.append(new_member_id(client_id, instance_id))
        return new_ids[-1]

    monkeypatch.setattr(group, "new_member_id", recording_new_member_id)

    def failing_append(*args: Any, **kwargs: Any) -> None:
        raise KafkaStorageError("disk gone")

    monkeypatch.setattr(c.store, "append", failing_append)
    result = harness.join(join_request(instance_id="node-b", session_ms=20_000,
                                       rebalance_ms=25_000,
                                       protocols=[("range", b"new")])).wait()
    # COORDINATOR_NOT_AVAILABLE (retriable), with the current generation's description.
    assert (result.error_code, result.member_id, result.generation_id, result.protocol_type,
            result.protocol_name, result.leader) == (15, "", 2, "consumer", "range", a.member_id)
    # Nothing changed: the old instance is still the member, with its old settings.
    assert list(group.members) == [a.member_id, b.member_id]
    member = group.members[b.member_id]
    assert (member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms) == \
        ([("range", b"m")], 30_000, 30_000)
    assert not member.is_awaiting_join
    assert group.static_member_id("node-b") == b.member_id
    assert c.timer.is_scheduled(hb_key(b.member_id))
    assert len(new_ids) == 1 and not c.timer.is_scheduled(hb_key(new_ids[0]))
    assert c.heartbeat("g", 2, b.member_id, "node-b") == 0
    assert state(harness) == GroupState.STABLE


# -- timers, leaving and expiring in every state -------------------------------------------------


def test_leaving_cancels_the_session_timer(harness: Harness) -> None:
    leader, follower = harness.stable_group(members=2)
    c = harness.coordinator
    pending = harness.join(join_request()).wait()
    assert c.timer.is_scheduled(hb_key(leader.member_id))
    assert c.timer.is_scheduled(hb_key(pending.member_id))
    assert c.leave_group("g", [(leader.member_id, None), (pending.member_id, None)]) == (0, [0, 0])
    assert not c.timer.is_scheduled(hb_key(leader.member_id))
    assert not c.timer.is_scheduled(hb_key(pending.member_id))
    assert c.timer.is_scheduled(hb_key(follower.member_id))


def test_a_rebalance_waits_under_a_join_deadline(harness: Harness) -> None:
    leader, follower = harness.stable_group(members=2)
    c = harness.coordinator
    assert not c.timer.is_scheduled(("join", "g"))
    parked = harness.join(join_request(member_id=leader.member_id))
    assert c.timer.is_scheduled(("join", "g"))  # the laggards' rebalance timeout
    harness.join(join_request(member_id=follower.member_id))
    assert parked.wait().generation_id == 3
    assert not c.timer.is_scheduled(("join", "g"))


def test_a_join_deadline_firing_after_the_rebalance_changes_nothing(harness: Harness) -> None:
    (a,) = harness.stable_group(members=1)
    c = harness.coordinator
    c._on_timer(c._join_expired, "g")  # the timer thread took it just before completion
    assert state(harness) == GroupState.STABLE and list(c.groups["g"].members) == [a.member_id]
    assert c.groups["g"].generation_id == 1


def test_a_pending_member_leaving_does_not_rebalance(harness: Harness) -> None:
    (a,) = harness.stable_group(members=1)
    c = harness.coordinator
    pending = harness.join(join_request()).wait()
    assert c.leave_group("g", [(pending.member_id, None)]) == (0, [0])
    # GroupCoordinator.removePendingMemberAndUpdateGroup: not a member yet, no rebalance.
    assert state(harness) == GroupState.STABLE and c.groups["g"].generation_id == 1
    assert harness.join(join_request(member_id=pending.member_id)).wait().error_code == \
        UNKNOWN_MEMBER_ID
    # A rebalance waiting for a pending member completes when it leaves.
    other = harness.join(join_request()).wait()
    parked = harness.join(join_request(member_id=a.member_id))
    assert not parked.done
    assert c.leave_group("g", [(other.member_id, None)]) == (0, [0])
    assert parked.wait().generation_id == 2


def test_a_pending_member_expiring_completes_the_rebalance(harness: Harness) -> None:
    (a,) = harness.stable_group(members=1)
    c = harness.coordinator
    pending = harness.join(join_request()).wait()
    parked = harness.join(join_request(member_id=a.member_id))
    assert not parked.done
    c._on_timer(c._expire_heartbeat, "g", pending.member_id)
    assert parked.wait().generation_id == 2


def test_an_admin_removes_static_members_by_instance_id(harness: Harness) -> None:
    a, _ = static_stable(harness)
    c = harness.coordinator
    # Another instance's id: fenced.
    assert c.leave_group("g", [(a.member_id, "node-b")]) == (0, [FENCED_INSTANCE_ID])
    assert state(harness) == GroupState.STABLE
    assert c.leave_group("g", [("", "node-b"), ("", "ghost")]) == (0, [0, UNKNOWN_MEMBER_ID])
    assert list(c.groups["g"].members) == [a.member_id]
    assert c.groups["g"].static_member_id("node-b") is None
    assert state(harness) == GroupState.PREPARING_REBALANCE


def test_leaving_answers_the_members_parked_requests(harness: Harness) -> None:
    leader, follower = harness.stable_group(members=2)
    c = harness.coordinator
    parked_join = harness.join(join_request(member_id=leader.member_id))
    assert c.leave_group("g", [(leader.member_id, None)]) == (0, [0])
    answer = parked_join.wait()
    assert (answer.error_code, answer.member_id) == (UNKNOWN_MEMBER_ID, "")
    # CompletingRebalance: a follower's parked sync, then it leaves: a new rebalance.
    rejoined = harness.join(join_request(member_id=follower.member_id)).wait()
    assert rejoined.generation_id == 3
    newcomer = harness.join_new()
    harness.join(join_request(member_id=follower.member_id))
    gen4 = newcomer.wait()
    assert gen4.generation_id == 4 and gen4.leader == follower.member_id
    assert state(harness) == GroupState.COMPLETING_REBALANCE
    parked_sync = harness.sync(sync_request("g", 4, gen4.member_id))
    assert c.leave_group("g", [(gen4.member_id, None)]) == (0, [0])
    assert parked_sync.wait().error_code == UNKNOWN_MEMBER_ID
    assert state(harness) == GroupState.PREPARING_REBALANCE


def test_session_expiry_in_every_state(harness: Harness) -> None:
    leader, follower = harness.stable_group(members=2)
    c = harness.coordinator
    # A parked join counts as a heartbeat.
    parked = harness.join(join_request(member_id=leader.member_id))
    c._on_timer(c._expire_heartbeat, "g", leader.member_id)
    assert leader.member_id in c.groups["g"].members
    # ... except for a member that is still new: its join is answered and it is dropped.
    newcomer = harness.join_new()
    new_id = next(m for m in c.groups["g"].members if m not in (leader.member_id,
                                                                 follower.member_id))
    c._on_timer(c._expire_heartbeat, "g", new_id)
    dropped = newcomer.wait()
    assert (dropped.error_code, dropped.member_id) == (UNKNOWN_MEMBER_ID, "")
    harness.join(join_request(member_id=follower.member_id))
    assert (parked.wait().error_code, parked.value.generation_id) == (0, 3)
    # CompletingRebalance: the follower's session ends before it syncs: a new rebalance.
    assert state(harness) == GroupState.COMPLETING_REBALANCE
    c._on_timer(c._expire_heartbeat, "g", follower.member_id)
    assert follower.member_id not in c.groups["g"].members
    assert state(harness) == GroupState.PREPARING_REBALANCE


# -- offsets and admin in depth ------------------------------------------------------------------


def test_a_members_commit_proves_it_alive(make_harness: Any) -> None:
    h = make_harness({"group.initial.rebalance.delay.ms": 60_000})
    h.logs.create_topic("t", 1)
    c = h.coordinator
    h.join_new()  # parked in the first rebalance: generation 0
    (member_id,) = c.groups["g"].members
    c.timer.cancel(hb_key(member_id))  # as if its session timer had just fired
    assert c.commit_offsets("g", 0, member_id, None, [commit("t", 0, 1)]) == [0]
    assert c.timer.is_scheduled(hb_key(member_id))


def test_commits_of_a_static_member_check_its_instance_id(harness: Harness, topic: str) -> None:
    a, _ = static_stable(harness)
    c = harness.coordinator
    assert c.commit_offsets("g", 2, a.member_id, "node-b", [commit(topic, 0, 1)]) == \
        [FENCED_INSTANCE_ID]
    assert c.commit_offsets("g", 2, a.member_id, "node-a", [commit(topic, 0, 1)]) == [0]


def test_commit_metadata_and_time(harness: Harness, topic: str) -> None:
    c = harness.coordinator
    before = coordinator_module._now_ms()
    assert c.commit_offsets("s", -1, "", None, [
        commit(topic, 0, 1, None),
        PartitionCommit(topic, 1, 2, -1, "m", commit_timestamp_ms=1234)]) == [0, 0]
    found = c.fetch_offsets("s", None)[1]
    now = found[(topic, 0)]
    assert now is not None and now.metadata == "" and now.commit_timestamp_ms >= before
    given = found[(topic, 1)]
    assert given is not None and (given.metadata, given.commit_timestamp_ms) == ("m", 1234)


def test_describe_an_unknown_group(harness: Harness) -> None:
    d = harness.coordinator.describe_group("nope")
    assert (d.group_id, d.state, d.protocol_type, d.protocol, d.members) == \
        ("nope", "Dead", "", "", [])


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics (int32 count, int16-length names),
    user data (null)."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def test_delete_offsets_of_an_active_group(harness: Harness, topic: str) -> None:
    harness.logs.create_topic("u", 1)
    c = harness.coordinator
    assert c.delete_offsets("nope", [(topic, 0)]) == (69, {})
    # A consumer group subscribed to t keeps t's offsets (GROUP_SUBSCRIBED_TO_TOPIC).
    first = harness.join(join_request("sub", protocols=[("range", subscription(topic))])).wait()
    a = harness.join(join_request("sub", first.member_id,
                                  protocols=[("range", subscription(topic))])).wait()
    harness.sync(sync_request("sub", 1, a.member_id)).wait()
    assert c.commit_offsets("sub", 1, a.member_id, None,
                            [commit(topic, 0, 1), commit("u", 0, 2)]) == [0, 0]
    assert c.delete_offsets("sub", [(topic, 0), ("u", 0)]) == (0, {(topic, 0): 86, ("u", 0): 0})
    assert list(c.fetch_offsets("sub", None)[1]) == [(topic, 0)]
    # Subscriptions that cannot be read count as every topic (GroupMetadata.isSubscribedToTopic).
    (b,) = harness.stable_group("opaque", members=1)  # metadata b"m"
    assert c.commit_offsets("opaque", 1, b.member_id, None, [commit("u", 0, 3)]) == [0]
    assert c.delete_offsets("opaque", [("u", 0)]) == (0, {("u", 0): 86})
    assert list(c.fetch_offsets("opaque", None)[1]) == [("u", 0)]
    # Any other active group: NON_EMPTY_GROUP.
    other = harness.join(join_request("conn", protocol_type="connect")).wait()
    harness.join(join_request("conn", other.member_id, protocol_type="connect")).wait()
    assert c.delete_offsets("conn", [("u", 0)]) == (68, {})


def test_deleting_the_last_offsets_of_an_empty_group_deletes_it(harness: Harness,
                                                                 topic: str) -> None:
    (a,) = harness.stable_group(members=1)
    c = harness.coordinator
    assert c.commit_offsets("g", 1, a.member_id, None,
                            [commit(topic, 0, 1), commit(topic, 1, 2)]) == [0, 0]
    assert c.leave_group("g", [(a.member_id, None)]) == (0, [0])
    assert state(harness) == GroupState.EMPTY
    assert c.delete_offsets("g", [(topic, 0)]) == (0, {(topic, 0): 0})
    assert "g" in c.groups  # one offset left
    assert c.delete_offsets("g", [(topic, 1), (topic, 2)]) == (0, {(topic, 1): 0, (topic, 2): 0})
    assert "g" not in c.groups and c.list_groups() == []
    c = harness.restart()  # the group's record was tombstoned too
    assert "g" not in c.groups and c.describe_group("g").state == "Dead"


def test_an_empty_consumer_group_survives_a_restart(harness: Harness) -> None:
    (a,) = harness.stable_group(members=1)
    assert harness.coordinator.leave_group("g", [(a.member_id, None)]) == (0, [0])
    c = harness.restart()
    group = c.groups["g"]
    assert (group.state, group.generation_id, group.protocol_type) == \
        (GroupState.EMPTY, 2, "consumer")
    assert [(o.group_id, o.protocol_type, o.state) for o in c.list_groups()] == \
        [("g", "consumer", "Empty")]


def test_commits_that_cannot_be_stored(harness: Harness, topic: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from samsa.errors import KafkaStorageError

    c = harness.coordinator
    assert c.commit_offsets("s", -1, "", None, [commit(topic, 0, 1)]) == [0]

    def failing_append(*args: Any, **kwargs: Any) -> None:
        raise KafkaStorageError("disk gone")

    monkeypatch.setattr(c.store, "append", failing_append)
    # The accepted commits fail with COORDINATOR_NOT_AVAILABLE; the others keep their error.
    assert c.commit_offsets("s", -1, "", None, [commit(topic, 0, 2), commit(topic, 1, 3, "x" * 4097),
                                                commit(topic, 2, 4)]) == [15, 12, 15]
    assert c.fetch_offsets("s", None)[1][(topic, 0)].offset == 1  # type: ignore[union-attr]
    assert (topic, 2) not in c.fetch_offsets("s", None)[1]


def test_commit_generation_boundaries(harness: Harness, topic: str) -> None:
    c = harness.coordinator
    # Generation 0 is a real generation, not "no group management".
    assert c.commit_offsets("nope", 0, "", None, [commit(topic, 0, 1)]) == [ILLEGAL_GENERATION]
    assert c.commit_offsets("s", -1, "", None, [commit(topic, 0, 1)]) == [0]  # creates Empty "s"
    assert state(harness, "s") == GroupState.EMPTY
    assert c.commit_offsets("s", 0, "", None, [commit(topic, 0, 2)]) == [UNKNOWN_MEMBER_ID]
    # Without a generation an Empty group takes the commit whatever member id is sent.
    assert c.commit_offsets("s", -1, "someone", None, [commit(topic, 0, 3)]) == [0]
    # A member of a live group committing without its generation: a stale generation.
    (a,) = harness.stable_group(members=1)
    assert c.commit_offsets("g", -1, a.member_id, None, [commit(topic, 0, 5)]) == \
        [ILLEGAL_GENERATION]


def test_sync_and_commit_check_the_static_instance_id(harness: Harness, topic: str) -> None:
    a = harness.join(join_request(instance_id="i")).wait()
    c = harness.coordinator
    # The right member id under another instance id: that instance is not in the group.
    assert harness.sync(sync_request("g", 1, a.member_id, instance_id="other")).wait() \
        .error_code == UNKNOWN_MEMBER_ID
    assert harness.sync(sync_request("g", 1, a.member_id, instance_id="i")).wait() \
        .error_code == 0
    # A commit naming instance "i" but not its member id is fenced, even without a generation.
    assert c.commit_offsets("g", -1, "", "i", [commit(topic, 0, 1)]) == [FENCED_INSTANCE_ID]
