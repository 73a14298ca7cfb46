"""Consumer groups against the samsa broker's coordinator, at the highest group API versions."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from samsa.broker import Broker
from samsa.consumer import KafkaConsumer, TopicPartition
from samsa.consumer.versions import group_api_version
from samsa.net.api_versions import NodeApiVersions
from samsa.protocol import ApiKey

HOST = "127.0.0.1"
BROKER_CONFIG = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 500,
                 "num.partitions": 12}


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return BROKER_CONFIG


def conf(bootstrap: str, group: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "session.timeout.ms": 3000, "heartbeat.interval.ms": 100,
            "enable.auto.commit": False, **{k.replace("_", "."): v for k, v in extra.items()}}


def produce(bootstrap: str, topic: str, n: int, partitions: int = 12) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000})
    for i in range(n):
        p.produce(topic, value=b"%d" % i, partition=i % partitions)
        if i % 50_000 == 49_999:
            p.poll(0)
    assert p.flush(60) == 0


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, list[TopicPartition]]] = []

    def on_partitions_assigned(self, parts: list[TopicPartition]) -> None:
        self.events.append(("assigned", sorted(parts)))

    def on_partitions_revoked(self, parts: list[TopicPartition]) -> None:
        self.events.append(("revoked", sorted(parts)))

    def on_partitions_lost(self, parts: list[TopicPartition]) -> None:
        self.events.append(("lost", sorted(parts)))


class Poller:
    """Polls a consumer on its own thread until stopped (applications poll continuously)."""

    def __init__(self, consumer: KafkaConsumer,
                 on_records: Callable[[KafkaConsumer, Any], None] | None = None) -> None:
        self.consumer = consumer
        self.on_records = on_records
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                records = self.consumer.poll(0.1)
                if records and self.on_records is not None:
                    self.on_records(self.consumer, records)
        except BaseException as exc:  # noqa: BLE001 -- reported by join()
            self.error = exc

    def join(self) -> None:
        self.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive()
        if self.error is not None:
            raise self.error


def wait_for(cond: Callable[[], bool], what: str, polls: int = 600) -> None:
    for _ in range(polls):
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def test_group_api_versions_per_broker() -> None:
    real = NodeApiVersions({18: (0, 4), 11: (0, 9), 14: (0, 5), 13: (0, 5), 12: (0, 4),
                            8: (2, 9), 9: (1, 9), 10: (0, 6)})
    assert group_api_version(real, ApiKey.JOIN_GROUP) == 9
    assert group_api_version(real, ApiKey.LEAVE_GROUP) == 5
    # librdkafka's mock: ApiVersions 0-2, yet JoinGroup 0-6, SyncGroup 0-4, LeaveGroup 0-4.
    mock = NodeApiVersions({18: (0, 2), 11: (0, 6), 14: (0, 4), 13: (0, 4), 12: (0, 5),
                            8: (0, 9), 9: (0, 6), 10: (0, 3)})
    assert [group_api_version(mock, k) for k in (ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP,
                                                 ApiKey.LEAVE_GROUP, ApiKey.HEARTBEAT)] \
        == [5, 3, 2, 3]


def test_highest_versions_and_commit_async(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    produce(bs, "gv", 120)
    done: list[tuple[dict[TopicPartition, Any], Exception | None]] = []
    c = KafkaConsumer(conf(bs, "g-versions"))
    try:
        c.subscribe(["gv"])
        got: list[Any] = []
        for _ in range(200):
            got.extend(c.poll(0.1))
            if len(got) >= 120:
                break
        assert len(got) == 120
        c.commit_async(callback=lambda offsets, err: done.append((offsets, err)))
        for _ in range(100):
            if done:
                break
            c.poll(0.05)  # the callback runs from poll once the broker answered
        assert len(done) == 1 and done[0][1] is None
        tp = TopicPartition("gv", 0)
        committed = c.committed([tp])[tp]
        assert committed is not None and committed.offset == 10
        for _ in range(100):
            if ApiKey.HEARTBEAT in c._coordinator.versions_used:
                break
            c.poll(0.05)
    finally:
        c.close()
    used = c._coordinator.versions_used
    assert used[ApiKey.JOIN_GROUP] == 9 and used[ApiKey.SYNC_GROUP] == 5
    assert used[ApiKey.OFFSET_COMMIT] == 9 and used[ApiKey.OFFSET_FETCH] == 9
    assert used[ApiKey.FIND_COORDINATOR] == 6 and used[ApiKey.LEAVE_GROUP] == 5
    assert used[ApiKey.HEARTBEAT] == 4


def test_three_members_share_and_take_over_exactly_once(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    topic, n = "g-share", 300_000
    produce(bs, topic, n)
    seen: dict[tuple[int, int], int] = {}
    lock = threading.Lock()

    def process(consumer: KafkaConsumer, records: Any) -> None:
        with lock:
            for r in records:
                key = (r.partition, r.offset)
                seen[key] = seen.get(key, 0) + 1
        consumer.commit()  # commit after processing

    consumers = [KafkaConsumer(conf(bs, "g-share", client_id=f"m{i}", max_poll_records=2000))
                 for i in range(3)]
    for c in consumers:
        c.subscribe([topic])
    pollers = [Poller(c, process) for c in consumers]
    try:
        wait_for(lambda: all(len(c.assignment()) == 4 for c in consumers), "4 partitions each")
        assert set().union(*(c.assignment() for c in consumers)) == \
            {TopicPartition(topic, p) for p in range(12)}
        wait_for(lambda: len(seen) > n // 10, "some progress")
        # One member leaves; the other two take over its partitions.
        pollers[0].join()
        consumers[0].close()
        wait_for(lambda: all(len(c.assignment()) == 6 for c in consumers[1:]), "6 each")
        wait_for(lambda: len(seen) == n, f"all {n} records", polls=1200)
    finally:
        for p in pollers[1:]:
            p.join()
        for c in consumers[1:]:
            c.close()
    assert len(seen) == n and set(seen.values()) == {1}


def test_mixed_group_with_confluent_kafka(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    produce(bs, "g-mixed", 12)
    ours = KafkaConsumer(conf(bs, "g-mixed", partition_assignment_strategy="range"))
    theirs = Consumer({"bootstrap.servers": bs, "group.id": "g-mixed",
                       "partition.assignment.strategy": "range", "session.timeout.ms": 6000,
                       "heartbeat.interval.ms": 100, "auto.offset.reset": "earliest"})
    ours.subscribe(["g-mixed"])
    theirs.subscribe(["g-mixed"])
    poller = Poller(ours)
    try:
        for _ in range(300):
            theirs.poll(0.1)
            if len(ours.assignment()) == 6 and len(theirs.assignment()) == 6:
                break
        mine = {(tp.topic, tp.partition) for tp in ours.assignment()}
        other = {(tp.topic, tp.partition) for tp in theirs.assignment()}
        assert len(mine) == 6 and len(other) == 6 and not (mine & other)
    finally:
        poller.join()
        ours.close()
        theirs.close()


def test_cooperative_sticky_moves_only_what_must_move(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    produce(bs, "g-coop", 12)
    cfg = conf(bs, "g-coop", partition_assignment_strategy="cooperative-sticky")
    r1, r2 = Recorder(), Recorder()
    c1, c2 = KafkaConsumer(cfg), KafkaConsumer(cfg)
    c1.subscribe(["g-coop"], listener=r1)
    p1 = Poller(c1)
    try:
        wait_for(lambda: len(c1.assignment()) == 12, "c1 owns all 12")
        c2.subscribe(["g-coop"], listener=r2)
        p2 = Poller(c2)
        try:
            wait_for(lambda: len(c1.assignment()) == 6 and len(c2.assignment()) == 6, "6 + 6")
        finally:
            p2.join()
    finally:
        p1.join()
    revoked = [parts for kind, parts in r1.events if kind == "revoked"]
    assert len(revoked) == 1 and len(revoked[0]) == 6  # only the six that moved
    assert set(revoked[0]) == set(c2.assignment())
    assert not [e for e in r2.events if e[0] != "assigned"]
    c1.close()
    c2.close()


def test_static_member_rejoins_without_rebalance(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    produce(bs, "g-static", 12)
    r1 = Recorder()
    c1 = KafkaConsumer(conf(bs, "g-static", group_instance_id="a", session_timeout_ms=6000))
    c2 = KafkaConsumer(conf(bs, "g-static", group_instance_id="b", session_timeout_ms=6000))
    c1.subscribe(["g-static"], listener=r1)
    c2.subscribe(["g-static"])
    p1, p2 = Poller(c1), Poller(c2)
    try:
        wait_for(lambda: len(c1.assignment()) == 6 and len(c2.assignment()) == 6, "6 + 6")
        before = set(c2.assignment())
        events = len(r1.events)
        p2.join()
        c2.close()  # a static member sends no LeaveGroup
        c3 = KafkaConsumer(conf(bs, "g-static", group_instance_id="b", session_timeout_ms=6000))
        c3.subscribe(["g-static"])
        p3 = Poller(c3)
        try:
            wait_for(lambda: set(c3.assignment()) == before, "same partitions for b")
        finally:
            p3.join()
            c3.close()
        assert len(r1.events) == events  # c1 saw no rebalance
    finally:
        p1.join()
        c1.close()


def test_poll_returns_while_the_group_waits_and_max_poll_interval_leave(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    produce(bs, "g-slow", 12)
    r1 = Recorder()
    c1 = KafkaConsumer(conf(bs, "g-slow", max_poll_interval_ms=1500))
    c2 = KafkaConsumer(conf(bs, "g-slow", max_poll_interval_ms=1500))
    try:
        c1.subscribe(["g-slow"], listener=r1)
        for _ in range(100):
            c1.poll(0.1)
            if len(c1.assignment()) == 12:
                break
        assert len(c1.assignment()) == 12
        # c1 stops polling.  c2's join waits for c1 (rebalance); poll(0.1) still returns.
        # (c2 joins a little later so that c1's max.poll.interval.ms leave, not the broker's
        # rebalance timeout, is what ends c1's membership.)
        time.sleep(0.5)
        c2.subscribe(["g-slow"])
        polls = 0
        while len(c2.assignment()) != 12:
            c2.poll(0.1)
            polls += 1
            assert polls < 600, "c1 never left the group after max.poll.interval.ms"
        assert polls > 1  # it took several returning polls, not one blocking call
        c1.poll(0.1)  # back from a long pause: its partitions are lost
        assert ("lost", [TopicPartition("g-slow", p) for p in range(12)]) in r1.events
    finally:
        c1.close()
        c2.close()


def test_pattern_subscription_skips_internal_topics(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    produce(bs, "pat-a", 12)
    produce(bs, "pat-b", 12)
    c = KafkaConsumer(conf(bs, "g-pattern"))
    try:
        c.subscribe(pattern=r"pat-.*|__consumer_offsets")
        for _ in range(200):
            c.poll(0.1)
            if len(c.assignment()) == 24:
                break
        assert {tp.topic for tp in c.assignment()} == {"pat-a", "pat-b"}
        assert c.subscription() == {"pat-a", "pat-b"}
    finally:
        c.close()


def test_close_timeout_with_unreachable_coordinator(tmp_path: Path) -> None:
    b = Broker(tmp_path / "b", port=0, host=HOST, config=BROKER_CONFIG)
    b.start()
    b.wait_until_ready()
    bs = b.bootstrap_servers
    produce(bs, "g-close", 12)
    c = KafkaConsumer(conf(bs, "g-close", enable_auto_commit=True))
    c.subscribe(["g-close"])
    for _ in range(100):
        c.poll(0.1)
        if c.assignment():
            break
    b.close()
    c.close(timeout=0.5)  # returns (commit and LeaveGroup give up) rather than hanging
    assert c.closed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _start_broker_process(data_dir: Path, port: int) -> subprocess.Popen[str]:
    args = [sys.executable, "-m", "samsa.cli", "broker", "--host", HOST, "--port", str(port),
            "--data-dir", str(data_dir), "--log-level", "WARNING"]
    for key, value in BROKER_CONFIG.items():
        args += ["--config", f"{key}={value}"]
    for _ in range(50):
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                text=True)
        assert proc.stdout is not None
        if proc.stdout.readline().startswith("listening on "):
            return proc
        proc.wait(10)
        time.sleep(0.2)  # port still held after the previous broker
    raise AssertionError("samsa broker did not start")


def test_committed_offsets_survive_restart_and_sigkill(tmp_path: Path) -> None:
    tp = TopicPartition("g-durable", 3)
    # Clean restart of an in-process broker.
    with Broker(tmp_path / "inproc", port=0, host=HOST, config=BROKER_CONFIG) as b:
        b.wait_until_ready()
        port = b.port
        produce(b.bootstrap_servers, "g-durable", 12)
        with KafkaConsumer(conf(b.bootstrap_servers, "g-durable")) as c:
            c.commit({tp: 7})
    with Broker(tmp_path / "inproc", port=port, host=HOST, config=BROKER_CONFIG) as b:
        b.wait_until_ready()
        with KafkaConsumer(conf(b.bootstrap_servers, "g-durable")) as c:
            committed = c.committed([tp])[tp]
            assert committed is not None and committed.offset == 7
    # SIGKILL of a `samsa broker` subprocess right after the commit was acknowledged.
    port = _free_port()
    data = tmp_path / "proc"
    proc = _start_broker_process(data, port)
    try:
        bs = f"{HOST}:{port}"
        produce(bs, "g-durable", 12)
        with KafkaConsumer(conf(bs, "g-durable")) as c:
            c.commit({tp: 9})
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            c.close(timeout=0.5)
        proc = _start_broker_process(data, port)
        with KafkaConsumer(conf(bs, "g-durable")) as c:
            committed = c.committed([tp])[tp]
            assert committed is not None and committed.offset == 9
    finally:
        proc.kill()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
