"""The coordinator when the group cannot be stored at the leader's SyncGroup, the Stable SyncGroup
answer, and the deadlines it arms (new members' join deadline, the initial rebalance delay and its
extension while members keep arriving, the wait when nobody rejoined).  Deadlines are checked
through the timer's keys and the delays handed to it, and fired by hand: no test waits for time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from samsa.broker.group import GroupState, PartitionCommit
from samsa.broker.group.coordinator import NEW_MEMBER_JOIN_TIMEOUT_MS
from samsa.errors import KafkaStorageError

from .conftest import Harness, sync_request
from .test_coordinator import static_stable
from .test_coordinator_sync_deadline import two_member_generation

COORDINATOR_NOT_AVAILABLE = 15
JOIN_KEY = ("join", "g")


class Schedules:
    """Records what the coordinator hands its timer: (key, delay_ms, task)."""

    def __init__(self, harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[Any, float, Callable[[], None]]] = []
        timer = harness.coordinator.timer
        schedule = timer.schedule

        def recording(key: Any, delay_ms: float, task: Callable[[], None]) -> None:
            self.calls.append((key, delay_ms, task))
            schedule(key, delay_ms, task)

        monkeypatch.setattr(timer, "schedule", recording)

    def of(self, key: Any) -> list[tuple[float, Callable[[], None]]]:
        return [(delay, task) for k, delay, task in self.calls if k == key]


# -- the group cannot be stored at the leader's SyncGroup -----------------------------------------


def test_leader_sync_that_cannot_be_stored_fails_every_parked_sync_and_rebalances(
        harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    leader, follower = two_member_generation(harness)
    parked = harness.sync(sync_request("g", 2, follower))
    assert not parked.done
    c = harness.coordinator

    def failing_append(*args: Any, **kwargs: Any) -> None:
        raise KafkaStorageError("disk gone")

    monkeypatch.setattr(c.store, "append", failing_append)
    answer = harness.sync(sync_request("g", 2, leader, {leader: b"L", follower: b"F"}))
    # COORDINATOR_NOT_AVAILABLE (retriable) for both, with no assignment: the client rejoins.
    for result in (answer.wait(), parked.wait()):
        assert (result.error_code, result.assignment, result.protocol_type,
                result.protocol_name) == (COORDINATOR_NOT_AVAILABLE, b"", None, None)
    group = c.groups["g"]
    assert group.state == GroupState.PREPARING_REBALANCE
    assert c.timer.is_scheduled(JOIN_KEY)  # the members' rejoin deadline
    # The unstored assignment is not handed out later either.
    assert all(m.assignment == b"" for m in group.members.values())


# -- SyncGroup in Stable --------------------------------------------------------------------------


def test_sync_in_stable_answers_the_assignment_with_the_protocol_type_and_name(
        harness: Harness) -> None:
    _leader, follower = harness.stable_group(members=2)
    again = harness.sync(sync_request("g", follower.generation_id, follower.member_id)).wait()
    assert (again.error_code, again.assignment, again.protocol_type, again.protocol_name) == \
        (0, follower.member_id.encode(), "consumer", "range")


# -- deadlines ------------------------------------------------------------------------------------


def test_a_new_member_gets_the_new_member_join_deadline_not_its_session(
        harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    # Kafka's NewMemberJoinTimeoutMs: a joining newcomer is given 5 minutes, whatever its session.
    (a,) = harness.stable_group(members=1)
    schedules = Schedules(harness, monkeypatch)
    harness.join_new(session_ms=20_000)
    newcomer = next(m for m in harness.coordinator.groups["g"].members if m != a.member_id)
    # (The first deadline, its session, was the pending member id's, from the handshake.)
    assert [d for d, _ in schedules.of(("heartbeat", "g", newcomer))] == \
        [20_000, NEW_MEMBER_JOIN_TIMEOUT_MS]


def test_initial_delay_is_extended_while_members_keep_arriving(
        make_harness: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # group.initial.rebalance.delay.ms 10 s, rebalance timeout 30 s: at most 20 s of extensions.
    h = make_harness({"group.initial.rebalance.delay.ms": 10_000})
    schedules = Schedules(h, monkeypatch)
    c = h.coordinator
    joins = [h.join_new()]
    assert c.timer.is_scheduled(JOIN_KEY)
    assert [d for d, _ in schedules.of(JOIN_KEY)] == [10_000]
    for expected_next in (10_000, 10_000):
        joins.append(h.join_new())  # a member arrives within the delay: wait another delay
        schedules.of(JOIN_KEY)[-1][1]()
        assert not any(j.done for j in joins)
        assert c.groups["g"].state == GroupState.PREPARING_REBALANCE
        assert schedules.of(JOIN_KEY)[-1][0] == expected_next
    # The rebalance timeout is used up: the next expiry completes the join despite a newcomer,
    # there and then, with no further wait armed.
    joins.append(h.join_new())
    armed = len(schedules.of(JOIN_KEY))
    schedules.of(JOIN_KEY)[-1][1]()
    assert all(j.done for j in joins) and len(schedules.of(JOIN_KEY)) == armed
    results = [j.wait() for j in joins]
    assert {r.generation_id for r in results} == {1} and len(results) == 4


def _lone_member_completes_at_the_delay(make_harness: Any, monkeypatch: pytest.MonkeyPatch
                                        ) -> tuple[Any, Callable[[], None]]:
    """One member joins; firing the initial-delay expiry completes its join (generation 1).
    Returns the harness and that expiry task."""
    h = make_harness({"group.initial.rebalance.delay.ms": 10_000})
    schedules = Schedules(h, monkeypatch)
    first = h.join_new()
    (_, task), = schedules.of(JOIN_KEY)
    task()
    assert first.wait().generation_id == 1
    return h, task


def test_initial_delay_not_extended_when_nobody_else_arrived(
        make_harness: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _lone_member_completes_at_the_delay(make_harness, monkeypatch)


def test_initial_delay_extension_uses_the_last_millisecond_of_the_rebalance_timeout(
        make_harness: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Rebalance timeout = delay + 1 ms: one more, 1 ms, wait for a member that arrived.
    h = make_harness({"group.initial.rebalance.delay.ms": 10_000})
    schedules = Schedules(h, monkeypatch)
    h.join_new(rebalance_ms=10_001)
    h.join_new(rebalance_ms=10_001)  # arrives within the delay
    schedules.of(JOIN_KEY)[-1][1]()
    # (Not checked: that the joins wait; the 1 ms wait may have ended already.)
    assert [d for d, _ in schedules.of(JOIN_KEY)] == [10_000, 1]


def test_no_initial_delay_extension_when_the_delay_covers_the_rebalance_timeout(
        make_harness: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    h = make_harness({"group.initial.rebalance.delay.ms": 10_000})
    schedules = Schedules(h, monkeypatch)
    joins = [h.join_new(rebalance_ms=10_000), h.join_new(rebalance_ms=10_000)]
    schedules.of(JOIN_KEY)[-1][1]()
    # Completed there and then, although a member arrived during the delay: no wait is armed.
    assert all(j.done for j in joins) and len(schedules.of(JOIN_KEY)) == 1
    assert {j.wait().generation_id for j in joins} == {1}


def test_a_late_initial_delay_expiry_leaves_the_completed_rebalance_alone(
        make_harness: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    h, task = _lone_member_completes_at_the_delay(make_harness, monkeypatch)
    task()  # the timer thread took it just before the completion: nothing happens
    group = h.coordinator.groups["g"]
    assert (group.state, group.generation_id) == (GroupState.COMPLETING_REBALANCE, 1)


def test_when_nobody_rejoins_the_group_waits_another_rebalance_timeout(
        harness: Harness) -> None:
    # Only static members are left and none rejoined: they are kept, and the group waits for
    # their sessions to end (or for them to rejoin) instead of starting a generation.
    a, b = static_stable(harness)
    c = harness.coordinator
    assert c.leave_group("g", [(b.member_id, "node-b")])[0] == 0
    assert c.timer.is_scheduled(JOIN_KEY)
    c.timer.cancel(JOIN_KEY)  # as if the deadline had just fired
    c._on_timer(c._join_expired, "g")
    group = c.groups["g"]
    assert (group.state, list(group.members)) == (GroupState.PREPARING_REBALANCE, [a.member_id])
    assert c.timer.is_scheduled(JOIN_KEY)


# -- offsets --------------------------------------------------------------------------------------


def test_commit_without_a_timestamp_is_stamped_with_the_current_time(harness: Harness) -> None:
    harness.logs.create_topic("t", 1)
    c = harness.coordinator
    before = time.time_ns() // 1_000_000
    errors = c.commit_offsets("g", -1, "", None, [PartitionCommit("t", 0, 5, -1, "")])
    after = time.time_ns() // 1_000_000
    assert errors == [0]
    stamp = c.groups["g"].offsets[("t", 0)].commit_timestamp_ms
    assert before <= stamp <= after
