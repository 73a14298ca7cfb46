"""Old clients against the broker: kafka-python pinned to the protocol of Kafka 0.9 and 0.10.1.

Pinned, kafka-python skips ApiVersions and speaks what those brokers spoke: Metadata v0-2,
Produce v0-2 with magic 0 (0.9) or magic 1 (0.10.1) message sets, Fetch v0-3, ListOffsets
v0-1, group membership v0-1, OffsetCommit v2 / OffsetFetch v1.  Kafka 3.9 still serves all of
that (KIP-896 removed it in 4.0): records are converted to v2 on produce and back on fetch.
Also raw Fetch v0 / v2 over the socket, large enough that the response is converted and sent
in several chunks.
"""

from __future__ import annotations

import socket
import struct
import time
import warnings
from typing import Any

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from samsa.broker import Broker
from samsa.protocol import FetchRequest
from samsa.records import MemoryRecords, iter_batches
from samsa.records.builder import RecordBatchBuilder

COUNT = 50


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    # No initial rebalance delay: each test's groups join at once (two joins per test).
    return {"num.partitions": 2, "group.initial.rebalance.delay.ms": 0}

PINNED = {"0.9": (0, 9), "0.10.1": (0, 10, 1)}
CASES = [(pinned, codec) for pinned in PINNED for codec in (None, "gzip", "snappy", "lz4")]


def _produce(bootstrap: str, version: tuple[int, ...], topic: str, codec: str | None,
             start: int = 0) -> list[Any]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=version, acks="all",
                             compression_type=codec, linger_ms=5, request_timeout_ms=15_000)
    try:
        futures = [producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
                   for i in range(start, start + COUNT)]
        producer.flush(60)
        return [f.get(timeout=60) for f in futures]
    finally:
        producer.close(timeout=10)


def _consume(bootstrap: str, version: tuple[int, ...], topic: str, group: str,
             expected: int) -> list[Any]:
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, api_version=version,
                             group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=10_000,
                             heartbeat_interval_ms=1_000, request_timeout_ms=15_000)
    try:
        got: list[Any] = []
        deadline = time.monotonic() + 90
        while len(got) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(records)
        consumer.commit()
        committed = {p: consumer.committed(TopicPartition(topic, p)) for p in (0, 1)}
        assert committed == {p: max(r.offset for r in got if r.partition == p) + 1
                             for p in (0, 1)}
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize(("pinned", "codec"), CASES, ids=[f"{p}-{c or 'none'}" for p, c in CASES])
def test_kafka_python_pinned_produces_consumes_in_a_group_and_commits(
        broker: Broker, pinned: str, codec: str | None) -> None:
    version = PINNED[pinned]
    topic = f"old-{pinned}-{codec or 'none'}"
    bootstrap = broker.bootstrap_servers
    sent = _produce(bootstrap, version, topic, codec)
    assert sorted((m.partition, m.offset) for m in sent) == sorted(
        [(0, i) for i in range(COUNT // 2)] + [(1, i) for i in range(COUNT // 2)])
    got = _consume(bootstrap, version, topic, "group-" + topic, COUNT)
    assert sorted((r.key, r.value) for r in got) == sorted(
        (b"k%d" % i, b"v%d" % i) for i in range(COUNT))
    # 0.9 has no timestamps (magic 0); 0.10.1 keeps the producer's CreateTime.
    assert {r.timestamp is None or r.timestamp < 0 for r in got} == {pinned == "0.9"}
    # The group resumes from its commit: only what is produced next comes back.
    _produce(bootstrap, version, topic, codec, start=COUNT)
    again = _consume(bootstrap, version, topic, "group-" + topic, COUNT)
    assert sorted(r.value for r in again) == sorted(b"v%d" % i for i in range(COUNT, 2 * COUNT))
    # What the log holds is v2, whatever the client sent.
    stored = broker.apis.services.get_log(topic, 0).read(0, 1 << 24).records.read()
    assert {b.magic for b in iter_batches(stored)} == {2}


@pytest.mark.parametrize(("version", "magic"), [(0, 0), (2, 1)])
def test_raw_fetch_of_old_versions_is_converted_in_chunks(broker: Broker, raw_client: Any,
                                                          version: int, magic: int) -> None:
    topic = f"raw-fetch-v{version}"
    client = raw_client(broker.port)
    assert client.create_topic(topic, 1) == 0
    for n in range(20):  # 20 batches of ~40 KiB: several 128 KiB conversion chunks
        builder = RecordBatchBuilder(batch_size_limit=1 << 30)
        for i in range(40):
            builder.append(1_700_000_000_000 + i, b"k", b"%05d-" % (n * 40 + i) + b"x" * 1000)
        assert client.produce(topic, 0, builder.build()).error_code == 0
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, topics=[
        FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchPartition(partition=0, fetch_offset=0,
                                        partition_max_bytes=4 << 20)])])
    part = client.call(request, version).responses[0].partitions[0]
    assert (part.error_code, part.high_watermark) == (0, 800)
    assert {b.magic for b in iter_batches(part.records)} == {magic}
    records = list(MemoryRecords(part.records).records())
    assert [r.offset for r in records] == list(range(len(records)))
    assert len(records) > 700  # growth in the old format may cut the tail off
    assert all(r.value.startswith(b"%05d-" % r.offset) for r in records)
    # The connection stays usable after the chunked response.
    assert client.call(request, 4).responses[0].partitions[0].error_code == 0


def test_unserved_versions_are_logged_once_per_client(broker: Broker,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    """Kafka closes the connection; an old client reconnects and asks again, so the broker
    logs the first time per (client, API, version) and the repeats at debug level."""
    caplog.set_level("DEBUG", logger="samsa.broker.network")
    client_id = b"repeating-client"
    # Fetch v18: beyond what the codec knows, so the network layer refuses it.
    header = struct.pack(">hhih", 1, 18, 1, len(client_id)) + client_id + b"\x00" * 16
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", broker.port), timeout=15) as sock:
            sock.sendall(struct.pack(">i", len(header)) + header)
            try:
                answer = sock.recv(1)
            except ConnectionResetError:
                answer = b""
            assert answer == b""  # closed without an answer
    mine = [r for r in caplog.records if "repeating-client" in r.getMessage()]
    assert [r.levelname for r in mine] == ["WARNING", "DEBUG", "DEBUG"]
