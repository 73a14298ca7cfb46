"""offsets.retention.minutes / offsets.retention.check.interval.ms (KIP-211): committed offsets
expire as Kafka 2.1+'s group coordinator expires them -- a standalone consumer's retention after
its commit, an Empty group's retention after it became Empty, nothing of what a Stable group is
subscribed to -- with tombstones in __consumer_offsets, so a restart does not bring them back;
an Empty group left with no offsets is removed."""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import Any

from samsa.broker.group import GroupCoordinator, PartitionCommit
from samsa.broker.group.records import OffsetValue, decode_key, decode_offset_value, offset_value
from tests.broker.group.conftest import Harness, eventually, join_request, sync_request

MINUTE = 60_000
RETENTION = 2 * MINUTE
CONFIG = {"offsets.retention.minutes": 2}


def subscription(*topics: str) -> bytes:
    """A consumer protocol Subscription v0 naming ``topics``."""
    body = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        body += struct.pack(">h", len(topic)) + topic.encode()
    return body + struct.pack(">i", -1)  # no user data


def commit(c: GroupCoordinator, group: str, *tps: tuple[str, int], offset: int = 5,
           generation: int = -1, member: str = "", **extra: Any) -> None:
    commits = [PartitionCommit(t, p, offset, -1, "", **extra) for t, p in tps]
    assert c.commit_offsets(group, generation, member, None, commits) == [0] * len(commits)


def committed(c: GroupCoordinator, group: str, tp: tuple[str, int]) -> int:
    """OffsetFetch's answer: -1 where nothing is committed."""
    _, found = c.fetch_offsets(group, [tp])
    o = found[tp]
    return -1 if o is None else o.offset


def commit_time(c: GroupCoordinator, group: str, tp: tuple[str, int]) -> int:
    return c.groups[group].offsets[tp].commit_timestamp_ms


def stable_consumer_group(h: Harness, group: str, topics: tuple[str, ...]) -> Any:
    protocols = [("range", subscription(*topics))]
    first = h.join(join_request(group, protocols=protocols)).wait()
    joined = h.join(join_request(group, first.member_id, protocols=protocols)).wait()
    assert joined.error_code == 0
    synced = h.sync(sync_request(group, joined.generation_id, joined.member_id,
                                 {joined.member_id: b""})).wait()
    assert synced.error_code == 0
    return joined


def test_simple_consumer_offsets_expire_after_their_commit(
        make_harness: Callable[[dict[str, Any]], Harness]) -> None:
    h = make_harness(CONFIG)
    h.logs.create_topic("t", 2)
    c = h.coordinator
    commit(c, "solo", ("t", 0))
    time.sleep(0.005)
    commit(c, "solo", ("t", 1))
    first, second = commit_time(c, "solo", ("t", 0)), commit_time(c, "solo", ("t", 1))
    assert second > first
    assert c.expire_offsets(first + RETENTION - 1) == 0
    assert c.expire_offsets(first + RETENTION) == 1  # each offset by its own commit time
    assert committed(c, "solo", ("t", 0)) == -1 and committed(c, "solo", ("t", 1)) == 5
    assert c.expire_offsets(second + RETENTION) == 1
    assert committed(c, "solo", ("t", 1)) == -1
    assert "solo" not in c.groups  # no members, no offsets: removed
    assert c.describe_group("solo").state == "Dead"
    # The tombstones keep them gone after a restart.
    c = h.restart()
    assert committed(c, "solo", ("t", 0)) == committed(c, "solo", ("t", 1)) == -1
    assert "solo" not in c.groups


def test_empty_group_offsets_expire_retention_after_it_became_empty(
        make_harness: Callable[[dict[str, Any]], Harness]) -> None:
    h = make_harness(CONFIG)
    h.logs.create_topic("t", 1)
    c = h.coordinator
    joined = stable_consumer_group(h, "g", ("t",))
    # Committed long ago (OffsetCommit v1's explicit timestamp): still kept while subscribed.
    old = int(time.time() * 1000) - 10 * RETENTION
    commit(c, "g", ("t", 0), generation=joined.generation_id, member=joined.member_id,
           commit_timestamp_ms=old)
    assert c.expire_offsets() == 0
    assert c.groups["g"].state.value == "Stable"
    assert c.leave_group("g", [(joined.member_id, None)])[0] == 0
    eventually(lambda: c.groups["g"].state.value == "Empty")
    empty_since = c.groups["g"].state_timestamp_ms
    assert c.expire_offsets(empty_since + RETENTION - 1) == 0
    # A restart keeps when the group became Empty (GroupMetadataValue.current_state_timestamp).
    c = h.restart()
    assert c.groups["g"].state_timestamp_ms == empty_since
    assert c.expire_offsets(empty_since + RETENTION - 1) == 0
    assert committed(c, "g", ("t", 0)) == 5
    assert c.expire_offsets(empty_since + RETENTION) == 1
    assert committed(c, "g", ("t", 0)) == -1
    assert "g" not in c.groups
    c = h.restart()
    assert committed(c, "g", ("t", 0)) == -1
    assert "g" not in c.groups


