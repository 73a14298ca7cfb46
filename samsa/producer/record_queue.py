"""send()'s queue: records accepted by ``send()`` and not yet appended to a batch.

librdkafka's ``rd_kafka_produce()`` only puts the message on a queue; its batches are built
later, many records at a time.  samsa does the same for ``send()``: :meth:`RecordQueue.try_send`
checks the record (topic known, serialized, partition chosen or left to the sticky partitioner,
size), stamps its timestamp and returns a :class:`QueuedRecordFuture` for it, with no lock and
no batch touched.  The records are appended to their batches in bulk
(``RecordAccumulator.append_run`` with a :class:`QueuedRun`, the path of ``send_many``):

* by the sending thread, once the queue holds ``max_records`` records or ``max_bytes`` bytes;
  this may block for buffer memory (max.block.ms), as Java's ``send()`` does;
* by the Sender thread, for the records left over, at each of its iterations (never blocking);
* before anything that must see them in batches: ``flush()``, ``close()``, ``send_many()``,
  ``send_arrow()``, a ``send()`` that takes the direct path, or a ``get()`` on a queued future.

One lock (the drain lock of samsa.producer.queue_appender, which does the appending)
serializes appends from the queue, so records keep their order per partition.  A queued
future binds to its batch's result when appended, or fails (the producer closed, the record
waited past delivery.timeout.ms, or an unexpected error): every future resolves.

setup.py compiles this module with mypyc where it can (the typed source is the fallback).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from samsa.errors import KafkaTimeoutError
from samsa.producer.batch import ProducerBatch, estimate_size_upper_bound
from samsa.producer.future import (
    ProduceRequestResult,
    RecordCallback,
    RecordFuture,
    RecordMetadata,
)
from samsa.producer.partitioner import UNKNOWN_PARTITION, murmur2, to_positive
from samsa.records.builder import Header

__all__ = [
    "RECORD_OVERHEAD_UPPER_BOUND",
    "HeadersArg",
    "QueuedRecordFuture",
    "QueuedRun",
    "RecordQueue",
    "group_queued",
    "normalize_headers",
]

log = logging.getLogger(__name__)

HeadersArg = Mapping[str, bytes | str | None] | Iterable[tuple[str, bytes | str | None]] | None
"""send()'s headers: a mapping or (name, value) pairs; str values are sent as UTF-8."""

# A v2 batch header plus a record's varints at their widest (estimate_size_upper_bound).
RECORD_OVERHEAD_UPPER_BOUND: Final = estimate_size_upper_bound(None, None)

# The result a queued future points at until it is appended: never completed.
_UNBOUND: Final = ProduceRequestResult("", UNKNOWN_PARTITION)


def normalize_headers(headers: HeadersArg) -> list[tuple[str, bytes | None]] | None:
    """send()'s headers (a mapping or pairs; str values as UTF-8) as (name, bytes) pairs."""
    if not headers:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    out: list[tuple[str, bytes | None]] = []
    for name, value in items:
        if isinstance(value, str):
            value = value.encode("utf-8")
        elif value is not None and not isinstance(value, bytes):
            value = bytes(value)
        out.append((name, value))
    return out


