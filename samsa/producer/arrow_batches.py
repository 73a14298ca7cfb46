"""Columnar produce: Arrow columns into the accumulator's batches, and the call's future.

``KafkaProducer.send_arrow`` resolves its columns here (:func:`resolve_columns`), places the
rows as ``send()`` would (explicit partition, else murmur2 of the key over all partitions
(Kafka's ``BuiltInPartitioner.partitionForKey``, vectorised in :func:`key_partitions`), else the
sticky partition), groups them by partition with one stable sort and encodes them with
:class:`~samsa.records.arrow_records.ArrowRecords`.  Each partition's rows go through
``RecordAccumulator.append_run`` as an :class:`ArrowRun`: the same routine as ``send()``'s
appends (buffer.memory, sticky switching, AddPartitionsToTxn before the first drain), so the
Sender treats these batches like any other (sequences, retries, ordering, delivery.timeout.ms,
MESSAGE_TOO_LARGE splits).  The run remembers, per batch it filled, which rows went where;
:class:`ArrowSendFuture` turns the batches' results into per-row partitions and offsets, and
names the rows of any batch that failed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from samsa.errors import KafkaError, KafkaTimeoutError
from samsa.producer.batch import ProducerBatch
from samsa.producer.future import INVALID_OFFSET, ProduceRequestResult, RecordCallback, RecordFuture
from samsa.records.arrow_records import ArrowRecords, as_binary

__all__ = ["ArrowDelivery", "ArrowRun", "ArrowSendError", "ArrowSendFuture", "key_partitions",
           "resolve_columns"]

ColumnArg: TypeAlias = "str | pa.Array | pa.ChunkedArray | None"

_SEED = 0x9747B28C
_M = np.uint32(0x5BD1E995)


def key_partitions(keys: pa.Array, count: int) -> np.ndarray:
    """``toPositive(murmur2(key)) % count`` for each non-null key (Kafka's Utils.murmur2), -1
    for null keys; numpy over 4-byte words of all keys at once."""
    n = len(keys)
    lens = pc.fill_null(pc.binary_length(keys), -1).to_numpy(zero_copy_only=False).astype(np.int64)
    out = np.full(n, -1, np.int64)
    rows = np.nonzero(lens >= 0)[0]
    if not len(rows):
        return out
    offsets = np.frombuffer(keys.buffers()[1], np.int64, n + 1, keys.offset * 8)
    raw = keys.buffers()[2]
    data = np.frombuffer(raw, np.uint8) if raw is not None and raw.size else np.zeros(4, np.uint8)
    length = lens[rows]
    starts = offsets[:-1][rows]
    h = ((np.uint64(_SEED) ^ length.astype(np.uint64)) & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    words = length >> 2
    with np.errstate(over="ignore"):
        for j in range(int(words.max())):
            sel = np.nonzero(words > j)[0]
            p = starts[sel] + 4 * j
            k = (data[p].astype(np.uint32) | (data[p + 1].astype(np.uint32) << 8)
                 | (data[p + 2].astype(np.uint32) << 16) | (data[p + 3].astype(np.uint32) << 24))
            k *= _M
            k ^= k >> np.uint32(24)
            k *= _M
            h[sel] = (h[sel] * _M) ^ k
        rest = length & 3
        tail = starts + (length & ~3)
        sel = np.nonzero(rest == 3)[0]
        h[sel] ^= data[tail[sel] + 2].astype(np.uint32) << 16
        sel = np.nonzero(rest >= 2)[0]
        h[sel] ^= data[tail[sel] + 1].astype(np.uint32) << 8
        sel = np.nonzero(rest >= 1)[0]
        h[sel] ^= data[tail[sel]].astype(np.uint32)
        h[sel] *= _M
        h ^= h >> np.uint32(13)
        h *= _M
        h ^= h >> np.uint32(15)
    out[rows] = (h & np.uint32(0x7FFFFFFF)).astype(np.int64) % count
    return out


def _column(data: pa.Table | pa.RecordBatch, arg: ColumnArg, what: str, default: str | None) -> Any:
    """The column ``arg`` names (or is), None when absent; a missing column named by the
    caller is an error, a missing default one means "none"."""
    if arg is None:
        return None
    if isinstance(arg, str):
        index = data.schema.get_field_index(arg)
        if index < 0:
            if arg == default:
                return None
            raise KeyError(f"send_arrow(): no column {arg!r} for the {what}; the data has "
                           f"{data.schema.names}; name one of them or pass an array")
        column = data.column(index)
    else:
        column = arg
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if len(column) != data.num_rows:
        raise ValueError(f"send_arrow(): the {what} array has {len(column)} items but the data has "
                         f"{data.num_rows} rows; give one per row")
    return column


def _timestamps(column: pa.Array, now_ms: int) -> np.ndarray:
    """ms since the epoch per row: timestamp[s/ms/us/ns] (any time zone) or integer ms; null
    means now, as send()'s None."""
    t = column.type
    if pa.types.is_timestamp(t):
        # The epoch count in the column's unit, whatever its time zone.
        stamps = pc.fill_null(column.cast(pa.int64()), 0).to_numpy(zero_copy_only=False).astype(np.int64)
        if t.unit == "s":
            stamps = stamps * 1000
        elif t.unit != "ms":
            stamps = stamps // (1000 if t.unit == "us" else 1_000_000)
    elif pa.types.is_integer(t):
        stamps = pc.fill_null(column.cast(pa.int64()), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    else:
        raise TypeError(f"send_arrow(): the timestamp column is {t}; give timestamp[ms/us/ns] or int64 "
                        "milliseconds since the epoch")
    if column.null_count:
        stamps[column.is_null().to_numpy(zero_copy_only=False)] = now_ms
    return stamps


def resolve_columns(
    data: pa.Table | pa.RecordBatch, key: ColumnArg, value: ColumnArg, timestamp: ColumnArg,
    headers: ColumnArg, partition: ColumnArg | int, now_ms: int,
) -> tuple[pa.Array | None, pa.Array, int | np.ndarray, pa.Array | None, np.ndarray | int | None]:
    """(keys, values, timestamps, headers, partitions) of send_arrow's arguments: keys and
    values large_binary, keys None when every key is null, timestamps one int or int64 ms,
    partitions None (none given), one int, or an int64 array with -1 where not given."""
    if not isinstance(data, (pa.Table, pa.RecordBatch)):
        raise TypeError(f"send_arrow() takes a pyarrow Table or RecordBatch, not {type(data).__name__}")
    values = _column(data, value, "value", None)
    if values is None:
        raise ValueError("send_arrow(): value=None; name the value column or pass an array "
                         "(a column of nulls sends null values)")
    values = as_binary(values, "value")
    keys = _column(data, key, "key", "key")
    if keys is not None:
        keys = None if keys.null_count == len(keys) else as_binary(keys, "key")
    stamps: int | np.ndarray = now_ms
    ts = _column(data, timestamp, "timestamp", None)
    if ts is not None and ts.null_count < len(ts):
        stamps = _timestamps(ts, now_ms)
    hs = _column(data, headers, "headers", None)
    if hs is not None and hs.null_count == len(hs):
        hs = None
    parts: np.ndarray | int | None = None
    if isinstance(partition, (int, np.integer)) and not isinstance(partition, bool):
        if partition < 0:
            raise ValueError(f"send_arrow(): partition {partition} is negative; partitions are >= 0")
        parts = int(partition)
    else:
        column = _column(data, partition, "partition", None)
        if column is not None and column.null_count < len(column):
            if not pa.types.is_integer(column.type):
                raise TypeError(f"send_arrow(): the partition column is {column.type}; give integers")
            placed: np.ndarray = pc.fill_null(column.cast(pa.int64()), -1).to_numpy(
                zero_copy_only=False).astype(np.int64)
            parts = placed
            if ((placed < -1) | ((placed == -1) & ~column.is_null().to_numpy(zero_copy_only=False))).any():
                raise ValueError("send_arrow(): a partition is negative; partitions are >= 0 (null: the "
                                 "partitioner decides)")
    return keys, values, stamps, hs, parts


class ArrowRun:
    """Rows ``lo`` .. ``hi - 1`` of an :class:`ArrowRecords` (one partition's, or the sticky
    partition's) for ``RecordAccumulator._append``; remembers each batch it filled."""

    __slots__ = ("callback", "hi", "lo", "records", "segments")

    future = None  # no per-record futures

    def __init__(self, records: ArrowRecords, lo: int, hi: int, segments: list[Any],
                 callback: RecordCallback | None = None) -> None:
        self.records = records
        self.lo = lo
        self.hi = hi
        # (batch result, its relative offset of the first row, first row, end row)
        self.segments = segments
        self.callback = callback

    def into(self, batch: ProducerBatch, start: int, end: int, now_ms: int) -> int:
        """Under the deque lock: rows ``start`` .. (relative to ``lo``) into ``batch``."""
        builder = batch.builder
        before = builder.record_count
        lo = self.lo
        stop = self.records.append_to(builder, lo + start, lo + end) - lo
        if stop > start:
            batch.last_append_ms = now_ms
            batch.size = builder.estimated_size
            self.segments.append((batch.result, before, lo + start, lo + stop))
            if self.callback is not None:
                rows = self.records
                batch.thunks.append((self.callback, RecordFuture(
                    batch.result, before, rows.timestamp(lo + start),
                    int(rows.key_sizes[lo + start]), int(rows.value_sizes[lo + start]))))
        return stop

    def upper_bound(self, index: int) -> int:
        return int(self.records.bounds[self.lo + index])


class ArrowDelivery:
    """Where each row of a send_arrow() call went: arrays aligned with the rows.

    ``partitions`` (int32) and ``offsets`` (int64; -1 for rows that failed and with acks=0);
    ``errors``: (row indexes, error) per failure; :attr:`failed_rows` all of them, sorted."""

    __slots__ = ("errors", "offsets", "partitions", "topic")

    def __init__(self, topic: str, partitions: np.ndarray, offsets: np.ndarray,
                 errors: list[tuple[np.ndarray, BaseException]]) -> None:
        self.topic = topic
        self.partitions = partitions
        self.offsets = offsets
        self.errors = errors

    @property
    def failed_rows(self) -> np.ndarray:
        if not self.errors:
            return np.zeros(0, np.int64)
        return np.sort(np.concatenate([rows for rows, _ in self.errors]))

    def offset_ranges(self) -> dict[int, tuple[int, int]]:
        """Per partition, the (lowest, highest) offset the call's acknowledged rows got."""
        ok = self.offsets >= 0
        out: dict[int, tuple[int, int]] = {}
        for p in np.unique(self.partitions[ok]):
            offs = self.offsets[ok & (self.partitions == p)]
            out[int(p)] = (int(offs.min()), int(offs.max()))
        return out

    def __repr__(self) -> str:
        return (f"ArrowDelivery({self.topic!r}, rows={len(self.offsets)}, "
                f"failed={sum(len(r) for r, _ in self.errors)})")


class ArrowSendError(KafkaError):
    """Rows of a send_arrow() call failed; ``delivery`` says which (``failed_rows``,
    ``errors``) and where the others went."""

    def __init__(self, delivery: ArrowDelivery) -> None:
        self.delivery = delivery
        rows = delivery.failed_rows
        first = delivery.errors[0][1]
        shown = ", ".join(str(r) for r in rows[:10]) + (", ..." if len(rows) > 10 else "")
        super().__init__(f"{len(rows)} of {len(delivery.offsets)} rows sent to {delivery.topic!r} failed "
                         f"(rows {shown}); first error: {first!r}; see .delivery.errors for each "
                         "failed row's error and send those rows again if they must arrive")
        self.__cause__ = first if isinstance(first, BaseException) else None


class ArrowSendFuture:
    """The outcome of one send_arrow() call: done when every row's batch completed."""

    __slots__ = ("_delivery", "_order", "_rows", "_segments", "topic")

    def __init__(self, topic: str, rows: int, order: np.ndarray | None,
                 segments: list[tuple[ProduceRequestResult, int, int, int]]) -> None:
        self.topic = topic
        self._rows = rows
        # Row j of the encoded (partition-grouped) rows is row order[j] of the call.
        self._order = order
        self._segments = segments
        self._delivery: ArrowDelivery | None = None

    def done(self) -> bool:
        return all(_final_done(result, rel, lo, hi) for result, rel, lo, hi in self._segments)

    def add_done_callback(self, callback: Callable[[ArrowSendFuture], object]) -> None:
        """Call ``callback(self)`` once every row completed (on the Sender thread, or now)."""
        pending = [len(self._segments)]

        def one_done() -> None:
            pending[0] -= 1
            if pending[0] == 0:
                if not self.done():  # a split batch: its rows complete later
                    threading_wait(self, callback)
                    return
                callback(self)

        if not self._segments:
            callback(self)
        for result, *_ in self._segments:
            result.add_listener(one_done)

    def outcome(self, timeout: float | None = None) -> ArrowDelivery:
        """Every row's partition and offset, and the failures (not raised); waits like :meth:`get`."""
        if self._delivery is not None:
            return self._delivery
        deadline = None if timeout is None else time.monotonic() + timeout
        for result, rel, lo, hi in self._segments:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not result.wait(remaining) or not _wait_moved(result, rel, lo, hi, deadline):
                raise KafkaTimeoutError(
                    f"the broker to acknowledge the rows sent to {result.topic}-{result.partition} "
                    "(their batch is still queued or in flight; the producer keeps trying until "
                    "delivery.timeout.ms; a longer timeout waits for that)",
                    None if timeout is None else timeout * 1000.0)
        self._delivery = self._collect()
        return self._delivery

    def get(self, timeout: float | None = None) -> ArrowDelivery:
        """Wait (``timeout`` seconds, None: no limit) for every row; the delivery, or
        ArrowSendError naming the failed rows, or KafkaTimeoutError."""
        delivery = self.outcome(timeout)
        if delivery.errors:
            raise ArrowSendError(delivery)
        return delivery

    result = get

    def _collect(self) -> ArrowDelivery:
        n = self._rows
        partitions = np.full(n, -1, np.int32)
        offsets = np.full(n, INVALID_OFFSET, np.int64)
        failures: dict[int, tuple[list[np.ndarray], BaseException]] = {}

        def fail(rows: np.ndarray, error: BaseException) -> None:
            failures.setdefault(id(error), ([], error))[0].append(rows)

        for result, rel, lo, hi in self._segments:
            rows = np.arange(lo, hi)
            if result.moved_to is not None:  # split after MESSAGE_TOO_LARGE: row by row
                for j, row in enumerate(rows):
                    metadata, error = result.moved_to[rel + j].outcome()
                    final = result.moved_to[rel + j]
                    partitions[row] = final.partition
                    if error is not None:
                        fail(np.array([row]), error)
                    elif metadata is not None:
                        offsets[row] = metadata.offset
                continue
            partitions[lo:hi] = result.partition
            if result.error is None and not result.record_errors:
                if result.base_offset != INVALID_OFFSET:
                    offsets[lo:hi] = result.base_offset + rel + np.arange(hi - lo)
                continue
            for j in range(hi - lo):
                error = result.error_for(rel + j)
                if error is not None:
                    fail(rows[j:j + 1], error)
                elif result.base_offset != INVALID_OFFSET:
                    offsets[lo + j] = result.base_offset + rel + j
        order = self._order
        errors = [(np.concatenate(parts), error) for parts, error in failures.values()]
        if order is not None:  # back to the caller's row order
            partitions[order] = partitions.copy()
            offsets[order] = offsets.copy()
            errors = [(np.sort(order[rows]), error) for rows, error in errors]
        return ArrowDelivery(self.topic, partitions, offsets, errors)

    def __repr__(self) -> str:
        return f"ArrowSendFuture({self.topic!r}, rows={self._rows}, {'done' if self.done() else 'pending'})"


def _final_done(result: ProduceRequestResult, rel: int, lo: int, hi: int) -> bool:
    if not result.is_done():
        return False
    moved = result.moved_to
    return moved is None or all(moved[rel + j].done() for j in range(hi - lo))


def _wait_moved(result: ProduceRequestResult, rel: int, lo: int, hi: int, deadline: float | None) -> bool:
    """After a split, wait for the rows' new batches; False if the deadline passed."""
    moved = result.moved_to
    if moved is None:
        return True
    for j in range(hi - lo):
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            moved[rel + j].exception(remaining)
        except KafkaTimeoutError:
            return False
    return True


def threading_wait(future: ArrowSendFuture, callback: Callable[[ArrowSendFuture], object]) -> None:
    """Rows of a split batch are still on their way: call back from a helper thread when done."""
    import threading

    def wait() -> None:
        future.outcome()
        callback(future)

    threading.Thread(target=wait, name="samsa-arrow-callback", daemon=True).start()