def test_stable_group_keeps_subscribed_offsets(
        make_harness: Callable[[dict[str, Any]], Harness]) -> None:
    h = make_harness(CONFIG)
    h.logs.create_topic("t", 1)
    h.logs.create_topic("old", 1)
    c = h.coordinator
    joined = stable_consumer_group(h, "g", ("t",))
    commit(c, "g", ("t", 0), ("old", 0), generation=joined.generation_id,
           member=joined.member_id)
    later = commit_time(c, "g", ("t", 0)) + 100 * RETENTION
    # A topic the group no longer consumes expires after its commit (KIP-496); the
    # subscribed one never does while the group is Stable.
    assert c.expire_offsets(later) == 1
    assert committed(c, "g", ("old", 0)) == -1
    assert committed(c, "g", ("t", 0)) == 5
    assert c.groups["g"].state.value == "Stable"


def test_rebalancing_group_expires_nothing(
        make_harness: Callable[[dict[str, Any]], Harness]) -> None:
    h = make_harness(CONFIG)
    h.logs.create_topic("old", 1)
    c = h.coordinator
    joined = stable_consumer_group(h, "g", ("t",))
    commit(c, "g", ("old", 0), generation=joined.generation_id, member=joined.member_id)
    h.join(join_request("g", joined.member_id, protocols=[("range", subscription("t"))]))
    eventually(lambda: c.groups["g"].state.value != "Stable")
    assert c.expire_offsets(commit_time(c, "g", ("old", 0)) + 100 * RETENTION) == 0


def test_explicit_retention_time_sets_the_expiry(
        make_harness: Callable[[dict[str, Any]], Harness]) -> None:
    h = make_harness(CONFIG)
    h.logs.create_topic("t", 1)
    c = h.coordinator
    commit(c, "old-client", ("t", 0), retention_time_ms=1_000)
    stored = c.groups["old-client"].offsets[("t", 0)]
    assert stored.expire_timestamp_ms == stored.commit_timestamp_ms + 1_000
    c = h.restart()  # stored as OffsetCommitValue v1, with its expire timestamp
    assert c.groups["old-client"].offsets[("t", 0)] == stored
    assert c.expire_offsets(stored.expire_timestamp_ms - 1) == 0
    assert c.expire_offsets(stored.expire_timestamp_ms) == 1


def test_a_retention_time_near_int64_max_keeps_the_offset_for_ever(
        make_harness: Callable[[dict[str, Any]], Harness]) -> None:
    """commit time + 2^63-1 does not fit the stored int64 (the fuzzer's find): capped."""
    h = make_harness(CONFIG)
    h.logs.create_topic("t", 1)
    c = h.coordinator
    commit(c, "old-client", ("t", 0), retention_time_ms=2**63 - 1)
    assert c.groups["old-client"].offsets[("t", 0)].expire_timestamp_ms == 2**63 - 1
    c = h.restart()
    assert committed(c, "old-client", ("t", 0)) == 5
    assert c.expire_offsets(commit_time(c, "old-client", ("t", 0)) + 100 * RETENTION) == 0


def test_offset_value_v1_round_trip() -> None:
    value = OffsetValue(7, -1, "m", 1_000, 5_000)
    data = offset_value(value)
    assert struct.unpack_from(">h", data)[0] == 1
    assert decode_offset_value(data) == value
    assert decode_offset_value(offset_value(OffsetValue(7, 3, "m", 1_000))).expire_timestamp == -1


def test_pending_transactional_offset_is_kept(
        make_harness: Callable[[dict[str, Any]], Harness]) -> None:
    h = make_harness(CONFIG)
    h.logs.create_topic("t", 2)
    c = h.coordinator
    commit(c, "tx", ("t", 0), ("t", 1))
    assert c.commit_transactional_offsets("tx", 9, 0, -1, "", None,
                                          [PartitionCommit("t", 0, 8, -1, "")]) == [0]
    now = commit_time(c, "tx", ("t", 0)) + RETENTION
    assert c.expire_offsets(now) == 1  # t-1; t-0 waits for its transaction
    assert committed(c, "tx", ("t", 0)) == 5 and committed(c, "tx", ("t", 1)) == -1
    assert "tx" in c.groups


