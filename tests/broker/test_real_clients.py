"""Real clients move 100,000 records each through a 4-partition topic on the samsa broker and
read back exactly what was written: keys, values, headers, timestamps, partitions and offsets.

The peers -- kcat (librdkafka 2.0.2), confluent-kafka (librdkafka 2.16), kafka-python 3.0 and
aiokafka 0.14 -- were not written here, so they catch protocol mistakes our own tests would
share with our own code.  Compression is checked where it matters: in the batches the broker
stored (read from its segment files), since librdkafka 2.0.2 silently sends uncompressed
batches when the advertised versions do not pass its feature checks (rdkafka_feature.c).

Each peer must be installed; a missing one fails the test, it never skips.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pytest

from samsa.broker import Broker
from samsa.records import Compression

N = 100_000
PARTITIONS = 4
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
_CODEC_IDS = {"none": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
              "lz4": Compression.LZ4, "zstd": Compression.ZSTD}


@dataclass(frozen=True, slots=True)
class Rec:
    """One record as a client wrote or read it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def key_of(i: int) -> bytes:
    return b"key-%06d" % i


def value_of(i: int) -> bytes:
    # Distinct, a little compressible, and free of kcat's separators (':' '|' newline).
    return b"value-%06d-" % i + b"abcdefgh" * (i % 5)


def headers_of(i: int) -> tuple[tuple[str, bytes | None], ...]:
    return (("seq", b"%d" % i), ("origin", b"test"))


def assert_same_records(written: Iterable[Rec], read: Iterable[Rec]) -> None:
    """``read`` holds exactly ``written``: nothing lost, nothing extra, every field equal,
    and offsets per partition contiguous from 0."""
    written = list(written)
    by_position = {(r.partition, r.offset): r for r in written}
    got: dict[tuple[int, int], Rec] = {}
    for r in read:
        assert (r.partition, r.offset) not in got, f"read twice: {r}"
        got[(r.partition, r.offset)] = r
    assert len(by_position) == len(written), "the producer reported duplicate positions"
    missing = by_position.keys() - got.keys()
    extra = got.keys() - by_position.keys()
    assert not missing and not extra, (f"{len(missing)} missing (e.g. {sorted(missing)[:3]}), "
                                       f"{len(extra)} unexpected (e.g. {sorted(extra)[:3]})")
    for position, want in by_position.items():
        assert got[position] == want, f"at {position}: wrote {want}, read {got[position]}"
    for p in range(PARTITIONS):
        offsets = sorted(o for q, o in by_position if q == p)
        assert offsets == list(range(len(offsets))), f"partition {p}: offsets not contiguous"


def assert_stored_codec(broker: Broker, topic: str, codec: str, read_stored: Any,
                        *, skips_useless_compression: bool = False) -> int:
    """Every batch of ``topic`` the broker stored uses ``codec``; returns the record count.

    kafka-python, aiokafka and librdkafka send a batch uncompressed when compressing it would
    not make it smaller (a lone small record): with ``skips_useless_compression`` such small batches
    may be NONE, but most records must be stored compressed."""
    want = _CODEC_IDS[codec]
    total = compressed = 0
    for p in range(PARTITIONS):
        for batch in read_stored(broker.data_dir, topic, p):
            header = batch.header
            total += header.records_count
            if header.compression == want:
                compressed += header.records_count
                continue
            assert skips_useless_compression and header.compression == Compression.NONE \
                and header.size < 400, (
                    f"{topic}-{p}: batch at offset {header.base_offset} is stored with "
                    f"{header.compression.name}, the client was told to use {codec}")
    assert compressed >= 0.9 * total, f"only {compressed} of {total} records use {codec}"
    return total


def assert_stored_matches(broker: Broker, topic: str, read: Iterable[Rec], read_stored: Any
                          ) -> None:
    """What a client read is what the broker stored (offsets, keys, values, timestamps)."""
    stored = {}
    for p in range(PARTITIONS):
        for batch in read_stored(broker.data_dir, topic, p):
            for r in batch:
                stored[(p, r.offset)] = (r.key, r.value, r.timestamp)
    read_map = {(r.partition, r.offset): (r.key, r.value, r.timestamp) for r in read}
    assert stored == read_map


# --- kcat (librdkafka 2.0.2) ------------------------------------------------------------------------


def _kcat() -> str:
    path = shutil.which("kcat")
    assert path is not None, "kcat is not installed (apt-get install kcat)"
    return path


