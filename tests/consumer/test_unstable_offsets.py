"""Committed offsets held by an open transaction (KIP-447): a read_committed consumer sends
OffsetFetch with require_stable (v7+) and retries UNSTABLE_OFFSET_COMMIT with backoff until the
transaction ends or the caller's timeout runs out, as Java's ConsumerCoordinator
(OffsetFetchResponseHandler) does.

librdkafka's mock cluster answers the injected UNSTABLE_OFFSET_COMMIT (at OffsetFetch v5, its
highest usable version for samsa, as a group-level error); the request builder and the
partition-level form are checked on the coordinator directly.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import Producer

from samsa.consumer import KafkaConsumer, OffsetAndMetadata, TopicPartition
from samsa.errors import KafkaTimeoutError, UnstableOffsetCommitError
from tests.support.mock_cluster import MockCluster

TOPIC = "stable"
TP = TopicPartition(TOPIC, 0)
OFFSET_FETCH = 9
UNSTABLE_OFFSET_COMMIT = 88
BACKOFF_MS = 150


@pytest.fixture(scope="module")
def cluster() -> Iterator[MockCluster]:
    with MockCluster(1, topics={TOPIC: 1}, group_initial_rebalance_delay_ms=0) as mc:
        p = Producer({"bootstrap.servers": mc.bootstrap_servers})
        for i in range(10):
            p.produce(TOPIC, value=b"%d" % i, partition=0)
        assert p.flush(30) == 0
        yield mc


def conf(bootstrap: str, group: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "isolation.level": "read_committed", "retry.backoff.ms": BACKOFF_MS, **extra}


def committed_at(mc: MockCluster, group: str, offset: int) -> None:
    with KafkaConsumer(conf(mc.bootstrap_servers, group)) as c:
        c.commit({TP: OffsetAndMetadata(offset)})


def offset_fetch_gaps_us(mc: MockCluster) -> list[int]:
    stamps = [r.timestamp_us for r in mc.requests(OFFSET_FETCH)]
    return [b - a for a, b in pairwise(stamps)]


def test_require_stable_is_sent_under_read_committed_from_v7() -> None:
    for level, stable in (("read_committed", True), ("read_uncommitted", False)):
        with KafkaConsumer(conf("127.0.0.1:9", "g", **{"isolation.level": level})) as c:
            build = c._coordinator._offset_fetch_request([TP])
            assert build(7).require_stable is stable
            assert build(9).require_stable is stable
            assert build(6).require_stable is False  # no such field below v7


def test_a_partition_level_unstable_offset_names_the_partitions() -> None:
    body = SimpleNamespace(error_code=0, topics=[SimpleNamespace(name=TOPIC, partitions=[
        SimpleNamespace(partition_index=0, error_code=UNSTABLE_OFFSET_COMMIT, committed_offset=-1,
                        metadata="", committed_leader_epoch=-1),
        SimpleNamespace(partition_index=1, error_code=0, committed_offset=4, metadata="",
                        committed_leader_epoch=-1)])])
    with KafkaConsumer(conf("127.0.0.1:9", "g-unit")) as c:
        with pytest.raises(UnstableOffsetCommitError, match=r"stable', partition=0.*still open") as e:
            c._coordinator._parse_offset_fetch(body, 7)
        assert e.value.retriable


def test_committed_waits_out_unstable_offsets_then_times_out_naming_the_transaction(
        cluster: MockCluster) -> None:
    committed_at(cluster, "g-wait", 4)
    with KafkaConsumer(conf(cluster.bootstrap_servers, "g-wait")) as c:
        c.committed([TP])  # coordinator found and connected
        cluster.start_request_tracking()
        try:
            cluster.push_request_errors(OFFSET_FETCH, [UNSTABLE_OFFSET_COMMIT] * 2)
            assert c.committed([TP], timeout=30) == {TP: OffsetAndMetadata(4, "", 0)}
            gaps = offset_fetch_gaps_us(cluster)
            cluster.push_request_errors(OFFSET_FETCH, [UNSTABLE_OFFSET_COMMIT] * 50)
            with pytest.raises(KafkaTimeoutError, match="a transaction holding the group's "
                               "offsets is still open"):
                c.committed([TP], timeout=0.5)
        finally:
            cluster.stop_request_tracking()
            cluster.clear_request_errors(OFFSET_FETCH)
    assert len(gaps) == 2 and min(gaps) >= BACKOFF_MS * 1000 * 0.9


def test_poll_starts_at_the_committed_offset_once_it_is_stable(cluster: MockCluster) -> None:
    # The position lookup in poll() retries too, after retry.backoff.ms rather than at once.
    committed_at(cluster, "g-poll", 6)
    with KafkaConsumer(conf(cluster.bootstrap_servers, "g-poll")) as c:
        c.committed([TP])
        c.assign([TP])
        cluster.start_request_tracking()
        try:
            cluster.push_request_errors(OFFSET_FETCH, [UNSTABLE_OFFSET_COMMIT] * 2)
            got: list[int] = []
            for _ in range(200):
                got += [r.offset for r in c.poll(0.05)]
                if got:
                    break
            gaps = offset_fetch_gaps_us(cluster)
        finally:
            cluster.stop_request_tracking()
    assert got[0] == 6
    assert len(gaps) == 2 and min(gaps) >= BACKOFF_MS * 1000 * 0.9


def test_position_times_out_naming_the_open_transaction(cluster: MockCluster) -> None:
    committed_at(cluster, "g-position", 6)
    with KafkaConsumer(conf(cluster.bootstrap_servers, "g-position")) as c:
        c.committed([TP])
        c.assign([TP])
        cluster.push_request_errors(OFFSET_FETCH, [UNSTABLE_OFFSET_COMMIT] * 50)
        try:
            with pytest.raises(KafkaTimeoutError, match=r"position of .*still open"):
                c.position(TP, timeout=0.6)
        finally:
            cluster.clear_request_errors(OFFSET_FETCH)
