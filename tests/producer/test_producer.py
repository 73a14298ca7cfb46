"""KafkaProducer's API: settings, serializers, interceptors, headers, size checks, flush,
metrics, threads and fork, against a one-broker librdkafka mock cluster."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, Consumer
from confluent_kafka import TopicPartition as CKTopicPartition

import samsa
from samsa import KafkaProducer, RecordMetadata
from samsa.errors import (
    ConfigError,
    ForkedClientError,
    KafkaTimeoutError,
    RecordTooLargeError,
)
from samsa.net.clock import MockClock
from tests.support.mock_cluster import MockCluster

from .test_producer_mock import DEADLINE_S, FAST


@pytest.fixture(scope="module")
def cluster() -> Iterator[MockCluster]:
    with MockCluster(1, topics={"t": 2, "one": 1}) as mock:
        yield mock


def producer_for(cluster: MockCluster, **extra: Any) -> KafkaProducer:
    return KafkaProducer({"bootstrap.servers": cluster.bootstrap_servers, **FAST}, **extra)


def read_one_partition(cluster: MockCluster, topic: str, count: int) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "g",
                         "enable.auto.commit": False, "check.crcs": True})
    try:
        consumer.assign([CKTopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[Any] = []
        for _ in range(40):
            out += [m for m in consumer.consume(1000, timeout=0.5) if not m.error()]
            if len(out) >= count:
                break
        return out
    finally:
        consumer.close()


def test_exports() -> None:
    assert samsa.KafkaProducer is KafkaProducer
    assert samsa.RecordMetadata is RecordMetadata


def test_unknown_and_invalid_settings_fail_at_construction() -> None:
    with pytest.raises(ConfigError, match="lingr.ms"):
        KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "lingr.ms": 5})
    with pytest.raises(ConfigError, match="bootstrap.servers"):
        KafkaProducer()
    with pytest.raises(ConfigError, match="acks"):
        KafkaProducer(bootstrap_servers="127.0.0.1:1", acks="2")


def test_keyword_settings_and_serializers_headers_timestamps(cluster: MockCluster) -> None:
    with producer_for(cluster, key_serializer="str", value_serializer="json", linger_ms=0) as producer:
        md = producer.send("one", {"a": 1}, key="k", timestamp_ms=1_700_000_000_123,
                           headers={"h": "v", "n": None}).get(timeout=DEADLINE_S)
        assert md.serialized_key_size == 1
        assert md.serialized_value_size == len(b'{"a": 1}') or md.serialized_value_size == len(b'{"a":1}')
    [message] = read_one_partition(cluster, "one", 1)
    assert message.key() == b"k"
    assert message.value().replace(b" ", b"") == b'{"a":1}'
    assert message.timestamp()[1] == 1_700_000_000_123
    assert message.headers() == [("h", b"v"), ("n", None)]


def test_interceptors_see_sends_and_acknowledgements(cluster: MockCluster) -> None:
    events: list[tuple[str, Any]] = []

    class Upper:
        def on_send(self, record: Any) -> Any:
            events.append(("send", record.value))
            return record._replace(value=record.value.upper())

        def on_acknowledgement(self, metadata: Any, exception: Any) -> None:
            events.append(("ack", metadata.topic))

        def close(self) -> None:
            events.append(("close", None))

    acked = threading.Event()
    with producer_for(cluster, interceptor_classes=[Upper()]) as producer:
        producer.send("t", b"abc", partition=1, on_delivery=lambda md, err: acked.set()).get(timeout=DEADLINE_S)
        producer.send("t", b"def", partition=1).get(timeout=DEADLINE_S)
        assert acked.is_set()
    assert events == [("send", b"abc"), ("ack", "t"), ("send", b"def"), ("ack", "t"), ("close", None)]


def test_record_size_checks(cluster: MockCluster) -> None:
    with (
        producer_for(cluster, max_request_size=1000) as producer,
        pytest.raises(RecordTooLargeError, match="max.request.size=1000"),
    ):
        producer.send("t", b"x" * 2000)
    with (
        producer_for(cluster, buffer_memory=1500, batch_size=1000, max_request_size=10_000) as producer,
        pytest.raises(RecordTooLargeError, match="buffer.memory=1500"),
    ):
        producer.send("t", b"x" * 2000)


def test_partitions_for_and_metrics(cluster: MockCluster) -> None:
    with producer_for(cluster) as producer:
        assert producer.partitions_for("t") == [0, 1]
        for i in range(100):
            producer.send("t", b"%d" % i)
        producer.flush(DEADLINE_S)
        metrics = producer.metrics()
    for name in ("record-send-rate", "batch-size-avg", "request-latency-avg", "record-retry-total",
                 "record-error-total", "buffer-available-bytes", "buffer-total-bytes"):
        assert name in metrics
    assert metrics["record-send-total"] == 100
    assert metrics["buffer-available-bytes"] == metrics["buffer-total-bytes"]


def test_flush_raises_when_records_are_not_acknowledged_in_time(cluster: MockCluster) -> None:
    producer = producer_for(cluster)
    try:
        producer.partitions_for("one")
        cluster.set_rtt(-1, 2000)
        producer.send("one", b"slow")
        with pytest.raises(KafkaTimeoutError, match="flush"):
            producer.flush(timeout=0.2)
    finally:
        cluster.set_rtt(-1, 0)
        producer.close(0)


def test_many_threads_send_concurrently(cluster: MockCluster) -> None:
    results: list[RecordMetadata] = []
    lock = threading.Lock()
    with producer_for(cluster) as producer:
        def worker(n: int) -> None:
            futures = [producer.send("t", b"%d-%d" % (n, i), key=b"%d" % n) for i in range(500)]
            got = [f.get(timeout=DEADLINE_S) for f in futures]
            with lock:
                results.extend(got)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(results) == 4000
    offsets = {(md.partition, md.offset) for md in results}
    assert len(offsets) == 4000  # every record got its own offset


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_use_after_fork_raises_in_the_child(cluster: MockCluster) -> None:
    with producer_for(cluster) as producer:
        producer.send("t", b"parent").get(timeout=DEADLINE_S)
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            code = 1
            try:
                producer.send("t", b"child")
            except ForkedClientError:
                code = 0
            except BaseException:  # noqa: BLE001 - any other outcome is a failure
                code = 2
            os.write(write_fd, bytes([code]))
            os._exit(0)
        os.close(write_fd)
        answer = os.read(read_fd, 1)
        os.waitpid(pid, 0)
        os.close(read_fd)
        # The parent goes on as before.
        producer.send("t", b"parent again").get(timeout=DEADLINE_S)
    assert answer == b"\x00", "the child should get ForkedClientError"


def test_close_is_idempotent_and_close_from_a_callback_does_not_hang(cluster: MockCluster) -> None:
    producer = producer_for(cluster)
    done = threading.Event()

    def close_inside(md: Any, err: Any) -> None:
        producer.close(timeout=1)
        done.set()

    producer.send("t", b"x", on_delivery=close_inside)
    assert done.wait(DEADLINE_S)
    producer.close()
    producer.close(0)
    assert producer.closed


def test_a_producer_never_closed_does_not_keep_the_interpreter_alive(cluster: MockCluster) -> None:
    import subprocess
    import sys

    script = (
        "from samsa import KafkaProducer\n"
        f"p = KafkaProducer({{'bootstrap.servers': {cluster.bootstrap_servers!r}, 'linger.ms': 50}})\n"
        "p.send('exit-topic', b'sent before exit', partition=0)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], check=False, timeout=60, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # Closing at exit sent what was queued.
    [message] = read_one_partition(cluster, "exit-topic", 1)
    assert message.value() == b"sent before exit"


def test_one_injected_clock_times_the_whole_producer() -> None:
    """Record timestamps, batch ages and the network client's times all come from ``clock``
    (Java's Time): with a MockClock that never moves, a record still goes out (linger.ms=0)
    and carries the mock wall-clock time."""
    clock = MockClock(now_ms=5_000, wall_start_ms=1_600_000_000_000)
    with MockCluster(1, topics={"clock": 1}) as mock:
        producer = producer_for(mock, clock=clock, linger_ms=0)
        try:
            assert producer._client._clock == clock.monotonic_ms
            assert producer._metadata._clock == clock.monotonic_ms
            accumulator = producer._accumulator
            assert accumulator._clock is clock and accumulator.buffer_pool._clock is clock
            created: list[int] = []
            original = accumulator._append

            def spy(*args: Any) -> Any:
                result = original(*args)
                created.extend(b.created_ms for b in accumulator.get_deque("clock", 0) or ())
                return result

            accumulator._append = spy  # type: ignore[method-assign]
            producer.send("clock", b"v").get(timeout=DEADLINE_S)
            assert created == [5_000]
        finally:
            producer.close(DEADLINE_S)
        (message,) = read_one_partition(mock, "clock", 1)
        assert message.timestamp() == (TIMESTAMP_CREATE_TIME, 1_600_000_000_000)
