"""The sink's write path without Spark: batch-level failure detection, pooled producers."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from samsa.broker import Broker
from samsa.consumer.consumer import KafkaConsumer
from samsa.errors import KafkaError
from samsa.net.cluster import TopicPartition
from samsa.spark import writer
from samsa.spark.options import SinkOptions


def test_failed_records_fail_the_write(broker: Broker, new_topic: Callable[..., str]) -> None:
    # The broker refuses a 2 MB batch (message.max.bytes ~1 MiB); no callback sees it, the
    # producer's counters do.
    opts = SinkOptions(client={"bootstrap.servers": broker.bootstrap_servers,
                               "max.request.size": str(8 << 20)}, topic=new_topic())
    big = pa.RecordBatch.from_pydict({"value": pa.array([b"x" * (2 << 20)], pa.binary())})
    with pytest.raises(KafkaError, match="1 of 1 records could not be written"):
        writer.write_batches(opts, iter([big]))
    # The failed producer was closed, not returned to the pool; the next write gets a new one.
    small = pa.RecordBatch.from_pydict({"value": pa.array([b"ok"] * 10, pa.binary())})
    assert writer.write_batches(opts, iter([small])) == 10


def test_columns_become_record_fields(broker: Broker, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    ts = pa.array([datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC), None, None], pa.timestamp("us", tz="UTC"))
    batch = pa.RecordBatch.from_pydict({
        "value": pa.array(["a", "b", None], pa.string()),
        "key": pa.array([b"k", None, b"k3"], pa.binary()),
        "partition": pa.array([2, 2, 1], pa.int32()),
        "timestamp": ts,
        "headers": pa.array([[{"key": "h", "value": b"1"}], None, []],
                            pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
    })
    opts = SinkOptions(client={"bootstrap.servers": broker.bootstrap_servers}, topic=topic)
    assert writer.write_batches(opts, iter([batch, batch.slice(0, 0)])) == 3
    with KafkaConsumer({"bootstrap.servers": broker.bootstrap_servers}) as c:
        tps = [TopicPartition(topic, 1), TopicPartition(topic, 2)]
        c.assign(tps)
        c.seek_to_beginning(tps)
        got = []
        while len(got) < 3:
            got += list(c.poll(1.0))
    by_partition = {(r.partition, r.offset): r for r in got}
    a, b, n = by_partition[(2, 0)], by_partition[(2, 1)], by_partition[(1, 0)]
    assert (a.key, a.value, a.headers, a.timestamp) == (b"k", b"a", (("h", b"1"),), 1704164645678)
    assert (b.key, b.value, b.headers) == (None, b"b", ())
    assert (n.key, n.value, n.headers) == (b"k3", None, ())
    assert b.timestamp > 1704164645678  # null: the time of sending
