"""Consumer groups on the samsa broker, driven by real clients.

confluent-kafka (librdkafka 2.16), kcat (librdkafka 2.0.2), kafka-python 3.0 and aiokafka 0.14
join groups, share partitions, take over a departed member's partitions, commit, and find
their committed offsets again after a clean restart and after a SIGKILL of the broker.

Each peer must be installed; a missing one fails the test, it never skips.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from samsa.broker import Broker
from samsa.broker.group import GROUP_METADATA_TOPIC, GroupState

HOST = "127.0.0.1"
GROUP_CONFIG = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 5,
                "num.partitions": 4}
PATIENCE = 60.0
# librdkafka settings that make rebalances quick without changing what they do.
FAST_GROUP = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 200,
              "topic.metadata.refresh.interval.ms": 1000}


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return GROUP_CONFIG


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    """Create ``topic`` and fill it: see :func:`append`."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    append(bootstrap, topic, count, partitions)


def append(bootstrap: str, topic: str, count: int, partitions: int, start: int = 0) -> None:
    """Records ``start`` .. ``start + count - 1`` (value: the number) round-robin over the
    topic's ``partitions`` partitions, which exist, by confluent-kafka."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        while True:
            try:
                producer.produce(topic, value=b"%d" % i, partition=i % partitions)
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def confluent_consumer(bootstrap: str, group: str, **extra: Any) -> Any:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     **FAST_GROUP, **extra})


def records(batch: list[Any]) -> list[Any]:
    """The records of a consume() batch; any error event in it fails the test with the error
    (these consumers leave enable.partition.eof at its default, false, so reaching the end of
    a partition is no event: every error is a real one)."""
    errors = [m.error() for m in batch if m.error() is not None]
    assert not errors, f"consumer errors: {errors}"
    return batch


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    from confluent_kafka import TopicPartition

    c = confluent_consumer(bootstrap, group)
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)
        return [max(tp.offset, 0) for tp in got]  # -1001: nothing committed
    finally:
        c.close()


def wait_for(condition: Callable[[], bool], what: str, timeout: float = PATIENCE) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# --- confluent-kafka ---------------------------------------------------------------------------


class Worker(threading.Thread):
    """A group member that processes batches and commits after each one."""

    def __init__(self, bootstrap: str, group: str, topic: str, seen: Counter[bytes],
                 lock: threading.Lock, total: int, stop_after: int | None = None,
                 **extra: Any) -> None:
        super().__init__(daemon=True)
        self.consumer = confluent_consumer(bootstrap, group, **extra)
        self.topic, self.seen, self.lock, self.total = topic, seen, lock, total
        self.stop_after = stop_after
        self.processed = 0
        self.partitions_seen: set[int] = set()
        self.final_assignment: set[int] = set()
        self.commit_errors: list[str] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        from confluent_kafka import KafkaException

        try:
            self.consumer.subscribe([self.topic])
            deadline = time.monotonic() + PATIENCE
            while time.monotonic() < deadline:
                good = records(self.consumer.consume(500, 0.2))
                if good:
                    time.sleep(0.005)  # "processing": keeps one member from doing it all
                    with self.lock:
                        for m in good:
                            self.seen[m.value()] += 1
                            self.partitions_seen.add(m.partition())
                    self.processed += len(good)
                    try:
                        self.consumer.commit(asynchronous=False)
                    except KafkaException as exc:
                        self.commit_errors.append(str(exc))
                if self.stop_after is not None and self.processed >= self.stop_after:
                    break
                with self.lock:
                    if len(self.seen) >= self.total:
                        break
            self.final_assignment = {tp.partition for tp in self.consumer.assignment()}
        except Exception as exc:  # noqa: BLE001 -- handed to the test thread, which fails on it
            self.error = exc
        finally:
            self.consumer.close()


def test_three_confluent_consumers_share_and_take_over(broker: Broker) -> None:
    bs, topic, n = broker.bootstrap_servers, "group-share", 300_000
    produce(bs, topic, n, 12)
    seen: Counter[bytes] = Counter()
    lock = threading.Lock()
    quitter = Worker(bs, "share", topic, seen, lock, n, stop_after=30_000)
    stayers = [Worker(bs, "share", topic, seen, lock, n) for _ in range(2)]
    for w in [quitter, *stayers]:
        w.start()
    for w in [quitter, *stayers]:
        w.join(PATIENCE + 10)
        assert w.error is None, w.error
    # Everyone got a share while all three were there; the quitter left early.
    assert quitter.partitions_seen and all(w.partitions_seen for w in stayers)
    assert quitter.processed < n
    # The two that stayed ended up with all 12 partitions between them.
    assert set().union(*(w.final_assignment for w in stayers)) == set(range(12))
    assert not any(w.commit_errors for w in [quitter, *stayers]), \
        [w.commit_errors for w in [quitter, *stayers]]
    assert len(seen) == n and set(seen.values()) == {1}, "each record exactly once"
    assert committed_offsets(bs, "share", topic, 12) == [n // 12] * 12


@pytest.mark.usefixtures("kafka_python_rejoins_as_java")
def test_consumer_offsets_is_internal_and_not_matched_by_regex(broker: Broker) -> None:
    """Kafka lists __consumer_offsets flagged internal; clients that exclude internal topics
    (Java, kafka-python, aiokafka) leave it out of pattern subscriptions.  librdkafka does not
    look at the flag -- against Kafka too it matches "^.*" unless topic.blacklist says so."""
    from kafka import KafkaConsumer

    bs = broker.bootstrap_servers
    produce(bs, "regex-one", 10, 1)
    consume_some(bs, "regex-commit", "regex-one", 10)  # a commit creates __consumer_offsets
    c = KafkaConsumer(bootstrap_servers=bs, group_id="regex", auto_offset_reset="earliest",
                      heartbeat_interval_ms=200, metadata_max_age_ms=500)
    try:
        c.subscribe(pattern="^.*")
        got = 0

        def assigned() -> bool:
            nonlocal got
            got += sum(len(r) for r in c.poll(timeout_ms=100).values())
            return bool(c.assignment()) and got >= 10

        wait_for(assigned, "a pattern assignment")
        topics = {tp.topic for tp in c.assignment()}
        assert "regex-one" in topics and GROUP_METADATA_TOPIC not in topics
    finally:
        c.close()


def test_cooperative_sticky_rebalances_incrementally(broker: Broker) -> None:
    bs, topic, n = broker.bootstrap_servers, "group-coop", 3000
    produce(bs, topic, n, 6)
    events: list[tuple[str, str, list[int]]] = []
    seen: Counter[bytes] = Counter()
    lock = threading.Lock()

    def tracked(name: str) -> Any:
        c = confluent_consumer(bs, "coop", **{"partition.assignment.strategy":
                                              "cooperative-sticky"})

        def on_assign(consumer: Any, parts: list[Any]) -> None:
            events.append((name, "assign", sorted(p.partition for p in parts)))

        def on_revoke(consumer: Any, parts: list[Any]) -> None:
            events.append((name, "revoke", sorted(p.partition for p in parts)))

        def on_lost(consumer: Any, parts: list[Any]) -> None:
            # Without on_lost, librdkafka reports lost partitions (a session that expired on a
            # starved machine) through on_revoke, which would read as a full eager revoke.
            events.append((name, "lost", sorted(p.partition for p in parts)))

        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
        return c

    def drain(c: Any) -> None:
        from confluent_kafka import KafkaError, KafkaException

        for m in records(c.consume(200, 0.1)):
            with lock:
                seen[m.value()] += 1
        if c.assignment():
            try:
                c.commit(asynchronous=False)
            except KafkaException as exc:
                # Nothing consumed yet on a fresh assignment; or a commit racing the
                # cooperative follow-up rebalance with the previous generation (Kafka refuses
                # those too).
                assert exc.args[0].code() in (KafkaError._NO_OFFSET,
                                              KafkaError.ILLEGAL_GENERATION,
                                              KafkaError.REBALANCE_IN_PROGRESS), exc

    a = tracked("a")
    try:
        wait_for(lambda: (drain(a), len(a.assignment()) == 6)[1], "a to own all 6 partitions")
        b = tracked("b")
        try:
            def balanced() -> bool:
                drain(a)
                drain(b)
                return len(a.assignment()) == 3 and len(b.assignment()) == 3

            wait_for(balanced, "3 + 3 partitions")
            wait_for(lambda: (drain(a), drain(b), len(seen) == n)[2], "every record")
        finally:
            b.close()
    finally:
        a.close()
    # Incremental: A only ever gave partitions up (no full revoke of its 6), B only gained.
    a_revokes = [p for who, what, p in events if who == "a" and what == "revoke" and p]
    assert a_revokes and all(len(p) < 6 for p in a_revokes[:1])
    assert len(seen) == n


def test_static_member_rejoins_without_a_rebalance(broker: Broker) -> None:
    bs, topic = broker.bootstrap_servers, "group-static"
    produce(bs, topic, 100, 4)
    coordinator = broker.apis.services.groups

    def member(instance: str) -> Any:
        c = confluent_consumer(bs, "static", **{"group.instance.id": instance,
                                                "session.timeout.ms": 30_000})
        c.subscribe([topic])
        return c

    a, b = member("inst-a"), member("inst-b")
    try:
        def settled() -> bool:
            a.poll(0.05)
            b.poll(0.05)
            group = coordinator.groups.get("static")
            return (group is not None and group.state == GroupState.STABLE
                    and len(group.members) == 2
                    and len(a.assignment()) + len(b.assignment()) == 4
                    and bool(a.assignment()) and bool(b.assignment()))

        wait_for(settled, "two static members sharing 4 partitions")
        generation = coordinator.groups["static"].generation_id
        b_parts = {tp.partition for tp in b.assignment()}
        b.close()  # a static member does not leave on close: its session keeps its place
        b = member("inst-b")
        wait_for(lambda: (a.poll(0.05), b.poll(0.05), len(b.assignment()) > 0)[2],
                 "the restarted static member's assignment")
        assert {tp.partition for tp in b.assignment()} == b_parts
        assert coordinator.groups["static"].generation_id == generation, "no rebalance"
    finally:
        a.close()
        b.close()


# --- durability --------------------------------------------------------------------------------


def consume_some(bootstrap: str, group: str, topic: str, count: int) -> int:
    """Consume about ``count`` records in ``group`` committing as we go; returns how many."""
    c = confluent_consumer(bootstrap, group)
    c.subscribe([topic])
    got = 0
    try:
        deadline = time.monotonic() + PATIENCE
        while got < count and time.monotonic() < deadline:
            batch = records(c.consume(min(100, count - got), 0.2))
            got += len(batch)
            if batch:
                c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def test_committed_offsets_survive_a_clean_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Broker(data, port=0, host=HOST, config=GROUP_CONFIG) as b:
        produce(b.bootstrap_servers, "durable", 1000, 4)
        first = consume_some(b.bootstrap_servers, "keeper", "durable", 400)
        before = committed_offsets(b.bootstrap_servers, "keeper", "durable", 4)
    assert sum(before) == first
    with Broker(data, port=0, host=HOST, config=GROUP_CONFIG) as b:
        assert committed_offsets(b.bootstrap_servers, "keeper", "durable", 4) == before
        rest = consume_some(b.bootstrap_servers, "keeper", "durable", 1000 - first)
        assert first + rest == 1000
        assert committed_offsets(b.bootstrap_servers, "keeper", "durable", 4) == [250] * 4


def test_committed_offsets_survive_sigkill(broker_process: Any) -> None:
    proc = broker_process(GROUP_CONFIG).start()
    bs = proc.bootstrap_servers
    produce(bs, "crash", 1000, 4)
    first = consume_some(bs, "crashers", "crash", 300)
    before = committed_offsets(bs, "crashers", "crash", 4)
    assert sum(before) == first
    proc.kill()
    proc.start()
    assert committed_offsets(bs, "crashers", "crash", 4) == before
    assert consume_some(bs, "crashers", "crash", 1000 - first) == 1000 - first
    assert committed_offsets(bs, "crashers", "crash", 4) == [250] * 4


# --- other clients -----------------------------------------------------------------------------


@pytest.mark.usefixtures("kafka_python_rejoins_as_java")
def test_kafka_python_group(broker: Broker) -> None:
    from kafka import KafkaConsumer

    bs, topic, n = broker.bootstrap_servers, "group-kp", 2000
    produce(bs, topic, n, 4)
    seen: Counter[bytes] = Counter()
    lock = threading.Lock()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            c = KafkaConsumer(topic, bootstrap_servers=bs, group_id="kp",
                              auto_offset_reset="earliest", enable_auto_commit=False,
                              heartbeat_interval_ms=200, session_timeout_ms=6000)
            deadline = time.monotonic() + PATIENCE
            while time.monotonic() < deadline:
                for records in c.poll(timeout_ms=200).values():
                    with lock:
                        for r in records:
                            seen[r.value] += 1
                    c.commit()
                with lock:
                    if len(seen) >= n:
                        break
            c.close()
        except Exception as exc:  # noqa: BLE001 -- handed to the test thread, which fails on it
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(PATIENCE + 10)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads), "a member did not stop"
    assert len(seen) == n and set(seen.values()) == {1}
    assert committed_offsets(bs, "kp", topic, 4) == [n // 4] * 4


def test_aiokafka_group(broker: Broker) -> None:
    from aiokafka import AIOKafkaConsumer

    bs, topic, n = broker.bootstrap_servers, "group-aio", 1000
    produce(bs, topic, n, 4)

    async def run() -> Counter[bytes]:
        seen: Counter[bytes] = Counter()
        c = AIOKafkaConsumer(topic, bootstrap_servers=bs, group_id="aio",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             heartbeat_interval_ms=200, session_timeout_ms=6000)
        await c.start()
        try:
            deadline = time.monotonic() + PATIENCE
            while len(seen) < n and time.monotonic() < deadline:
                batches = await c.getmany(timeout_ms=200)
                for records in batches.values():
                    for r in records:
                        seen[r.value] += 1
                if batches:
                    await c.commit()
        finally:
            await c.stop()
        return seen

    seen = asyncio.run(run())
    assert len(seen) == n and set(seen.values()) == {1}
    assert committed_offsets(bs, "aio", topic, 4) == [n // 4] * 4


def test_kcat_balanced_consumer(broker: Broker) -> None:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed (apt-get install kcat)"
    bs, topic, n = broker.bootstrap_servers, "group-kcat", 400
    produce(bs, topic, n, 4)
    out = subprocess.run(
        [kcat, "-b", bs, "-G", "kcat-group", "-e", "-f", "%p %o\n",
         "-X", "auto.offset.reset=earliest", "-X", "heartbeat.interval.ms=200", topic],
        capture_output=True, timeout=PATIENCE, check=True)
    lines = out.stdout.decode().split()
    assert len(lines) == 2 * n
    positions = {(int(lines[i]), int(lines[i + 1])) for i in range(0, len(lines), 2)}
    assert positions == {(p, o) for p in range(4) for o in range(n // 4)}
    # kcat auto-commits; closing the consumer commits what it read.
    assert committed_offsets(bs, "kcat-group", topic, 4) == [n // 4] * 4
    groups = subprocess.run([kcat, "-b", bs, "-L"], capture_output=True, timeout=30,
                            check=True).stdout.decode()
    assert GROUP_METADATA_TOPIC in groups
