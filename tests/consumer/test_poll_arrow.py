"""KafkaConsumer.poll_arrow against the samsa broker: the same records as poll() and as
confluent-kafka's consumer (every codec, headers, nulls, transactions under read_committed,
kafka-python's old message formats), positions as poll() moves them (max_records, seek, pause),
commits of a group member."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from samsa.broker import Broker
from samsa.consumer import KafkaConsumer, TopicPartition
from samsa.consumer.arrow_records import ARROW_SCHEMA

_ids = itertools.count()


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"num.partitions": 3, "group.initial.rebalance.delay.ms": 0,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1}


def conf(broker: Broker, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest", **extra}


def read_arrow(consumer: KafkaConsumer, n: int, max_records: int | None = None
               ) -> dict[TopicPartition, pa.Table]:
    got: dict[TopicPartition, list[pa.RecordBatch]] = {}
    count = 0
    for _ in range(200):
        for tp, batch in consumer.poll_arrow(0.5, max_records=max_records).items():
            assert batch.schema == ARROW_SCHEMA
            assert max_records is None or batch.num_rows <= max_records
            got.setdefault(tp, []).append(batch)
            count += batch.num_rows
        if count >= n:
            break
    return {tp: pa.Table.from_batches(b) for tp, b in got.items()}


def read_rows(consumer: KafkaConsumer, n: int) -> list[Any]:
    out: list[Any] = []
    for _ in range(200):
        out.extend(consumer.poll(0.5))
        if len(out) >= n:
            break
    return out


def read_confluent(broker: Broker, topic: str, partitions: int, n: int, **extra: Any) -> list[Any]:
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"ck-{topic}",
                  "enable.auto.commit": False, **extra})
    c.assign([CkTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out: list[Any] = []
    try:
        for _ in range(100):
            for m in c.consume(1000, 0.5):
                assert m.error() is None, m.error()
                out.append((m.partition(), m.offset(), m.timestamp()[1], m.key(), m.value(),
                            [(k, v) for k, v in (m.headers() or [])]))
            if len(out) >= n:
                break
    finally:
        c.close()
    return sorted(out)


def as_tuples(tables: dict[TopicPartition, pa.Table]) -> list[Any]:
    out = []
    for tp, t in tables.items():
        d = t.to_pydict()
        assert set(d["topic"]) == {tp.topic} and set(d["partition"]) == {tp.partition}
        out += [(p, o, ts, k, v, [(h["key"], h["value"]) for h in hs]) for p, o, ts, k, v, hs in zip(
            d["partition"], d["offset"], d["timestamp"], d["key"], d["value"], d["headers"],
            strict=True)]
    return sorted(out)


def rows_as_tuples(rows: list[Any]) -> list[Any]:
    return sorted((r.partition, r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in rows)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_matches_poll_and_confluent(broker: Broker, produce: Callable[..., None],
                                                 codec: str) -> None:
    topic = f"arrow-{codec}-{next(_ids)}"
    records = [{"key": None if i % 4 == 0 else f"k{i}".encode(),
                "value": None if i % 9 == 0 else b"" if i % 9 == 1 else f"value-{i}".encode() * (i % 7),
                "partition": i % 3, "timestamp": 1_700_000_000_000 + i,
                "headers": [("h", f"{i}".encode()), ("n", None)] if i % 2 else None}
               for i in range(600)]
    produce(topic, records, **{"compression.type": codec, "batch.size": 4096})
    tps = [TopicPartition(topic, p) for p in range(3)]
    with KafkaConsumer(conf(broker)) as c:
        c.assign(tps)
        tables = read_arrow(c, 600, max_records=170)
        positions = {tp: c.position(tp) for tp in tps}
    with KafkaConsumer(conf(broker)) as c:
        c.assign(tps)
        rows = read_rows(c, 600)
        assert positions == {tp: c.position(tp) for tp in tps} == {tp: 200 for tp in tps}
    got = as_tuples(tables)
    assert len(got) == 600
    assert got == rows_as_tuples(rows) == read_confluent(broker, topic, 3, 600)


def test_positions_max_records_seek_pause(broker: Broker, produce: Callable[..., None]) -> None:
    topic = f"arrow-seek-{next(_ids)}"
    produce(topic, [{"value": str(i).encode(), "partition": 0} for i in range(50)],
            **{"batch.size": 200})
    tp = TopicPartition(topic, 0)
    with KafkaConsumer(conf(broker, **{"max.poll.records": 7})) as c:
        c.assign([tp])
        first = c.poll_arrow(5.0)
        assert first[tp].column("offset").to_pylist() == list(range(7))  # max.poll.records
        assert c.position(tp) == 7
        rows = c.poll(5.0)  # poll() goes on where poll_arrow stopped, and back
        assert [r.offset for r in rows] == list(range(7, 14))
        assert c.poll_arrow(5.0)[tp].column("offset").to_pylist() == list(range(14, 21))
        c.seek(tp, 45)
        assert read_arrow(c, 5)[tp].column("offset").to_pylist() == [45, 46, 47, 48, 49]
        assert c.position(tp) == 50
        c.seek(tp, 10)
        c.pause([tp])
        assert c.poll_arrow(0.3) == {}
        c.resume([tp])
        assert read_arrow(c, 40)[tp].column("value").to_pylist() == [
            str(i).encode() for i in range(10, 50)]


def test_read_committed_skips_aborted_transactions(broker: Broker) -> None:
    topic = f"arrow-txn-{next(_ids)}"
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": topic,
                  "linger.ms": 5})
    p.init_transactions(30)
    for txn in range(6):
        p.begin_transaction()
        for i in range(50):
            p.produce(topic, f"txn{txn}-{i}".encode(), partition=i % 2)
        p.flush(30)
        if txn % 3 == 1:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    tps = [TopicPartition(topic, q) for q in range(2)]
    with KafkaConsumer(conf(broker, **{"isolation.level": "read_committed"})) as c:
        c.assign(tps)
        tables = read_arrow(c, 200, max_records=33)
        ends = c.end_offsets(tps)
        assert {tp: c.position(tp) for tp in tps} == ends  # past the last marker
    values = sorted(v for t in tables.values() for v in t.column("value").to_pylist())
    assert values == sorted(f"txn{t}-{i}".encode() for t in (0, 2, 3, 5) for i in range(50))
    assert as_tuples(tables) == read_confluent(broker, topic, 2, 200, **{
        "isolation.level": "read_committed"})


@pytest.mark.parametrize("api_version", [(0, 10, 1), (0, 9)])
def test_kafka_python_old_formats(broker: Broker, api_version: tuple[int, ...]) -> None:
    from kafka import KafkaProducer

    topic = f"arrow-kp-{next(_ids)}"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, api_version=api_version,
                             compression_type="gzip", linger_ms=5)
    for i in range(120):
        producer.send(topic, key=None if i % 3 else b"k", value=f"v{i}".encode(), partition=i % 3)
    producer.flush(30)
    producer.close()
    tps = [TopicPartition(topic, q) for q in range(3)]
    with KafkaConsumer(conf(broker)) as c:
        c.assign(tps)
        tables = read_arrow(c, 120)
    with KafkaConsumer(conf(broker)) as c:
        c.assign(tps)
        rows = read_rows(c, 120)
    assert len(rows) == 120
    assert as_tuples(tables) == rows_as_tuples(rows)


def test_group_member_commits_what_poll_arrow_returned(broker: Broker,
                                                        produce: Callable[..., None]) -> None:
    topic = f"arrow-group-{next(_ids)}"
    produce(topic, [{"value": b"x", "partition": i % 3} for i in range(90)])
    assigned: list[Any] = []

    class Listener:
        def on_partitions_assigned(self, partitions: Any) -> None:
            assigned.extend(partitions)

        def on_partitions_revoked(self, partitions: Any) -> None:
            pass

    with KafkaConsumer(conf(broker, **{"group.id": topic, "enable.auto.commit": False})) as c:
        c.subscribe([topic], listener=Listener())
        tables = read_arrow(c, 90)
        c.commit()
        committed = c.committed(set(tables))
    assert sorted(assigned) == [TopicPartition(topic, q) for q in range(3)]
    assert sum(t.num_rows for t in tables.values()) == 90
    assert {tp: o.offset for tp, o in committed.items()} == {tp: 30 for tp in tables}