class QueuedRecordFuture(RecordFuture):
    """The future of a record in the :class:`RecordQueue`: it holds the record until the
    record is appended to a batch, then behaves as the batch's :class:`RecordFuture`.

    Waiting on it (``get()``, ``result()``, ``exception()``), adding a callback, or asking for
    its partition or offset first has the queue appended (:meth:`RecordQueue.settle`).
    ``done()`` is False while queued.
    """

    __slots__ = ("_callback", "_headers", "_key", "_partition", "_queue", "_topic", "_value")

    def __init__(
        self,
        queue: RecordQueue,
        topic: str,
        partition: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]] | None,
        callback: RecordCallback | None,
    ) -> None:
        self._result = _UNBOUND
        self._relative_offset = -1
        self._timestamp = timestamp
        self._key_size = -1 if key is None else len(key)
        self._value_size = -1 if value is None else len(value)
        self._next = None
        self._queue: RecordQueue | None = queue
        self._topic = topic
        self._partition = partition
        self._key = key
        self._value = value
        self._headers = headers
        self._callback = callback

    # -- while queued --------------------------------------------------------------------

    def is_queued(self) -> bool:
        """True until the record is appended to a batch (or failed)."""
        return self._queue is not None

    def bind(self, result: ProduceRequestResult, relative_offset: int) -> None:
        """The record is now ``relative_offset`` in the batch of ``result``."""
        self._result = result
        self._relative_offset = relative_offset
        self._queue = None
        self._key = self._value = None
        self._headers = None
        self._callback = None

    def fail(self, error: BaseException) -> None:
        """The record never reached a batch: complete it with ``error`` (and its callback)."""
        if self._queue is None:
            return
        callback = self._callback
        result = ProduceRequestResult(self._topic, self._partition)
        result.set(-1, -1, error)
        self.bind(result, 0)
        result.mark_done()
        if callback is not None:
            try:
                callback(None, error)
            except Exception:
                log.exception("Error in a callback for a record sent to %s", self._topic)

    def _settle(self, timeout: float | None) -> None:
        queue = self._queue
        if queue is not None:
            queue.settle(self, timeout)

    # -- RecordFuture, once appended ------------------------------------------------------

    @property
    def relative_offset(self) -> int:
        self._settle(None)
        return self._relative_offset

    @property
    def topic(self) -> str:
        if self._queue is not None:
            return self._topic
        return self._final()._result.topic

    @property
    def partition(self) -> int:
        self._settle(None)
        return self._final()._result.partition

    def done(self) -> bool:
        if self._queue is not None:
            return False
        return super().done()

    def get(self, timeout: float | None = None) -> RecordMetadata:
        self._settle(timeout)
        return super().get(timeout)

    def result(self, timeout: float | None = None) -> RecordMetadata:
        self._settle(timeout)
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._settle(timeout)
        return super().exception(timeout)

    def value(self) -> RecordMetadata:
        self._settle(None)
        return super().value()

    def outcome(self) -> tuple[RecordMetadata | None, BaseException | None]:
        self._settle(None)
        return super().outcome()

    def add_callback(self, callback: RecordCallback) -> None:
        self._settle(None)
        super().add_callback(callback)

    def __repr__(self) -> str:
        if self._queue is not None:
            return f"RecordFuture({self._topic}, queued)"
        return super().__repr__()


