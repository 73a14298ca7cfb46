"""A compression bomb already in a log reaches samsa's consumer: poll() raises a clear
CorruptRecordError (partition, offset, the consumer setting) after handing out the records
before it, the consumer's resident memory stays bounded by samsa.decompressed.batch.max.bytes
(128 MiB by default) rather than by the 256 MiB the batch inflates to, and seeking past the
batch goes on with the records after it.

The bomb gets into the log through a samsa broker subprocess told to accept it (its own limit
raised to 1 GiB), as a Kafka broker, which has no such limit, would store it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from samsa.consumer import KafkaConsumer, TopicPartition
from samsa.consumer.config import ConsumerConfig
from samsa.errors import CorruptRecordError
from samsa.records import Compression
from tests.broker.conftest import BrokerProcess, RawClient
from tests.support.compression_bombs import MiB, batch_of, zstd_records
from tests.support.process_stats import peak_rss_bytes, reset_peak_rss, rss_bytes

TOPIC = "bomb"
BOMB_RECORDS = 256  # of 1 MiB each: 256 MiB from a 16 KB zstd frame
CONSUMER_LIMIT = ConsumerConfig({})["samsa.decompressed.batch.max.bytes"]


def test_a_bomb_in_the_log_raises_a_clear_error_with_memory_bounded(tmp_path: Path) -> None:
    assert CONSUMER_LIMIT == 128 * MiB
    broker = BrokerProcess(tmp_path / "data", {"samsa.decompressed.batch.max.bytes": 1 << 30})
    broker.start()
    client = RawClient(broker.port)
    try:
        assert client.create_topic(TOPIC, 1) == 0
        before_bomb = batch_of(zstd_records(2, 10), Compression.ZSTD, count=2)  # offsets 0-1
        bomb = batch_of(zstd_records(BOMB_RECORDS, MiB), Compression.ZSTD, count=BOMB_RECORDS)
        after_bomb = batch_of(zstd_records(3, 20), Compression.ZSTD, count=3)
        for batch in (before_bomb, bomb, after_bomb):
            assert client.produce(TOPIC, 0, batch).error_code == 0
        first_after = 2 + BOMB_RECORDS
        assert client.list_offset(TOPIC, 0) == first_after + 3
        tp = TopicPartition(TOPIC, 0)
        with KafkaConsumer({"bootstrap.servers": broker.bootstrap_servers,
                            "auto.offset.reset": "earliest", "fetch.max.wait.ms": 100}) as c:
            c.assign([tp])
            got = []
            pid = os.getpid()
            baseline = rss_bytes(pid)
            reset_peak_rss(pid)
            with pytest.raises(CorruptRecordError) as info:
                for _ in range(100):
                    got += c.poll(0.2)
            growth = peak_rss_bytes(pid) - baseline
            assert [(r.offset, r.value) for r in got] == [(0, bytes(10)), (1, bytes(10))]
            text = str(info.value)
            assert f"partition {TOPIC}-0" in text and "batch at offset 2" in text, text
            assert f"limit of {CONSUMER_LIMIT} bytes" in text, text
            assert "samsa.decompressed.batch.max.bytes" in text, text
            assert f"seek to offset {first_after}" in text, text
            assert growth < CONSUMER_LIMIT + 32 * MiB, \
                f"the consumer's RSS rose by {growth / MiB:.0f} MiB"
            # The position stays on the bomb (the error again) until a seek past it.
            assert c.position(tp) == 2
            with pytest.raises(CorruptRecordError):
                c.poll(0.2)
            c.seek(tp, first_after)
            after: list = []
            for _ in range(100):
                after += c.poll(0.2)
                if len(after) >= 3:
                    break
            assert [(r.offset, r.value) for r in after] == [
                (first_after + i, bytes(20)) for i in range(3)]
    finally:
        client.close()
        broker.stop()
