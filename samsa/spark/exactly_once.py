"""The sink's exactly-once mode: one Kafka transaction per task, the micro-batch id recorded
in it (design and crash analysis: docs/spark-exactly-once.md).

A task's transactional id is ``<prefix>-<scope>-<partition>``; the scope is the streaming
query's id (kept in the checkpoint, so the same after a restart) or, for a batch write, an
id drawn when the write was planned.  ``init_transactions()`` on that id fences every older
attempt of the partition and completes its transaction (InitProducerId, KIP-98).  In
streaming, the transaction also commits the offset ``batch_id + 1`` of the consumer group of
the same name on ``(progress_topic, 0)`` (TxnOffsetCommit), so a re-run of a batch whose
partition already committed finds that offset and writes nothing.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from samsa.errors import ConfigError
from samsa.net.cluster import TopicPartition
from samsa.spark.options import SinkOptions
from samsa.spark.rows import BULK_DEFAULTS, failed_rows, send_batch

__all__ = ["TaskScope", "already_written", "check_transactional_config", "progress_metadata",
           "task_scope", "transactional_id", "write_transactionally"]

log = logging.getLogger(__name__)

# How long one transactional call may block (init, offsets, commit, abort); the producer's
# own default, max.block.ms, when None.
_ABORT_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class TaskScope:
    """Who is writing: the query (or batch write), the micro-batch and the Spark partition."""

    scope_id: str  # the streaming query's id, or the batch write's id
    partition_id: int
    attempt: int = 0
    batch_id: int | None = None  # None in a batch (non-streaming) write


def task_scope(write_id: str | None = None) -> TaskScope:
    """This task's scope from Spark's TaskContext: the query id and micro-batch id local
    properties MicroBatchExecution sets (``sql.streaming.queryId``, ``streaming.sql.batchId``),
    or ``write_id`` for a batch write."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise RuntimeError("the transactional sink's write() must run in a Spark task (no TaskContext)")
    raw_batch = ctx.getLocalProperty("streaming.sql.batchId")
    if write_id is not None:
        return TaskScope(write_id, ctx.partitionId(), ctx.attemptNumber())
    query_id = ctx.getLocalProperty("sql.streaming.queryId")
    if query_id is None or raw_batch is None:
        raise RuntimeError("the transactional stream writer found no streaming query id or batch id "
                           "in the task's local properties (sql.streaming.queryId, "
                           "streaming.sql.batchId); is this a micro-batch query?")
    return TaskScope(query_id, ctx.partitionId(), ctx.attemptNumber(), int(raw_batch))


def transactional_id(prefix: str, scope: TaskScope) -> str:
    """The transactional id, and the progress group id, of one Spark partition of the scope."""
    return f"{prefix}-{scope.scope_id}-{scope.partition_id}"


def already_written(committed: Any, batch_id: int) -> bool:
    """Whether the progress record (the group's committed offset: the next batch id to write,
    or None when the group has none) says ``batch_id`` was committed already."""
    return committed is not None and int(committed.offset) > batch_id


def progress_metadata(batch_id: int, records: int) -> str:
    """The committed offset's metadata: for people reading the group's offsets."""
    return f"samsa spark sink: batch {batch_id} committed with {records} records"


def check_transactional_config(options: SinkOptions) -> None:
    """On the driver: the kafka.* settings must allow a transactional producer."""
    from samsa.producer.config import ProducerConfig

    try:
        ProducerConfig({**options.client, "transactional.id": options.transactional_id_prefix})
    except ConfigError as e:
        raise ConfigError(f"kafka.{e.setting}", f"{e.problem} (the option transactional=true makes "
                                                "every task's producer transactional)") from None


def _read_progress(options: SinkOptions, group_id: str, tp: TopicPartition) -> Any:
    """The group's committed offset on ``tp`` with require_stable (a read_committed consumer's
    committed() retries UNSTABLE_OFFSET_COMMIT), or None."""
    from samsa.consumer.config import CONSUMER_CONFIG
    from samsa.consumer.consumer import KafkaConsumer

    conf: dict[str, Any] = {k: v for k, v in options.client.items() if k in CONSUMER_CONFIG}
    conf.update({"group.id": group_id, "isolation.level": "read_committed",
                 "enable.auto.commit": "false"})
    conf.setdefault("client.id", f"{group_id}-progress")
    consumer = KafkaConsumer(conf)
    try:
        return consumer.committed([tp]).get(tp)
    finally:
        consumer.close(autocommit=False)


def _producer(options: SinkOptions, txn_id: str) -> Any:
    from samsa.producer.producer import KafkaProducer

    conf = {**BULK_DEFAULTS, **options.client, "transactional.id": txn_id}
    conf.setdefault("client.id", txn_id)
    return KafkaProducer(conf)


def write_transactionally(options: SinkOptions, batches: Iterator[pa.RecordBatch], scope: TaskScope,
                          step: Callable[[str], None] | None = None) -> tuple[int, bool]:
    """Write every row of one task in one transaction; returns (rows written, skipped).

    ``skipped`` is true when the progress record shows that an earlier attempt already
    committed this micro-batch for this partition.  ``step`` is called with "sent" once every
    row is acknowledged inside the open transaction and with "committed" after the commit.
    """
    if options.progress_topic is None and scope.batch_id is not None:
        raise ConfigError("transactionalProgressTopic", "is required with transactional=true")
    rows = (b for b in batches if b.num_rows)
    first = next(rows, None)
    if first is None:
        return 0, False  # nothing to write, nothing to record; the re-run is empty too
    txn_id = transactional_id(options.transactional_id_prefix, scope)
    producer = _producer(options, txn_id)
    try:
        # Fences older attempts of this partition and completes their transaction.
        producer.init_transactions()
        progress = None
        if scope.batch_id is not None:
            assert options.progress_topic is not None
            progress = TopicPartition(options.progress_topic, 0)
            committed = _read_progress(options, txn_id, progress)
            if already_written(committed, scope.batch_id):
                log.info("%s: batch %d already committed (%s); writing nothing", txn_id,
                         scope.batch_id, committed.metadata)
                return 0, True
        producer.begin_transaction()
        count = 0
        futures: list[Any] = []
        for batch in itertools.chain([first], rows):
            futures += send_batch(producer, batch, options.topic)
            count += batch.num_rows
        producer.flush()
        failed, errors = failed_rows(futures)
        if failed:
            raise errors[0]
        if step is not None:
            step("sent")
        if progress is not None:
            assert scope.batch_id is not None
            from samsa.consumer.records import OffsetAndMetadata

            producer.send_offsets_to_transaction(
                {progress: OffsetAndMetadata(scope.batch_id + 1, progress_metadata(scope.batch_id, count))},
                txn_id)
        producer.commit_transaction()  # raises if a record or the commit failed
    except BaseException:
        _abort_quietly(producer, txn_id)
        raise
    finally:
        producer.close(0)
    if step is not None:
        step("committed")
    return count, False


def _abort_quietly(producer: Any, txn_id: str) -> None:
    """Best effort: a fenced or broken producer can't abort; the next init_transactions() on
    the id, or the coordinator's transaction timeout, aborts the transaction then."""
    try:
        producer.abort_transaction(_ABORT_TIMEOUT_S)
    except Exception as e:  # noqa: BLE001 - the task's own error is the one to raise
        log.warning("%s: could not abort the transaction (%s); it is aborted by the next attempt "
                    "or by transaction.timeout.ms", txn_id, e)

