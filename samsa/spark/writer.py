"""Batch and streaming sink: Arrow batches in, one idempotent producer per writing task.

Columns as Spark's Kafka sink: ``value`` (required, string or binary), ``key`` (string or
binary), ``headers`` (array<struct<key:string,value:binary>>), ``topic`` (string; the
``topic`` option overrides it), ``partition`` (int; null lets the partitioner decide).  One
addition: a ``timestamp`` column (timestamp type) becomes the record's CreateTime, so a
pipeline can keep event time; null (or no column) means the time of sending.  Spark's own
Kafka sink ignores such a column, and a source DataFrame's ``timestamp`` column is carried
over by it.  Other columns are ignored.

Throughput: each Arrow batch goes to ``KafkaProducer.send_arrow`` (one call per topic in it:
record batches built from the columns, no Python object per row); write() flushes before it
returns and then reads the calls' futures, which name every failed row, so a task that
succeeds has all its records acknowledged: at-least-once, as Spark's Kafka sink (a retried or
aborted task may already have produced some records).  Producers are pooled per worker
process and client config; each write() has one to itself.
With the option ``transactional`` each task writes in one Kafka transaction instead, and a
streaming query becomes exactly-once for read_committed readers (exactly_once.py,
docs/spark-exactly-once.md).  Unless the user sets them (``kafka.linger.ms``, ``kafka.batch.size``), the
sink uses bulk-friendly defaults: BULK_DEFAULTS.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
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
from samsa.spark.exactly_once import (
    TaskScope,
    check_transactional_config,
    task_scope,
    write_transactionally,
)
from samsa.spark.options import SinkOptions
from samsa.spark.rows import BULK_DEFAULTS, failed_rows, send_batch
from samsa.spark.schema import HEADERS_TYPE

__all__ = ["BULK_DEFAULTS", "SamsaCommitMessage", "SamsaStreamWriter", "SamsaWriter", "check_sink_schema",
           "write_batches"]

log = logging.getLogger(__name__)

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
    # Transactional mode: an earlier attempt had committed this batch's partition already.
    skipped: bool = False


def write_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Produce every row and wait until all are acknowledged; returns the row count."""
    producer = _checkout(options.client)
    count = 0
    futures: list[Any] = []
    try:
        for batch in batches:
            if batch.num_rows:
                futures += send_batch(producer, batch, options.topic)
                count += batch.num_rows
        producer.flush()
        failed, errors = failed_rows(futures)
    except BaseException:
        producer.close(0)  # unsent records must not leak into the next task
        raise
    if failed:
        producer.close(0)
        first = errors[0]
        raise KafkaError(f"{failed} of {count} records could not be written to Kafka; "
                         f"one error: {first!r}") from first
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
        if options.transactional:
            check_transactional_config(options)
        # Drawn once where Spark plans the write; every task attempt gets a pickled copy, so a
        # retry uses the same transactional id as the attempt it replaces (and fences it).
        self.write_id = uuid.uuid4().hex if options.transactional else None

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SamsaCommitMessage:
        if self.options.transactional:
            scope = task_scope(self.write_id)
            records, _ = write_transactionally(self.options, iterator, scope)
            return SamsaCommitMessage(records, scope.partition_id, None)
        records = write_batches(self.options, iterator)
        partition_id, batch_id = _task_info()
        return SamsaCommitMessage(records, partition_id, batch_id)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.records for m in messages if isinstance(m, SamsaCommitMessage))
        log.info("wrote %d records to Kafka in %d tasks", total, len(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        done = sum(m.records for m in messages if isinstance(m, SamsaCommitMessage))
        if self.options.transactional:
            log.warning("write aborted; the %d records of finished tasks are committed in their "
                        "transactions; failed tasks' transactions are aborted", done)
        else:
            log.warning("write aborted; %d records from finished tasks stay in Kafka (at-least-once)", done)


class SamsaStreamWriter(DataSourceStreamArrowWriter):  # type: ignore[misc]
    def __init__(self, options: SinkOptions) -> None:
        self.options = options
        if options.transactional:
            check_transactional_config(options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SamsaCommitMessage:
        if self.options.transactional:
            scope = task_scope()
            records, skipped = write_transactionally(
                self.options, iterator, scope, lambda step: self.transaction_step(step, scope))
            return SamsaCommitMessage(records, scope.partition_id, scope.batch_id, skipped)
        records = write_batches(self.options, iterator)
        partition_id, batch_id = _task_info()
        return SamsaCommitMessage(records, partition_id, batch_id)

    def transaction_step(self, step: str, scope: TaskScope) -> None:
        """Called in the task at each step of its transaction ("sent": every row acknowledged,
        transaction still open; "committed"); a seam for logging and crash tests."""
        log.debug("batch %s partition %d: %s", scope.batch_id, scope.partition_id, step)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        done = [m for m in messages if isinstance(m, SamsaCommitMessage)]
        total = sum(m.records for m in done)
        if self.options.transactional:
            # The tasks committed their own transactions; nothing is left to do here.
            skipped = sum(1 for m in done if m.skipped)
            log.info("batch %d: wrote %d records to Kafka in transactions (%d partitions already "
                     "written by an earlier attempt)", batchId, total, skipped)
        else:
            log.info("batch %d: wrote %d records to Kafka", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.options.transactional:
            log.warning("batch %d aborted; finished tasks committed their transactions and skip "
                        "when the batch is re-run, failed tasks' transactions are aborted", batchId)
        else:
            log.warning("batch %d aborted; records already produced stay in Kafka (at-least-once)", batchId)
