"""KafkaProducer: the public producer, as Kafka's Java ``KafkaProducer``.

``send()`` runs on the caller's thread.  For a topic whose metadata it has seen, and without
interceptors, transactions or a custom partitioner, ``RecordQueue.try_send`` (``record_queue.py``)
serializes, partitions, checks the size and queues the record, returning its future; the queue
is appended to batches in bulk (see that module).  Otherwise, the direct path: the queue first,
then interceptors -> wait for the topic's metadata (bounded by max.block.ms) -> serialize key
and value -> partition -> size checks -> ``RecordAccumulator.append_to_last`` (the partition's
open batch takes the record) or else ``RecordAccumulator.append`` (may block for buffer memory,
within what is left of max.block.ms) -> wake the Sender when a batch filled up or was created
-> return the record's future.
Everything else happens on the Sender thread (``sender.py``).

Example::

    with KafkaProducer({"bootstrap.servers": "127.0.0.1:9092"}) as producer:
        future = producer.send("events", b"value", key=b"key")
        print(future.get(timeout=10))  # RecordMetadata(topic, partition, offset, ...)
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from types import TracebackType
from typing import TYPE_CHECKING, Any, NamedTuple, Self

from samsa.errors import (
    ConfigError,
    ForkedClientError,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    ProducerClosedError,
    RecordTooLargeError,
)
from samsa.net.client import NetworkClient
from samsa.net.clock import SYSTEM_CLOCK, Time
from samsa.net.cluster import ClusterView, TopicPartition
from samsa.net.metadata import Metadata
from samsa.producer.accumulator import RecordAccumulator
from samsa.producer.batch import estimate_size_upper_bound
from samsa.producer.config import ProducerConfig
from samsa.producer.future import RecordCallback, RecordFuture, RecordMetadata
from samsa.producer.interceptors import ProducerInterceptors
from samsa.producer.metrics import ProducerMetrics
from samsa.producer.partitioner import UNKNOWN_PARTITION, murmur2, partition_for_record
from samsa.producer.queue_appender import TOPIC_TOUCH_INTERVAL_MS, QueueAppender
from samsa.producer.record_queue import RECORD_OVERHEAD_UPPER_BOUND, HeadersArg, RecordQueue
from samsa.producer.record_queue import normalize_headers as _normalize_headers
from samsa.producer.sender import Sender
from samsa.producer.serializers import as_serialize_fn
from samsa.producer.transaction_manager import TransactionManager
from samsa.producer.txn_state import TransactionalRequestResult

if TYPE_CHECKING:
    import pyarrow as pa

    from samsa.producer.arrow_batches import ArrowSendFuture, ColumnArg

__all__ = ["KafkaProducer", "ProducerRecord", "RecordMetadata"]

log = logging.getLogger(__name__)

# send()'s queue is appended in bulk once it holds this many records or bytes (the bytes
# bound keeps large records from waiting outside buffer.memory for long).
QUEUE_MAX_RECORDS = 256
QUEUE_MAX_BYTES = 1 << 20

# Bumped in every forked child; a producer remembers the value it was created with.
_fork_generation = 0


def _after_fork_in_child() -> None:
    global _fork_generation
    _fork_generation += 1
    for producer in list(_open_producers):
        producer._queue.open = False  # send() takes the direct path, which raises ForkedClientError


os.register_at_fork(after_in_child=_after_fork_in_child)

# The Sender is not a daemon thread (queued records get a chance to go out), so a producer
# never closed would keep the interpreter from exiting.  At exit, before non-daemon threads
# are joined, such producers are closed, waiting at most this long for their records.
EXIT_CLOSE_TIMEOUT_S = 30.0
_open_producers: weakref.WeakSet[KafkaProducer] = weakref.WeakSet()


def _close_open_producers() -> None:
    for producer in list(_open_producers):
        try:
            producer.close(EXIT_CLOSE_TIMEOUT_S)
        except Exception:
            log.exception("Error closing producer %s at exit", producer.client_id)


threading._register_atexit(_close_open_producers)  # type: ignore[attr-defined]


class ProducerRecord(NamedTuple):
    """What interceptors see and may replace in ``on_send``."""

    topic: str
    value: Any = None
    key: Any = None
    partition: int | None = None
    timestamp_ms: int | None = None
    headers: HeadersArg = None


class KafkaProducer:
    """A thread-safe producer; see the module docstring and ``samsa.producer.config``.

    ``KafkaProducer(config: dict | None = None, **kwargs)``: settings use Kafka's dotted
    names; keyword arguments with underscores map to them (``linger_ms=10``).  ``clock`` is
    the one time source of the producer and its network client (tests inject a MockClock).
    """

    def __init__(
        self, config: Mapping[str, Any] | None = None, *, clock: Time = SYSTEM_CLOCK, **kwargs: Any
    ) -> None:
        self.config = cfg = ProducerConfig(config, **kwargs)
        if not cfg["bootstrap.servers"]:
            raise ConfigError("bootstrap.servers", "give at least one host:port of a broker, e.g. 127.0.0.1:9092")
        self._fork_generation = _fork_generation
        self._clock = clock
        # Bound once: for the SystemClock these are time.monotonic_ns/time_ns themselves.
        self._monotonic_ns = clock.monotonic_ns
        self._time_ns = clock.time_ns
        self._closed = False
        self._close_lock = threading.Lock()
        self.client_id: str = cfg["client.id"]
        self._max_block_ms: int = cfg["max.block.ms"]
        self._max_request_size: int = cfg["max.request.size"]
        self._total_memory: int = cfg["buffer.memory"]
        self._serialize_key = as_serialize_fn(cfg["key.serializer"])
        self._serialize_value = as_serialize_fn(cfg["value.serializer"])
        self._raw_keys = cfg["key.serializer"] is None
        self._raw_values = cfg["value.serializer"] is None
        self._max_record_size = min(self._max_request_size, self._total_memory)
        # topic -> (metadata snapshot, partition count, last time it was marked in use)
        self._known_topics: dict[str, tuple[Any, int, int]] = {}
        partitioner = cfg["partitioner.class"]
        self._partitioner = partitioner() if isinstance(partitioner, type) else partitioner
        self._ignore_keys: bool = cfg["partitioner.ignore.keys"]
        self._interceptors = ProducerInterceptors(cfg["interceptor.classes"])
        self._has_interceptors = bool(self._interceptors)
        self._metrics = ProducerMetrics(clock)
        self._transactional_id: str | None = cfg["transactional.id"]
        self._transaction_manager = (
            TransactionManager(cfg["transaction.timeout.ms"], self._transactional_id,
                               cfg["retry.backoff.ms"], clock)
            if cfg["enable.idempotence"] else None
        )
        self._accumulator = RecordAccumulator.from_config(cfg, self._transaction_manager, clock)
        self._metadata, self._client = _network(cfg, clock)
        self._view: ClusterView | None = None
        # send()'s queue (samsa.producer.record_queue), appended by the QueueAppender.
        # Transactions, interceptors and custom partitioners need every record on the direct path
        # (the queue then never holds a record, and the direct path skips appending it).
        self._uses_queue = (self._transactional_id is None and not self._has_interceptors
                            and self._partitioner is None)
        self._appender = QueueAppender(
            self._accumulator, self._metadata, clock, self._client.selector.wakeup, self._known_topics,
            max_block_ms=self._max_block_ms, delivery_timeout_ms=cfg["delivery.timeout.ms"],
        )
        self._queue = RecordQueue(
            self._appender.append, self._appender.settle, self._client.selector.wakeup, self._time_ns,
            self._monotonic_ns,
            self._serialize_key, self._serialize_value,
            raw_keys=self._raw_keys, raw_values=self._raw_values, ignore_keys=self._ignore_keys,
            max_record_size=self._max_record_size, max_records=QUEUE_MAX_RECORDS, max_bytes=QUEUE_MAX_BYTES,
            max_wait_ms=cfg["linger.ms"],
            open=self._uses_queue,
        )
        self._appender.attach(self._queue)
        acks: int = cfg["acks"]
        self._sender = Sender(
            self._client,
            self._metadata,
            self._accumulator,
            acks=acks,
            retries=cfg["retries"],
            max_request_size=self._max_request_size,
            request_timeout_ms=cfg["request.timeout.ms"],
            delivery_timeout_ms=cfg["delivery.timeout.ms"],
            retry_backoff_ms=cfg["retry.backoff.ms"],
            retry_backoff_max_ms=cfg["retry.backoff.max.ms"],
            guarantee_message_order=(
                cfg["max.in.flight.requests.per.connection"] == 1 or cfg["enable.idempotence"]
            ),
            transaction_manager=self._transaction_manager,
            metrics=self._metrics,
            client_id=self.client_id,
            clock=clock,
            record_queue=self._queue,
        )
        self._appender.io_thread = self._sender
        # send() wakes the Sender's poll directly (Sender.wakeup is the same call, two frames up).
        self._wakeup_sender = self._client.selector.wakeup
        self._sender.start()
        _open_producers.add(self)
        # Stop the Sender if the producer is dropped without close().
        self._finalizer = weakref.finalize(self, Sender.initiate_close, self._sender)
        log.debug("Producer %s started", self.client_id)

    # --- sending --------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: HeadersArg = None,
        on_delivery: RecordCallback | None = None,
    ) -> RecordFuture:
        """Queue a record; returns its future at once.

        Blocks up to max.block.ms for the topic's metadata and for buffer memory.  The record
        may first wait in the producer's queue (samsa.producer.record_queue), which is appended
        to batches in bulk; waiting on its future appends it at once.
        ``on_delivery(metadata, error)`` runs on the producer's I/O thread when the record is
        acknowledged or fails; keep it short.  Raises KafkaTimeoutError (metadata or memory not
        available in time), RecordTooLargeError, SerializationError, ProducerClosedError.
        """
        future = self._queue.try_send(topic, value, key, partition, timestamp_ms, headers, on_delivery)
        if future is not None:
            return future
        return self._send_directly(topic, value, key, partition, timestamp_ms, headers, on_delivery)

    def _send_directly(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp_ms: int | None,
        headers: HeadersArg,
        on_delivery: RecordCallback | None,
    ) -> RecordFuture:
        """send() without its queue: checks, waits for metadata, then appends the record to
        its batch at once (after the queue, so that no record overtakes an earlier one)."""
        if self._fork_generation != _fork_generation:
            raise ForkedClientError()
        if self._closed:
            raise ProducerClosedError("send() was called after close(); create a new producer")
        if self._sender.fatal_error is not None:
            raise self._failed_fatally()
        if self._transactional_id is not None:
            self._transaction_manager.fail_if_not_ready_for_send()  # type: ignore[union-attr]
        if self._has_interceptors:
            interceptors = self._interceptors
            record = interceptors.on_send(ProducerRecord(topic, value, key, partition, timestamp_ms, headers))
            topic, value, key, partition, timestamp_ms, headers = record
            on_delivery = _InterceptorCallback(on_delivery, interceptors)
        try:
            # clock.milliseconds(), inlined; a plain attribute load then a call is quicker than
            # self._monotonic_ns() (a method-call lookup that never specializes on CPython 3.11).
            monotonic_ns = self._monotonic_ns
            now = monotonic_ns() // 1_000_000
            # Fast path: the topic is known in the current metadata snapshot.
            cluster = self._metadata.fetch()
            known = self._known_topics.get(topic)
            if known is not None and known[0] is cluster and (partition is None or partition < known[1]):
                view = self._view
                assert view is not None  # set by the first _wait_on_metadata
                remaining_ms: float = self._max_block_ms
                if now - known[2] >= TOPIC_TOUCH_INTERVAL_MS:
                    self._metadata.add(topic, now)  # keeps the topic from expiring
                    self._known_topics[topic] = (cluster, known[1], now)
                count: int | None = known[1]
            else:
                view, remaining_ms = self._wait_on_metadata(topic, partition, now)
                count = view.partition_count(topic)
                if count is not None:
                    self._known_topics[topic] = (view.cluster, count, now)
            # The default serializer takes bytes as they are; skip the call for them.
            if self._raw_keys and (key is None or type(key) is bytes):
                key_bytes = key
            else:
                key_bytes = self._serialize_key(topic, key)
            if self._raw_values and (value is None or type(value) is bytes):
                value_bytes = value
            else:
                value_bytes = self._serialize_value(topic, value)
            if partition is None and self._partitioner is None and (key_bytes is None or self._ignore_keys):
                chosen = UNKNOWN_PARTITION
            else:
                chosen = partition_for_record(
                    topic, partition, key_bytes, value_bytes, view, self._partitioner, self._ignore_keys
                )
            if headers:
                record_headers = _normalize_headers(headers)
                size = estimate_size_upper_bound(key_bytes, value_bytes, record_headers)
            else:
                record_headers = None
                # estimate_size_upper_bound without headers, inlined for the hot path
                size = RECORD_OVERHEAD_UPPER_BOUND + (len(key_bytes) if key_bytes is not None else 0) + (
                    len(value_bytes) if value_bytes is not None else 0
                )
            if size > self._max_record_size:
                self._record_too_large(size)
            if timestamp_ms is None:
                time_ns = self._time_ns
                timestamp_ms = time_ns() // 1_000_000
            if count is not None:
                self._queue.topics[topic] = count  # later records of the topic take the queue
            if self._uses_queue:
                self._appender.append(True)  # earlier send()s first
            future = self._accumulator.append_to_last(
                topic, chosen, timestamp_ms, key_bytes, value_bytes, record_headers,
                on_delivery, now, view, self._wakeup_sender,
            )
            if future is not None:
                return future
            result = self._accumulator.append(
                topic, chosen, timestamp_ms, key_bytes, value_bytes, record_headers,
                on_delivery, remaining_ms, False, now, view,
            )
            if result.batch_is_full or result.new_batch_created:
                self._wakeup_sender()
            return result.future  # type: ignore[return-value]  # None only with abort_on_new_batch
        except KafkaError as exc:
            if self._has_interceptors:
                self._interceptors.on_send_error(ProducerRecord(topic, value, key, partition, timestamp_ms, headers),
                                           partition, exc)
            raise

    def send_many(
        self,
        topic: str,
        values: Sequence[Any],
        keys: Sequence[Any] | None = None,
        partitions: Sequence[int | None] | None = None,
        timestamps_ms: Sequence[int | None] | None = None,
        headers: Sequence[HeadersArg] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> int:
        """Queue ``len(values)`` records for ``topic`` at once; returns that count.

        The bulk form of :meth:`send` for many small records: ``keys``, ``partitions``,
        ``timestamps_ms`` and ``headers`` are None (every record has none) or sequences as long
        as ``values``, item ``i`` belonging to record ``i``; None items mean what they mean for
        send().  Records are placed as send() places them (explicit partition, else the
        partitioner/key hash, else the sticky partition) and keep their order within each
        partition.  There are no per-record futures: wait with :meth:`flush`, then learn about
        failures from ``metrics()`` (record-send-total, record-error-total),
        :meth:`last_error`, or ``on_error(error)``, called on the producer's I/O thread once
        per failed batch that holds records of this call.

        Everything is checked (metadata, serialization, sizes, partitions) before the first
        record is queued, so the exceptions send() raises leave nothing queued; only a timeout
        waiting for buffer memory (BufferExhaustedError) or close() can stop a call part way.
        """
        if self._fork_generation != _fork_generation:
            raise ForkedClientError()
        if self._closed:
            raise ProducerClosedError("send_many() was called after close(); create a new producer")
        if self._sender.fatal_error is not None:
            raise self._failed_fatally()
        if self._transactional_id is not None:
            self._transaction_manager.fail_if_not_ready_for_send()  # type: ignore[union-attr]
        n = len(values)
        for name, column in (("keys", keys), ("partitions", partitions), ("timestamps_ms", timestamps_ms),
                             ("headers", headers)):
            if column is not None and len(column) != n:
                raise ValueError(f"send_many(): {name} has {len(column)} items but values has {n}; "
                                 "give one item per value, or None for all")
        if not n:
            return 0
        if self._has_interceptors:
            # Interceptors see (and may change) every record: send them one by one.
            callback = None if on_error is None else _ErrorOnlyCallback(on_error)
            for i in range(n):
                self.send(topic, values[i], None if keys is None else keys[i],
                          None if partitions is None else partitions[i],
                          None if timestamps_ms is None else timestamps_ms[i],
                          None if headers is None else headers[i], callback)
            return n
        now = self._monotonic_ns() // 1_000_000
        explicit = None if partitions is None else [p for p in partitions if p is not None]
        if explicit and min(explicit) < 0:
            raise ValueError(f"send_many(): partition {min(explicit)} is negative; partitions are >= 0")
        view, remaining_ms = self._wait_on_metadata(topic, max(explicit) if explicit else None, now)
        accumulator = self._accumulator
        callback = None if on_error is None else _ErrorOnlyCallback(on_error)
        stamps: int | list[int | None]
        if timestamps_ms is None or timestamps_ms.count(None) == n:
            stamps = self._time_ns() // 1_000_000
        else:
            stamps = list(timestamps_ms)
        value_list: list[Any] | None = None
        if (keys is None and headers is None and type(stamps) is int and self._partitioner is None
                and (partitions is None or partitions.count(None) == n) and accumulator.takes_columnar(n)):
            # Values alone, all to the sticky partition: as Arrow rows where that pays.
            source = self._bytes_like_list(values)
            if source is None:
                source = value_list = self._serialize_all(topic, values, self._raw_values, self._serialize_value)
            columnar = accumulator.columnar_run(source, stamps, callback)
            if columnar is not None:
                if columnar[1] > self._max_record_size:
                    self._record_too_large(columnar[1])
                self._appender.append(True)  # earlier send()s first
                accumulator.append_run(topic, UNKNOWN_PARTITION, columnar[0], n, remaining_ms, now, view,
                                       self._wakeup_sender)
                return n
        if value_list is None:  # (bytes-like values again: the default serializer, no side effects)
            value_list = self._serialize_all(topic, values, self._raw_values, self._serialize_value)
        key_list = None if keys is None else self._serialize_all(topic, keys, self._raw_keys, self._serialize_key)
        if key_list is not None and key_list.count(None) == n:
            key_list = None
        header_list: list[Any] | None = None
        if headers is not None and any(headers):
            header_list = [_normalize_headers(h) if h else None for h in headers]
        self._check_sizes(key_list, value_list, header_list)
        chosen = self._partitions_for_many(topic, partitions, key_list, value_list, view)
        self._appender.append(True)  # earlier send()s first
        if chosen is None:  # all to the sticky partition
            accumulator.append_many(topic, UNKNOWN_PARTITION, stamps, key_list, value_list, header_list,
                                    remaining_ms, now, view, self._wakeup_sender, callback)
            return n
        sticky = None
        if UNKNOWN_PARTITION in chosen:
            # Mixed with placed records, the keyless ones all take the current sticky
            # partition, so that every partition's records are appended in call order.
            partitioner = accumulator.built_in_partitioner(topic)
            sticky = partitioner.peek_current_partition_info(view)
            chosen = [sticky.partition if p == UNKNOWN_PARTITION else p for p in chosen]
        groups: dict[int, list[int]] = {}
        for i, p in enumerate(chosen):
            group = groups.get(p)
            if group is None:
                groups[p] = [i]
            else:
                group.append(i)
        for p, idx in groups.items():
            pick = _picker(idx)
            accumulator.append_many(
                topic, p, stamps if isinstance(stamps, int) else pick(stamps),
                None if key_list is None else pick(key_list), pick(value_list),
                None if header_list is None else pick(header_list),
                remaining_ms, now, view, self._wakeup_sender, callback,
            )
        if sticky is not None:
            # Count what went to the sticky partition (roughly) so that it moves on in time.
            keyless = groups.get(sticky.partition, ())
            partitioner.update_partition_info(sticky, sum(len(value_list[i] or b"") for i in keyless), view, True)
        return n

    def send_arrow(
        self,
        topic: str,
        data: pa.Table | pa.RecordBatch,
        *,
        key: ColumnArg = "key",
        value: ColumnArg = "value",
        timestamp: ColumnArg = None,
        headers: ColumnArg = None,
        partition: ColumnArg | int = None,
    ) -> ArrowSendFuture:
        """Queue every row of a pyarrow Table or RecordBatch as a record of ``topic``; returns
        one future for the call (samsa.producer.arrow_batches.ArrowSendFuture).

        ``key``, ``value``, ``timestamp``, ``headers`` and ``partition`` each name a column of
        ``data`` or give an array as long as it (None: not given).  Keys and values are
        binary or string columns (large/view variants too; null: a null key or value), sent
        as they are (no serializers).  A missing ``key`` column means no keys.  ``timestamp``
        is timestamp[s/ms/us/ns] or integer ms (null or not given: now); ``headers``
        list<struct<key: string, value: binary>>; ``partition`` an int for every row or an
        integer column (null: placed as send() places it: murmur2 of the key, else the
        sticky partition).  Records are built straight from the columns, a buffer per batch,
        and go through the same accumulator and Sender as send()'s (batch.size, buffer.memory,
        idempotence, transactions, retries, delivery.timeout.ms).  Every check is made
        before the first row is queued (raises as send() does); ``future.get(timeout)``
        returns each row's partition and offset (ArrowDelivery) or raises ArrowSendError
        naming the failed rows.  Needs pyarrow and numpy (``pip install samsa[arrow]``).
        """
        if self._fork_generation != _fork_generation:
            raise ForkedClientError()
        if self._closed:
            raise ProducerClosedError("send_arrow() was called after close(); create a new producer")
        if self._sender.fatal_error is not None:
            raise self._failed_fatally()
        if self._transactional_id is not None:
            self._transaction_manager.fail_if_not_ready_for_send()  # type: ignore[union-attr]
        if self._has_interceptors:
            raise IllegalStateError("send_arrow() does not run interceptor.classes (they take one record "
                                    "at a time); use send() or send_many() with interceptors")
        # pyarrow and numpy are optional (the arrow extra): imported on first use.
        import numpy as np
        import pyarrow as pa

        from samsa.producer import arrow_batches as ab
        from samsa.records.arrow_records import ArrowRecords

        now = self._monotonic_ns() // 1_000_000
        keys, values, stamps, hs, parts = ab.resolve_columns(
            data, key, value, timestamp, headers, partition, self._time_ns() // 1_000_000)
        n = len(values)
        if not n:
            return ab.ArrowSendFuture(topic, 0, None, [])
        highest = parts if isinstance(parts, int) else None if parts is None else int(parts.max())
        view, remaining_ms = self._wait_on_metadata(topic, None if highest is None or highest < 0 else highest, now)
        self._appender.append(True)  # earlier send()s first
        chosen: np.ndarray | int
        if isinstance(parts, int):
            chosen = parts
        elif self._partitioner is not None:
            # A custom partitioner takes Python objects: one call per row.
            key_list = [None] * n if keys is None else keys.to_pylist()
            value_list = values.to_pylist()
            chosen = np.array([
                partition_for_record(topic, None if parts is None or parts[i] < 0 else int(parts[i]),
                                     key_list[i], value_list[i], view, self._partitioner, self._ignore_keys)
                for i in range(n)], np.int64)
        elif parts is None and (keys is None or self._ignore_keys):
            chosen = UNKNOWN_PARTITION  # every row to the sticky partition
        else:
            count = view.partition_count(topic)
            assert count  # _wait_on_metadata saw the topic
            chosen = (ab.key_partitions(keys, count) if keys is not None and not self._ignore_keys
                      else np.full(n, UNKNOWN_PARTITION, np.int64))
            if parts is not None:
                chosen = np.where(parts >= 0, parts, chosen)
        accumulator = self._accumulator
        sticky = None
        order = None
        groups: list[tuple[int, int, int]]
        if isinstance(chosen, int) or (chosen == chosen[0]).all():
            groups = [(int(chosen if isinstance(chosen, int) else chosen[0]), 0, n)]
        else:
            if (chosen == UNKNOWN_PARTITION).any():
                # Mixed with placed rows, the keyless ones all take the current sticky
                # partition (as send_many()), so each partition's rows keep the call's order.
                partitioner = accumulator.built_in_partitioner(topic)
                sticky = partitioner.peek_current_partition_info(view)
                chosen = np.where(chosen == UNKNOWN_PARTITION, sticky.partition, chosen)
            order = np.argsort(chosen, kind="stable")
            placed = chosen[order]
            cuts = np.flatnonzero(placed[1:] != placed[:-1]) + 1
            starts = np.concatenate(([0], cuts))
            ends = np.concatenate((cuts, [n]))
            groups = [(int(placed[a]), int(a), int(b)) for a, b in zip(starts, ends, strict=True)]
            take = pa.array(order)
            keys = None if keys is None else keys.take(take)
            values = values.take(take)
            hs = None if hs is None else hs.take(take)
            if not isinstance(stamps, int):
                stamps = stamps[order]
        records = ArrowRecords(keys, values, hs, stamps)
        largest = int(records.bounds.max())
        if largest > self._max_record_size:
            self._record_too_large(largest)
        segments: list[Any] = []
        for p, lo, hi in groups:
            accumulator.append_run(topic, p, ab.ArrowRun(records, lo, hi, segments), hi - lo,
                                   remaining_ms, now, view, self._wakeup_sender)
        if sticky is not None:
            # Count what went to the sticky partition (roughly) so that it moves on in time.
            for p, lo, hi in groups:
                if p == sticky.partition:
                    keyless = int(np.maximum(records.value_sizes[lo:hi], 0).sum())
                    partitioner.update_partition_info(sticky, keyless, view, True)
        return ab.ArrowSendFuture(topic, n, order, segments)

    def _bytes_like_list(self, values: Sequence[Any]) -> list[Any] | None:
        """``values`` as they are for the columnar path when the default serializer would take
        every one as bytes (bytes-like, none None): ``b"".join`` checks that in C, ~3x faster
        than looking at each type, and Arrow reads their bytes as bytes() would; else None."""
        if not self._raw_values or type(values) is not list:
            return None
        join = b"".join
        try:
            for i in range(0, len(values), 512):  # small joins: heap memory, no fresh pages
                join(values[i:i + 512])
        except TypeError:
            return None
        return values

    @staticmethod
    def _serialize_all(topic: str, items: Sequence[Any], raw: bool, serialize: Any) -> list[Any]:
        """Serialized keys or values; bytes and None pass as they are with the default serializer."""
        if raw and set(map(type, items)) <= _RAW_TYPES:
            return items if type(items) is list else list(items)
        return [item if raw and (item is None or type(item) is bytes) else serialize(topic, item) for item in items]

    def _check_sizes(self, keys: list[Any] | None, values: list[Any], headers: list[Any] | None) -> None:
        """RecordTooLargeError for the first record over the limits (send()'s check, in bulk)."""
        longest = max(map(len, filter(None, values)), default=0)
        if keys is not None:
            longest += max(map(len, filter(None, keys)), default=0)
        if headers is None and RECORD_OVERHEAD_UPPER_BOUND + longest <= self._max_record_size:
            return
        for i, value in enumerate(values):
            size = estimate_size_upper_bound(None if keys is None else keys[i], value,
                                             None if headers is None else headers[i])
            if size > self._max_record_size:
                self._record_too_large(size)

    def _partitions_for_many(
        self, topic: str, partitions: Sequence[int | None] | None, keys: list[Any] | None,
        values: list[Any], view: ClusterView,
    ) -> list[int] | None:
        """Each record's partition as send() chooses it (UNKNOWN_PARTITION: sticky), or None
        when every record goes to the sticky partition."""
        partitioner = self._partitioner
        use_keys = keys is not None and not self._ignore_keys
        if partitioner is None and not use_keys and (partitions is None or partitions.count(None) == len(values)):
            return None
        if partitioner is None and partitions is None and use_keys:
            count = view.partition_count(topic)
            assert count  # _wait_on_metadata saw the topic
            unknown = UNKNOWN_PARTITION
            return [unknown if k is None else (murmur2(k) & 0x7FFFFFFF) % count for k in keys]  # type: ignore[union-attr]
        return [
            partition_for_record(topic, None if partitions is None else partitions[i],
                                 None if keys is None else keys[i], values[i], view, partitioner, self._ignore_keys)
            for i in range(len(values))
        ]

    def last_error(self) -> BaseException | None:
        """The error of the most recent batch that failed (None if none has): with send_many(),
        which has no futures, the error behind a growing record-error-total."""
        return self._metrics.last_error

    def produce(self, topic: str, value: Any = None, key: Any = None, **kwargs: Any) -> RecordFuture:
        """Alias of :meth:`send` (confluent-kafka's spelling)."""
        return self.send(topic, value, key, **kwargs)

    def _failed_fatally(self) -> KafkaError:
        """The error send() raises once the producer failed fatally (Java's
        TransactionManager.maybeFailWithError): of the fatal error's class, saying what to do."""
        fatal = self._sender.fatal_error
        kind = type(fatal) if isinstance(fatal, KafkaError) else KafkaError
        return kind(f"the producer failed earlier and sends nothing more: {fatal}; close it and "
                    "create a new producer once the cause is fixed")

    def _record_too_large(self, size: int) -> None:
        if size > self._max_request_size:
            raise RecordTooLargeError(
                f"The record is {size} bytes when serialized, which is larger than max.request.size="
                f"{self._max_request_size}; raise max.request.size (and the broker's message.max.bytes) "
                "or send smaller records"
            )
        raise RecordTooLargeError(
            f"The record is {size} bytes when serialized, which is larger than buffer.memory="
            f"{self._total_memory}; raise buffer.memory or send smaller records"
        )

    def _wait_on_metadata(self, topic: str, partition: int | None, now: int) -> tuple[ClusterView, float]:
        """The cluster view once ``topic`` (and ``partition``) is known, and what is left of
        max.block.ms.  Java's waitOnMetadata: request updates and wait, bounded."""
        metadata = self._metadata
        cluster = metadata.fetch()
        view = self._view
        if view is None or view.cluster is not cluster:
            view = self._view = ClusterView(cluster)
        count = view.partition_count(topic)
        if count is not None and (partition is None or partition < count):
            metadata.add(topic, now)
            return view, self._max_block_ms
        max_wait = self._max_block_ms
        monotonic = self._clock.monotonic
        deadline = monotonic() + max_wait / 1000.0
        metadata.add(topic, now)
        self._metrics.metadata_waits += 1
        while True:
            metadata.maybe_throw_for_topic(topic)  # invalid name, not authorized
            remaining = deadline - monotonic()
            if remaining <= 0:
                if count is not None and partition is not None:
                    raise KafkaTimeoutError(
                        f"partition {partition} of topic {topic!r}, which has only {count} partition(s), "
                        f"to appear in metadata; use a partition below {count}",
                        max_wait,
                    )
                raise KafkaTimeoutError(
                    f"topic {topic!r} to be present in metadata (Topic {topic} not present in metadata after "
                    f"{max_wait} ms); check that bootstrap.servers={','.join(self.config['bootstrap.servers'])} "
                    "is reachable and that the topic exists or can be auto-created",
                    max_wait,
                )
            if self._closed:
                raise ProducerClosedError("the producer was closed while send() waited for metadata")
            version = metadata.request_update_for_topic(topic)
            self._sender.wakeup()
            try:
                metadata.await_update(version, remaining * 1000.0)
            except KafkaTimeoutError:
                continue  # the next round raises the error that says what to check
            cluster = metadata.fetch()
            view = self._view = ClusterView(cluster)
            count = view.partition_count(topic)
            if count is not None and (partition is None or partition < count):
                left = max(0.0, deadline - monotonic()) * 1000.0
                return view, left

    # --- transactions (KIP-98) --------------------------------------------------------

    def init_transactions(self, timeout: float | None = None) -> None:
        """Get this transactional.id's producer id and epoch from its transaction coordinator,
        fencing any older producer with the same id and completing its open transaction.  Call
        once, before the first begin_transaction().  ``timeout`` in seconds (default
        max.block.ms); a timed-out call may be repeated and resumes."""
        tm = self._transactions("init_transactions")
        result = tm.initialize_transactions()
        self._await_transactional(result, "init_transactions", timeout)

    def begin_transaction(self) -> None:
        """Start a transaction: the records sent until commit_transaction() or
        abort_transaction() are written together or not at all."""
        self._transactions("begin_transaction").begin_transaction()

    def send_offsets_to_transaction(
        self, offsets: Mapping[Any, Any], group_metadata: Any, timeout: float | None = None
    ) -> None:
        """Commit the consumer offsets ``offsets`` (TopicPartition -> OffsetAndMetadata or an
        int offset: the next record to read) for the consumer group as part of the transaction:
        they become visible only if it commits.  ``group_metadata`` is the consumer's
        ``group_metadata()`` (KIP-447: the coordinator then fences a zombie consumer) or a bare
        group id."""
        tm = self._transactions("send_offsets_to_transaction")
        group = _group_metadata(group_metadata)
        normalized = _normalize_offsets(offsets)
        if not normalized:
            return
        result = tm.send_offsets_to_transaction(normalized, group)
        self._await_transactional(result, "send_offsets_to_transaction", timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush every record of the transaction, then commit it.  Raises the error of a
        record or request that failed (the transaction must then be aborted, or, for
        ProducerFencedError, the producer closed).  A timed-out call may be repeated and
        resumes."""
        tm = self._transactions("commit_transaction")
        result = tm.begin_commit()
        self._await_transactional(result, "commit_transaction", timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: records not yet sent fail with TransactionAbortedError and
        none of its records or offsets become visible to read_committed consumers.  The way
        out of an abortable error; a timed-out call may be repeated and resumes."""
        tm = self._transactions("abort_transaction")
        result = tm.begin_abort()
        self._await_transactional(result, "abort_transaction", timeout)

    def _transactions(self, operation: str) -> TransactionManager:
        if self._fork_generation != _fork_generation:
            raise ForkedClientError()
        tm = self._transaction_manager
        if self._transactional_id is None or tm is None:
            raise IllegalStateError(
                f"{operation}() needs a transactional producer; set transactional.id in its config")
        if self._closed:
            raise ProducerClosedError(f"{operation}() was called after close(); create a new producer")
        return tm

    def _await_transactional(self, result: TransactionalRequestResult, operation: str,
                             timeout: float | None) -> None:
        self._sender.wakeup()
        tm = self._transaction_manager
        assert tm is not None
        timeout_s = self._max_block_ms / 1000.0 if timeout is None else max(0.0, timeout)
        result.wait(timeout_s, lambda: tm.waiting_for(operation, self._describe_node))

    def _describe_node(self, node: Any) -> str:
        return f"node {node.id} ({node.host}:{node.port})"

    # --- flush, close, info -----------------------------------------------------------

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait (up to ``timeout`` seconds) until every record
        sent before the call is acknowledged or failed.  Raises KafkaTimeoutError on timeout."""
        if self._fork_generation != _fork_generation:
            raise ForkedClientError()
        if threading.current_thread() is self._sender:
            log.warning("flush() called from a send callback would deadlock; ignored")
            return
        self._appender.append_within(
            self._max_block_ms if timeout is None else min(self._max_block_ms, timeout * 1000.0), True)
        self._accumulator.begin_flush()
        self._sender.wakeup()
        self._accumulator.await_flush_completion(timeout)

    def close(self, timeout: float | None = None) -> None:
        """Send what is queued and stop, waiting at most ``timeout`` seconds (None: until done).

        Records not acknowledged when the time runs out (all of them with ``timeout=0``) fail
        with ProducerClosedError.  Never blocks much past ``timeout``.  A producer still open
        when the interpreter exits is closed with a timeout of EXIT_CLOSE_TIMEOUT_S.
        """
        with self._close_lock:
            if self._closed and not self._sender.is_alive():
                return
            self._closed = True
            self._queue.open = False
        monotonic = self._clock.monotonic
        deadline = None if timeout is None else monotonic() + max(0.0, timeout)
        sender = self._sender
        in_callback = threading.current_thread() is sender
        # Queued records go into batches first; those still waiting for memory when the time
        # is up fail with ProducerClosedError (the Sender's last append, once closed).
        if timeout is None or timeout > 0:
            self._appender.settle(timeout)
        if timeout is not None and timeout <= 0:
            sender.force_close()
        else:
            sender.initiate_close()
        if not in_callback and sender.is_alive():
            sender.join(None if deadline is None else max(0.0, deadline - monotonic()))
            if sender.is_alive():
                log.warning("Producer %s: close() timed out; failing records not yet acknowledged", self.client_id)
                sender.force_close()
                # Give the Sender a moment to fail the futures; never much past the timeout.
                sender.join(0.05 if timeout is None or timeout <= 0 else min(0.5, timeout))
        elif in_callback:
            sender.force_close()
        self._finalizer.detach()
        _open_producers.discard(self)
        if not sender.is_alive():
            self._metadata.close()
        self._interceptors.close()
        if self._partitioner is not None and hasattr(self._partitioner, "close"):
            try:
                self._partitioner.close()
            except Exception:
                log.exception("Error closing the partitioner")
        log.debug("Producer %s closed", self.client_id)

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids (waits up to max.block.ms for its metadata)."""
        if self._closed:
            raise ProducerClosedError("partitions_for() was called after close()")
        view, _ = self._wait_on_metadata(topic, None, self._clock.milliseconds())
        return [p.partition for p in view.cluster.partitions_for_topic(topic)]

    def metrics(self) -> dict[str, Any]:
        """Counters and rates (Java's metric names where one exists)."""
        pool = self._accumulator.buffer_pool
        extra: dict[str, Any] = {
            "buffer-total-bytes": self._total_memory,
            "buffer-available-bytes": pool.available_memory(),
            "waiting-threads": pool.queued(),
            "requests-in-flight": self._client.in_flight_request_count(),
            "batches-incomplete": self._accumulator.incomplete_count(),
        }
        tm = self._transaction_manager
        if tm is not None:
            pid = tm.producer_id_and_epoch()
            extra["producer-id"] = pid.producer_id
            extra["producer-epoch"] = pid.epoch
        return self._metrics.snapshot(extra)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"KafkaProducer(client_id={self.client_id!r}, {state})"


_RAW_TYPES = {bytes, type(None)}


def _picker(indexes: list[int]) -> Callable[[Sequence[Any]], list[Any]]:
    """Items at ``indexes`` of a sequence, as a list (itemgetter runs in C)."""
    if len(indexes) == 1:
        index = indexes[0]
        return lambda items: [items[index]]
    getter = itemgetter(*indexes)
    return lambda items: list(getter(items))


class _ErrorOnlyCallback:
    """A delivery callback that passes only failures on: send_many()'s ``on_error``."""

    __slots__ = ("on_error",)

    def __init__(self, on_error: Callable[[BaseException], None]) -> None:
        self.on_error = on_error

    def __call__(self, metadata: RecordMetadata | None, error: BaseException | None) -> None:
        if error is not None:
            self.on_error(error)


class _InterceptorCallback:
    """Runs interceptors' on_acknowledgement, then the user's callback (Java's InterceptorCallback)."""

    __slots__ = ("callback", "interceptors")

    def __init__(self, callback: RecordCallback | None, interceptors: ProducerInterceptors) -> None:
        self.callback = callback
        self.interceptors = interceptors

    def __call__(self, metadata: RecordMetadata | None, error: BaseException | None) -> None:
        self.interceptors.on_acknowledgement(metadata, error)
        if self.callback is not None:
            self.callback(metadata, error)


def _network(cfg: ProducerConfig, clock: Time) -> tuple[Metadata, NetworkClient]:
    """Metadata and NetworkClient for the producer's settings, on the producer's clock."""
    metadata = Metadata(
        clock=clock.monotonic_ms,
        retry_backoff_ms=cfg["retry.backoff.ms"],
        retry_backoff_max_ms=cfg["retry.backoff.max.ms"],
        metadata_max_age_ms=cfg["metadata.max.age.ms"],
        metadata_max_idle_ms=cfg["metadata.max.idle.ms"],
    )
    client = NetworkClient.from_config(cfg, metadata, clock=clock.monotonic_ms)
    return metadata, client


class _GroupMetadata(NamedTuple):
    """What TxnOffsetCommit needs of a consumer's ConsumerGroupMetadata (KIP-447)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


def _group_metadata(value: Any) -> _GroupMetadata:
    """A ConsumerGroupMetadata (or anything with its attributes) or a bare group id; a bare
    id means generation -1 and no member, as Java's ConsumerGroupMetadata(groupId)."""
    if isinstance(value, str):
        group = _GroupMetadata(value)
    elif hasattr(value, "group_id"):
        group = _GroupMetadata(value.group_id, getattr(value, "generation_id", -1),
                               getattr(value, "member_id", "") or "", getattr(value, "group_instance_id", None))
    else:
        raise TypeError(
            f"group_metadata must be the consumer's group_metadata() or a group id, not {value!r}")
    if not group.group_id:
        raise ValueError("group_metadata has an empty group id; pass the consumer's group_metadata()")
    return group


def _normalize_offsets(offsets: Mapping[Any, Any]) -> dict[TopicPartition, tuple[int, str | None, int]]:
    """TopicPartition -> (offset, metadata, leader epoch or -1) from OffsetAndMetadata or int."""
    out: dict[TopicPartition, tuple[int, str | None, int]] = {}
    for tp, value in offsets.items():
        key = TopicPartition(tp[0], tp[1]) if not hasattr(tp, "topic") else TopicPartition(tp.topic, tp.partition)
        if isinstance(value, int):
            offset, metadata, epoch = value, "", None
        elif hasattr(value, "offset"):
            offset = value.offset
            metadata = getattr(value, "metadata", "")
            epoch = getattr(value, "leader_epoch", None)
        else:
            raise TypeError(f"the offset for {key} must be an OffsetAndMetadata or an int, not {value!r}")
        if offset < 0:
            raise ValueError(f"the offset for {key} is negative ({offset}); give the next offset to read")
        out[key] = (int(offset), metadata, -1 if epoch is None else int(epoch))
    return out
