"""Executor side of reading: one offset range of one partition into Arrow record batches.

Runs in Spark's Python workers.  Records are read with KafkaConsumer.poll_arrow, so a
partition's records go from the fetched bytes to Arrow columns without a Python object per
record (samsa.consumer.arrow_records).  Reuses one assign-only consumer per worker process and
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

__all__ = ["EXECUTOR_DEFAULTS", "read_range", "to_spark_batch"]

log = logging.getLogger(__name__)

BATCH_ROWS = 10_000  # rows per Arrow batch handed to Spark
_POLL_SECONDS = 0.5
# An executor reads only offsets that exist (a range ends at most at the log end its plan
# saw), so the broker never needs to hold its fetches for data to come.  But the consumer's
# prefetch sends one past the end of every range that ends at the log end, which the broker
# holds fetch.max.wait.ms, and the consumer sends the next range's fetch to that broker only
# once it is answered (one fetch per node in flight, as Java's Fetcher): with the 500 ms
# default, each task after the first in a worker waited up to 500 ms for nothing.
# kafka.fetch.max.wait.ms still sets it.
EXECUTOR_DEFAULTS = {"fetch.max.wait.ms": "10"}

_consumers: dict[tuple[tuple[tuple[str, str], ...], str | None], Any] = {}


def _consumer(client: Mapping[str, str], group_id: str | None) -> Any:
    key = (tuple(sorted(client.items())), group_id)
    consumer = _consumers.get(key)
    if consumer is None or consumer.closed:
        from samsa.consumer.consumer import KafkaConsumer

        consumer = _consumers[key] = KafkaConsumer(
            {**EXECUTOR_DEFAULTS, **consumer_config(client, "spark-samsa-executor", group_id)})
    return consumer


_TS_US = pa.timestamp("us", tz="UTC")


def to_spark_batch(batch: pa.RecordBatch, include_headers: bool) -> pa.RecordBatch:
    """One partition's records from KafkaConsumer.poll_arrow -> the source's schema: timestamps
    in UTC microseconds, timestampType int32, and (as Spark's Kafka source) null headers for a
    record without any.  Column operations only, nothing per record."""
    schema = arrow_schema(include_headers)
    stamps = batch.column("timestamp").to_numpy() * 1000
    columns = [
        batch.column("key"), batch.column("value"), batch.column("topic"),
        batch.column("partition"), batch.column("offset"), pa.array(stamps, _TS_US),
        batch.column("timestamp_type").cast(pa.int32()),
    ]
    if include_headers:
        headers = batch.column("headers")
        offsets = headers.offsets.to_numpy()
        first = int(offsets[0])  # a slice's offsets point into its parent's values
        values = headers.values.slice(first, int(offsets[-1]) - first)
        empty = pa.array(np.diff(offsets) == 0)
        columns.append(pa.ListArray.from_arrays(pa.array(offsets - first), values, mask=empty)
                       .cast(schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _joined(pieces: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(pieces) == 1:
        return pieces[0]
    return pa.Table.from_batches(pieces).combine_chunks().to_batches()[0]


def read_range(rng: OffsetRange, client: Mapping[str, str], include_headers: bool,
               fail_on_data_loss: bool, poll_timeout_ms: int, group_id: str | None = None
               ) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``rng`` (offsets [start, end)) as Arrow batches of about
    BATCH_ROWS rows, decoded by the consumer's poll_arrow (no Python object per record).

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
    pieces: list[pa.RecordBatch] = []
    pending = 0
    idle_since = time.monotonic()
    while position < end:
        try:
            batch = consumer.poll_arrow(_POLL_SECONDS, max_records=BATCH_ROWS - pending).get(tp)
        except OffsetOutOfRangeError:
            position = _skip_lost(consumer, tp, position, end, fail_on_data_loss)
            if position < end:
                consumer.seek(tp, position)
            continue
        got = batch is not None and batch.num_rows > 0
        if batch is not None and got:
            idle_since = time.monotonic()
            offsets = batch.column("offset")
            if offsets[-1].as_py() >= end:
                batch = batch.slice(0, int(offsets.to_numpy().searchsorted(end)))
            pieces.append(to_spark_batch(batch, include_headers))
            pending += batch.num_rows
            if pending >= BATCH_ROWS // 2:  # a poll's batch as it is, not joined (copied)
                yield _joined(pieces)
                pieces, pending = [], 0
        position = consumer.position(tp)
        if not got and position < end:
            # Nothing came: either the rest of the range is gone (log truncated below the
            # end we planned for) or the broker is slow; tell them apart by the log end.
            log_end = consumer.end_offsets([tp])[tp]
            if log_end <= position:
                _report_loss(tp, position, end, f"the log ends at {log_end}", fail_on_data_loss)
                break
            if (time.monotonic() - idle_since) * 1000 > poll_timeout_ms:
                raise TimeoutError(f"no records from {tp} at offset {position} for {poll_timeout_ms} ms "
                                   f"(kafkaConsumer.pollTimeoutMs) although the log ends at {log_end}")
    if pieces:
        yield _joined(pieces)


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
