"""KafkaProducer end to end against librdkafka's mock cluster (3 brokers), read back with a
confluent-kafka consumer (check.crcs on): every record exactly once, in send order per
partition, keyed records on Java's murmur2 partition.  Faults are injected while sending.

About duplicates: the mock validates idempotent sequences only for transactional producers
(rdkafka_mock.c), so a request it appended whose response was then lost would be
appended twice.  Each fault below is one the mock applies *before* appending (pushed request
errors, a partition whose leader moved away answers NOT_LEADER_OR_FOLLOWER, added RTT only
delays), or is injected while nothing is in flight (a broker goes down after a flush).  That
makes "exactly once" a valid assertion here.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator, Sequence

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer
from confluent_kafka import TopicPartition as CKTopicPartition

from samsa import KafkaProducer
from samsa.errors import KafkaTimeoutError, ProducerClosedError
from samsa.producer.partitioner import partition_for_key
from tests.support.mock_cluster import MockCluster

PRODUCE = 0
INIT_PRODUCER_ID = 22
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
DEADLINE_S = 60.0

FAST = {
    # Short backoffs keep fault tests quick; they change pacing, not correctness.
    "retry.backoff.ms": 10,
    "retry.backoff.max.ms": 100,
    "reconnect.backoff.ms": 10,
    "reconnect.backoff.max.ms": 100,
}


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster(3) as mock:
        yield mock


def make_producer(cluster: MockCluster, **extra: object) -> KafkaProducer:
    config: dict[str, object] = {"bootstrap.servers": cluster.bootstrap_servers, **FAST}
    config.update({k.replace("_", "."): v for k, v in extra.items()})
    return KafkaProducer(config)


def read_back(
    bootstrap: str, topic: str, partitions: int, expected: int, deadline_s: float = DEADLINE_S
) -> dict[int, list[tuple[bytes | None, bytes]]]:
    """Every record of the topic, per partition in offset order (reads until ``expected``)."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "samsa-readback",
        "enable.auto.commit": False,
        "check.crcs": True,
        "fetch.message.max.bytes": 1 << 20,
    })
    try:
        consumer.assign([CKTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: dict[int, list[tuple[bytes | None, bytes]]] = {p: [] for p in range(partitions)}
        got = 0
        deadline = time.monotonic() + deadline_s
        idle_polls = 0
        while time.monotonic() < deadline:
            messages = consumer.consume(10000, timeout=0.5)
            if not messages:
                idle_polls += 1
                if got >= expected and idle_polls >= 2:
                    break  # nothing more (a duplicate would have shown up by now)
                continue
            idle_polls = 0
            for m in messages:
                if m.error():
                    if m.error().code() == -191:  # _PARTITION_EOF
                        continue
                    raise AssertionError(f"consumer error: {m.error()}")
                out[m.partition()].append((m.key(), m.value()))
                got += 1
        return out
    finally:
        consumer.close()


def check_exactly_once_in_order(
    records: dict[int, list[tuple[bytes | None, bytes]]],
    sent: Sequence[tuple[bytes | None, bytes]],
    partitions: int,
) -> None:
    """Values are b"<index>"; each index once, increasing per partition, keyed ones on the
    murmur2 partition."""
    seen: set[int] = set()
    for partition, items in records.items():
        last = -1
        for key, value in items:
            index = int(value.split(b":")[0])
            assert index not in seen, f"record {index} appears twice"
            seen.add(index)
            assert index > last, f"partition {partition}: record {index} after {last}"
            last = index
            expected_key = sent[index][0]
            assert key == expected_key
            if key is not None:
                assert partition == partition_for_key(key, partitions)
    missing = set(range(len(sent))) - seen
    assert not missing, f"{len(missing)} record(s) missing, e.g. {sorted(missing)[:5]}"


def send_all(producer: KafkaProducer, topic: str, records: Sequence[tuple[bytes | None, bytes]],
             start: int = 0, stop: int | None = None) -> list[BaseException]:
    errors: list[BaseException] = []

    def on_delivery(_md: object, err: BaseException | None) -> None:
        if err is not None:
            errors.append(err)

    for i in range(start, len(records) if stop is None else stop):
        key, value = records[i]
        producer.send(topic, value, key=key, on_delivery=on_delivery)
    return errors


def make_records(n: int, keyed_every: int = 2, pad: int = 0) -> list[tuple[bytes | None, bytes]]:
    filler = b":" + b"x" * pad if pad else b""
    return [
        (b"key-%d" % (i % 1000) if i % keyed_every == 0 else None, b"%d" % i + filler)
        for i in range(n)
    ]


def test_200k_keyed_and_keyless_records_exactly_once_in_order(cluster: MockCluster) -> None:
    topic, partitions = "big", 8
    cluster.create_topic(topic, partitions)
    records = make_records(200_000)
    with make_producer(cluster) as producer:
        errors = send_all(producer, topic, records)
        producer.flush(DEADLINE_S)
        metrics = producer.metrics()
    assert not errors, errors[:3]
    assert metrics["record-send-total"] == len(records)
    check_exactly_once_in_order(read_back(cluster.bootstrap_servers, topic, partitions, len(records)),
                                records, partitions)


@pytest.mark.parametrize("idempotent", [True, False])
def test_faults_while_sending_lose_and_duplicate_nothing(cluster: MockCluster, idempotent: bool) -> None:
    topic, partitions = "faults", 8
    cluster.create_topic(topic, partitions)
    records = make_records(30_000)
    extra: dict[str, object] = {"linger.ms": 2, "batch.size": 4096}
    if not idempotent:
        extra.update({"enable.idempotence": False, "acks": "1", "max.in.flight.requests.per.connection": 1})
    errors: list[BaseException] = []
    with make_producer(cluster, **extra) as producer:
        step = len(records) // 6
        # 1. Partition leaders move while records flow (old leader answers NOT_LEADER).
        errors += send_all(producer, topic, records, 0, step)
        for p in range(partitions):
            cluster.set_partition_leader(topic, p, 1 + (p + 1) % 3)
        errors += send_all(producer, topic, records, step, 2 * step)
        # 2. Errors the mock returns before appending: NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT.
        cluster.push_request_errors(PRODUCE, [NOT_LEADER_OR_FOLLOWER] * 3 + [REQUEST_TIMED_OUT] * 3)
        errors += send_all(producer, topic, records, 2 * step, 3 * step)
        # 3. Added round-trip time on every broker (well under request.timeout.ms).
        cluster.set_rtt(-1, 50)
        errors += send_all(producer, topic, records, 3 * step, 4 * step)
        producer.flush(DEADLINE_S)
        cluster.set_rtt(-1, 0)
        # 4. A broker goes down with nothing in flight, records for it wait, it comes back.
        cluster.broker_down(2)
        errors += send_all(producer, topic, records, 4 * step, 5 * step)
        time.sleep(0.3)
        cluster.broker_up(2)
        errors += send_all(producer, topic, records, 5 * step)
        producer.flush(DEADLINE_S)
        metrics = producer.metrics()
    assert not errors, errors[:3]
    assert metrics["record-retry-total"] > 0
    check_exactly_once_in_order(read_back(cluster.bootstrap_servers, topic, partitions, len(records)),
                                records, partitions)


def test_buffer_memory_exhaustion_blocks_then_raises_after_max_block_ms(cluster: MockCluster) -> None:
    cluster.create_topic("stalled", 1)
    producer = make_producer(cluster, buffer_memory=64 * 1024, batch_size=16 * 1024, max_block_ms=300)
    try:
        assert producer.partitions_for("stalled") == [0]
        for broker in (1, 2, 3):
            cluster.broker_down(broker)
        with pytest.raises(KafkaTimeoutError, match="buffer.memory") as info:
            for i in range(100_000):
                producer.send("stalled", b"x" * 1000)
        assert i > 10  # it buffered records first, then blocked
        # The time left of max.block.ms after the metadata wait (as Java's BufferPool says it).
        waited = re.search(r"within max\.block\.ms=(\d+)", str(info.value))
        assert waited is not None and 0 < int(waited.group(1)) <= 300, str(info.value)
    finally:
        producer.close(0)


def test_close_with_timeout_zero_fails_pending_records(cluster: MockCluster) -> None:
    cluster.create_topic("slow", 2)
    producer = make_producer(cluster)
    assert len(producer.partitions_for("slow")) == 2
    producer.send("slow", b"first").get(timeout=DEADLINE_S)  # the producer id is in hand
    cluster.set_rtt(-1, 3000)
    futures = [producer.send("slow", b"%d" % i) for i in range(100)]
    # A Produce request is on the wire (its answer takes 3 s) when close(0) is called: close
    # must not wait for the broker, so even those records fail with ProducerClosedError (a
    # close that waited for the answer would see them succeed).
    deadline = time.monotonic() + DEADLINE_S
    while producer.metrics()["requests-in-flight"] == 0:
        assert time.monotonic() < deadline, "no produce request went out"
        time.sleep(0.005)
    producer.close(timeout=0)
    for future in futures:
        with pytest.raises(ProducerClosedError, match="closed"):
            future.get(timeout=10)
    with pytest.raises(ProducerClosedError):
        producer.send("slow", b"late")


def test_a_raising_callback_does_not_stop_the_sender(cluster: MockCluster) -> None:
    cluster.create_topic("cb", 4)
    calls: list[int] = []

    def bad(_md: object, _err: BaseException | None) -> None:
        calls.append(1)
        raise RuntimeError("boom from a user callback")

    with make_producer(cluster) as producer:
        producer.send("cb", b"first", on_delivery=bad).get(timeout=DEADLINE_S)
        futures = [producer.send("cb", b"%d" % i, on_delivery=bad) for i in range(1000)]
        for f in futures:
            assert f.get(timeout=DEADLINE_S).offset >= 0
    assert len(calls) == 1001


def test_callbacks_run_in_send_order_per_partition(cluster: MockCluster) -> None:
    cluster.create_topic("order", 3)
    seen: dict[int, list[int]] = {}
    lock = threading.Lock()

    def callback_for(i: int):  # type: ignore[no-untyped-def]
        def cb(md: object, err: BaseException | None) -> None:
            assert err is None
            with lock:
                seen.setdefault(md.partition, []).append(i)  # type: ignore[attr-defined]
        return cb

    with make_producer(cluster, linger_ms=1, batch_size=1024) as producer:
        for i in range(5000):
            producer.send("order", b"%d" % i, key=b"%d" % (i % 17), on_delivery=callback_for(i))
        producer.flush(DEADLINE_S)
    assert sum(len(v) for v in seen.values()) == 5000
    for indices in seen.values():
        assert indices == sorted(indices)


def test_unreachable_bootstrap_fails_clearly_after_max_block_ms() -> None:
    producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "max.block.ms": 500, **FAST})
    try:
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError) as info:
            producer.send("t", b"v")
        assert time.monotonic() - started >= 0.45
        text = str(info.value)
        assert "not present in metadata after 500 ms" in text
        assert "127.0.0.1:1" in text and "reachable" in text
    finally:
        producer.close(1)


def test_send_after_close_and_context_manager(cluster: MockCluster) -> None:
    with make_producer(cluster) as producer:
        md = producer.send("auto", b"v", key=b"k").get(timeout=DEADLINE_S)
        assert md.topic == "auto" and md.offset == 0
        assert md.partition == partition_for_key(b"k", 4)  # the mock auto-creates 4 partitions
    with pytest.raises(ProducerClosedError):
        producer.send("auto", b"v")
