"""The consumer's coordinator under injected errors from librdkafka's mock cluster: commits,
committed-offset lookups and coordinator discovery, judged against Java's ConsumerCoordinator
and AbstractCoordinator.

Errors are pushed with ``push_request_errors`` (the next requests of one API key, on any broker,
are answered with the given codes); request tracking counts what the consumer sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from samsa.consumer import KafkaConsumer, OffsetAndMetadata, TopicPartition
from samsa.consumer.errors import CommitFailedError
from samsa.errors import (
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    InconsistentGroupProtocolError,
    KafkaTimeoutError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
)
from tests.support.mock_cluster import MockCluster

TOPIC = "coord"
RECORDS_PER_PARTITION = 20

OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14

OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_REQUEST = 42
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
GROUP_AUTHORIZATION_FAILED = 30
FENCED_INSTANCE_ID = 82
TRANSPORT = -195  # librdkafka's mock drops the connection instead of answering

DEADLINE_POLLS = 200  # poll(0.05) slices before a waited-for event counts as missing


def new_cluster() -> MockCluster:
    mc = MockCluster(3, topics={TOPIC: 2}, group_initial_rebalance_delay_ms=0)
    p = Producer({"bootstrap.servers": mc.bootstrap_servers})
    for i in range(2 * RECORDS_PER_PARTITION):
        p.produce(TOPIC, value=f"v{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0
    return mc


@pytest.fixture(scope="module")
def cluster() -> Iterator[MockCluster]:
    with new_cluster() as mc:
        yield mc


@pytest.fixture
def own_cluster() -> Iterator[MockCluster]:
    """A cluster of the test's own, for broker-level pushes: once a broker has had errors or
    delays pushed for an API key, that (even empty) stack shadows the cluster-wide errors for
    the key on that broker (rdkafka_mock.c, rd_kafka_mock_next_request_error)."""
    with new_cluster() as mc:
        yield mc


@pytest.fixture
def tracked(cluster: MockCluster) -> Iterator[MockCluster]:
    """The cluster; errors a test pushed and did not use up are dropped after it."""
    yield cluster
    for key in (OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, SYNC_GROUP):
        cluster.clear_request_errors(key)


def conf(mc: MockCluster, group: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": mc.bootstrap_servers, "group.id": group,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "retry.backoff.ms": 20, "reconnect.backoff.ms": 20,
            **{k.replace("_", "."): v for k, v in extra.items()}}


TP0 = TopicPartition(TOPIC, 0)
TP1 = TopicPartition(TOPIC, 1)


def poll_until(consumer: KafkaConsumer, done: Callable[[], bool]) -> None:
    for _ in range(DEADLINE_POLLS):
        if done():
            return
        consumer.poll(0.05)
    assert done(), "the awaited event never happened"


def ready_consumer(mc: MockCluster, group: str, **extra: Any) -> KafkaConsumer:
    """A consumer with a manual assignment whose coordinator is known and connected."""
    consumer = KafkaConsumer(conf(mc, group, **extra))
    consumer.assign([TP0])
    consumer.commit({TP0: OffsetAndMetadata(1)})
    return consumer


# -- OffsetCommit: coordinator errors are retried after finding the coordinator again --------


@pytest.mark.parametrize("errors", [[NOT_COORDINATOR], [COORDINATOR_NOT_AVAILABLE],
                                    [NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE]])
def test_commit_sync_finds_the_coordinator_again_and_retries_after_coordinator_errors(
        tracked: MockCluster, errors: list[int]) -> None:
    # Java's OffsetCommitResponseHandler: COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR mark the
    # coordinator unknown and fail the attempt retriably; commitSync looks the coordinator up
    # again (FindCoordinator) and resends until it succeeds or its timeout runs out.
    with ready_consumer(tracked, f"g-commit-sync-{len(errors)}-{errors[0]}") as c:
        tracked.start_request_tracking()
        tracked.push_request_errors(OFFSET_COMMIT, errors)
        c.commit({TP0: OffsetAndMetadata(17, "after the errors")}, timeout=10)
        commits = tracked.requests(OFFSET_COMMIT)
        finds = tracked.requests(FIND_COORDINATOR)
        got = c.committed([TP0])[TP0]
    assert got is not None and (got.offset, got.metadata) == (17, "after the errors")
    assert len(commits) == len(errors) + 1
    assert len(finds) == len(errors)


def test_commit_sync_retries_a_loading_coordinator_without_looking_it_up_again(
        tracked: MockCluster) -> None:
    # OffsetCommitResponseHandler: COORDINATOR_LOAD_IN_PROGRESS is "just retry", same coordinator.
    with ready_consumer(tracked, "g-commit-loading") as c:
        tracked.start_request_tracking()
        tracked.push_request_errors(OFFSET_COMMIT, [COORDINATOR_LOAD_IN_PROGRESS] * 2)
        c.commit({TP0: OffsetAndMetadata(21)}, timeout=10)
        commits = tracked.requests(OFFSET_COMMIT)
        finds = tracked.requests(FIND_COORDINATOR)
        got = c.committed([TP0])[TP0]
    assert got is not None and got.offset == 21
    assert (len(commits), len(finds)) == (3, 0)


def test_commit_async_reports_a_coordinator_error_and_the_next_commit_rediscovers_it(
        tracked: MockCluster) -> None:
    # Java's commitAsync does not retry: the callback gets the retriable error (wrapped in
    # RetriableCommitFailedException) and the coordinator is marked unknown, so the next
    # commit goes through FindCoordinator to the current coordinator.
    results: list[tuple[dict[TopicPartition, OffsetAndMetadata], Exception | None]] = []

    def callback(offsets: dict[TopicPartition, OffsetAndMetadata], error: Exception | None) -> None:
        results.append((offsets, error))

    with ready_consumer(tracked, "g-commit-async") as c:
        tracked.start_request_tracking()
        tracked.push_request_errors(OFFSET_COMMIT, [NOT_COORDINATOR])
        c.commit_async({TP0: OffsetAndMetadata(8)}, callback=callback)
        poll_until(c, lambda: len(results) == 1)
        c.commit_async({TP0: OffsetAndMetadata(9)}, callback=callback)
        poll_until(c, lambda: len(results) == 2)
        finds = tracked.requests(FIND_COORDINATOR)
        got = c.committed([TP0])[TP0]
    (first_offsets, first_error), (second_offsets, second_error) = results
    assert first_offsets == {TP0: OffsetAndMetadata(8)}
    assert isinstance(first_error, NotCoordinatorError) and first_error.retriable
    assert second_offsets == {TP0: OffsetAndMetadata(9)} and second_error is None
    assert len(finds) == 1
    assert got is not None and got.offset == 9


def test_commit_survives_a_dropped_connection(tracked: MockCluster) -> None:
    # A disconnect is retriable for commitSync (the coordinator is looked up again); an async
    # commit reports it to its callback.
    results: list[Exception | None] = []
    with ready_consumer(tracked, "g-commit-dropped") as c:
        tracked.push_request_errors(OFFSET_COMMIT, [TRANSPORT])
        c.commit({TP0: OffsetAndMetadata(4)}, timeout=10)
        tracked.push_request_errors(OFFSET_COMMIT, [TRANSPORT])
        c.commit_async({TP0: OffsetAndMetadata(5)}, callback=lambda offsets, error: results.append(error))
        poll_until(c, lambda: bool(results))
        got = c.committed([TP0])[TP0]
    assert got is not None and got.offset == 4
    assert results[0] is not None and getattr(results[0], "retriable", False)


def test_non_retriable_commit_error_is_raised(tracked: MockCluster) -> None:
    with ready_consumer(tracked, "g-commit-too-large") as c:
        tracked.push_request_errors(OFFSET_COMMIT, [OFFSET_METADATA_TOO_LARGE])
        with pytest.raises(OffsetMetadataTooLargeError) as info:
            c.commit({TP0: OffsetAndMetadata(3, "m" * 10)}, timeout=10)
        assert f"{TOPIC}-0" in str(info.value)


def test_commit_sync_gives_up_at_its_timeout(tracked: MockCluster) -> None:
    with ready_consumer(tracked, "g-commit-timeout") as c:
        tracked.push_request_errors(OFFSET_COMMIT, [COORDINATOR_LOAD_IN_PROGRESS] * 10_000)
        with pytest.raises(KafkaTimeoutError) as info:
            c.commit({TP0: OffsetAndMetadata(3)}, timeout=0.3)
    assert "offset commit" in str(info.value) and "300" in str(info.value)


def test_empty_commits_send_nothing_and_callbacks_run_in_order_even_if_one_raises(
        tracked: MockCluster) -> None:
    results: list[str] = []

    def failing(offsets: dict[TopicPartition, OffsetAndMetadata], error: Exception | None) -> None:
        results.append("failing")
        raise RuntimeError("a callback bug")

    with ready_consumer(tracked, "g-commit-empty") as c:
        tracked.start_request_tracking()
        c.commit({})
        c.commit_async({}, callback=failing)
        c.commit_async({TP0: OffsetAndMetadata(7)},
                       callback=lambda offsets, error: results.append(f"second {error}"))
        poll_until(c, lambda: len(results) == 2)
        commits = tracked.requests(OFFSET_COMMIT)
    assert results == ["failing", "second None"]
    assert len(commits) == 1


# -- FindCoordinator ---------------------------------------------------------------------------


def test_find_coordinator_retries_while_no_coordinator_is_available(tracked: MockCluster) -> None:
    # AbstractCoordinator.lookupCoordinator: a retriable FindCoordinator error is retried after
    # retry.backoff.ms until the caller's timer runs out.
    tracked.start_request_tracking()
    tracked.push_request_errors(FIND_COORDINATOR, [COORDINATOR_NOT_AVAILABLE] * 2)
    with KafkaConsumer(conf(tracked, "g-find-retry")) as c:
        c.assign([TP0])
        c.commit({TP0: OffsetAndMetadata(3)}, timeout=10)
        finds = tracked.requests(FIND_COORDINATOR)
        got = c.committed([TP0])[TP0]
    assert len(finds) == 3
    assert got is not None and got.offset == 3


def test_find_coordinator_authorization_failure_is_raised_naming_the_group(tracked: MockCluster) -> None:
    # FindCoordinatorResponseHandler: GROUP_AUTHORIZATION_FAILED is fatal for the call
    # (GroupAuthorizationException(groupId)), not retried.
    tracked.push_request_errors(FIND_COORDINATOR, [GROUP_AUTHORIZATION_FAILED])
    with KafkaConsumer(conf(tracked, "g-find-denied")) as c:
        c.assign([TP0])
        with pytest.raises(GroupAuthorizationFailedError) as info:
            c.commit({TP0: OffsetAndMetadata(3)}, timeout=10)
        assert "g-find-denied" in str(info.value)
        # The failure is not sticky: the next call finds the coordinator.
        c.commit({TP0: OffsetAndMetadata(4)}, timeout=10)
        got = c.committed([TP0])[TP0]
    assert got is not None and got.offset == 4


def test_find_coordinator_gives_up_at_the_callers_timeout_naming_the_group(tracked: MockCluster) -> None:
    tracked.push_request_errors(FIND_COORDINATOR, [COORDINATOR_NOT_AVAILABLE] * 10_000)
    with KafkaConsumer(conf(tracked, "g-find-timeout")) as c:
        c.assign([TP0])
        with pytest.raises(KafkaTimeoutError) as info:
            c.committed([TP0], timeout=0.3)
    assert "coordinator" in str(info.value) and "g-find-timeout" in str(info.value)


# -- OffsetFetch -------------------------------------------------------------------------------


@pytest.mark.parametrize("error", [NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS])
def test_committed_retries_coordinator_errors(tracked: MockCluster, error: int) -> None:
    # OffsetFetchResponseHandler: COORDINATOR_LOAD_IN_PROGRESS is retried as is; NOT_COORDINATOR
    # marks the coordinator unknown first, so the retry goes through FindCoordinator.
    with ready_consumer(tracked, f"g-fetch-{error}") as c:
        c.commit({TP0: OffsetAndMetadata(6, "six")})
        tracked.start_request_tracking()
        tracked.push_request_errors(OFFSET_FETCH, [error])
        got = c.committed([TP0], timeout=10)[TP0]
        fetches = tracked.requests(OFFSET_FETCH)
        finds = tracked.requests(FIND_COORDINATOR)
    assert got is not None and (got.offset, got.metadata) == (6, "six")
    assert len(fetches) == 2
    assert len(finds) == (1 if error == NOT_COORDINATOR else 0)


def test_committed_survives_a_dropped_connection(tracked: MockCluster) -> None:
    with ready_consumer(tracked, "g-fetch-dropped") as c:
        tracked.push_request_errors(OFFSET_FETCH, [TRANSPORT])
        got = c.committed([TP0], timeout=10)[TP0]
    assert got is not None and got.offset == 1


def test_seek_while_the_committed_offset_is_fetched_wins(own_cluster: MockCluster) -> None:
    tracked = own_cluster
    # Only partitions still initializing take the committed offset (Java's
    # refreshCommittedOffsets); a seek() made meanwhile stands.
    group = "g-seek-wins"
    tracked.set_coordinator("group", group, 3)
    with ready_consumer(tracked, group) as c:
        c.commit({TP1: OffsetAndMetadata(2)})
    with KafkaConsumer(conf(tracked, group)) as c:
        c.assign([TP1])
        c.committed([TP1])  # coordinator known and connected
        tracked.broker_push_request_error_rtts(3, OFFSET_FETCH, [(0, 300)])
        c.poll(0)  # sends the OffsetFetch for the position
        c.seek(TP1, 12)
        coordinator = c._coordinator
        got: list[Any] = []
        for _ in range(DEADLINE_POLLS):
            got.extend(c.poll(0.05))
            # Until the delayed OffsetFetch answer is in and everything after 12 was read.
            if coordinator._committed_request is None and len(got) >= RECORDS_PER_PARTITION - 12:
                break
        got.extend(c.poll(0.2))  # what a committed offset applied after the seek would refetch
        assert tracked.broker_error_stack_count(3, OFFSET_FETCH) == 0  # the delay was used
    assert [r.offset for r in got] == list(range(12, RECORDS_PER_PARTITION))


def test_committed_raises_a_non_retriable_error(tracked: MockCluster) -> None:
    with ready_consumer(tracked, "g-fetch-denied") as c:
        tracked.push_request_errors(OFFSET_FETCH, [GROUP_AUTHORIZATION_FAILED])
        with pytest.raises(GroupAuthorizationFailedError):
            c.committed([TP0], timeout=10)


def test_newly_assigned_partition_starts_at_its_committed_offset_after_a_retriable_error(
        tracked: MockCluster) -> None:
    # ConsumerCoordinator.refreshCommittedOffsetsIfNeeded: the OffsetFetch for positions is
    # retried on the next poll; the position then comes from the commit, not auto.offset.reset.
    group = "g-refresh"
    with ready_consumer(tracked, group) as c:
        c.commit({TP1: OffsetAndMetadata(15)})
    tracked.push_request_errors(OFFSET_FETCH, [TRANSPORT, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS])
    with KafkaConsumer(conf(tracked, group)) as c:
        c.assign([TP1])
        # Every poll's records are kept: poll_until's own poll() between checks would drop
        # whatever it returned (the five records, whenever they arrived in that poll).
        got: list[Any] = []
        for _ in range(DEADLINE_POLLS):
            got.extend(c.poll(0.05))
            if len(got) >= 5:
                break
    assert [r.offset for r in got] == list(range(15, RECORDS_PER_PARTITION))


def test_newly_assigned_partition_raises_a_non_retriable_offset_fetch_error(tracked: MockCluster) -> None:
    tracked.push_request_errors(OFFSET_FETCH, [GROUP_AUTHORIZATION_FAILED])
    with KafkaConsumer(conf(tracked, "g-refresh-denied")) as c:
        c.assign([TP1])
        with pytest.raises(GroupAuthorizationFailedError):
            for _ in range(DEADLINE_POLLS):
                c.poll(0.05)


# -- close ---------------------------------------------------------------------------------------


def test_close_waits_for_an_async_commit_in_flight_and_runs_its_callback(own_cluster: MockCluster) -> None:
    tracked = own_cluster
    # ConsumerCoordinator.close -> maybeAutoCommitOffsetsSync / waiting for pending async
    # commits within the close timeout: a commit sent before close() is not lost.
    group = "g-close-commit"
    tracked.set_coordinator("group", group, 2)
    results: list[Exception | None] = []
    c = ready_consumer(tracked, group)
    try:
        tracked.broker_push_request_error_rtts(2, OFFSET_COMMIT, [(0, 300)])
        c.commit_async({TP0: OffsetAndMetadata(12)}, callback=lambda offsets, error: results.append(error))
        assert results == []
    finally:
        c.close(timeout=10)
    assert results == [None]
    with KafkaConsumer(conf(tracked, group)) as again:
        got = again.committed([TP0])[TP0]
    assert got is not None and got.offset == 12


def test_close_with_auto_commit_and_nothing_consumed_commits_nothing(tracked: MockCluster) -> None:
    # ConsumerCoordinator.maybeAutoCommitOffsetsSync commits the consumed positions only.
    c = KafkaConsumer(conf(tracked, "g-close-nothing", enable_auto_commit=True))
    c.assign([TP0])
    c.committed([TP0])  # coordinator known
    tracked.start_request_tracking()
    c.close(timeout=10)
    assert tracked.requests(OFFSET_COMMIT) == []


def test_close_fails_async_commits_it_could_not_send_within_its_timeout(tracked: MockCluster) -> None:
    results: list[Exception | None] = []
    tracked.push_request_errors(FIND_COORDINATOR, [COORDINATOR_NOT_AVAILABLE] * 1000)
    c = KafkaConsumer(conf(tracked, "g-close-unsent"))
    c.assign([TP0])
    c.commit_async({TP0: OffsetAndMetadata(2)}, callback=lambda offsets, error: results.append(error))
    c.close(timeout=0.3)
    assert len(results) == 1 and isinstance(results[0], KafkaTimeoutError)
    assert "async commit" in str(results[0])


# -- membership errors ---------------------------------------------------------------------------


class Listener:
    def __init__(self) -> None:
        self.assigned: list[list[TopicPartition]] = []
        self.revoked: list[list[TopicPartition]] = []
        self.lost: list[list[TopicPartition]] = []

    def on_partitions_assigned(self, parts: list[TopicPartition]) -> None:
        self.assigned.append(sorted(parts))

    def on_partitions_revoked(self, parts: list[TopicPartition]) -> None:
        self.revoked.append(sorted(parts))

    def on_partitions_lost(self, parts: list[TopicPartition]) -> None:
        self.lost.append(sorted(parts))


class RevokeOnlyListener:
    def __init__(self) -> None:
        self.revoked: list[list[TopicPartition]] = []

    def on_partitions_assigned(self, parts: list[TopicPartition]) -> None:
        pass

    def on_partitions_revoked(self, parts: list[TopicPartition]) -> None:
        self.revoked.append(sorted(parts))


def member(mc: MockCluster, group: str, listener: Any, **extra: Any) -> KafkaConsumer:
    """A group member that owns both partitions."""
    # A short session: the mock waits for a replaced member's session to end before it
    # completes the rebalance that a member rejoining under a new id starts.
    c = KafkaConsumer(conf(mc, group, **{"session_timeout_ms": 1000, "heartbeat_interval_ms": 100, **extra}))
    c.subscribe([TOPIC], listener=listener)
    poll_until(c, lambda: len(c.assignment()) == 2)
    return c


def test_membership_errors_lose_the_partitions_and_rejoin_as_a_new_member(tracked: MockCluster) -> None:
    # Heartbeat UNKNOWN_MEMBER_ID (HeartbeatResponseHandler) and OffsetCommit ILLEGAL_GENERATION
    # (OffsetCommitResponseHandler, then CommitFailedException) both end in
    # resetGenerationOnResponseError: generation and member id are reset, the partitions are
    # lost (onPartitionsLost, KIP-429: another member may own them already) and the next poll
    # joins again with an empty member id.
    listener = Listener()
    with member(tracked, "g-membership", listener) as c:
        first = c.group_metadata()
        tracked.push_request_errors(HEARTBEAT, [UNKNOWN_MEMBER_ID])
        poll_until(c, lambda: len(listener.lost) == 1 and len(c.assignment()) == 2)
        second = c.group_metadata()
        tracked.push_request_errors(OFFSET_COMMIT, [ILLEGAL_GENERATION])
        with pytest.raises(CommitFailedError):
            c.commit({TP0: OffsetAndMetadata(1)})
        assert len(listener.lost) == 2 and c.assignment() == set()
        poll_until(c, lambda: len(c.assignment()) == 2)
        third = c.group_metadata()
        assert listener.revoked == []  # (close() revokes; a lost partition is not revoked)
    assert listener.lost == [[TP0, TP1]] * 2
    assert listener.assigned == [[TP0, TP1]] * 3
    assert len({first.member_id, second.member_id, third.member_id}) == 3
    assert first.generation_id < second.generation_id < third.generation_id


def test_fenced_static_member_gets_the_error_instead_of_fencing_the_other_instance(
        tracked: MockCluster) -> None:
    # KIP-345: FENCED_INSTANCE_ID means another consumer runs with this group.instance.id.
    # Java's heartbeat thread fails with FencedInstanceIdException, which the next poll()
    # throws; rejoining silently would fence the other instance in turn.  The partitions are
    # lost; a listener without on_partitions_lost hears of it through on_partitions_revoked
    # (ConsumerRebalanceListener.onPartitionsLost's default).
    listener = RevokeOnlyListener()
    with member(tracked, "g-fenced", listener, group_instance_id="static-1") as c:
        tracked.push_request_errors(HEARTBEAT, [FENCED_INSTANCE_ID])
        with pytest.raises(FencedInstanceIdError) as info:
            for _ in range(DEADLINE_POLLS):
                c.poll(0.05)
        assert "static-1" in str(info.value)
        assert listener.revoked == [[TP0, TP1]] and c.assignment() == set()
        # A commit answered FENCED_INSTANCE_ID fails with that error (not CommitFailedError).
        tracked.push_request_errors(OFFSET_COMMIT, [FENCED_INSTANCE_ID])
        with pytest.raises(FencedInstanceIdError):
            c.commit({TP0: OffsetAndMetadata(1)})


def test_sync_group_invalid_request_rejoins(tracked: MockCluster) -> None:
    # librdkafka's mock answers a follower's SyncGroup that comes after the leader's with
    # INVALID_REQUEST (rdkafka_mock_cgrp.c); the member rejoins, as librdkafka does, instead of
    # failing the application's poll().
    tracked.start_request_tracking()
    tracked.push_request_errors(SYNC_GROUP, [INVALID_REQUEST])
    with member(tracked, "g-sync-invalid", Listener()) as c:
        assert len(tracked.requests(SYNC_GROUP)) == 2
        assert len(tracked.requests(JOIN_GROUP)) >= 2
        assert len(c.assignment()) == 2


def test_group_member_recovers_from_coordinator_and_rebalance_errors(tracked: MockCluster) -> None:
    # AbstractCoordinator: JoinGroup NOT_COORDINATOR marks the coordinator unknown and the join
    # goes to the rediscovered one; JoinGroup or SyncGroup REBALANCE_IN_PROGRESS rejoins; a
    # heartbeat whose connection drops only marks the coordinator unknown (the membership
    # stands).  ConsumerCoordinator: a commit answered REBALANCE_IN_PROGRESS raises
    # RebalanceInProgressException and the next poll rejoins (eager: revoke, then assign;
    # the generation is kept until the new one, nothing is lost).  unsubscribe() revokes and
    # sends LeaveGroup.
    listener = Listener()
    tracked.start_request_tracking()
    tracked.push_request_errors(JOIN_GROUP, [NOT_COORDINATOR, REBALANCE_IN_PROGRESS])
    tracked.push_request_errors(SYNC_GROUP, [REBALANCE_IN_PROGRESS])
    with member(tracked, "g-recovers", listener) as c:
        assert len(tracked.requests(SYNC_GROUP)) == 2
        assert len(tracked.requests(FIND_COORDINATOR)) == 2
        joined = c.group_metadata()

        tracked.clear_requests()
        tracked.push_request_errors(HEARTBEAT, [TRANSPORT])
        poll_until(c, lambda: len(tracked.requests(FIND_COORDINATOR)) == 1
                   and len(tracked.requests(HEARTBEAT)) >= 2)
        assert c.group_metadata() == joined and listener.lost == []

        tracked.push_request_errors(OFFSET_COMMIT, [REBALANCE_IN_PROGRESS])
        with pytest.raises(RebalanceInProgressError):
            c.commit({TP0: OffsetAndMetadata(2)})
        poll_until(c, lambda: c.group_metadata().generation_id > joined.generation_id
                   and len(c.assignment()) == 2)
        assert c.group_metadata().member_id == joined.member_id
        assert listener.revoked == [[TP0, TP1]] and listener.lost == []
        c.commit({TP0: OffsetAndMetadata(2)})

        tracked.clear_requests()
        c.unsubscribe()
        assert len(tracked.requests(LEAVE_GROUP)) == 1
        assert listener.revoked == [[TP0, TP1]] * 2 and c.assignment() == set()
    assert listener.assigned == [[TP0, TP1]] * 2


def test_fatal_join_error_is_raised_by_poll(tracked: MockCluster) -> None:
    # JoinGroupResponseHandler: INCONSISTENT_GROUP_PROTOCOL (and other non-retriable errors)
    # fail the join and poll() throws.
    tracked.push_request_errors(JOIN_GROUP, [INCONSISTENT_GROUP_PROTOCOL])
    with KafkaConsumer(conf(tracked, "g-join-fatal")) as c:
        c.subscribe([TOPIC])
        with pytest.raises(InconsistentGroupProtocolError) as info:
            for _ in range(DEADLINE_POLLS):
                c.poll(0.05)
    assert "g-join-fatal" in str(info.value)


def test_fatal_find_coordinator_error_is_raised_by_poll(tracked: MockCluster) -> None:
    tracked.push_request_errors(FIND_COORDINATOR, [GROUP_AUTHORIZATION_FAILED])
    with KafkaConsumer(conf(tracked, "g-find-fatal")) as c:
        c.subscribe([TOPIC])
        with pytest.raises(GroupAuthorizationFailedError):
            for _ in range(DEADLINE_POLLS):
                c.poll(0.05)
