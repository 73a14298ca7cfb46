"""A record that lies inside a batch whose CRC is right, already in a broker's log (written by a
broker that did not validate records, as samsa's did before): samsa's consumer hands out the
records before it, then fails every poll with a CorruptRecordError naming the partition, the
batch and the record, and the offset to seek to; after that seek it reads on.

That is Java's consumer (CompletedFetch.fetchRecords keeps its cachedRecordException, the
position stays on the bad record, "please seek past the record to continue consumption").
The batch goes into the segment file directly, then the broker restarts without its clean
shutdown marker, so that recovery (size and CRC, as Kafka's) takes it in.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from samsa.broker.log.manager import CLEAN_SHUTDOWN_FILE
from samsa.consumer import KafkaConsumer, TopicPartition
from samsa.errors import CorruptRecordError
from samsa.records import set_base_offset
from tests.broker.conftest import RawClient
from tests.broker.handmade_batches import handmade_record, wrap_records
from tests.support.broker import start_broker

TOPIC = "lies"


def batch(first: int, values: list[bytes], lie_at: int | None = None) -> bytes:
    """A batch of ``values`` at offsets ``first``...; record ``lie_at``'s key length runs past
    its end (the batch's CRC is right)."""
    now = int(time.time() * 1000)
    records = b"".join(
        handmade_record(i, v, key=b"k", key_length=50 if i == lie_at else None,
                        timestamp_delta=0)
        for i, v in enumerate(values))
    data = bytearray(wrap_records(records, len(values), base_timestamp=now, max_timestamp=now))
    set_base_offset(data, 0, first)
    return bytes(data)


def poll_until(consumer: KafkaConsumer, count: int) -> list[Any]:
    got: list[Any] = []
    for _ in range(100):
        got += consumer.poll(0.2)
        if len(got) >= count:
            break
    return got


# 5000: polls that take more than a chunk check the records first and build them when the
# application iterates (samsa.consumer.fetcher.RecordSpan); the check finds the lie.
@pytest.mark.parametrize("max_poll_records", [500, 5000])
def test_a_lying_record_in_the_log_fails_each_poll_until_a_seek_past_its_batch(
        tmp_path: Path, max_poll_records: int) -> None:
    data_dir = tmp_path / "data"
    good = [b"good-%d" % i for i in range(5)]
    with start_broker(data_dir) as broker:
        client = RawClient(broker.port)
        assert client.create_topic(TOPIC, 1) == 0
        assert client.produce(TOPIC, 0, batch(0, good)).error_code == 0  # offsets 0-4
        client.close()
    # Offsets 5-9, the third record (offset 7) lying, past the broker's validation.
    segment = max((data_dir / f"{TOPIC}-0").glob("*.log"))
    with segment.open("ab") as f:
        f.write(batch(5, [b"poisoned-%d" % i for i in range(5)], lie_at=2))
    (data_dir / CLEAN_SHUTDOWN_FILE).unlink()
    later = [b"later-%d" % i for i in range(5)]
    with start_broker(data_dir) as broker:
        client = RawClient(broker.port)
        assert client.produce(TOPIC, 0, batch(0, later)).error_code == 0  # offsets 10-14
        client.close()
        tp = TopicPartition(TOPIC, 0)
        with KafkaConsumer({"bootstrap.servers": broker.bootstrap_servers,
                            "auto.offset.reset": "earliest", "fetch.max.wait.ms": 100,
                            "max.poll.records": max_poll_records}) as c:
            c.assign([tp])
            got: list[Any] = []
            with pytest.raises(CorruptRecordError) as info:
                for _ in range(100):
                    got += c.poll(0.2)
            # The records before the lying one, its batch's first two included.
            assert [(r.offset, r.value) for r in got] == [
                *enumerate(good), (5, b"poisoned-0"), (6, b"poisoned-1")]
            text = str(info.value)
            assert text.startswith(f"CORRUPT_MESSAGE (error code 2): partition {TOPIC}-0: "
                                   "batch at offset 5: record 2 (offset 7): key length 50 "), text
            assert text.endswith("; seek to offset 10 to skip the rest of its batch"), text
            # Every later poll fails the same way, the position on the lying record.
            for _ in range(3):
                with pytest.raises(CorruptRecordError) as again:
                    c.poll(0.2)
                assert str(again.value) == text
                assert c.position(tp) == 7
            c.seek(tp, 10)
            after = poll_until(c, 5)
            assert [(r.offset, r.value) for r in after] == [(10 + i, v)
                                                           for i, v in enumerate(later)]