def test_the_check_runs_every_interval(
        make_harness: Callable[[dict[str, Any]], Harness]) -> None:
    h = make_harness({**CONFIG, "offsets.retention.check.interval.ms": 50})
    h.logs.create_topic("t", 1)
    c = h.coordinator
    long_ago = int(time.time() * 1000) - 2 * RETENTION
    commit(c, "solo", ("t", 0), commit_timestamp_ms=long_ago)
    eventually(lambda: committed(c, "solo", ("t", 0)) == -1)
    eventually(lambda: "solo" not in c.groups)
    # The tombstones are in __consumer_offsets.
    plog = h.logs.get_log("__consumer_offsets", c.partition_for("solo"))
    assert plog is not None
    from samsa.records import iter_batches

    tombstoned = [decode_key(r.key) for seg in plog.segments_snapshot()
                  for b in iter_batches(seg.log_path.read_bytes()) for r in b.records()
                  if r.value is None]
    assert len(tombstoned) == 2  # the offset and the group


def test_broker_expires_commits_of_clients(make_broker: Callable[..., Any],
                                           raw_client: Callable[[int], Any]) -> None:
    """Through the broker: a confluent-kafka standalone consumer's commit and an OffsetCommit
    v2 with a retention time expire, and OffsetFetch (confluent-kafka's committed()) then
    answers no offset; a consumer group's commit stays while the group is Stable."""
    from confluent_kafka import OFFSET_INVALID, Consumer, TopicPartition

    from samsa.protocol import OffsetCommitRequest

    broker = make_broker({"offsets.retention.minutes": 1,
                          "offsets.retention.check.interval.ms": 100,
                          "group.initial.rebalance.delay.ms": 0})
    broker.log_manager.create_topic("t", 1)
    servers = broker.bootstrap_servers

    client = raw_client(broker.port)
    request = OffsetCommitRequest(
        group_id="old-client", generation_id_or_member_epoch=-1, member_id="",
        retention_time_ms=300, topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
            name="t", partitions=[OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=7, committed_metadata="")])])
    assert client.call(request, 2).topics[0].partitions[0].error_code == 0

    standalone = Consumer({"bootstrap.servers": servers, "group.id": "standalone",
                           "enable.auto.commit": False})
    grouped = Consumer({"bootstrap.servers": servers, "group.id": "grouped",
                        "enable.auto.commit": False, "auto.offset.reset": "earliest",
                        "session.timeout.ms": 6000})
    try:
        tp = TopicPartition("t", 0, 3)
        standalone.commit(offsets=[tp], asynchronous=False)
        grouped.subscribe(["t"])
        deadline = time.monotonic() + 30
        while not grouped.assignment():
            assert time.monotonic() < deadline, "no assignment"
            grouped.poll(0.1)
        grouped.commit(offsets=[TopicPartition("t", 0, 4)], asynchronous=False)

        def offset_of(consumer: Any) -> int:
            return consumer.committed([TopicPartition("t", 0)], 10)[0].offset

        assert offset_of(standalone) == 3
        coordinator = broker.apis.services.groups
        eventually(lambda: "old-client" not in coordinator.groups)  # after ~300 ms
        _, found = coordinator.fetch_offsets("old-client", [("t", 0)])
        assert found == {("t", 0): None}
        # The standalone commit expires a minute after it was made: age it instead of waiting.
        with coordinator._lock:
            group = coordinator.groups["standalone"]
            o = group.offsets[("t", 0)]
            group.offsets[("t", 0)] = type(o)(o.offset, o.leader_epoch, o.metadata,
                                              o.commit_timestamp_ms - 60_000)
            grouped_group = coordinator.groups["grouped"]
            g = grouped_group.offsets[("t", 0)]
            grouped_group.offsets[("t", 0)] = type(g)(g.offset, g.leader_epoch, g.metadata,
                                                      g.commit_timestamp_ms - 600_000)
        eventually(lambda: offset_of(standalone) == OFFSET_INVALID)
        time.sleep(0.3)  # a few more checks: the Stable group's subscribed offset stays
        assert offset_of(grouped) == 4
    finally:
        standalone.close()
        grouped.close()
