"""Arrow rows to producer sends: the sink's columns (see writer.py) become records through
KafkaProducer.send_arrow.

Shared by the at-least-once writer (writer.py) and the transactional one (exactly_once.py).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from samsa.errors import ConfigError

__all__ = ["BULK_DEFAULTS", "KEPT_ERRORS", "failed_rows", "send_batch"]

# Producer settings for bulk writes, used unless the kafka.* options set them: bigger batches
# mean fewer, larger produce requests (Kafka's 16 KiB default holds only ~130 small records).
BULK_DEFAULTS = {"linger.ms": "5", "batch.size": str(256 * 1024)}

# Row errors kept per write, to name one in the task's failure.
KEPT_ERRORS = 8


def _field(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    i = batch.schema.get_field_index(name)
    return None if i < 0 else batch.column(i)


def _check_timestamps(col: pa.Array) -> None:
    ints = col.cast(pa.int64())  # the epoch count in the column's unit, whatever its time zone
    if ints.null_count < len(ints) and pc.min(ints).as_py() < 0:
        raise ValueError("a row's timestamp is before 1970-01-01, which Kafka can't store; "
                         "give a later timestamp or null (null means the time of sending)")


def failed_rows(futures: list[Any], timeout: float | None = None) -> tuple[int, list[BaseException]]:
    """Rows that failed among send_batch()'s futures (after a flush they are all done), and
    the first few errors (KEPT_ERRORS)."""
    failed = 0
    errors: list[BaseException] = []
    for future in futures:
        for rows, error in future.outcome(timeout).errors:
            failed += len(rows)
            if len(errors) < KEPT_ERRORS:
                errors.append(error)
    return failed, errors


def send_batch(producer: Any, batch: pa.RecordBatch, topic_option: str | None) -> list[Any]:
    """Queue every row of ``batch``: one ``send_arrow`` per topic in the batch (records built
    from the columns, no Python object per row); returns the calls' futures."""
    value_col = _field(batch, "value")
    assert value_col is not None  # checked on the driver
    names = batch.schema.names
    ts_col = _field(batch, "timestamp")
    if ts_col is not None:
        _check_timestamps(ts_col)
    columns = {
        "key": "key" if "key" in names else None,
        "timestamp": "timestamp" if ts_col is not None else None,
        "headers": "headers" if "headers" in names else None,
        "partition": "partition" if "partition" in names else None,
    }
    if topic_option is not None:
        return [producer.send_arrow(topic_option, batch, **columns)]
    topic_col = _field(batch, "topic")
    assert topic_col is not None  # checked on the driver
    if topic_col.null_count:
        raise ConfigError("topic", "a row has a null 'topic' and no topic option is set; "
                                   "every row needs a topic")
    topics = pc.unique(topic_col).to_pylist()
    if len(topics) == 1:
        return [producer.send_arrow(topics[0], batch, **columns)]
    return [producer.send_arrow(topic, batch.filter(pc.equal(topic_col, topic)), **columns) for topic in topics]