class RecordQueue:
    """send()'s records not yet in batches (see the module docstring).

    ``drain(block)`` is QueueAppender.append: with ``block`` on the caller's
    thread (may wait for buffer memory; raises when it cannot), without it on the Sender's.
    ``settle(timeout)`` appends it for a waiting future (False: this thread must not wait).
    ``wake()`` wakes the Sender.  ``topics`` maps each topic whose metadata send() has seen to
    its partition count; ``open`` is False once the producer closed, forked or failed fatally
    (send() then takes the direct path, which raises the reason).
    """

    def __init__(
        self,
        drain: Callable[[bool], object],
        settle: Callable[[float | None], bool],
        wake: Callable[[], object],
        time_ns: Callable[[], int],
        monotonic_ns: Callable[[], int],
        serialize_key: Callable[[str, Any], bytes | None],
        serialize_value: Callable[[str, Any], bytes | None],
        *,
        raw_keys: bool,
        raw_values: bool,
        ignore_keys: bool,
        max_record_size: int,
        max_records: int,
        max_bytes: int,
        max_wait_ms: int,
        open: bool,
    ) -> None:
        self._futures: deque[QueuedRecordFuture] = deque()
        # Bound once: compiled code calls a deque's methods by name lookup otherwise.
        self._put = self._futures.append
        self._pop = self._futures.popleft
        self._drain = drain
        self._settle = settle
        self._wake = wake
        self._time_ns = time_ns
        self._monotonic_ns = monotonic_ns
        self._serialize_key = serialize_key
        self._serialize_value = serialize_value
        self._raw_keys = raw_keys
        self._raw_values = raw_values
        self._ignore_keys = ignore_keys
        self._max_record_size = max_record_size
        self._max_records = max_records
        self._max_bytes = max_bytes
        self.queued_bytes = 0
        # When the oldest queued record was queued (monotonic ns; read only when the queue was
        # empty): records left waiting for buffer memory still expire after delivery.timeout.ms.
        self.oldest_ns = 0
        self._taken_oldest_ns = 0
        self.topics: dict[str, int] = {}
        self.open = open
        # How long the Sender lets queued records wait before it appends them (linger.ms).
        self.max_wait_ms = max_wait_ms
        # Set by the Sender around its poll: True while it may sleep longer than linger.ms,
        # so that the first record queued must wake it.
        self.sender_sleeps_long = False

    def __len__(self) -> int:
        return len(self._futures)

    def drain(self, block: bool) -> None:
        """Append the queued records (QueueAppender.append; see the class docstring)."""
        self._drain(block)

    def try_send(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp_ms: int | None,
        headers: HeadersArg,
        callback: RecordCallback | None,
    ) -> RecordFuture | None:
        """send()'s fast path: queue the record and return its future, or None when send()
        must take its direct path (queue closed, topic or partition not known yet, a custom
        partitioner, a record too large: the direct path waits or raises as Java's does).

        Appends the queue first when it is full, which may block for buffer memory and raise
        (the record is then not queued)."""
        if not self.open:
            return None
        count = self.topics.get(topic)
        if count is None:
            return None
        if self._raw_keys and (key is None or type(key) is bytes):
            key_bytes: bytes | None = key
        else:
            key_bytes = self._serialize_key(topic, key)
        if self._raw_values and (value is None or type(value) is bytes):
            value_bytes: bytes | None = value
        else:
            value_bytes = self._serialize_value(topic, value)
        if partition is None:
            if key_bytes is None or self._ignore_keys:
                chosen = UNKNOWN_PARTITION
            else:
                chosen = to_positive(murmur2(key_bytes)) % count
        elif 0 <= partition < count:
            chosen = partition
        else:
            return None
        if headers:
            record_headers = normalize_headers(headers)
            size = estimate_size_upper_bound(key_bytes, value_bytes, record_headers)
        else:
            record_headers = None
            size = RECORD_OVERHEAD_UPPER_BOUND
            if key_bytes is not None:
                size += len(key_bytes)
            if value_bytes is not None:
                size += len(value_bytes)
        if size > self._max_record_size:
            return None
        if timestamp_ms is None:
            timestamp_ms = self._time_ns() // 1_000_000
        futures = self._futures
        if len(futures) >= self._max_records or self.queued_bytes >= self._max_bytes:
            self._drain(True)
        future = QueuedRecordFuture(self, topic, chosen, timestamp_ms, key_bytes, value_bytes,
                                    record_headers, callback)
        self.queued_bytes += size
        if futures:
            self._put(future)
        else:
            self.oldest_ns = self._monotonic_ns()
            self._put(future)
            if self.sender_sleeps_long:
                self._wake()
        if not self.open:
            # close() (or a fork, or a fatal error) came between the check above and here,
            # perhaps after its last append of the queue: take the record back unless a
            # drain already has it, and let the direct path raise.
            try:
                futures.remove(future)
            except ValueError:
                return future
            return None
        return future

    def take(self) -> list[QueuedRecordFuture]:
        """Every queued record, oldest first, out of the queue (the drain lock held)."""
        pop = self._pop
        taken = [pop() for _ in range(len(self._futures))]
        self.queued_bytes = 0
        self._taken_oldest_ns = self.oldest_ns
        return taken

    def give_back(self, futures: list[QueuedRecordFuture]) -> None:
        """Put records :meth:`take` took and could not append back at the head, in order."""
        self._futures.extendleft(reversed(futures))
        self.oldest_ns = self._taken_oldest_ns

    def settle(self, future: QueuedRecordFuture, timeout: float | None) -> None:
        """Append the queue until ``future`` is in a batch (a get() or a callback needs it),
        waiting for buffer memory up to ``timeout`` seconds (None: as long as it takes)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while future.is_queued():
            remaining = None if deadline is None else deadline - time.monotonic()
            if (remaining is not None and remaining <= 0) or (not self._settle(remaining) and future.is_queued()):
                raise KafkaTimeoutError(
                    f"the record sent to {future._topic} to leave send()'s queue (it waits for "
                    "buffer memory; check that the brokers acknowledge records, or raise "
                    "buffer.memory)",
                    None if timeout is None else timeout * 1000.0,
                )

class QueuedRun:
    """Queued records of one (topic, partition) for ``RecordAccumulator.append_run``: their
    columns are gathered once, appended in runs with ``RecordBatchBuilder.append_many``, and
    each appended record's future is bound to its batch."""

    future: RecordFuture | None = None  # RecordRun's single-record future: none for a run

    def __init__(self, futures: list[QueuedRecordFuture]) -> None:
        self.futures = futures
        timestamps: list[int | None] = []
        keys: list[bytes | None] = []
        values: list[bytes | None] = []
        headers: list[Sequence[Header] | None] = []
        any_key = any_headers = False
        for future in futures:
            timestamps.append(future._timestamp)
            key = future._key
            if key is not None:
                any_key = True
            keys.append(key)
            values.append(future._value)
            hs = future._headers
            if hs is not None:
                any_headers = True
            headers.append(hs)
        self.timestamps = timestamps
        self.keys: list[bytes | None] | None = keys if any_key else None
        self.values = values
        self.headers: list[Sequence[Header] | None] | None = headers if any_headers else None

    def into(self, batch: ProducerBatch, start: int, end: int, now_ms: int) -> int:
        """Under the deque lock: records ``start`` .. into ``batch``; the first one not taken."""
        builder = batch.builder
        before = builder.record_count
        stop = builder.append_many(self.timestamps, self.keys, self.values, self.headers, start, end)
        if stop > start:
            batch.last_append_ms = now_ms
            batch.size = builder.estimated_size
            result = batch.result
            thunks = batch.thunks
            futures = self.futures
            offset = before
            for i in range(start, stop):
                future = futures[i]
                callback = future._callback
                if callback is not None:
                    thunks.append((callback, future))
                future.bind(result, offset)
                offset += 1
        return stop

    def upper_bound(self, index: int) -> int:
        keys, headers = self.keys, self.headers
        return estimate_size_upper_bound(
            None if keys is None else keys[index], self.values[index],
            None if headers is None else headers[index],
        )


