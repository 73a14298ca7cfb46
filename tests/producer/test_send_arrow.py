"""KafkaProducer.send_arrow: Arrow rows produced to the embedded samsa broker read back by
samsa's consumer and by confluent-kafka's exactly as the same rows sent with send() (keys,
values, headers, timestamps, partitions; every codec); batches byte for byte send()'s;
murmur2 placement as send()'s; per-row offsets and failures; idempotent and transactional."""

from __future__ import annotations

import time
import uuid
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer
from confluent_kafka import TopicPartition as CKTopicPartition
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from samsa import KafkaProducer
from samsa.broker import Broker
from samsa.consumer import KafkaConsumer
from samsa.errors import IllegalStateError, RecordTooLargeError
from samsa.net.clock import MockClock
from samsa.producer.accumulator import RecordAccumulator
from samsa.producer.arrow_batches import ArrowRun, ArrowSendError, key_partitions
from samsa.producer.buffer_pool import BufferPool
from samsa.producer.partitioner import partition_for_key
from samsa.records.arrow_records import ArrowRecords, as_binary
from tests.producer.fakes import FakeCluster

PARTITIONS = 4
BASE_TS = 1_700_000_000_000
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"num.partitions": PARTITIONS, "message.max.bytes": 200_000}


def producer_for(broker: Broker, **extra: Any) -> KafkaProducer:
    return KafkaProducer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5, **extra})


