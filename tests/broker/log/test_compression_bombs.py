"""Compression bombs on produce (issue 14, behaviour 2): a samsa broker subprocess, default
settings, gets each bomb in a raw Produce request, answers an error for the partition, appends
nothing, keeps its resident memory (VmHWM, read from /proc) well below what the bomb inflates
to, and goes on serving a healthy confluent-kafka client.

The broker checks every produced batch by decompressing it; samsa.decompressed.batch.max.bytes
(32 MiB by default) bounds that, and a batch past it gets MESSAGE_TOO_LARGE.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from samsa.records import Compression, RecordBatchBuilder
from samsa.records.compression import DEFAULT_MAX_DECOMPRESSED_BYTES
from tests.broker.conftest import BrokerProcess, RawClient
from tests.support.compression_bombs import (
    MiB,
    batch_of,
    gzip_bomb,
    lz4_bomb,
    lz4_declared_bomb,
    snappy_xerial_bomb,
    zstd_bomb,
)
from tests.support.process_stats import peak_rss_bytes, reset_peak_rss, rss_bytes

MESSAGE_TOO_LARGE = 10
LIMIT = DEFAULT_MAX_DECOMPRESSED_BYTES
# The limit itself, plus the request's own buffers (a 4.6 MB Produce), an output piece or an
# LZ4 block, zstd's window and the allocator's slack.  The bombs inflate to 96 MiB - 1 GiB.
BOUND = LIMIT + 32 * MiB
CODECS = (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD)
TOPIC = "bombs"
BIG_TOPIC = "big-bombs"  # max.message.bytes=8 MiB: room for a snappy payload past the limit


def _healthy_batch(codec: Compression, tag: str) -> bytes:
    builder = RecordBatchBuilder(compression=codec)
    now = int(time.time() * 1000)
    for i in range(100):
        builder.append(now, b"key", b"%s-%d " % (tag.encode(), i) * 50)
    return builder.build()


def test_bombs_get_an_error_and_the_broker_stays_small(
        broker_process: Callable[..., BrokerProcess],
        raw_client: Callable[[int], RawClient]) -> None:
    bombs: list[tuple[str, str, Compression, bytes]] = [
        ("zstd 8 KB -> 256 MiB", TOPIC, Compression.ZSTD, zstd_bomb(256 * MiB)),
        ("zstd 8 KB -> 256 MiB, no content size", TOPIC, Compression.ZSTD,
         zstd_bomb(256 * MiB, content_size=False)),
        ("gzip 520 KB -> 512 MiB", TOPIC, Compression.GZIP, gzip_bomb(512 * MiB)),
        ("lz4 1 MB -> 252 MiB", TOPIC, Compression.LZ4, lz4_bomb(252 * MiB)),
        ("snappy (xerial) 4.6 MB -> 96 MiB", BIG_TOPIC, Compression.SNAPPY,
         snappy_xerial_bomb(96 * MiB)),
    ]
    broker = broker_process().start()
    pid = broker.proc.pid if broker.proc is not None else -1
    client = raw_client(broker.port)
    assert client.create_topic(TOPIC, 1) == 0
    assert client.create_topic(BIG_TOPIC, 1, {"max.message.bytes": str(8 * MiB)}) == 0
    # Every codec once first, so its contexts and the broker's buffers count as baseline.
    for topic in (TOPIC, BIG_TOPIC):
        for codec in CODECS:
            assert client.produce(topic, 0, _healthy_batch(codec, "warm"), version=8).error_code == 0
    stored = {topic: client.list_offset(topic, 0) for topic in (TOPIC, BIG_TOPIC)}

    for name, topic, codec, payload in bombs:
        before = rss_bytes(pid)
        reset_peak_rss(pid)
        answer = client.produce(topic, 0, batch_of(payload, codec), version=8)
        growth = peak_rss_bytes(pid) - before
        assert answer.error_code == MESSAGE_TOO_LARGE, (name, answer)
        assert f"limit of {LIMIT} bytes" in answer.error_message, (name, answer.error_message)
        assert "samsa.decompressed.batch.max.bytes" in answer.error_message, answer.error_message
        assert growth < BOUND, f"{name}: the broker's RSS rose by {growth / MiB:.0f} MiB"

    # A frame declaring 256 blocks of 4 MiB that holds 256 tiny ones: refused as the records
    # they hold (zeros) are not records, without a buffer sized from the declaration.
    before = rss_bytes(pid)
    reset_peak_rss(pid)
    answer = client.produce(TOPIC, 0, batch_of(lz4_declared_bomb(256), Compression.LZ4),
                            version=8)
    growth = peak_rss_bytes(pid) - before
    assert answer.error_code != 0, answer
    assert growth < 32 * MiB, f"declared lz4 blocks: the broker's RSS rose by {growth / MiB:.0f} MiB"

    assert {topic: client.list_offset(topic, 0) for topic in stored} == stored  # nothing appended
    _healthy_round_trip(broker.bootstrap_servers, stored[TOPIC])
    assert broker.is_running()


def _healthy_round_trip(bootstrap: str, stored: int) -> None:
    """A confluent-kafka producer (lz4) and consumer get their records through, after the
    ``stored`` records already in partition 0."""
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4",
                         "linger.ms": 5})
    errors: list[Any] = []
    for i in range(50):
        producer.produce(TOPIC, b"after-%d" % i, partition=0,
                         on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert producer.flush(30) == 0 and not errors, errors
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "after-bombs",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30  # only guards against a hang
        while len(got) < stored + 50 and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.5):
                assert msg.error() is None, msg.error()
                got.append(msg.value())
        assert len(got) == stored + 50 and got[stored:] == [b"after-%d" % i for i in range(50)]
    finally:
        consumer.close()