def test_kcat_metadata(broker: Broker) -> None:
    topic = "kcat-meta"
    produced = subprocess.run([_kcat(), "-b", broker.bootstrap_servers, "-P", "-t", topic],
                              input=b"x\n", check=False, capture_output=True, timeout=60)
    assert produced.returncode == 0, produced.stderr
    listing = subprocess.run([_kcat(), "-b", broker.bootstrap_servers, "-L", "-t", topic],
                             check=False, capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0, listing.stderr
    out = listing.stdout
    assert f"1 brokers:\n  broker {broker.node_id} at {broker.bootstrap_servers}" in out, out
    assert f'topic "{topic}" with {PARTITIONS} partitions:' in out, out
    for p in range(PARTITIONS):
        assert (f"partition {p}, leader {broker.node_id}, replicas: {broker.node_id}, "
                f"isrs: {broker.node_id}") in out, out


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produce_consume(broker: Broker, read_stored: Any, codec: str) -> None:
    kcat, bs, topic = _kcat(), broker.bootstrap_servers, f"kcat-{codec}"
    lines = b"".join(key_of(i) + b":" + value_of(i) + b"\n" for i in range(N))
    before = int(time.time() * 1000)
    produced = subprocess.run(
        [kcat, "-b", bs, "-P", "-t", topic, "-z", codec, "-K:", "-H", "seq=fixed",
         "-H", "origin=kcat", "-X", "linger.ms=20", "-X", "enable.idempotence=true"],
        input=lines, check=False, capture_output=True, timeout=120)
    after = int(time.time() * 1000)
    assert produced.returncode == 0, produced.stderr.decode()
    # librdkafka 2.0.2 falls back to uncompressed batches without a word if the broker's
    # ApiVersions ranges fail its feature checks: look at what was stored (a lone small record
    # that compression would not shrink goes uncompressed, which a fast broker makes likelier).
    assert assert_stored_codec(broker, topic, codec, read_stored,
                               skips_useless_compression=True) == N

    consumed = subprocess.run(
        [kcat, "-b", bs, "-C", "-t", topic, "-e", "-o", "beginning", "-X", "check.crcs=true",
         "-f", "%k|%s|%T|%h|%p|%o\n"], check=False, capture_output=True, timeout=120)
    assert consumed.returncode == 0, consumed.stderr.decode()
    read: list[Rec] = []
    for line in consumed.stdout.splitlines():
        key, value, ts, hdrs, part, off = line.split(b"|")
        headers = tuple((k.decode(), v) for k, _, v in (h.partition(b"=")
                                                        for h in hdrs.split(b",")))
        read.append(Rec(int(part), int(off), key, value, headers, int(ts)))
    assert len(read) == N, consumed.stderr.decode()[-2000:]

    # kcat cannot set timestamps: they are librdkafka's CreateTime at produce, so check they
    # fall in the produce window and equal what the broker stored.
    assert all(before <= r.timestamp <= after for r in read)
    assert_stored_matches(broker, topic, read, read_stored)
    # Keys and values as written, each partition in the order it was written.
    expected = {key_of(i): value_of(i) for i in range(N)}
    assert {r.key: r.value for r in read} == expected
    assert all(r.headers == (("seq", b"fixed"), ("origin", b"kcat")) for r in read)
    for p in range(PARTITIONS):
        in_partition = sorted((r for r in read if r.partition == p), key=lambda r: r.offset)
        assert [r.offset for r in in_partition] == list(range(len(in_partition)))
        keys = [r.key or b"" for r in in_partition]
        assert keys == sorted(keys)


# --- confluent-kafka (librdkafka 2.16) ------------------------------------------------------------


def test_confluent_kafka_idempotent_produce_and_assigned_consume(broker: Broker,
                                                                  read_stored: Any) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    bs, topic = broker.bootstrap_servers, "confluent"
    base_ts = int(time.time() * 1000) - 60_000
    producer = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True,
                         "compression.type": "zstd", "linger.ms": 5})
    written: list[Rec] = []
    errors: list[Any] = []

    def make_callback(i: int) -> Callable[[Any, Any], None]:
        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(err)
            else:
                written.append(Rec(msg.partition(), msg.offset(), key_of(i), value_of(i),
                                   headers_of(i) + (("null", None),), base_ts + i))
        return on_delivery

    for i in range(N):
        while True:
            try:
                producer.produce(topic, value_of(i), key_of(i),
                                 headers=[*headers_of(i), ("null", None)],
                                 timestamp=base_ts + i, on_delivery=make_callback(i))
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:5]
    assert assert_stored_codec(broker, topic, "zstd", read_stored) == N

    consumer = Consumer({"bootstrap.servers": bs, "group.id": "unused-assign-only",
                         "enable.auto.commit": False, "check.crcs": True})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        read = _confluent_consume(consumer, N)
    finally:
        consumer.close()
    assert_same_records(written, read)


def _confluent_consume(consumer: Any, count: int) -> list[Rec]:
    from confluent_kafka import TIMESTAMP_CREATE_TIME

    read: list[Rec] = []
    deadline = time.monotonic() + 120
    while len(read) < count and time.monotonic() < deadline:
        for msg in consumer.consume(10_000, 1.0):
            assert msg.error() is None, msg.error()
            ts_type, ts = msg.timestamp()
            assert ts_type == TIMESTAMP_CREATE_TIME
            read.append(Rec(msg.partition(), msg.offset(), msg.key(), msg.value(),
                            tuple(msg.headers() or ()), ts))
    return read


