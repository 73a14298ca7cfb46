"""JoinGroup / SyncGroup edge cases, close, and __consumer_offsets loading and compaction,
driven directly through GroupCoordinator (more in test_coordinator.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from samsa.broker.group import GroupCoordinator, GroupState, PartitionCommit, partition_for
from samsa.broker.group.records import group_key, offset_key
from samsa.broker.group.store import GROUP_METADATA_TOPIC
from samsa.broker.log import LogManager

from .conftest import FAST, Harness, join_request, sync_request

MEMBER_ID_REQUIRED, UNKNOWN_MEMBER_ID, INVALID_SESSION_TIMEOUT = 79, 25, 26
INCONSISTENT_GROUP_PROTOCOL, GROUP_MAX_SIZE_REACHED, COORDINATOR_NOT_AVAILABLE = 23, 81, 15
UNKNOWN_TOPIC_OR_PARTITION = 3


def commit(topic: str, partition: int, offset: int) -> PartitionCommit:
    return PartitionCommit(topic, partition, offset, -1, "")


def answered_now(h: Harness, req: Any) -> Any:
    """A join that must be answered at once (not parked)."""
    answer = h.join(req)
    assert answer.done and answer.calls == 1
    return answer.value


# -- JoinGroup errors echo the member id ---------------------------------------------------------


def test_join_errors_echo_the_members_id(harness: Harness) -> None:
    # Kafka answers errors with the member id the client sent (clients keep or reset it by it).
    bad = answered_now(harness, join_request(member_id="m-1", session_ms=1))
    assert (bad.error_code, bad.member_id) == (INVALID_SESSION_TIMEOUT, "m-1")
    unknown = answered_now(harness, join_request(member_id="nobody"))
    assert (unknown.error_code, unknown.member_id) == (UNKNOWN_MEMBER_ID, "nobody")
    (a,) = harness.stable_group(members=1)
    inconsistent = answered_now(harness, join_request(member_id=a.member_id,
                                                      protocols=[("other", b"")]))
    assert (inconsistent.error_code, inconsistent.member_id) == \
        (INCONSISTENT_GROUP_PROTOCOL, a.member_id)
    stranger = answered_now(harness, join_request(member_id="stranger"))
    assert (stranger.error_code, stranger.member_id) == (UNKNOWN_MEMBER_ID, "stranger")


def test_the_largest_session_timeout_is_allowed(make_harness: Any) -> None:
    h = make_harness({"group.max.session.timeout.ms": 9000})
    assert h.join(join_request(session_ms=9000)).wait().error_code == MEMBER_ID_REQUIRED


def test_a_dynamic_member_claiming_an_instance_id_is_unknown(harness: Harness) -> None:
    (a,) = harness.stable_group(members=1)
    result = answered_now(harness, join_request(member_id=a.member_id, instance_id="i-9"))
    assert (result.error_code, result.member_id) == (UNKNOWN_MEMBER_ID, a.member_id)


# -- rejoining an existing member ----------------------------------------------------------------


def test_rejoin_repeats_the_answer_with_the_members_own_id(harness: Harness) -> None:
    first = harness.join_new().wait()  # CompletingRebalance
    again = answered_now(harness, join_request(member_id=first.member_id))
    assert (again.error_code, again.member_id, again.members) == \
        (0, first.member_id, first.members)


def test_a_stable_follower_rejoining_unchanged_gets_its_own_id(harness: Harness) -> None:
    leader, follower = harness.stable_group(members=2)
    again = answered_now(harness, join_request(member_id=follower.member_id))
    assert (again.error_code, again.member_id, again.generation_id, again.members) == \
        (0, follower.member_id, follower.generation_id, [])
    assert again.leader == leader.member_id


def test_new_protocols_while_completing_the_rebalance_start_a_new_one(harness: Harness) -> None:
    first = harness.join_new().wait()
    assert harness.coordinator.groups["g"].state == GroupState.COMPLETING_REBALANCE
    again = harness.join(join_request(member_id=first.member_id,
                                      protocols=[("range", b"changed")])).wait()
    assert (again.error_code, again.member_id, again.generation_id) == \
        (0, first.member_id, first.generation_id + 1)
    assert again.members == [(first.member_id, None, b"changed")]


def test_a_rejoin_during_preparing_rebalance_updates_the_member(harness: Harness) -> None:
    a, b = harness.stable_group(members=2)
    parked_a = harness.join(join_request(member_id=a.member_id))  # Stable leader: rebalance
    assert not parked_a.done
    b_again = harness.join(join_request(member_id=b.member_id, protocols=[("range", b"new")]))
    results = [parked_a.wait(), b_again.wait()]
    assert [(r.error_code, r.generation_id) for r in results] == [(0, a.generation_id + 1)] * 2
    assert results[1].member_id == b.member_id
    assert sorted(results[0].members) == sorted([(a.member_id, None, b"m"),
                                                 (b.member_id, None, b"new")])


# -- group.max.size ------------------------------------------------------------------------------


def test_a_full_stable_group_refuses_newcomers_but_not_its_members(make_harness: Any) -> None:
    h = make_harness({"group.max.size": 1})
    (a,) = h.stable_group(members=1)
    refused = answered_now(h, join_request())
    assert (refused.error_code, refused.member_id) == (GROUP_MAX_SIZE_REACHED, "")
    again = h.join(join_request(member_id=a.member_id)).wait()  # the leader: a rebalance
    assert (again.error_code, again.generation_id) == (0, a.generation_id + 1)


def test_preparing_rebalance_counts_only_the_members_that_rejoined(make_harness: Any) -> None:
    h = make_harness({})
    h.stable_group(members=3)
    # The limit is lowered below the group's size (a restart with a new config).
    h.restart({**FAST, "group.max.size": 2})
    a, b, _ = list(h.coordinator.groups["g"].members)
    parked = [h.join(join_request(member_id=a))]  # Preparing, 1 of 3 rejoined
    assert answered_now(h, join_request()).error_code == MEMBER_ID_REQUIRED
    parked.append(h.join(join_request(member_id=b)))  # 2 rejoined: full
    refused = answered_now(h, join_request())
    assert (refused.error_code, refused.member_id) == (GROUP_MAX_SIZE_REACHED, "")
    # A member that already rejoined may rejoin again.
    again = h.join(join_request(member_id=a))
    assert not again.done
    assert not any(p.done for p in parked[1:])


# -- close ---------------------------------------------------------------------------------------


def test_close_answers_a_parked_sync_with_coordinator_not_available(harness: Harness) -> None:
    leader, follower = harness.stable_group(members=2)
    results = [harness.join(join_request(member_id=m.member_id)) for m in (leader, follower)]
    gen = results[1].wait()
    results[0].wait()
    parked_sync = harness.sync(sync_request("g", gen.generation_id, follower.member_id))
    assert not parked_sync.done
    harness.coordinator.close()
    assert parked_sync.done and parked_sync.value.error_code == COORDINATOR_NOT_AVAILABLE


def test_close_answers_a_parked_join_with_its_member_id(harness: Harness) -> None:
    (a,) = harness.stable_group(members=1)
    newcomer = harness.join_new()
    harness.coordinator.close()
    result = newcomer.value
    assert newcomer.done and result.error_code == COORDINATOR_NOT_AVAILABLE
    assert result.member_id in harness.coordinator.groups["g"].members
    assert result.member_id != a.member_id


def test_a_timer_task_running_after_close_does_nothing(harness: Harness) -> None:
    # A timer task may already wait for the lock while close() runs; it must not act after.
    harness.coordinator.close()
    ran: list[int] = []
    harness.coordinator._on_timer(lambda: ran.append(1))
    assert ran == []


# -- construction --------------------------------------------------------------------------------


def test_appends_to_consumer_offsets_are_reported(tmp_path: Path) -> None:
    appended: list[tuple[str, int]] = []
    logs = LogManager(tmp_path)
    c = GroupCoordinator(logs, {**FAST, "offsets.topic.segment.bytes": 123_456},
                         on_append=lambda topic, part: appended.append((topic, part)))
    try:
        logs.create_topic("t", 1)
        assert c.commit_offsets("solo", -1, "", None, [commit("t", 0, 5)]) == [0]
        assert appended == [(GROUP_METADATA_TOPIC, partition_for("solo", 3))]
        info = logs.topic(GROUP_METADATA_TOPIC)
        assert info is not None and info.configs["segment.bytes"] == "123456"
        # A partition past the topic's last is unknown (the default partition check).
        assert c.commit_offsets("solo", -1, "", None, [commit("t", 1, 5)]) == \
            [UNKNOWN_TOPIC_OR_PARTITION]
    finally:
        c.close()
        logs.close()


# -- loading __consumer_offsets ------------------------------------------------------------------


def test_load_skips_tombstones_of_keys_it_never_saw(harness: Harness) -> None:
    # Kafka's log cleaner removes a key's values before its tombstone: a tombstone may be first.
    harness.logs.create_topic("t", 1)
    store = harness.coordinator.store
    store.append("lost", [(offset_key("lost", "t", 0), None), (group_key("lost"), None)])
    store.append("bare", [(group_key("bare"), None)])  # a group never seen with offsets
    assert harness.coordinator.commit_offsets("kept", -1, "", None, [commit("t", 0, 9)]) == [0]
    c = harness.restart()
    assert "lost" not in c.groups and "bare" not in c.groups
    assert c.fetch_offsets("kept", [("t", 0)])[1][("t", 0)].offset == 9  # type: ignore[union-attr]


def test_a_group_tombstone_drops_the_groups_offsets_at_load(harness: Harness) -> None:
    harness.logs.create_topic("t", 1)
    c = harness.coordinator
    assert c.commit_offsets("gone", -1, "", None, [commit("t", 0, 3)]) == [0]
    c.store.append("gone", [(group_key("gone"), None)])
    c = harness.restart()
    assert "gone" not in c.groups
    assert c.fetch_offsets("gone", [("t", 0)])[1][("t", 0)] is None


def test_groups_after_one_without_offsets_are_still_loaded(harness: Harness) -> None:
    harness.logs.create_topic("t", 1)
    c = harness.coordinator
    assert c.commit_offsets("a", -1, "", None, [commit("t", 0, 1)]) == [0]
    assert c.commit_offsets("b", -1, "", None, [commit("t", 0, 2)]) == [0]
    c.store.append("a", [(offset_key("a", "t", 0), None)])  # a's only offset deleted
    c = harness.restart()
    assert "a" not in c.groups
    assert c.fetch_offsets("b", [("t", 0)])[1][("t", 0)].offset == 2  # type: ignore[union-attr]


# -- __consumer_offsets compacted by the log cleaner ----------------------------------------------


def offsets_log(h: Harness, group: str) -> Any:
    return h.logs.get_log(GROUP_METADATA_TOPIC, partition_for(group, 3))


def history_of(h: Harness, group: str, commits: int, *, records: int = 1) -> None:
    """``commits`` commits of ``records`` partitions each, then a rolled segment."""
    for i in range(commits):
        assert h.coordinator.commit_offsets(
            group, -1, "", None, [commit("t", p, i) for p in range(records)]) == [0] * records
    offsets_log(h, group).roll()


def test_the_cleaner_compacts_the_offsets_topic_and_keeps_an_empty_group(harness: Harness) -> None:
    harness.logs.create_topic("t", 3)
    (a,) = harness.stable_group("solo", members=1)
    harness.coordinator.leave_group("solo", [(a.member_id, None)])
    assert harness.coordinator.groups["solo"].state == GroupState.EMPTY
    history_of(harness, "solo", 12)
    # The broker's cleaner thread picks the dirtiest compacted log: __consumer_offsets here.
    cleaner = harness.logs.cleaner
    assert cleaner.clean_filthiest(cleaner.new_cleaner())
    plog = offsets_log(harness, "solo")
    kept = [(o, k) for o, k, _ in _stored(plog)]
    assert len(kept) == 2  # the group record and the last commit
    c = harness.restart()
    d = c.describe_group("solo")
    assert (d.state, d.protocol_type) == ("Empty", "consumer")
    assert c.fetch_offsets("solo", [("t", 0)])[1][("t", 0)].offset == 11  # type: ignore[union-attr]


def _stored(plog: Any) -> list[tuple[int, bytes | None, bytes | None]]:
    from samsa.records import iter_batches

    rows = []
    for segment in plog.segments_snapshot():
        for batch in iter_batches(segment.read_bytes(0, segment.size)):
            rows.extend((r.offset, r.key, r.value) for r in batch)
    return rows


# -- SyncGroup -----------------------------------------------------------------------------------


def test_the_leaders_assignment_restarts_the_sessions_of_the_members_it_answers(
        harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    # Kafka's completeAndScheduleNextHeartbeatExpiration: a member answered with its assignment
    # gets a fresh session; one that has not sent its SyncGroup yet keeps its deadline.
    members = harness.stable_group(members=3)
    rejoins = [harness.join(join_request(member_id=m.member_id)) for m in members]
    leader, waiting, late = [r.wait() for r in rejoins]
    parked = harness.sync(sync_request("g", waiting.generation_id, waiting.member_id))
    assert not parked.done
    c = harness.coordinator
    scheduled: list[Any] = []
    schedule = c.timer.schedule
    monkeypatch.setattr(c.timer, "schedule",
                        lambda key, *rest: (scheduled.append(key), schedule(key, *rest)))
    assignments = {m[0]: m[0].encode() for m in leader.members}
    assert harness.sync(sync_request("g", leader.generation_id, leader.member_id,
                                     assignments)).wait().error_code == 0
    assert parked.wait().assignment == waiting.member_id.encode()
    heartbeats = sorted(k[2] for k in scheduled if k[0] == "heartbeat")
    assert heartbeats == sorted([leader.member_id, waiting.member_id])
    assert late.member_id not in heartbeats
