"""Batch and streaming sink: Arrow batches in, one idempotent producer per worker process.

Columns as Spark's Kafka sink: ``value`` (required, string or binary), ``key`` (string or
binary), ``headers`` (array<struct<key:string,value:binary>>), ``topic`` (string; the
``topic`` option overrides it), ``partition`` (int; null lets the partitioner decide).  Other
columns are ignored.  Every write() flushes before it returns and fails if any record
failed, so a task that succeeds has all its records acknowledged: at-least-once, as Spark's
Kafka sink (a retried or aborted task may already have produced some records).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructType

from samsa.errors import ConfigError, KafkaError
from samsa.spark.options import SinkOptions
from samsa.spark.schema import HEADERS_TYPE

__all__ = ["SamsaCommitMessage", "SamsaStreamWriter", "SamsaWriter", "check_sink_schema"]

log = logging.getLogger(__name__)

_producers: dict[tuple[tuple[str, str], ...], Any] = {}
_producers_lock = threading.Lock()


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


def _producer(client: Mapping[str, str]) -> Any:
    key = tuple(sorted(client.items()))
    with _producers_lock:
        producer = _producers.get(key)
        if producer is None or producer.closed:
            from samsa.producer.producer import KafkaProducer

            conf = dict(client)
            conf.setdefault("client.id", "spark-samsa-sink")
            producer = _producers[key] = KafkaProducer(conf)
        return producer


def _drop_producer(client: Mapping[str, str]) -> None:
    with _producers_lock:
        producer = _producers.pop(tuple(sorted(client.items())), None)
    if producer is not None:
        producer.close(0)


@dataclass
class SamsaCommitMessage(WriterCommitMessage):  # type: ignore[misc]
    """What one task wrote (all acknowledged): for logs and the driver's commit()."""

    records: int
    partition_id: int | None = None
    batch_id: int | None = None


class _Delivery:
    """Send callback: counts failures and keeps the first one."""

    __slots__ = ("error", "failed")

    def __init__(self) -> None:
        self.error: BaseException | None = None
        self.failed = 0

    def __call__(self, metadata: Any, error: BaseException | None) -> None:
        if error is not None:
            self.failed += 1
            if self.error is None:
                self.error = error


def _bytes_column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    i = batch.schema.get_field_index(name)
    if i < 0:
        return None
    col = batch.column(i)
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        col = col.cast(pa.binary() if pa.types.is_string(col.type) else pa.large_binary())
    return col.to_pylist()


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    i = batch.schema.get_field_index(name)
    return None if i < 0 else batch.column(i).to_pylist()


def write_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Produce every row and wait until all are acknowledged; returns the row count."""
    producer = _producer(options.client)
    delivery = _Delivery()
    send = producer.send
    count = 0
    try:
        for batch in batches:
            n = batch.num_rows
            if n == 0:
                continue
            values = _bytes_column(batch, "value")
            assert values is not None  # checked on the driver
            keys = _bytes_column(batch, "key") or [None] * n
            partitions = _column(batch, "partition") or [None] * n
            raw_headers = _column(batch, "headers")
            headers = ([[(h["key"], h["value"]) for h in hs] if hs else None for hs in raw_headers]
                       if raw_headers is not None else [None] * n)
            if options.topic is not None:
                topics = [options.topic] * n
            else:
                topics = _column(batch, "topic") or [None] * n
            for topic, value, key, part, hdrs in zip(topics, values, keys, partitions, headers, strict=True):
                if topic is None:
                    raise ConfigError("topic", "a row has a null 'topic' and no topic option is set; "
                                               "every row needs a topic")
                send(topic, value, key, part, None, hdrs, delivery)
            count += n
        producer.flush()
    except BaseException:
        _drop_producer(options.client)  # unsent records must not leak into the next task
        raise
    if delivery.error is not None:
        _drop_producer(options.client)
        raise KafkaError(f"{delivery.failed} of {count} records could not be written to Kafka; "
                         f"first error: {delivery.error!r}") from delivery.error
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
