"""Arrow rows to producer sends: the sink's columns (see writer.py) become records.

Shared by the at-least-once writer (writer.py) and the transactional one (exactly_once.py).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from samsa.errors import ConfigError

__all__ = ["BULK_DEFAULTS", "KEPT_ERRORS", "send_batch"]

# Producer settings for bulk writes, used unless the kafka.* options set them: bigger batches
# mean fewer, larger produce requests (Kafka's 16 KiB default holds only ~130 small records).
BULK_DEFAULTS = {"linger.ms": "5", "batch.size": str(256 * 1024)}

# Batch errors kept per write, to name one in the task's failure.
KEPT_ERRORS = 8


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


def send_batch(producer: Any, batch: pa.RecordBatch, topic_option: str | None,
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
    on_error = errors.append if len(errors) < KEPT_ERRORS else None
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
