"""compression.type with real clients: confluent-kafka's and samsa's producers (uncompressed and
lz4, idempotent and transactional) write to topics with compression.type zstd, gzip,
uncompressed and producer; the stored batches have the topic's codec (the producer's under
``producer``) and confluent-kafka's and samsa's consumers read every record back unchanged."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from samsa.broker import Broker
from samsa.records import Compression, iter_batches

pytest.importorskip("confluent_kafka")

TOPIC_CODECS = ("zstd", "gzip", "uncompressed", "producer")
STORED = {"zstd": Compression.ZSTD, "gzip": Compression.GZIP, "uncompressed": Compression.NONE}
N = 1500
Row = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes], ...]]


def rows(tag: str) -> list[Row]:
    return [(None if i % 13 == 0 else b"%s-k%d" % (tag.encode(), i),
             None if i % 17 == 0 else b"%s value %d " % (tag.encode(), i) * (1 + i % 5),
             (("n", b"%d" % i),) if i % 4 == 0 else ())
            for i in range(N)]


def stored_codecs(broker: Broker, topic: str) -> set[int]:
    log = broker.log_manager.get_log(topic, 0)
    assert log is not None
    codecs: set[int] = set()
    for segment in log.segments_snapshot():
        for batch in iter_batches(segment.log_path.read_bytes(), check_crcs=True):
            if not batch.is_control:
                codecs.add(batch.compression)
    return codecs


def confluent_produce(servers: str, topic: str, data: list[Row], codec: str,
                      transactional: bool = False) -> None:
    from confluent_kafka import Producer

    conf: dict[str, Any] = {"bootstrap.servers": servers, "compression.type": codec,
                            "enable.idempotence": True, "acks": "all", "linger.ms": 5}
    if transactional:
        conf["transactional.id"] = f"tx-{topic}"
    producer = Producer(conf)
    errors: list[str] = []
    if transactional:
        producer.init_transactions(30)
        producer.begin_transaction()
    for key, value, headers in data:
        producer.produce(topic, value, key=key, partition=0, headers=list(headers) or None,
                         on_delivery=lambda err, _msg: errors.append(str(err)) if err else None)
        producer.poll(0)
    if transactional:
        producer.commit_transaction(30)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]


def samsa_produce(servers: str, topic: str, data: list[Row], codec: str,
                  transactional: bool = False) -> None:
    from samsa import KafkaProducer

    conf: dict[str, Any] = {"bootstrap.servers": servers, "compression.type": codec,
                            "enable.idempotence": True, "acks": "all", "linger.ms": 5}
    if transactional:
        conf["transactional.id"] = f"samsa-tx-{topic}"
    with KafkaProducer(conf) as producer:
        if transactional:
            producer.init_transactions(30)
            producer.begin_transaction()
        futures = [producer.send(topic, value, key=key, partition=0, headers=list(headers))
                   for key, value, headers in data]
        if transactional:
            producer.commit_transaction(30)
        producer.flush(60)
        for future in futures:
            future.get(30)


def confluent_read(servers: str, topic: str, count: int) -> list[Row]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": servers, "group.id": f"ck-{topic}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[Row] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < count and time.monotonic() < deadline:
            for m in consumer.consume(500, 0.5):
                assert m.error() is None, m.error()
                got.append((m.key(), m.value(), tuple(m.headers() or ())))
    finally:
        consumer.close()
    return got


def samsa_read(servers: str, topic: str, count: int) -> list[Row]:
    from samsa.consumer import KafkaConsumer, TopicPartition

    got: list[Row] = []
    with KafkaConsumer({"bootstrap.servers": servers, "auto.offset.reset": "earliest",
                        "isolation.level": "read_committed"}) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            for r in consumer.poll(0.5):
                got.append((r.key, r.value, tuple((h[0], h[1]) for h in r.headers or ())))
    return got


@pytest.mark.parametrize("transactional", [False, True], ids=["idempotent", "transactional"])
def test_clients_write_topics_with_compression_type(make_broker: Callable[..., Broker],
                                                    transactional: bool) -> None:
    broker = make_broker({"group.initial.rebalance.delay.ms": 0})
    servers = broker.bootstrap_servers
    for topic_codec in TOPIC_CODECS:
        for client, produce in (("ck", confluent_produce), ("samsa", samsa_produce)):
            for codec in ("none", "lz4"):
                topic = f"{client}-{codec}-to-{topic_codec}"
                broker.log_manager.create_topic(topic, 1, {"compression.type": topic_codec})
                data = rows(topic)
                produce(servers, topic, data, codec, transactional)
                want = STORED.get(topic_codec, Compression.LZ4 if codec == "lz4"
                                  else Compression.NONE)
                assert stored_codecs(broker, topic) == {want}, topic
                for reader in (confluent_read, samsa_read):
                    assert reader(servers, topic, N) == data, (topic, reader.__name__)