def group_queued(futures: list[QueuedRecordFuture]) -> list[tuple[str, int, list[QueuedRecordFuture]]]:
    """``futures`` as (topic, partition, futures) groups, each in queue order.

    Records of one partition keep their order.  A topic with records both for the sticky
    partitioner (UNKNOWN_PARTITION) and for given partitions is kept in consecutive runs, so
    that a record never overtakes an earlier one that lands in the same partition."""
    first = futures[0]
    topic, partition = first._topic, first._partition
    for future in futures:
        if future._partition != partition or future._topic != topic:
            break
    else:
        return [(topic, partition, futures)]
    groups: dict[tuple[str, int], list[QueuedRecordFuture]] = {}
    sticky: set[str] = set()
    given: set[str] = set()
    for future in futures:
        key = (future._topic, future._partition)
        group = groups.get(key)
        if group is None:
            groups[key] = group = []
            (sticky if key[1] == UNKNOWN_PARTITION else given).add(key[0])
        group.append(future)
    mixed = sticky & given
    if not mixed:
        return [(key[0], key[1], group) for key, group in groups.items()]
    runs: list[tuple[str, int, list[QueuedRecordFuture]]] = []
    for future in futures:
        if runs and runs[-1][0] == future._topic and runs[-1][1] == future._partition:
            runs[-1][2].append(future)
        else:
            runs.append((future._topic, future._partition, [future]))
    return runs