def read_confluent(broker: Broker, topic: str, expected: int) -> list[tuple[Any, ...]]:
    """(partition, offset, key, value, headers, timestamp) of every record, by partition and offset."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "send-arrow",
                         "enable.auto.commit": False, "check.crcs": True})
    out: list[tuple[Any, ...]] = []
    try:
        consumer.assign([CKTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        while len(out) < expected and time.monotonic() < deadline:
            for m in consumer.consume(10000, timeout=0.05):
                assert not m.error(), m.error()
                out.append((m.partition(), m.offset(), m.key(), m.value(),
                            [(k, v) for k, v in (m.headers() or [])], m.timestamp()[1]))
    finally:
        consumer.close()
    assert len(out) == expected
    return sorted(out, key=lambda r: (r[0], r[1]))


def read_samsa(broker: Broker, topic: str, expected: int) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    with KafkaConsumer({"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest"}) as c:
        c.assign([(topic, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        while len(out) < expected and time.monotonic() < deadline:
            for r in c.poll(0.05):
                out.append((r.partition, r.offset, r.key, r.value, list(r.headers), r.timestamp))
    assert len(out) == expected
    return sorted(out, key=lambda r: (r[0], r[1]))


row = st.tuples(
    st.none() | st.binary(max_size=20),  # key: null, empty or bytes
    st.none() | st.text(max_size=30),  # value: unicode strings, null, empty
    # (confluent-kafka reads header keys as C strings: no NUL in them)
    st.lists(st.tuples(st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=8),
                       st.none() | st.binary(max_size=10)), max_size=3),
    st.none() | st.integers(0, 10**6),  # timestamp delta in ms; null: now
    st.none() | st.integers(0, PARTITIONS - 1),  # explicit partition
)


def table_of(rows: list[Any]) -> pa.Table:
    return pa.table({
        "key": pa.array([r[0] for r in rows], pa.binary()),
        "value": pa.array([r[1] for r in rows], pa.string()),
        "headers": pa.array([[{"key": k, "value": v} for k, v in r[2]] for r in rows], HEADERS),
        "ts": pa.array([None if r[3] is None else BASE_TS + r[3] for r in rows], pa.timestamp("ms")),
        "partition": pa.array([r[4] for r in rows], pa.int32()),
    })


def without_place(records: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(((r[2], r[3], r[4], r[5]) for r in records), key=repr)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck),
          phases=[Phase.explicit, Phase.reuse, Phase.generate])  # no shrinking: each example reads 4 times
@given(rows=st.lists(row, min_size=1, max_size=80))
def test_rows_read_back_as_sends_rows(broker: Broker, rows: list[Any], codec: str) -> None:
    # Every row's timestamp is explicit so that both paths send the same records.
    rows = [(k, v, h, 0 if ts is None else ts, p) for k, v, h, ts, p in rows]
    tag = uuid.uuid4().hex[:8]
    by_arrow, by_send = f"arrow-{tag}", f"send-{tag}"
    with producer_for(broker, **{"compression.type": codec, "batch.size": 512}) as producer:
        delivery = producer.send_arrow(by_arrow, table_of(rows), timestamp="ts", headers="headers",
                                       partition="partition").get(30)
        futures = [producer.send(by_send, None if v is None else v.encode(), k, p, BASE_TS + ts, h or None)
                   for k, v, h, ts, p in rows]
        sent = [f.get(30) for f in futures]
    for name, read in (("samsa", read_samsa), ("confluent", read_confluent)):
        got_arrow, got_send = read(broker, by_arrow, len(rows)), read(broker, by_send, len(rows))
        assert without_place(got_arrow) == without_place(got_send), name
        # Keyed and explicitly placed rows land where send() puts them; the future says where.
        placed = {(r[0], r[1]): r for r in got_arrow}
        for i, (k, v, h, ts, p) in enumerate(rows):
            record = placed[(int(delivery.partitions[i]), int(delivery.offsets[i]))]
            assert record[2:] == (k, None if v is None else v.encode(), h, BASE_TS + ts), name
            if k is not None or p is not None:
                assert delivery.partitions[i] == sent[i].partition


@settings(max_examples=200, deadline=None)
@given(st.lists(st.none() | st.binary(max_size=40), min_size=1, max_size=50), st.integers(1, 100))
def test_key_partitions_are_murmur2_as_send(keys: list[bytes | None], count: int) -> None:
    got = key_partitions(as_binary(pa.array(keys, pa.binary()), "key"), count)
    assert got.tolist() == [-1 if k is None else partition_for_key(k, count) for k in keys]


def batches(acc: RecordAccumulator, partition: int) -> list[bytes]:
    dq = acc.get_deque("t", partition)
    assert dq is not None
    return [batch.builder.build() for batch in dq]


@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
def test_batches_are_byte_for_byte_sends(codec: str) -> None:
    """The accumulator fed by append() record by record and by an ArrowRun holds the same
    bytes: batch boundaries, varints, offset and timestamp deltas, attributes, CRC."""
    cluster = FakeCluster({"t": [1, 1]})
    rng = np.random.default_rng(7)
    n = 3000
    keys = [None if i % 7 == 0 else b"key-%d" % i for i in range(n)]
    values = [bytes(rng.integers(0, 4, int(rng.integers(0, 300)), np.uint8)) for _ in range(n)]
    headers = [[("h", b"%d" % i)] if i % 5 == 0 else [] for i in range(n)]
    stamps = [BASE_TS + int(d) for d in rng.integers(-5000, 5000, n)]
    accs = []
    for _ in range(2):
        acc = RecordAccumulator(4096, BufferPool(1 << 24, 4096), compression=codec, clock=MockClock())
        # A batch already open from send(): the Arrow rows continue it.
        acc.append("t", 1, BASE_TS, b"first", b"x", None, None, 0, False, 0, cluster)
        accs.append(acc)
    for i in range(n):
        accs[0].append("t", 1, stamps[i], keys[i], values[i], headers[i] or None, None, 0, False, 0, cluster)
    records = ArrowRecords(as_binary(pa.array(keys, pa.binary()), "key"), as_binary(pa.array(values), "value"),
                           pa.array([[{"key": k, "value": v} for k, v in h] for h in headers], HEADERS),
                           np.array(stamps, np.int64))
    segments: list[Any] = []
    accs[1].append_run("t", 1, ArrowRun(records, 0, n, segments), n, 0, 0, cluster, lambda: None)
    expected = batches(accs[0], 1)
    assert len(expected) > 10
    assert batches(accs[1], 1) == expected
    assert sum(hi - lo for _r, _rel, lo, hi in segments) == n


def test_keyless_rows_stick_and_offsets_say_where_each_row_went(broker: Broker) -> None:
    n = 20_000
    values = pa.array([b"%08d" % i + b"x" * 92 for i in range(n)])
    with producer_for(broker, **{"batch.size": 16384}) as producer:
        delivery = producer.send_arrow("keyless-arrow", pa.record_batch({"value": values})).get(60)
        metrics = producer.metrics()
    assert metrics["record-send-total"] == n and metrics["record-error-total"] == 0
    assert 100 <= metrics["records-per-batch-avg"] <= 16384 // 100  # batch.size holds
    got = read_confluent(broker, "keyless-arrow", n)
    by_place = {(p, o): int(v[:8]) for p, o, _k, v, _h, _t in got}
    assert [by_place[(int(p), int(o))] for p, o in zip(delivery.partitions, delivery.offsets, strict=True)] \
        == list(range(n))
    assert len(set(delivery.partitions.tolist())) > 1  # the sticky partition moved on
    ranges = delivery.offset_ranges()
    assert sum(hi - lo + 1 for lo, hi in ranges.values()) == n


def test_idempotent_and_transactional_send_arrow(broker: Broker) -> None:
    n = 5000
    table = pa.table({"key": [b"k%d" % (i % 50) for i in range(n)], "value": [b"v%d" % i for i in range(n)]})
    with producer_for(broker, **{"enable.idempotence": True, "acks": "all"}) as producer:
        producer.send_arrow("idem-arrow", table).get(30)
        assert producer.metrics()["record-error-total"] == 0
    assert len(read_confluent(broker, "idem-arrow", n)) == n
    tid = f"arrow-txn-{uuid.uuid4().hex[:6]}"
    with producer_for(broker, **{"transactional.id": tid}) as producer:
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.send_arrow("txn-arrow", table)
        producer.abort_transaction(30)
        producer.begin_transaction()
        delivery = producer.send_arrow("txn-arrow", table).get(30)
        producer.commit_transaction(30)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "arrow-txn",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    got: list[Any] = []
    try:
        consumer.assign([CKTopicPartition("txn-arrow", p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            got += [(m.partition(), m.offset()) for m in consumer.consume(10000, 0.2) if not m.error()]
    finally:
        consumer.close()
    # Only the committed call's rows, each once, at the offsets its future gave.
    assert sorted(got) == sorted(zip(delivery.partitions.tolist(), delivery.offsets.tolist(), strict=True))


def test_failures_name_the_rows(broker: Broker) -> None:
    # A row over the broker's message.max.bytes fails alone (its own batch); the others land.
    values = pa.array([b"a", b"b" * 250_000, b"c"])
    with producer_for(broker, **{"max.request.size": 1_000_000, "retries": 0}) as producer:
        future = producer.send_arrow("too-big-arrow", pa.table({"value": values}),
                                     partition=pa.array([0, 0, 1], pa.int32()))
        with pytest.raises(ArrowSendError) as info:
            future.get(30)
        delivery = future.outcome()
    assert info.value.delivery.failed_rows.tolist() == [1]
    assert "rows 1" in str(info.value)
    assert delivery.offsets[0] >= 0 and delivery.offsets[2] >= 0 and delivery.offsets[1] == -1


def test_checks_before_queueing(broker: Broker) -> None:
    with producer_for(broker, **{"max.request.size": 1000}) as producer:
        with pytest.raises(RecordTooLargeError, match="max.request.size"):
            producer.send_arrow("checks", pa.table({"value": [b"x", b"y" * 2000]}))
        with pytest.raises(KeyError, match="no column 'v'"):
            producer.send_arrow("checks", pa.table({"value": [b"x"]}), value="v")
        with pytest.raises(TypeError, match="binary or string"):
            producer.send_arrow("checks", pa.table({"value": [1]}))
        with pytest.raises(ValueError, match="negative"):
            producer.send_arrow("checks", pa.table({"value": [b"x"]}), partition=-2)
        assert producer.metrics()["batches-incomplete"] == 0
    with producer_for(broker, **{"interceptor.classes": [Interceptor]}) as producer, \
            pytest.raises(IllegalStateError, match="interceptor"):
        producer.send_arrow("checks", pa.table({"value": [b"x"]}))


class Interceptor:
    def on_send(self, record: Any) -> Any:
        return record

    def on_acknowledgement(self, metadata: Any, error: Any) -> None:
        pass

    def close(self) -> None:
        pass
