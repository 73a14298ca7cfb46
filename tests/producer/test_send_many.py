"""KafkaProducer.send_many against the embedded samsa broker, read back with confluent-kafka:
order per partition, keyed placement as send()'s, explicit partitions, headers and
timestamps, batch.size respected, failures counted and reported, checks before queueing."""

from __future__ import annotations

import time
from array import array
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer
from confluent_kafka import TopicPartition as CKTopicPartition

from samsa import KafkaProducer
from samsa.broker import Broker
from samsa.errors import RecordTooLargeError, SerializationError
from samsa.producer.partitioner import partition_for_key
from tests.support.mutation_budget import records as budget

PARTITIONS = 4


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"num.partitions": PARTITIONS, "message.max.bytes": 20_000}


def producer_for(broker: Broker, **extra: Any) -> KafkaProducer:
    return KafkaProducer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5, **extra})


def read_all(broker: Broker, topic: str, expected: int) -> dict[int, list[Any]]:
    """Per partition, in offset order: (key, value, headers, timestamp ms)."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "send-many",
                         "enable.auto.commit": False, "check.crcs": True})
    out: dict[int, list[Any]] = {p: [] for p in range(PARTITIONS)}
    try:
        consumer.assign([CKTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got, deadline = 0, time.monotonic() + 60
        while got < expected and time.monotonic() < deadline:
            for m in consumer.consume(10000, timeout=0.5):
                assert not m.error(), m.error()
                out[m.partition()].append((m.key(), m.value(), m.headers(), m.timestamp()[1]))
                got += 1
    finally:
        consumer.close()
    assert sum(map(len, out.values())) == expected
    return out


def test_keyless_records_all_arrive_in_order_in_full_batches(broker: Broker) -> None:
    n = budget(20_000)
    values = [b"%08d" % i + b"x" * 92 for i in range(n)]
    with producer_for(broker, **{"batch.size": 16384}) as producer:
        assert producer.send_many("keyless", values) == n
        producer.flush(60)
        metrics = producer.metrics()
    assert metrics["record-send-total"] == n and metrics["record-error-total"] == 0
    # ~16 KiB batches: batch.size holds (not one batch per call, not one per record).
    assert 100 <= metrics["records-per-batch-avg"] <= 16384 // 100
    got = read_all(broker, "keyless", n)
    seen = []
    for records in got.values():
        indexes = [int(value[:8]) for _key, value, _h, _ts in records]
        assert indexes == sorted(indexes)  # send order within each partition
        seen += indexes
    assert sorted(seen) == list(range(n))
    assert sum(1 for records in got.values() if records) > 1  # the sticky partition moved on


def test_keyed_placement_is_sends_and_explicit_partitions_win(broker: Broker) -> None:
    n = 3000
    keys: list[bytes | None] = [b"k%d" % (i % 97) if i % 3 else None for i in range(n)]
    values = [b"%d" % i for i in range(n)]
    partitions: list[int | None] = [i % PARTITIONS if i % 5 == 0 else None for i in range(n)]
    with producer_for(broker) as producer:
        producer.send_many("keyed", values, keys=keys, partitions=partitions)
        producer.flush(60)
        assert producer.metrics()["record-send-total"] == n
    got = read_all(broker, "keyed", n)
    for partition, records in got.items():
        indexes = [int(value) for _key, value, _h, _ts in records]
        assert indexes == sorted(indexes)
        for key, value, _h, _ts in records:
            i = int(value)
            assert key == keys[i]
            if partitions[i] is not None:
                assert partition == partitions[i]
            elif key is not None:
                assert partition == partition_for_key(key, PARTITIONS)


def test_headers_and_timestamps_are_kept(broker: Broker) -> None:
    values = [b"a", b"b", b"c", None]
    headers = [[("h", b"1")], None, {"x": "y", "z": None}, [("n", b"")]]
    stamps = [1_600_000_000_000, None, 1_600_000_000_123, 1_600_000_000_001]
    before = time.time() * 1000
    with producer_for(broker) as producer:
        producer.send_many("meta", values, partitions=[0, 0, 0, 0], timestamps_ms=stamps, headers=headers)
        producer.flush(60)
    got = read_all(broker, "meta", 4)[0]
    assert [v for _k, v, _h, _ts in got] == values
    assert [h for _k, _v, h, _ts in got] == [[("h", b"1")], None, [("x", b"y"), ("z", None)], [("n", b"")]]
    assert [got[0][3], got[2][3], got[3][3]] == [stamps[0], stamps[2], stamps[3]]
    assert got[1][3] >= before - 1000  # None: the time of sending


@pytest.mark.parametrize("failing", [3, 300])  # 300: laid out as Arrow rows (accumulator._columnar_run)
def test_failed_batches_are_counted_and_reported(broker: Broker, failing: int) -> None:
    errors: list[BaseException] = []
    small, big = [b"ok"] * 10, [b"x" * 30_000] * failing  # over the broker's message.max.bytes
    with producer_for(broker, retries=0) as producer:
        assert producer.last_error() is None
        producer.send_many("fails", small)
        producer.send_many("fails", big, on_error=errors.append)
        producer.flush(60)
        metrics = producer.metrics()
        last = producer.last_error()
    assert metrics["record-send-total"] == 10
    assert metrics["record-error-total"] == failing
    # One call of on_error per failed batch: a batch each, as each record is over batch.size.
    assert last is not None and len(errors) == failing and all(e is not None for e in errors)


def test_bad_input_queues_nothing(broker: Broker) -> None:
    with producer_for(broker, **{"max.request.size": 5000}) as producer:
        with pytest.raises(ValueError, match="keys has 1 items"):
            producer.send_many("bad", [b"a", b"b"], keys=[b"k"])
        with pytest.raises(RecordTooLargeError):
            producer.send_many("bad", [b"a", b"y" * 6000])
        with pytest.raises(ValueError, match="negative"):
            producer.send_many("bad", [b"a"], partitions=[-2])
        assert producer.send_many("bad", []) == 0
        producer.flush(10)
        assert producer.metrics()["record-send-total"] == 0
        assert producer.metrics()["batches-incomplete"] == 0


def test_serializers_and_interceptors_apply(broker: Broker) -> None:
    seen: list[str] = []

    class Recorder:
        def on_send(self, record: Any) -> Any:
            seen.append(record.value)
            return record

        def on_acknowledgement(self, metadata: Any, error: Any) -> None:
            pass

        def close(self) -> None:
            pass

    with producer_for(broker, **{"value.serializer": "string"}) as producer:
        producer.send_many("ser", ["é", "b"], partitions=[1, 1])
        producer.flush(30)
    with producer_for(broker, **{"value.serializer": "string", "interceptor.classes": [Recorder]}) as producer:
        producer.send_many("ser", ["c"], partitions=[1])
        producer.flush(30)
    assert seen == ["c"]
    assert [v for _k, v, _h, _ts in read_all(broker, "ser", 3)[1]] == ["é".encode(), b"b", b"c"]


def test_many_values_of_every_bytes_like_kind_and_nulls(broker: Broker) -> None:
    """Enough keyless values for the columnar path (accumulator.columnar_run): bytes,
    bytearray, memoryview (its bytes, as the default serializer copies them) and None arrive
    as given, in order; a str with the default serializer is refused before anything is queued."""
    n = 600
    kinds = [lambda i: b"b%05d" % i, lambda i: bytearray(b"a%05d" % i),
             lambda i: memoryview(array("i", [i, -i])), lambda i: None]
    values = [kinds[i % 4](i) for i in range(n)]
    with producer_for(broker, **{"batch.size": 2000}) as producer:
        with pytest.raises(SerializationError):
            producer.send_many("kinds", [b"x"] * (n - 1) + ["text"])
        assert producer.send_many("kinds", values) == n
        producer.flush(60)
        assert producer.metrics()["record-send-total"] == n
    got = [v for records in read_all(broker, "kinds", n).values() for _k, v, _h, _ts in records]
    expected = [None if v is None else bytes(v) for v in values]
    assert sorted(got, key=repr) == sorted(expected, key=repr)
