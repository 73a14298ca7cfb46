"""Consumer groups against librdkafka's mock cluster: join, commit, committed, rebalance."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from samsa.consumer import KafkaConsumer, OffsetAndMetadata, TopicPartition
from tests.support.mock_cluster import MockCluster

TOPIC = "grp"


@pytest.fixture(scope="module")
def cluster() -> Iterator[MockCluster]:
    with MockCluster(3, topics={TOPIC: 4, "mixed": 4}, group_initial_rebalance_delay_ms=0) as mc:
        p = Producer({"bootstrap.servers": mc.bootstrap_servers})
        for i in range(400):
            p.produce(TOPIC, value=f"v{i}".encode(), partition=i % 4)
        assert p.flush(30) == 0
        yield mc


def conf(mc: MockCluster, group: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": mc.bootstrap_servers, "group.id": group,
            "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300, **extra}


class Recorder:
    def __init__(self) -> None:
        self.assigned: list[list[TopicPartition]] = []
        self.revoked: list[list[TopicPartition]] = []

    def on_partitions_assigned(self, parts: list[TopicPartition]) -> None:
        self.assigned.append(sorted(parts))

    def on_partitions_revoked(self, parts: list[TopicPartition]) -> None:
        self.revoked.append(sorted(parts))


def test_join_consume_commit_committed(cluster: MockCluster) -> None:
    listener = Recorder()
    with KafkaConsumer(conf(cluster, "g1", enable_auto_commit=False)) as c:
        c.subscribe([TOPIC], listener=listener)
        got: list[Any] = []
        for _ in range(100):
            got.extend(c.poll(0.5))
            if len(got) >= 400:
                break
        assert len(got) == 400
        assert c.assignment() == {TopicPartition(TOPIC, p) for p in range(4)}
        assert listener.assigned[0] == [TopicPartition(TOPIC, p) for p in range(4)]
        c.commit()
        tp0 = TopicPartition(TOPIC, 0)
        assert c.committed([tp0])[tp0].offset == 100
        c.commit({tp0: OffsetAndMetadata(42, "meta")})
        again = c.committed([tp0])[tp0]
        assert again is not None and (again.offset, again.metadata) == (42, "meta")
    # A new member of the same group starts from the committed offsets.
    with KafkaConsumer(conf(cluster, "g1", enable_auto_commit=False)) as c2:
        c2.subscribe([TOPIC])
        got = []
        for _ in range(100):
            got.extend(c2.poll(0.5))
            if len(got) >= 58:
                break
        assert sorted(r.offset for r in got if r.partition == 0) == list(range(42, 100))
        assert len(got) == 58


@contextlib.contextmanager
def polling_in_background(consumer: KafkaConsumer) -> Iterator[None]:
    """Poll ``consumer`` on a thread of its own (as applications do) while the block runs; an
    exception the thread meets fails the test."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def keep_polling() -> None:
        try:
            while not stop.is_set():
                consumer.poll(0.1)
        except BaseException as exc:  # noqa: BLE001 -- the test thread fails on it
            errors.append(exc)

    thread = threading.Thread(target=keep_polling)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
    assert not errors, errors


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_rebalance_between_two_samsa_consumers(cluster: MockCluster, strategy: str) -> None:
    group = f"g-rebalance-{strategy}"
    c1 = KafkaConsumer(conf(cluster, group, partition_assignment_strategy=strategy))
    c2 = KafkaConsumer(conf(cluster, group, partition_assignment_strategy=strategy))
    try:
        c1.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        while len(c1.assignment()) != 4 and time.monotonic() < deadline:
            c1.poll(0.2)
        assert len(c1.assignment()) == 4
        c2.subscribe([TOPIC])
        # c1 leads; under load c2 can lose the mock's SyncGroup race a few times (see
        # test_mixed_group_with_confluent_kafka_range), each a 5 s round: the wait is long.
        with polling_in_background(c1):
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                c2.poll(0.2)
                if len(c2.assignment()) == 2 and len(c1.assignment()) == 2:
                    break
        a1, a2 = c1.assignment(), c2.assignment()
        assert len(a1) == 2 and len(a2) == 2 and not (a1 & a2)
    finally:
        c1.close()
        c2.close()


def test_mixed_group_with_confluent_kafka_range(cluster: MockCluster) -> None:
    """A samsa consumer leads a group with confluent-kafka as follower: librdkafka takes the
    partitions our range assignor gave it.

    Ours joins first, so the mock makes it the leader (the first member joined,
    rdkafka_mock_cgrp.c).  The other way round is a race against this mock: it answers a
    follower's SyncGroup that arrives after the leader's with INVALID_REQUEST (the group is
    already UP) where Kafka hands it its assignment, and librdkafka's leader syncs within a
    metadata round trip.  A confluent-kafka leader with a samsa follower is tested against
    the samsa broker (tests/consumer/test_groups_broker.py), which behaves as Kafka does.
    """
    group = "g-mixed"
    ours = KafkaConsumer(conf(cluster, group, partition_assignment_strategy="range"))
    theirs = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                       "partition.assignment.strategy": "range", "session.timeout.ms": 6000,
                       "heartbeat.interval.ms": 300, "auto.offset.reset": "earliest"})
    try:
        ours.subscribe(["mixed"])
        # Each consumer polls on its own thread, as applications do, so that ours rejoins
        # and syncs while the test thread polls theirs.
        with polling_in_background(ours):
            deadline = time.monotonic() + 30
            while len(ours.assignment()) != 4 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(ours.assignment()) == 4, "ours never joined the group alone"
            theirs.subscribe(["mixed"])
            # The mock waits session.timeout.ms - 1 s for members to rejoin before it elects.
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                theirs.poll(0.1)
                if len(ours.assignment()) == 2 and len(theirs.assignment()) == 2:
                    break
        mine = {(tp.topic, tp.partition) for tp in ours.assignment()}
        other = {(tp.topic, tp.partition) for tp in theirs.assignment()}
        assert len(mine) == 2 and len(other) == 2 and not (mine & other)
    finally:
        ours.close()
        theirs.close()
