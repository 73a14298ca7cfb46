"""Executor side of reading: one offset range of one partition into Arrow record batches.

Runs in Spark's Python workers.  Reuses one assign-only consumer per worker process and
client config (workers are reused across tasks), seeks to the range's start and polls until
the consumer's position reaches the end.  The position, not the last record's offset, decides
when a range is done: compaction leaves offset gaps and transaction markers take offsets that
are never returned as records.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from samsa.errors import OffsetOutOfRangeError
from samsa.net.cluster import TopicPartition
from samsa.spark.errors import DataLossError
from samsa.spark.offsets import OffsetRange, consumer_config
from samsa.spark.schema import arrow_schema

__all__ = ["read_range", "to_record_batch"]

log = logging.getLogger(__name__)

BATCH_ROWS = 10_000  # rows per Arrow batch handed to Spark
_POLL_SECONDS = 0.5

_consumers: dict[tuple[tuple[tuple[str, str], ...], str | None], Any] = {}


def _consumer(client: Mapping[str, str], group_id: str | None) -> Any:
    key = (tuple(sorted(client.items())), group_id)
    consumer = _consumers.get(key)
    if consumer is None or consumer.closed:
        from samsa.consumer.consumer import KafkaConsumer

        consumer = _consumers[key] = KafkaConsumer(
            consumer_config(client, "spark-samsa-executor", group_id))
    return consumer


_TS_US = pa.timestamp("us", tz="UTC")


def to_record_batch(topic: str, partition: int, rows: list[Any], include_headers: bool) -> pa.RecordBatch:
    """ConsumerRecords of one partition -> a RecordBatch in the source's schema.

    Columns that are constant or dense (topic, partition, timestampType, offsets) are built
    with numpy instead of from per-record Python objects.
    """
    schema = arrow_schema(include_headers)
    n = len(rows)
    # ConsumerRecord: topic, partition, offset, timestamp, timestamp_type, key, value, headers, ...
    _, _, offsets, stamps, types, keys, values, headers, *_ = zip(*rows, strict=True)
    first = offsets[0]
    if offsets[-1] - first == n - 1:  # no gaps (the usual case): 0.5 ns a row instead of 20
        offset_col = pa.array(np.arange(first, first + n, dtype=np.int64))
    else:
        offset_col = pa.array(offsets, pa.int64())
    kind = int(types[0])
    if types.count(types[0]) == n:
        type_col = pa.array(np.full(n, kind, dtype=np.int32))
    else:
        type_col = pa.array(list(map(int, types)), pa.int32())
    columns = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.array([topic], pa.string()).take(np.zeros(n, dtype=np.int32)),
        pa.array(np.full(n, partition, dtype=np.int32)),
        offset_col,
        pa.array(np.fromiter(stamps, np.int64, n) * 1000, _TS_US),
        type_col,
    ]
    if include_headers:
        columns.append(pa.array([h or None for h in headers], schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def read_range(rng: OffsetRange, client: Mapping[str, str], include_headers: bool,
               fail_on_data_loss: bool, poll_timeout_ms: int, group_id: str | None = None
               ) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``rng`` (offsets [start, end)) as Arrow batches.

    Under read_committed the range ends at a last stable offset and the consumer skips
    aborted transactions and markers: the position moving past them, not a record at each
    offset, completes the range, so those gaps are never taken for lost data."""
    if rng.end <= rng.start:
        return
    tp = TopicPartition(rng.topic, rng.partition)
    consumer = _consumer(client, group_id)
    consumer.assign([tp])
    consumer.seek(tp, rng.start)
    position, end = rng.start, rng.end
    rows: list[Any] = []
    idle_since = time.monotonic()
    while position < end:
        try:
            records = consumer.poll(_POLL_SECONDS, max_records=BATCH_ROWS).records(tp)
        except OffsetOutOfRangeError:
            position = _skip_lost(consumer, tp, position, end, fail_on_data_loss)
            if position < end:
                consumer.seek(tp, position)
            continue
        if records:
            idle_since = time.monotonic()
            if records[-1].offset >= end:
                records = [r for r in records if r.offset < end]
            rows += records
            if len(rows) >= BATCH_ROWS:
                yield to_record_batch(rng.topic, rng.partition, rows, include_headers)
                rows = []
        position = consumer.position(tp)
        if not records and position < end:
            # Nothing came: either the rest of the range is gone (log truncated below the
            # end we planned for) or the broker is slow; tell them apart by the log end.
            log_end = consumer.end_offsets([tp])[tp]
            if log_end <= position:
                _report_loss(tp, position, end, f"the log ends at {log_end}", fail_on_data_loss)
                break
            if (time.monotonic() - idle_since) * 1000 > poll_timeout_ms:
                raise TimeoutError(f"no records from {tp} at offset {position} for {poll_timeout_ms} ms "
                                   f"(kafkaConsumer.pollTimeoutMs) although the log ends at {log_end}")
    if rows:
        yield to_record_batch(rng.topic, rng.partition, rows, include_headers)


def _skip_lost(consumer: Any, tp: TopicPartition, position: int, end: int, fail: bool) -> int:
    """The position to go on from after OFFSET_OUT_OF_RANGE at ``position``."""
    earliest = consumer.beginning_offsets([tp])[tp]
    latest = consumer.end_offsets([tp])[tp]
    if position < earliest:
        _report_loss(tp, position, min(earliest, end),
                     f"the log now starts at {earliest} (retention or deleted records)", fail)
        return earliest
    _report_loss(tp, position, end, f"the log ends at {latest}", fail)
    return end


def _report_loss(tp: TopicPartition, start: int, stop: int, why: str, fail: bool) -> None:
    what = f"offsets {start} to {stop - 1} of {tp} are no longer available: {why}"
    if fail:
        raise DataLossError(
            f"{what}. Some data may have been lost. If you want the query to go on past lost "
            "data, set the source option failOnDataLoss to false.")
    log.warning("%s; skipping them because failOnDataLoss=false", what)
