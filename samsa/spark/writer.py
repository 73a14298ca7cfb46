"""Batch and streaming sink: Arrow batches in, one idempotent producer per writing task.

Columns as Spark's Kafka sink: ``value`` (required, string or binary), ``key`` (string or
binary), ``headers`` (array<struct<key:string,value:binary>>), ``topic`` (string; the
``topic`` option overrides it), ``partition`` (int; null lets the partitioner decide).  One
addition: a ``timestamp`` column (timestamp type) becomes the record's CreateTime, so a
pipeline can keep event time; null (or no column) means the time of sending.  Spark's own
Kafka sink ignores such a column, and a source DataFrame's ``timestamp`` column is carried
over by it.  Other columns are ignored.

Throughput: each Arrow batch goes to ``KafkaProducer.send_many`` (one call per topic in it:
no per-record futures or callbacks, records appended to the producer's batches in runs);
write() flushes before it returns and checks the producer's counters instead (record-send-total must grow by exactly the rows sent, record-error-total must not grow), so
a task that succeeds has all its records acknowledged: at-least-once, as Spark's Kafka sink
(a retried or aborted task may already have produced some records).  Producers are pooled per
worker process and client config and each write() has one to itself, which is what makes the
counters exact.  Unless the user sets them (``kafka.linger.ms``, ``kafka.batch.size``), the
sink uses bulk-friendly defaults: BULK_DEFAULTS.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    StringType,
    StructType,
    TimestampType,
)

from samsa.errors import ConfigError, KafkaError
from samsa.spark.options import SinkOptions
from samsa.spark.schema import HEADERS_TYPE

__all__ = ["BULK_DEFAULTS", "SamsaCommitMessage", "SamsaStreamWriter", "SamsaWriter", "check_sink_schema",
           "write_batches"]

log = logging.getLogger(__name__)

# Producer settings for bulk writes, used unless the kafka.* options set them: bigger batches
# mean fewer, larger produce requests (Kafka's 16 KiB default holds only ~130 small records).
BULK_DEFAULTS = {"linger.ms": "5", "batch.size": str(256 * 1024)}

# Batch errors kept per write, to name one in the task's failure.
_KEPT_ERRORS = 8

_idle: dict[tuple[tuple[str, str], ...], list[Any]] = {}
_idle_lock = threading.Lock()


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """Fail on the driver, before any task runs, when the columns can't be written."""
    fields = {f.name: f.dataType for f in schema.fields}
    value = fields.get("value")
    if value is None:
        raise ConfigError("value", "required attribute 'value' not found; the DataFrame to write needs a "
                                   "string or binary 'value' column")
    for name in ("value", "key"):
        if name in fields and not isinstance(fields[name], (StringType, BinaryType)):
            raise ConfigError(name, f"{name} attribute type must be a string or binary, "
                                    f"not {fields[name].simpleString()}")
    if options.topic is None and "topic" not in fields:
        raise ConfigError("topic", "topic option required when no 'topic' attribute is present; set "
                                   ".option('topic', ...) or add a string 'topic' column")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise ConfigError("topic", f"topic attribute type must be a string, not {fields['topic'].simpleString()}")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise ConfigError("partition", "partition attribute type must be an int, "
                                       f"not {fields['partition'].simpleString()}")
    if "headers" in fields and fields["headers"].simpleString() != HEADERS_TYPE.simpleString():
        raise ConfigError("headers", "headers attribute type must be array<struct<key:string,value:binary>>, "
                                     f"not {fields['headers'].simpleString()}")
    if "timestamp" in fields and not isinstance(fields["timestamp"], TimestampType):
        raise ConfigError("timestamp", "timestamp attribute type must be timestamp (it becomes the record's "
                                       f"CreateTime), not {fields['timestamp'].simpleString()}; cast it or "
                                       "drop the column")


def _key(client: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(client.items()))


def _checkout(client: Mapping[str, str]) -> Any:
    """A producer for this write alone: an idle one from the pool, else a new one."""
    with _idle_lock:
        pool = _idle.get(_key(client), [])
        while pool:
            producer = pool.pop()
            if not producer.closed:
                return producer
    from samsa.producer.producer import KafkaProducer

    conf = {**BULK_DEFAULTS, **client}
    conf.setdefault("client.id", "spark-samsa-sink")
    return KafkaProducer(conf)


def _checkin(client: Mapping[str, str], producer: Any) -> None:
    with _idle_lock:
        _idle.setdefault(_key(client), []).append(producer)


@dataclass
class SamsaCommitMessage(WriterCommitMessage):  # type: ignore[misc]
    """What one task wrote (all acknowledged): for logs and the driver's commit()."""

    records: int
    partition_id: int | None = None
    batch_id: int | None = None


