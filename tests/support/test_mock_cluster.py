"""The ctypes wrapper around librdkafka's mock cluster, exercised with confluent-kafka clients."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

from tests.support import librdkafka
from tests.support.mock_cluster import ALL_BROKERS, MockCluster, MockClusterError

PRODUCE = 0
METADATA = 3
API_VERSIONS = 18
NOT_LEADER_OR_FOLLOWER = 6
BROKER_NOT_AVAILABLE = 8
INVALID_RECORD = 87  # not retriable, so with retries=0 it reaches the delivery report
# Bounds on waiting for a client; generous, and never asserted on.
DEADLINE_S = 30.0
REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster(3) as mock:
        yield mock


def make_producer(cluster: MockCluster, **extra: str | int) -> Producer:
    conf: dict[str, str | int] = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "acks": "all",
        "partitioner": "murmur2_random",
        "linger.ms": 5,
        # Short backoffs keep fault tests quick; they change pacing, not correctness.
        "retry.backoff.ms": 10,
        "reconnect.backoff.ms": 10,
        "reconnect.backoff.max.ms": 100,
        "topic.metadata.refresh.fast.interval.ms": 10,
    }
    conf.update(extra)
    return Producer(conf)


class Deliveries:
    """Collects delivery reports: (partition, offset) on success, errors otherwise."""

    def __init__(self) -> None:
        self.ok: list[tuple[int, int]] = []
        self.errors: list[KafkaError] = []

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            partition, offset = msg.partition(), msg.offset()
            assert partition is not None and offset is not None
            self.ok.append((partition, offset))


def produce(
    producer: Producer, topic: str, count: int, *, start: int = 0
) -> Deliveries:
    reports = Deliveries()
    for i in range(start, start + count):
        producer.produce(topic, key=f"key-{i}", value=f"value-{i}", on_delivery=reports)
        producer.poll(0)
    remaining = producer.flush(DEADLINE_S)
    assert remaining == 0, f"{remaining} records still undelivered"
    return reports


def consume_all(
    cluster: MockCluster, topic: str, partitions: int, expected: int
) -> list[Message]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "samsa-mock-test",
            "enable.auto.commit": False,
            "check.crcs": True,
            "fetch.wait.max.ms": 10,
        }
    )
    try:
        consumer.assign(
            [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
        )
        messages: list[Message] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(messages) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(
                num_messages=expected - len(messages), timeout=0.5
            ):
                assert msg.error() is None, msg.error()
                messages.append(msg)
        return messages
    finally:
        consumer.close()


def text(data: bytes | None) -> str:
    assert data is not None
    return data.decode()


def test_produce_1000_records_and_read_them_back(cluster: MockCluster) -> None:
    cluster.create_topic("numbers", 4)
    reports = produce(make_producer(cluster), "numbers", 1000)
    assert reports.errors == []
    assert len(reports.ok) == 1000
    assert {p for p, _ in reports.ok} == {0, 1, 2, 3}

    messages = consume_all(cluster, "numbers", 4, 1000)
    assert sorted(text(m.value()) for m in messages) == sorted(
        f"value-{i}" for i in range(1000)
    )
    # Every record came back where the producer was told it landed, key intact.
    assert {(m.partition(), m.offset()) for m in messages} == set(reports.ok)
    assert all(text(m.key()) == "key-" + text(m.value())[6:] for m in messages)


def test_injected_not_leader_errors_are_retried(cluster: MockCluster) -> None:
    cluster.create_topic("flaky", 1)
    cluster.start_request_tracking()
    cluster.push_request_errors(PRODUCE, [NOT_LEADER_OR_FOLLOWER] * 3)

    reports = produce(make_producer(cluster), "flaky", 100)

    assert reports.errors == []
    assert sorted(reports.ok) == [(0, offset) for offset in range(100)]
    # Three Produce requests were refused, so at least one more carried the data.
    assert len(cluster.requests(PRODUCE)) >= 4


def test_without_retries_an_injected_error_reaches_the_client(
    cluster: MockCluster,
) -> None:
    cluster.create_topic("strict", 1)
    cluster.push_request_errors(PRODUCE, [INVALID_RECORD])
    reports = produce(make_producer(cluster, retries=0), "strict", 1)
    assert [e.code() for e in reports.errors] == [INVALID_RECORD]


def test_cleared_errors_are_not_injected(cluster: MockCluster) -> None:
    cluster.create_topic("strict", 1)
    cluster.push_request_errors(PRODUCE, [INVALID_RECORD] * 5)
    cluster.clear_request_errors(PRODUCE)
    reports = produce(make_producer(cluster, retries=0), "strict", 10)
    assert reports.errors == []
    assert len(reports.ok) == 10


def test_variadic_push_when_the_array_variant_is_missing(
    cluster: MockCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_has = librdkafka.has

    def has_without_array(name: str, lib: object = None) -> bool:
        return name != "rd_kafka_mock_push_request_errors_array" and real_has(name)

    monkeypatch.setattr(librdkafka, "has", has_without_array)
    cluster.create_topic("strict", 1)
    cluster.push_request_errors(PRODUCE, [INVALID_RECORD, INVALID_RECORD])
    producer = make_producer(cluster, retries=0)
    # One record per request: the first two requests take the two pushed errors.
    outcomes = [produce(producer, "strict", 1, start=i) for i in range(3)]
    assert [[e.code() for e in r.errors] for r in outcomes] == [
        [INVALID_RECORD],
        [INVALID_RECORD],
        [],
    ]
    assert outcomes[2].ok == [(0, 0)]


def test_partition_errors_hit_only_that_partition(cluster: MockCluster) -> None:
    cluster.create_topic("split", 2)
    cluster.partition_push_request_errors("split", 1, PRODUCE, [INVALID_RECORD])
    producer = make_producer(cluster, retries=0)
    reports = Deliveries()
    for partition in (0, 1):
        producer.produce("split", value=b"v", partition=partition, on_delivery=reports)
    assert producer.flush(DEADLINE_S) == 0
    assert [p for p, _ in reports.ok] == [0]
    assert [e.code() for e in reports.errors] == [INVALID_RECORD]


def test_broker_level_errors_are_consumed_per_request(cluster: MockCluster) -> None:
    cluster.create_topic("pinned", 1)
    cluster.set_partition_leader("pinned", 0, 2)
    cluster.broker_push_request_error_rtts(
        2, PRODUCE, [(NOT_LEADER_OR_FOLLOWER, 0), (NOT_LEADER_OR_FOLLOWER, 0)]
    )
    assert cluster.broker_error_stack_count(2, PRODUCE) == 2

    reports = produce(make_producer(cluster), "pinned", 20)

    assert reports.errors == []
    assert len(reports.ok) == 20
    assert cluster.broker_error_stack_count(2, PRODUCE) == 0


def test_broker_down_then_up(cluster: MockCluster) -> None:
    cluster.create_topic("outage", 1)
    cluster.set_partition_leader("outage", 0, 2)
    producer = make_producer(cluster)
    assert produce(producer, "outage", 10).errors == []

    cluster.broker_down(2)
    metadata = producer.list_topics("outage", timeout=DEADLINE_S)
    # The mock's quirk: a downed broker leaves the broker list but stays leader.
    assert 2 not in metadata.brokers
    assert metadata.topics["outage"].partitions[0].leader == 2

    reports = Deliveries()
    for i in range(50):
        producer.produce("outage", value=f"during-{i}", on_delivery=reports)
    producer.poll(0.3)
    assert reports.ok == []  # nothing can be acknowledged while the leader is down

    cluster.broker_up(2)
    assert producer.flush(DEADLINE_S) == 0
    assert reports.errors == []
    assert sorted(offset for _, offset in reports.ok) == list(range(10, 60))
    assert len(consume_all(cluster, "outage", 1, 60)) == 60


def test_moving_a_leader(cluster: MockCluster) -> None:
    cluster.create_topic("moving", 1)
    cluster.set_partition_leader("moving", 0, 1)
    producer = make_producer(cluster)
    assert produce(producer, "moving", 20).errors == []

    cluster.start_request_tracking()
    cluster.set_partition_leader("moving", 0, 3)
    reports = produce(producer, "moving", 20, start=20)

    assert reports.errors == []
    assert sorted(offset for _, offset in reports.ok) == list(range(20, 40))
    produce_requests = cluster.requests(PRODUCE)
    assert produce_requests[-1].broker_id == 3
    metadata = producer.list_topics("moving", timeout=DEADLINE_S)
    assert metadata.topics["moving"].partitions[0].leader == 3
    values = [text(m.value()) for m in consume_all(cluster, "moving", 1, 40)]
    assert values == [f"value-{i}" for i in range(40)]


def test_rtt_delays_responses(cluster: MockCluster) -> None:
    cluster.create_topic("slow", 1)
    cluster.set_partition_leader("slow", 0, 1)
    producer = make_producer(cluster)
    assert produce(producer, "slow", 1).errors == []  # connect and learn metadata first

    cluster.set_rtt(ALL_BROKERS, 300)
    started = time.monotonic()
    reports = produce(producer, "slow", 5)
    elapsed = time.monotonic() - started

    assert reports.errors == []
    # Only a lower bound, which a slow machine cannot break: the response was held back.
    assert elapsed >= 0.3
    cluster.set_rtt(ALL_BROKERS, 0)


def test_request_tracking_records_broker_and_api_key(cluster: MockCluster) -> None:
    cluster.start_request_tracking()
    producer = make_producer(cluster)
    producer.list_topics(timeout=DEADLINE_S)
    seen = cluster.requests()
    assert {API_VERSIONS, METADATA} <= {r.api_key for r in seen}
    assert {r.broker_id for r in seen} <= {1, 2, 3}
    assert all(r.timestamp_us > 0 for r in seen)
    assert cluster.requests(METADATA) == [r for r in seen if r.api_key == METADATA]

    cluster.clear_requests()
    assert cluster.requests() == []


def test_invalid_calls_raise_with_librdkafka_error(cluster: MockCluster) -> None:
    with pytest.raises(MockClusterError) as info:
        cluster.set_partition_leader("t", 0, 99)
    assert info.value.code == BROKER_NOT_AVAILABLE
    assert "BROKER_NOT_AVAILABLE" in str(info.value)
    with pytest.raises(MockClusterError, match="_UNKNOWN_BROKER"):
        cluster.broker_push_request_error_rtts(
            99, PRODUCE, [(NOT_LEADER_OR_FOLLOWER, 0)]
        )


def test_close_stops_the_listeners() -> None:
    mock = MockCluster(2, topics={"a": 2})
    host, port = mock.bootstrap_servers.split(",")[0].rsplit(":", 1)
    assert host == "127.0.0.1"
    socket.create_connection((host, int(port)), timeout=5).close()
    mock.close()
    mock.close()  # idempotent
    assert mock.closed
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, int(port)), timeout=5)
    with pytest.raises(RuntimeError, match="closed"):
        mock.create_topic("b", 1)


def test_constructor_options() -> None:
    with pytest.raises(ValueError):
        MockCluster(0)
    with MockCluster(
        1,
        topics={"x": 3},
        rtt_ms=0,
        group_initial_rebalance_delay_ms=0,
        track_requests=True,
    ) as mock:
        assert mock.broker_ids == [1]
        assert len(mock.bootstrap_servers.split(",")) == 1
        metadata = make_producer(mock).list_topics("x", timeout=DEADLINE_S)
        assert sorted(metadata.topics["x"].partitions) == [0, 1, 2]
        assert mock.requests(METADATA)


def test_cli_prints_bootstrap_servers_and_stops_on_sigint() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.mock_cluster",
            "--brokers",
            "2",
            "--topic",
            "t:2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        cwd=REPO_ROOT,  # ``-m tests.support...`` resolves from the repository root
    )
    try:
        assert proc.stdout is not None
        servers = proc.stdout.readline().strip().split(",")
        assert len(servers) == 2, servers
        host, port = servers[0].rsplit(":", 1)
        socket.create_connection((host, int(port)), timeout=5).close()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=DEADLINE_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