# --- kafka-python 3.0 -------------------------------------------------------------------------------


def _kafka_python_produce(bs: str, topic: str, count: int, codec: str | None) -> list[Rec]:
    from kafka import KafkaProducer

    base_ts = int(time.time() * 1000) - 60_000
    producer = KafkaProducer(bootstrap_servers=bs, acks="all", compression_type=codec,
                             linger_ms=5, batch_size=65536)
    try:
        futures = [(i, producer.send(topic, value=value_of(i), key=key_of(i),
                                     headers=list(headers_of(i)), timestamp_ms=base_ts + i))
                   for i in range(count)]
        producer.flush(60)
        written = []
        for i, future in futures:
            meta = future.get(timeout=60)
            written.append(Rec(meta.partition, meta.offset, key_of(i), value_of(i),
                               headers_of(i), base_ts + i))
        return written
    finally:
        producer.close()


def _kafka_python_consume(bs: str, topic: str, count: int) -> list[Rec]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, check_crcs=True,
                             max_poll_records=10_000)
    try:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, 0)
        read: list[Rec] = []
        deadline = time.monotonic() + 120
        while len(read) < count and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=1000).items():
                for r in records:
                    assert r.timestamp_type == 0
                    read.append(Rec(tp.partition, r.offset, r.key, r.value,
                                    tuple((k, v) for k, v in r.headers), r.timestamp))
        return read
    finally:
        consumer.close()


def test_kafka_python_produce_and_seek_consume(broker: Broker, read_stored: Any) -> None:
    bs, topic = broker.bootstrap_servers, "kafka-python"
    written = _kafka_python_produce(bs, topic, N, "lz4")
    assert assert_stored_codec(broker, topic, "lz4", read_stored,
                               skips_useless_compression=True) == N
    assert_same_records(written, _kafka_python_consume(bs, topic, N))


# --- aiokafka 0.14 -----------------------------------------------------------------------------------


async def _aiokafka_produce(bs: str, topic: str, count: int, codec: str | None) -> list[Rec]:
    from aiokafka import AIOKafkaProducer

    base_ts = int(time.time() * 1000) - 60_000
    producer = AIOKafkaProducer(bootstrap_servers=bs, acks="all", compression_type=codec,
                                linger_ms=5, max_batch_size=65536)
    await producer.start()
    try:
        futures = []
        for i in range(count):
            futures.append(await producer.send(topic, value=value_of(i), key=key_of(i),
                                               headers=list(headers_of(i)),
                                               timestamp_ms=base_ts + i))
        metas = await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return [Rec(m.partition, m.offset, key_of(i), value_of(i), headers_of(i), base_ts + i)
            for i, m in enumerate(metas)]


async def _aiokafka_consume(bs: str, topic: str, count: int) -> list[Rec]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, check_crcs=True)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, 0)
        read: list[Rec] = []
        deadline = time.monotonic() + 120
        while len(read) < count and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=1000, max_records=10_000)
            for tp, records in batches.items():
                for r in records:
                    assert r.timestamp_type == 0
                    read.append(Rec(tp.partition, r.offset, r.key, r.value,
                                    tuple((k, v) for k, v in r.headers), r.timestamp))
        return read
    finally:
        await consumer.stop()


def test_aiokafka_produce_and_seek_consume(broker: Broker, read_stored: Any) -> None:
    bs, topic = broker.bootstrap_servers, "aiokafka"
    written = asyncio.run(_aiokafka_produce(bs, topic, N, "gzip"))
    assert assert_stored_codec(broker, topic, "gzip", read_stored,
                               skips_useless_compression=True) == N
    assert_same_records(written, asyncio.run(_aiokafka_consume(bs, topic, N)))


# --- every codec of the Python clients, on smaller runs -----------------------------------------------


SMALL = 3000


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_python_client_codecs(broker: Broker, read_stored: Any, client: str, codec: str
                              ) -> None:
    bs, topic = broker.bootstrap_servers, f"{client}-{codec}"
    wire_codec = None if codec == "none" else codec
    if client == "kafka-python":
        written = _kafka_python_produce(bs, topic, SMALL, wire_codec)
        assert assert_stored_codec(broker, topic, codec, read_stored,
                                   skips_useless_compression=True) == SMALL
        read = _kafka_python_consume(bs, topic, SMALL)
    else:
        written = asyncio.run(_aiokafka_produce(bs, topic, SMALL, wire_codec))
        assert assert_stored_codec(broker, topic, codec, read_stored,
                                   skips_useless_compression=True) == SMALL
        read = asyncio.run(_aiokafka_consume(bs, topic, SMALL))
    assert_same_records(written, read)