def _field(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    i = batch.schema.get_field_index(name)
    return None if i < 0 else batch.column(i)


def _bytes_list(col: pa.Array) -> list[Any]:
    if pa.types.is_string(col.type):
        col = col.cast(pa.binary())
    elif pa.types.is_large_string(col.type):
        col = col.cast(pa.large_binary())
    return col.to_pylist()  # type: ignore[no-any-return]


def _timestamps_ms(col: pa.Array) -> list[int | None]:
    """A timestamp column as ms since the epoch (None where null)."""
    unit = col.type.unit
    ints = col.cast(pa.int64())  # the epoch count in the column's unit, whatever its time zone
    if ints.null_count < len(ints) and pc.min(ints).as_py() < 0:
        raise ValueError("a row's timestamp is before 1970-01-01, which Kafka can't store; "
                         "give a later timestamp or null (null means the time of sending)")
    per_ms = {"s": 0, "ms": 1, "us": 1000, "ns": 1_000_000}[unit]
    if per_ms == 0:
        ints = pc.multiply(ints, 1000)
    elif per_ms > 1:
        ints = pc.divide(ints, per_ms)  # integer division; values are >= 0
    return ints.to_pylist()  # type: ignore[no-any-return]


def _headers_list(col: pa.Array) -> list[Any]:
    return [[(h["key"], h["value"]) for h in hs] if hs else None for hs in col.to_pylist()]


def _send_batch(producer: Any, batch: pa.RecordBatch, topic_option: str | None,
                errors: list[BaseException]) -> None:
    """Queue every row of ``batch``: one ``send_many`` per topic in the batch."""
    n = batch.num_rows
    value_col = _field(batch, "value")
    assert value_col is not None  # checked on the driver
    key_col, part_col = _field(batch, "key"), _field(batch, "partition")
    head_col, ts_col = _field(batch, "headers"), _field(batch, "timestamp")
    values = _bytes_list(value_col)
    keys = _bytes_list(key_col) if key_col is not None and key_col.null_count < n else None
    parts = part_col.to_pylist() if part_col is not None and part_col.null_count < n else None
    stamps = _timestamps_ms(ts_col) if ts_col is not None and ts_col.null_count < n else None
    headers = _headers_list(head_col) if head_col is not None and head_col.null_count < n else None
    on_error = errors.append if len(errors) < _KEPT_ERRORS else None
    if topic_option is not None:
        producer.send_many(topic_option, values, keys, parts, stamps, headers, on_error)
        return
    topic_col = _field(batch, "topic")
    assert topic_col is not None  # checked on the driver
    if topic_col.null_count:
        raise ConfigError("topic", "a row has a null 'topic' and no topic option is set; "
                                   "every row needs a topic")
    topics = topic_col.to_pylist()
    first = topics[0]
    if topics.count(first) == n:
        producer.send_many(first, values, keys, parts, stamps, headers, on_error)
        return
    rows: dict[str, list[int]] = {}
    for i, topic in enumerate(topics):
        rows.setdefault(topic, []).append(i)
    for topic, idx in rows.items():
        def pick(items: list[Any] | None, idx: list[int] = idx) -> list[Any] | None:
            return None if items is None else [items[i] for i in idx]
        producer.send_many(topic, pick(values), pick(keys), pick(parts), pick(stamps), pick(headers), on_error)


def write_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Produce every row and wait until all are acknowledged; returns the row count."""
    producer = _checkout(options.client)
    count = 0
    errors: list[BaseException] = []  # a few batch errors: to name one if the write fails
    try:
        before = producer.metrics()
        for batch in batches:
            if batch.num_rows:
                _send_batch(producer, batch, options.topic, errors)
                count += batch.num_rows
        producer.flush()
        after = producer.metrics()
    except BaseException:
        producer.close(0)  # unsent records must not leak into the next task
        raise
    acked = after["record-send-total"] - before["record-send-total"]
    failed = after["record-error-total"] - before["record-error-total"]
    if failed or acked != count:
        producer.close(0)
        first = errors[0] if errors else None
        raise KafkaError(f"{count - acked} of {count} records could not be written to Kafka "
                         f"({failed} failed with errors); "
                         + (f"one error: {first!r}" if first is not None else
                            "see the executor log for the producer's errors")) from first
    _checkin(options.client, producer)
    return count


def _task_info() -> tuple[int | None, int | None]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return None, None
    raw = ctx.getLocalProperty("streaming.sql.batchId")
    return ctx.partitionId(), int(raw) if raw is not None else None


class SamsaWriter(DataSourceArrowWriter):  # type: ignore[misc]
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SamsaCommitMessage:
        records = write_batches(self.options, iterator)
        partition_id, batch_id = _task_info()
        return SamsaCommitMessage(records, partition_id, batch_id)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.records for m in messages if isinstance(m, SamsaCommitMessage))
        log.info("wrote %d records to Kafka in %d tasks", total, len(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        done = sum(m.records for m in messages if isinstance(m, SamsaCommitMessage))
        log.warning("write aborted; %d records from finished tasks stay in Kafka (at-least-once)", done)


class SamsaStreamWriter(DataSourceStreamArrowWriter):  # type: ignore[misc]
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SamsaCommitMessage:
        records = write_batches(self.options, iterator)
        partition_id, batch_id = _task_info()
        return SamsaCommitMessage(records, partition_id, batch_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total = sum(m.records for m in messages if isinstance(m, SamsaCommitMessage))
        log.info("batch %d: wrote %d records to Kafka", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("batch %d aborted; records already produced stay in Kafka (at-least-once)", batchId)
