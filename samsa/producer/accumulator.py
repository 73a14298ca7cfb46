"""RecordAccumulator: per-partition queues of batches between send() and the Sender thread.

The architecture of Kafka's Java ``RecordAccumulator`` (Kafka 4.x behaviour):

* ``append`` (one record) and ``append_many`` (a run of records) are thin callers of one
  routine, ``_append``; ``append_to_last`` is send()'s one-call fast path for the common
  case, ``_append``'s first step inlined (the last batch taking the record).  Per topic a
  dict partition -> deque
  of :class:`~samsa.producer.batch.ProducerBatch`, each deque with its own lock.  Try the
  deque's last batch under the lock; if it is full, reserve memory from the
  :class:`~samsa.producer.buffer_pool.BufferPool` *outside* the lock (this may block up to
  max.block.ms), then re-lock and retry the last batch before creating a new one, so that
  concurrent appenders do not leave half-empty batches behind.  Records without a partition
  (``UNKNOWN_PARTITION``) go to the topic's sticky partition
  (:class:`~samsa.producer.partitioner.BuiltInPartitioner`), validated again under the lock.
  ``abort_on_new_batch=True`` returns before creating a batch (for custom partitioners that
  want to choose again).  The result says whether a batch filled up or was created: the
  producer then wakes the Sender.
* ``ready(cluster, now_ms)`` (Sender): leaders of partitions with a sendable first batch
  (full, linger.ms expired, memory exhausted, flushing, closing; not while retry-backing-off
  or muted), the delay until the next check, and topics with unknown leaders.  It also
  rebuilds the adaptive partitioner's load stats from queue lengths.  Unlike Java, ready()
  reads the deques without their locks, and drain() takes a first batch without it when
  a later one follows: only the Sender takes batches out, appenders fill only the last
  batch, and a Sender blocked on an appender's lock must win back the GIL as well.
* ``drain(cluster, node_ids, max_size, now_ms)`` (Sender): per node, up to max_size bytes of
  first batches, starting at a per-node rotating index so no partition starves; assigns
  producer id/epoch/sequence when a transaction manager (idempotence) is present; builds
  the batches' bytes.
* ``expired_batches(now_ms)``, ``reenqueue(batch, now_ms)`` (head of the deque, backoff via
  attempts), ``split_and_reenqueue(batch)``, ``mute/unmute`` (one in-flight batch per
  partition when ordering requires it), ``deallocate(batch)`` after completion,
  ``begin_flush/await_flush_completion``, ``abort_incomplete_batches`` for close(timeout=0).

All ``now_ms`` values come from the producer's one clock (``clock``, a
:class:`~samsa.net.clock.Time`: monotonic int ms; tests inject a MockClock).  The cluster view is the small :class:`AccumulatorCluster`
protocol; the transaction manager (idempotence) the :class:`TransactionManagerView` protocol.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from samsa.errors import (
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    ProducerClosedError,
)
from samsa.net.backoff import (
    ExponentialBackoff,  # re-exported: the producer's retry backoff
)
from samsa.net.clock import SYSTEM_CLOCK, Time
from samsa.producer.batch import (
    CompressionRatioEstimator,
    ProducerBatch,
    TopicPartition,
    estimate_size_upper_bound,
)
from samsa.producer.buffer_pool import BufferPool
from samsa.producer.future import ProduceRequestResult, RecordCallback, RecordFuture
from samsa.producer.partitioner import (
    UNKNOWN_PARTITION,
    BuiltInPartitioner,
    ClusterView,
    StickyPartitionInfo,
)
from samsa.records.batch_header import NO_SEQUENCE, Compression
from samsa.records.builder import Header, producer_batch_builder

__all__ = [
    "MAX_DELAY_MS",
    "AccumulatorCluster",
    "ExponentialBackoff",
    "NodeLatencyStats",
    "ProducerIdAndEpoch",
    "ReadyCheckResult",
    "RecordAccumulator",
    "RecordAppendResult",
    "RecordRun",
    "TransactionManagerView",
]

MAX_DELAY_MS = 2**63 - 1
"""Java's Long.MAX_VALUE: "no deadline" for next_ready_check_delay_ms and expiry times."""

RETRY_BACKOFF_EXP_BASE = 2
RETRY_BACKOFF_JITTER = 0.2
_NO_LEADER: tuple[None, None] = (None, None)  # AccumulatorCluster.partition_leaders() of an unknown partition


class AccumulatorCluster(ClusterView, Protocol):
    """The metadata the accumulator needs (partitioner's view plus leaders)."""

    def leader_for(self, topic: str, partition: int) -> int | None:
        """Node id of the partition's leader, None if unknown."""
        ...

    def leader_epoch_for(self, topic: str, partition: int) -> int | None:
        """The partition's leader epoch, None if unknown."""
        ...

    def partition_leaders(self, topic: str) -> Mapping[int, tuple[int | None, int | None]]:
        """Partition -> (leader node id, leader epoch), None where unknown; partitions the
        metadata does not know are missing.  ready() and drain() ask it once per topic."""
        ...

    def partitions_for_node(self, node_id: int) -> Sequence[tuple[str, int]]:
        """(topic, partition) pairs led by ``node_id``, in a stable order."""
        ...


class ProducerIdAndEpoch(NamedTuple):
    producer_id: int
    epoch: int

    def is_valid(self) -> bool:
        return self.producer_id >= 0


class TransactionManagerView(Protocol):
    """What drain()/reenqueue() ask the idempotence/transaction state (Java's TransactionManager)."""

    def producer_id_and_epoch(self) -> ProducerIdAndEpoch: ...

    def is_transactional(self) -> bool: ...

    def is_completing(self) -> bool: ...

    def is_send_to_partition_allowed(self, tp: TopicPartition) -> bool: ...

    def has_inflight_batches(self, tp: TopicPartition) -> bool: ...

    def has_stale_producer_id_and_epoch(self, tp: TopicPartition) -> bool: ...

    def has_unresolved_sequence(self, tp: TopicPartition) -> bool: ...

    def first_in_flight_sequence(self, tp: TopicPartition) -> int: ...

    def maybe_update_producer_id_and_epoch(self, tp: TopicPartition) -> None: ...

    def sequence_number(self, tp: TopicPartition) -> int: ...

    def increment_sequence_number(self, tp: TopicPartition, increment: int) -> None: ...

    def add_in_flight_batch(self, batch: ProducerBatch) -> None: ...

    def maybe_add_partition(self, tp: TopicPartition) -> None: ...


class RecordAppendResult(NamedTuple):
    future: RecordFuture | None
    batch_is_full: bool
    new_batch_created: bool
    abort_for_new_batch: bool
    appended_bytes: int
    partition: (
        int  # the partition the record went to (the sticky one for UNKNOWN_PARTITION)
    )


# Building the tuple directly skips NamedTuple.__new__'s Python-level argument handling.
_new_result: Callable[[tuple[Any, ...]], RecordAppendResult] = lambda values: (
    tuple.__new__(RecordAppendResult, values)
)


def _last_full(dq: deque[ProducerBatch]) -> bool:
    """Java's allBatchesFull: only the last batch can be incomplete."""
    if not dq:
        return True
    last = dq[-1]
    return last.appends_closed or last.size >= last.size_limit


def _no_wakeup() -> None:
    """append()'s wakeup: its caller wakes the Sender from the result."""


class _OneRecord:
    """append()'s record, as a run of one for :meth:`RecordAccumulator._append`."""

    __slots__ = ("callback", "future", "headers", "key", "timestamp", "value")

    def __init__(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | None,
        callback: RecordCallback | None,
    ) -> None:
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers
        self.callback = callback
        self.future: RecordFuture | None = None

    def into(self, batch: ProducerBatch, start: int, end: int, now_ms: int) -> int:
        """Under the deque lock: append the record to ``batch``; the index after it if taken."""
        future = batch.try_append(self.timestamp, self.key, self.value, self.headers, self.callback, now_ms)
        if future is None:
            return start
        self.future = future
        return start + 1

    def upper_bound(self, index: int) -> int:
        return estimate_size_upper_bound(self.key, self.value, self.headers)


class _RecordRun:
    """append_many()'s columns of records, appended in runs for :meth:`RecordAccumulator._append`."""

    __slots__ = ("callback", "headers", "keys", "timestamps", "values")

    future = None  # no per-record futures

    def __init__(
        self,
        timestamps: int | Sequence[int | None],
        keys: Sequence[bytes | None] | None,
        values: Sequence[bytes | None],
        headers: Sequence[Sequence[Header] | None] | None,
        callback: RecordCallback | None,
    ) -> None:
        self.timestamps = timestamps
        self.keys = keys
        self.values = values
        self.headers = headers
        self.callback = callback

    def into(self, batch: ProducerBatch, start: int, end: int, now_ms: int) -> int:
        """Under the deque lock: records ``start`` .. into ``batch``; the first one not taken."""
        builder = batch.builder
        before = builder.record_count
        keys, values, timestamps = self.keys, self.values, self.timestamps
        stop = builder.append_many(timestamps, keys, values, self.headers, start, end)
        if stop > start:
            batch.last_append_ms = now_ms
            batch.size = builder.estimated_size
            callback = self.callback
            if callback is not None:
                first_key = None if keys is None else keys[start]
                first_value = values[start]
                ts = timestamps if isinstance(timestamps, int) else timestamps[start]
                batch.thunks.append((callback, RecordFuture(
                    batch.result, before, -1 if ts is None else ts,
                    -1 if first_key is None else len(first_key),
                    -1 if first_value is None else len(first_value),
                )))
        return stop

    def upper_bound(self, index: int) -> int:
        return estimate_size_upper_bound(
            None if self.keys is None else self.keys[index], self.values[index],
            None if self.headers is None else self.headers[index],
        )


# Below this many values an Arrow array costs more than it saves.
_COLUMNAR_MIN_RECORDS = 256
_arrow_missing = False


class RecordRun(Protocol):
    """Records :meth:`RecordAccumulator._append` takes in runs: :class:`_OneRecord`,
    :class:`_RecordRun`, or send_arrow's ArrowRun (samsa.producer.arrow_batches)."""

    @property
    def future(self) -> RecordFuture | None: ...

    def into(self, batch: ProducerBatch, start: int, end: int, now_ms: int) -> int:
        """Under the deque lock: records ``start`` .. ``end - 1`` into ``batch`` until one does
        not fit; the index of the first record not appended."""
        ...

    def upper_bound(self, index: int) -> int:
        """estimate_size_upper_bound of record ``index`` (a new batch is at least this big)."""
        ...


class ReadyCheckResult(NamedTuple):
    ready_nodes: set[int]
    next_ready_check_delay_ms: float  # the retry backoff has jitter
    unknown_leader_topics: set[str]


class NodeLatencyStats:
    """When a node last had data ready and last could take it (partitioner.availability.timeout.ms)."""

    __slots__ = ("drain_time_ms", "ready_time_ms")

    def __init__(self, now_ms: int) -> None:
        self.ready_time_ms = now_ms
        self.drain_time_ms = now_ms


class _PartitionDeque(deque[ProducerBatch]):
    """A partition's batches plus the lock that guards them (Java synchronizes on the deque)."""

    __slots__ = ("lock", "topic_partition")

    def __init__(self, topic_partition: TopicPartition) -> None:
        super().__init__()
        self.lock = threading.Lock()
        # Shared by the partition's batches (one object fewer per batch for the cyclic GC).
        self.topic_partition = topic_partition


class _TopicInfo:
    __slots__ = ("batches", "partitioner")

    def __init__(self, partitioner: BuiltInPartitioner) -> None:
        self.batches: dict[int, _PartitionDeque] = {}
        self.partitioner = partitioner


class _IncompleteBatches:
    """Batches appended but not yet completed and deallocated (sent or not)."""

    __slots__ = ("_batches", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._batches: set[ProducerBatch] = set()

    def add(self, batch: ProducerBatch) -> None:
        with self._lock:
            self._batches.add(batch)

    def remove(self, batch: ProducerBatch) -> None:
        with self._lock:
            try:
                self._batches.remove(batch)
            except KeyError:
                raise IllegalStateError(
                    f"{batch!r} is not an incomplete batch (deallocated twice?)"
                ) from None

    def copy_all(self) -> list[ProducerBatch]:
        with self._lock:
            return list(self._batches)

    def request_results(self) -> list[ProduceRequestResult]:
        with self._lock:
            return [batch.result for batch in self._batches]

    def __len__(self) -> int:
        return len(self._batches)


class RecordAccumulator:
    """Queues records per partition into batches for the Sender; see the module docstring."""

    def __init__(
        self,
        batch_size: int,
        buffer_pool: BufferPool,
        *,
        compression: Compression | str = Compression.NONE,
        compression_level: int | None = None,
        linger_ms: int = 5,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        delivery_timeout_ms: int = 120000,
        enable_adaptive_partitioning: bool = True,
        partition_availability_timeout_ms: int = 0,
        transaction_manager: TransactionManagerView | None = None,
        clock: Time = SYSTEM_CLOCK,
    ) -> None:
        if isinstance(compression, str):
            compression = Compression[compression.upper()]
        self._batch_size = max(1, batch_size)
        self._free = buffer_pool
        self._compression = Compression(compression)
        self._compression_level = compression_level
        self._linger_ms = linger_ms
        self._retry_backoff = ExponentialBackoff(
            retry_backoff_ms,
            RETRY_BACKOFF_EXP_BASE,
            retry_backoff_max_ms,
            RETRY_BACKOFF_JITTER,
        )
        self._delivery_timeout_ms = delivery_timeout_ms
        self._adaptive = enable_adaptive_partitioning
        self._availability_timeout_ms = partition_availability_timeout_ms
        self._tm = transaction_manager
        # Only a transactional producer's partitions join a transaction as batches open.
        self._txn_tm = transaction_manager if transaction_manager is not None and transaction_manager.is_transactional() else None
        # Without idempotence no field of an uncompressed batch changes after its last append
        # (drain stamps no producer id or sequence), so a batch that fills up is built (header,
        # CRC) by the appending thread, its bytes still in cache, instead of on the Sender
        # thread when drained, when they have gone cold: ~1 us rather than ~4 for 16 KiB.
        self._build_when_full = transaction_manager is None and self._compression == Compression.NONE
        self._clock = clock
        self._estimator = CompressionRatioEstimator()
        self._topics: dict[str, _TopicInfo] = {}
        self._topics_lock = threading.Lock()
        self._node_stats: dict[int, NodeLatencyStats] = {}
        self._incomplete = _IncompleteBatches()
        # One element per append in flight: list.append/pop are atomic, += on an int is not.
        self._appends_in_progress: list[None] = []
        self._flushes_lock = threading.Lock()
        self._flushes_in_progress = 0
        self._closed = False
        # Sender-thread only state.
        self._muted: set[tuple[str, int]] = set()
        self._nodes_drain_index: dict[int, int] = {}
        self._next_batch_expiry_time_ms = MAX_DELAY_MS

    @classmethod
    def from_config(
        cls,
        config: Mapping[str, Any],
        transaction_manager: TransactionManagerView | None = None,
        clock: Time = SYSTEM_CLOCK,
    ) -> RecordAccumulator:
        """Build from a :class:`~samsa.producer.config.ProducerConfig`, with its own BufferPool."""
        batch_size = max(1, config["batch.size"])
        codec = config["compression.type"]
        level_key = f"compression.{codec}.level"
        return cls(
            batch_size,
            BufferPool(config["buffer.memory"], batch_size, clock),
            compression=codec,
            compression_level=config.get(level_key),
            linger_ms=config["linger.ms"],
            retry_backoff_ms=config["retry.backoff.ms"],
            retry_backoff_max_ms=config["retry.backoff.max.ms"],
            delivery_timeout_ms=config["delivery.timeout.ms"],
            enable_adaptive_partitioning=config[
                "partitioner.adaptive.partitioning.enable"
            ],
            partition_availability_timeout_ms=config[
                "partitioner.availability.timeout.ms"
            ],
            transaction_manager=transaction_manager,
            clock=clock,
        )

    # -- bookkeeping --------------------------------------------------------------------------

    @property
    def buffer_pool(self) -> BufferPool:
        return self._free

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def delivery_timeout_ms(self) -> int:
        return self._delivery_timeout_ms

    @property
    def compression_ratio_estimator(self) -> CompressionRatioEstimator:
        return self._estimator

    def _topic_info(self, topic: str) -> _TopicInfo:
        info = self._topics.get(topic)
        if info is None:
            with self._topics_lock:
                info = self._topics.get(topic)
                if info is None:
                    info = _TopicInfo(BuiltInPartitioner(topic, self._batch_size))
                    # Replace the dict (copy-on-write): readers iterate without locks.
                    topics = dict(self._topics)
                    topics[topic] = info
                    self._topics = topics
        return info

    def _deque_for(self, topic: str, info: _TopicInfo, partition: int) -> _PartitionDeque:
        dq = info.batches.get(partition)
        if dq is None:
            with self._topics_lock:
                dq = info.batches.get(partition)
                if dq is None:
                    dq = _PartitionDeque(TopicPartition(topic, partition))
                    batches = dict(info.batches)
                    batches[partition] = dq
                    info.batches = batches
        return dq

    def get_deque(self, topic: str, partition: int) -> deque[ProducerBatch] | None:
        info = self._topics.get(topic)
        if info is None:
            return None
        return info.batches.get(partition)

    def _get_or_create_deque(self, tp: tuple[str, int]) -> _PartitionDeque:
        return self._deque_for(tp[0], self._topic_info(tp[0]), tp[1])

    def built_in_partitioner(self, topic: str) -> BuiltInPartitioner:
        return self._topic_info(topic).partitioner

    # -- append (caller's thread) ---------------------------------------------------------------

    def append(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | None,
        callback: RecordCallback | None,
        max_time_to_block_ms: float,
        abort_on_new_batch: bool,
        now_ms: int,
        cluster: ClusterView,
    ) -> RecordAppendResult:
        """Add a record to its partition's last batch or a new one; see the module docstring.

        ``partition`` may be UNKNOWN_PARTITION (-1): the topic's sticky partition is used.
        Raises BufferExhaustedError after ``max_time_to_block_ms`` without memory, and
        ProducerClosedError once the accumulator is closed.
        """
        return self._append(
            topic, partition, _OneRecord(timestamp, key, value, headers, callback), 1,
            max_time_to_block_ms, now_ms, cluster, _no_wakeup, abort_on_new_batch,
        )

    def append_to_last(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | None,
        callback: RecordCallback | None,
        now_ms: int,
        cluster: ClusterView,
        wakeup: Callable[[], object],
    ) -> RecordFuture | None:
        """send()'s fast path: :meth:`_append`'s first step (the partition's open last batch
        takes the record) for one record, inlined, in one call.

        Returns the record's future, or None when :meth:`append` must run instead (no open
        batch, a sticky partition switch pending, closed).  Calls ``wakeup()`` where append()
        would report batch_is_full (the batch filled up, or more than one is queued).  Never
        blocks; no result tuple per record.  Fullness and size are plain batch attributes.
        """
        info = self._topics.get(topic)
        if info is None:
            return None
        sticky: StickyPartitionInfo | None
        if partition == UNKNOWN_PARTITION:
            partitioner = info.partitioner
            sticky = partitioner.sticky_info
            if sticky is None:
                return None
            dq = info.batches.get(sticky.partition)
        else:
            sticky = None
            dq = info.batches.get(partition)
        if not dq:
            return None
        # acquire/release rather than ``with``: the with statement looks up and binds
        # __enter__ and __exit__ on every record (about twice the cost on CPython 3.11).
        lock = dq.lock
        lock.acquire()
        try:
            if not dq or self._closed:
                return None
            last = dq[-1]
            before = last.size
            if (
                last.appends_closed
                or before >= last.size_limit
                or (sticky is not None and partitioner.sticky_info is not sticky)
            ):
                return None
            # ProducerBatch.try_append, inlined: this runs for nearly every record.
            builder = last.builder
            delta = builder.append(timestamp, key, value, headers)
            if delta is None:
                last.appends_closed = True
                return None
            future = last.result.record_future(delta, timestamp, key, value)
            if callback is not None:
                last.thunks.append((callback, future))
            last.last_append_ms = now_ms
            last.size = size = builder.estimated_size
            full = size >= last.size_limit
            if sticky is not None:
                produced = sticky.produced_bytes = sticky.produced_bytes + size - before
                # Switch once batch.size bytes went here and the last batch is full, or at
                # twice batch.size (update_partition_info's rule, checked inline).
                limit = partitioner.sticky_batch_size
                if produced >= limit and (full or produced >= 2 * limit):
                    partitioner.update_partition_info(sticky, 0, cluster, full)
            if full or len(dq) > 1:
                wakeup()
            return future
        finally:
            lock.release()

    def append_many(
        self,
        topic: str,
        partition: int,
        timestamps: int | Sequence[int | None],
        keys: Sequence[bytes | None] | None,
        values: Sequence[bytes | None],
        headers: Sequence[Sequence[Header] | None] | None,
        max_time_to_block_ms: float,
        now_ms: int,
        cluster: ClusterView,
        wakeup: Callable[[], object],
        callback: RecordCallback | None = None,
    ) -> None:
        """Append all ``values`` (with their keys, headers, timestamps) in order, no futures.

        ``partition`` may be UNKNOWN_PARTITION: the records then follow the topic's sticky
        partition, which may switch whenever a batch fills up.  Runs of records go into the
        partition's last batch under one lock hold (``RecordBatchBuilder.append_many``); new
        batches take memory from the BufferPool as :meth:`append` does, blocking at most
        ``max_time_to_block_ms`` in all.  ``callback``, if given, is added once per batch a
        run went into (called with the run's first record).  Wakes the Sender whenever a
        batch filled up or was created.
        """
        if not values:
            return
        result = self._append(
            topic, partition, _RecordRun(timestamps, keys, values, headers, callback), len(values),
            max_time_to_block_ms, now_ms, cluster, wakeup, False,
        )
        if result[1] or result[2]:
            wakeup()

    def takes_columnar(self, count: int) -> bool:
        """Whether :meth:`columnar_run` would take ``count`` values: uncompressed batches, enough
        values for an Arrow array to pay, pyarrow installed (as far as known)."""
        return self._compression == Compression.NONE and count >= _COLUMNAR_MIN_RECORDS and not _arrow_missing

    def columnar_run(self, values: Sequence[bytes | bytearray | memoryview | None], timestamp: int,
                     callback: RecordCallback | None) -> tuple[RecordRun, int] | None:
        """send_many()'s keyless, headerless values of one timestamp as Arrow rows for
        :meth:`append_run`, with the largest record's estimate_size_upper_bound: uncompressed,
        such rows fill batches laid out ahead, a copy per batch rather than a loop per record
        (samsa.records.arrow_records).  For callers that checked :meth:`takes_columnar`; None
        where it cannot be done (no pyarrow, values Arrow does not take as binary)."""
        global _arrow_missing
        try:
            import pyarrow as pa

            from samsa.producer.arrow_batches import ArrowRun
            from samsa.records.arrow_records import ArrowRecords, as_binary
        except ImportError:
            _arrow_missing = True
            return None
        try:
            # binary, then widened: pyarrow converts a list to large_binary ~3.5x slower.
            column = pa.array(values, pa.binary())
            if isinstance(column, pa.ChunkedArray):  # past 2 GiB
                column = pa.array(values, pa.large_binary())
        except (pa.ArrowException, TypeError):
            return None
        records = ArrowRecords(None, as_binary(column, "value"), None, timestamp)
        return ArrowRun(records, 0, len(values), [], callback), int(records.bounds.max())

    def append_run(
        self,
        topic: str,
        partition: int,
        run: RecordRun,
        count: int,
        max_time_to_block_ms: float,
        now_ms: int,
        cluster: ClusterView,
        wakeup: Callable[[], object],
    ) -> None:
        """Append ``count`` records that ``run`` encodes itself (send_arrow's columns), as
        :meth:`append_many` appends its lists: in order, batches as full as batch.size allows,
        the sticky partition followed for UNKNOWN_PARTITION, the Sender woken."""
        if count <= 0:
            return
        result = self._append(topic, partition, run, count, max_time_to_block_ms, now_ms, cluster, wakeup, False)
        if result[1] or result[2]:
            wakeup()

    def _append(
        self,
        topic: str,
        partition: int,
        records: RecordRun,
        end: int,
        max_time_to_block_ms: float,
        now_ms: int,
        cluster: ClusterView,
        wakeup: Callable[[], object],
        abort_on_new_batch: bool,
    ) -> RecordAppendResult:
        """The append routine: records ``0 .. end`` of ``records`` in order into the partition's
        batches (Java's RecordAccumulator.append, looping for a run of records).

        Each round: pick the partition (the sticky one for UNKNOWN_PARTITION), fill its open
        last batch under the deque lock; if records are left, allocate memory outside the lock
        (blocking at most ``max_time_to_block_ms`` over all rounds), then, under the lock again,
        open a new batch unless another thread did meanwhile.  ``wakeup()`` is called for every
        batch that filled up or was created before the last round; the result describes the
        last round (its ``future`` is the single record's, None for a run).
        """
        info = self._topics.get(topic)
        if info is None:
            info = self._topic_info(topic)
        partitioner = info.partitioner
        deadline = now_ms + max_time_to_block_ms
        i = 0
        in_progress = self._appends_in_progress
        in_progress.append(None)
        reserved = 0  # buffer.memory taken for a new batch, not yet the batch's
        try:
            while True:
                sticky: StickyPartitionInfo | None
                if partition == UNKNOWN_PARTITION:
                    sticky = partitioner.sticky_info
                    if sticky is None:
                        sticky = partitioner.peek_current_partition_info(cluster)
                    effective = sticky.partition
                else:
                    sticky = None
                    effective = partition
                dq = info.batches.get(effective)
                if dq is None:
                    dq = self._deque_for(topic, info, effective)
                with dq.lock:
                    if self._closed:
                        raise ProducerClosedError("Producer closed while send in progress")
                    if sticky is not None and partitioner.partition_changed(sticky, _last_full(dq), cluster):
                        continue
                    if dq:
                        last = dq[-1]
                        before = last.size
                        if not last.appends_closed and before < last.size_limit:
                            start = i
                            i = records.into(last, i, end, now_ms)
                            if i < end:
                                last.appends_closed = True  # record i did not fit
                                if self._build_when_full:
                                    last.builder.build_buffer()
                            if i > start:
                                size = last.size
                                if sticky is not None:
                                    partitioner.update_partition_info(sticky, size - before, cluster,
                                                                      _last_full(dq))
                                if i >= end:
                                    full = len(dq) > 1 or size >= last.size_limit
                                    return _new_result((records.future, full, False, False,
                                                        size - before, effective))
                                wakeup()
                                continue
                            wakeup()  # closed without taking a record: ready to send

                if abort_on_new_batch:
                    return _new_result((None, False, False, True, 0, effective))

                if not reserved:
                    size = max(self._batch_size, records.upper_bound(i))
                    # May block for max.block.ms; no deque lock is held here.
                    self._free.reserve(size, max(0, deadline - self._clock.milliseconds()))
                    reserved = size
                    now_ms = self._clock.milliseconds()

                with dq.lock:
                    if self._closed:
                        raise ProducerClosedError("Producer closed while send in progress")
                    if sticky is not None and partitioner.partition_changed(sticky, _last_full(dq), cluster):
                        continue
                    if not _last_full(dq):
                        continue  # another thread opened a batch meanwhile; fill that one first
                    batch = ProducerBatch(
                        dq.topic_partition,
                        producer_batch_builder(self._compression, self._compression_level, reserved,
                                               self._estimator.estimation(topic, self._compression)),
                        now_ms,
                        initial_capacity=reserved,
                    )
                    start = i
                    i = records.into(batch, i, end, now_ms)
                    if i == start:  # the records builder always takes a first record
                        raise IllegalStateError(f"a new batch for {topic}-{effective} refused its first record")
                    reserved = 0  # the batch's now, given back by deallocate()
                    dq.append(batch)
                    self._incomplete.add(batch)
                    if self._txn_tm is not None:
                        # A transaction's partition joins it before its first batch is drained.
                        self._txn_tm.maybe_add_partition(batch.topic_partition)
                    if i < end:
                        batch.appends_closed = True
                        if self._build_when_full:
                            batch.builder.build_buffer()
                    if sticky is not None:
                        partitioner.update_partition_info(sticky, batch.size, cluster, _last_full(dq))
                    if i >= end:
                        return _new_result((records.future, len(dq) > 1 or batch.is_full(), True, False,
                                            batch.size, effective))
                wakeup()
        finally:
            if reserved:
                self._free.deallocate(None, reserved)
            in_progress.pop()


    # -- ready (Sender thread) ----------------------------------------------------------------

    def ready(self, cluster: AccumulatorCluster, now_ms: int) -> ReadyCheckResult:
        """Nodes with sendable data, ms until the next check is due, topics without leaders."""
        ready_nodes: set[int] = set()
        unknown_leader_topics: set[str] = set()
        next_delay: float = MAX_DELAY_MS
        exhausted = self._free.queued() > 0
        for topic, info in self._topics.items():
            next_delay = self._partition_ready(
                cluster,
                now_ms,
                topic,
                info,
                next_delay,
                ready_nodes,
                unknown_leader_topics,
                exhausted,
            )
        return ReadyCheckResult(ready_nodes, next_delay, unknown_leader_topics)

    def _partition_ready(
        self,
        cluster: AccumulatorCluster,
        now_ms: int,
        topic: str,
        info: _TopicInfo,
        next_delay: float,
        ready_nodes: set[int],
        unknown_leader_topics: set[str],
        exhausted: bool,
    ) -> float:
        batches = info.batches
        queue_sizes: list[int] | None = None
        partition_ids: list[int] | None = None
        if self._adaptive:
            count = cluster.partition_count(topic)
            # Weigh only once every partition has a deque: a partition missing from the
            # table could never be picked.
            if count is not None and len(batches) >= count:
                queue_sizes = [0] * len(batches)
                partition_ids = [0] * len(batches)
        leaders = cluster.partition_leaders(topic)
        muted = self._muted
        qi = -1
        for partition, dq in batches.items():
            leader, leader_epoch = leaders.get(partition, _NO_LEADER)
            if leader is not None and queue_sizes is not None:
                qi += 1
                partition_ids[qi] = partition  # type: ignore[index]
                queue_sizes[qi] = 0
            if not dq:
                continue
            # Read without the deque's lock, unlike Java's ready(): only this (the Sender)
            # thread takes batches out of a deque or changes a queued batch's retry and epoch
            # fields, so dq[0] stays put; an appending thread changes only the last batch's
            # size and appends_closed, and wakes the Sender once it filled or closed one, so
            # a stale read only makes the batch ready at that wakeup.  Waiting for a lock an
            # appending thread holds would also cost the Sender the GIL (~1 ms per wait).
            batch = dq[0]
            # The batch's waited_time_ms, maybe_update_leader_epoch and is_full, inline
            # (the Sender runs this for every partition before every request).
            waited = max(now_ms - batch.last_attempt_ms, 0)
            if leader_epoch is not None and leader_epoch != batch.current_leader_epoch:
                batch.maybe_update_leader_epoch(leader_epoch)
            attempts = batch.attempts
            # (_should_backoff is False for a first attempt, the common case.)
            backing_off = attempts > 0 and self._should_backoff(
                batch.has_leader_changed_for_the_ongoing_retry(), batch, waited
            )
            dq_size = len(dq)
            full = dq_size > 1 or batch.appends_closed or batch.size >= batch.size_limit
            if leader is None:
                unknown_leader_topics.add(topic)
                continue
            if queue_sizes is not None:
                queue_sizes[qi] = dq_size
            if self._availability_timeout_ms > 0:
                stats = self._node_stats.get(leader)
                if (
                    stats is not None
                    and stats.ready_time_ms - stats.drain_time_ms
                    > self._availability_timeout_ms
                ):
                    qi -= 1  # leave this partition out of the adaptive table
            if leader in ready_nodes or (topic, partition) in muted:
                continue
            time_to_wait = (
                self._retry_backoff.backoff(attempts - 1 if attempts > 0 else 0)
                if backing_off
                else self._linger_ms
            )
            sendable = (
                full
                or waited >= time_to_wait
                or exhausted
                or self._closed
                or self._flushes_in_progress > 0
                or (self._tm is not None and self._tm.is_completing())
            )
            if sendable and not backing_off:
                ready_nodes.add(leader)
            else:
                # Conservative: a node may turn out ready sooner through another partition.
                next_delay = min(max(time_to_wait - waited, 0), next_delay)
        info.partitioner.update_partition_load_stats(queue_sizes, partition_ids, qi + 1)
        return next_delay

    def _should_backoff(
        self, leader_changed: bool, batch: ProducerBatch, waited_ms: int
    ) -> bool:
        attempts = batch.attempts
        if attempts == 0 or leader_changed:
            return False
        return waited_ms < self._retry_backoff.backoff(attempts - 1)

    def has_undrained(self) -> bool:
        for info in self._topics.values():
            for dq in info.batches.values():
                if dq:
                    return True
        return False

    # -- drain (Sender thread) ----------------------------------------------------------------

    def drain(
        self,
        cluster: AccumulatorCluster,
        nodes: Iterable[int],
        max_size: int,
        now_ms: int,
    ) -> dict[int, list[ProducerBatch]]:
        """Per node, first batches of its partitions totalling at most ``max_size`` bytes
        (one batch always goes, even if larger)."""
        return {
            node: self._drain_batches_for_one_node(cluster, node, max_size, now_ms)
            for node in nodes
        }

    def _drain_batches_for_one_node(
        self, cluster: AccumulatorCluster, node: int, max_size: int, now_ms: int
    ) -> list[ProducerBatch]:
        ready: list[ProducerBatch] = []
        parts = cluster.partitions_for_node(node)
        n = len(parts)
        if not n:
            return ready
        size = 0
        start = self._nodes_drain_index.get(node, 0) % n
        tm = self._tm
        muted = self._muted
        topics = self._topics
        leaders: Mapping[int, tuple[int | None, int | None]] = {}
        leaders_topic = None
        index = start
        for i in range(n):
            index = (start + i) % n
            part = parts[index]
            if part in muted:
                continue
            topic, partition = part
            info = topics.get(topic)
            dq = info.batches.get(partition) if info is not None else None
            if not dq:  # no deque, or an empty one (checked again under the lock)
                continue
            if topic != leaders_topic:
                leaders, leaders_topic = cluster.partition_leaders(topic), topic
            # Only this thread takes batches out, so a deque of two or more keeps its head:
            # appending threads fill only the last batch, and need not be waited for (that
            # wait would cost the Sender the GIL too).  A lone batch may be being filled.
            lock = dq.lock if len(dq) == 1 else None
            if lock is not None:
                lock.acquire()
            try:
                first = dq[0]  # (not empty: checked above, and only this thread takes out)
                leader_epoch = leaders.get(partition, _NO_LEADER)[1]
                if leader_epoch is not None and leader_epoch != first.current_leader_epoch:
                    first.maybe_update_leader_epoch(leader_epoch)
                if first.attempts and self._should_backoff(
                    first.has_leader_changed_for_the_ongoing_retry(),
                    first,
                    first.waited_time_ms(now_ms),
                ):
                    continue
                if size + first.builder.estimated_size > max_size and ready:
                    # A single batch larger than max_size still goes, alone.
                    break
                tp = first.topic_partition
                if tm is not None and self._should_stop_drain_batches_for_partition(
                    first, tp
                ):
                    break
                batch = dq.popleft()
                if tm is not None and not batch.has_sequence():
                    pid_epoch = tm.producer_id_and_epoch()
                    # A new epoch or id resets the partition's sequence; only with nothing in flight
                    # (guaranteed by _should_stop_drain_batches_for_partition).
                    tm.maybe_update_producer_id_and_epoch(tp)
                    batch.set_producer_state(
                        pid_epoch.producer_id,
                        pid_epoch.epoch,
                        tm.sequence_number(tp),
                        tm.is_transactional(),
                    )
                    tm.increment_sequence_number(tp, batch.record_count)
                    tm.add_in_flight_batch(batch)
            finally:
                if lock is not None:
                    lock.release()
            # Building (compression, CRC) happens outside the lock.
            size += len(batch.close(self._estimator))
            ready.append(batch)
            batch.drained_ms = max(batch.drained_ms, now_ms)  # batch.drained(now_ms), inline
        # Remember where we stopped so the next drain starts there (no partition starves).
        self._nodes_drain_index[node] = index
        return ready

    def _should_stop_drain_batches_for_partition(
        self, first: ProducerBatch, tp: TopicPartition
    ) -> bool:
        tm = self._tm
        assert tm is not None
        if not tm.is_send_to_partition_allowed(tp):
            return True
        if not tm.producer_id_and_epoch().is_valid():
            return True  # wait for InitProducerId
        if not first.has_sequence():
            if tm.has_inflight_batches(tp) and tm.has_stale_producer_id_and_epoch(tp):
                # New epoch/id: sequence 0 must not overtake batches still in flight.
                return True
            if tm.has_unresolved_sequence(tp):
                return True
        first_in_flight = tm.first_in_flight_sequence(tp)
        # A retried batch waits until it is the first in flight: one in-flight batch during retries.
        return (
            first_in_flight != NO_SEQUENCE
            and first.has_sequence()
            and first.base_sequence != first_in_flight
        )

    # -- expiry, retries, splitting (Sender thread) ----------------------------------------------

    def expired_batches(self, now_ms: int) -> list[ProducerBatch]:
        """Remove and return queued batches older than delivery.timeout.ms (head first)."""
        expired: list[ProducerBatch] = []
        timeout = self._delivery_timeout_ms
        for info in self._topics.values():
            for dq in info.batches.values():
                with dq.lock:
                    while dq:
                        batch = dq[0]
                        if batch.has_reached_delivery_timeout(now_ms, timeout):
                            dq.popleft()
                            batch.abort_record_appends()
                            expired.append(batch)
                        else:
                            self.maybe_update_next_batch_expiry_time(batch)
                            break
        return expired

    def next_expiry_time_ms(self) -> int:
        return self._next_batch_expiry_time_ms

    def reset_next_batch_expiry_time(self) -> None:
        self._next_batch_expiry_time_ms = MAX_DELAY_MS

    def maybe_update_next_batch_expiry_time(self, batch: ProducerBatch) -> None:
        self._next_batch_expiry_time_ms = min(
            self._next_batch_expiry_time_ms,
            batch.created_ms + self._delivery_timeout_ms,
        )

    def reenqueue(self, batch: ProducerBatch, now_ms: int) -> None:
        """Put a failed batch back at the head of its deque for a retry (after backoff)."""
        batch.reenqueued(now_ms)
        dq = self._get_or_create_deque(batch.topic_partition)
        with dq.lock:
            if self._tm is not None:
                self._insert_in_sequence_order(dq, batch)
            else:
                dq.appendleft(batch)

    def split_and_reenqueue(self, big_batch: ProducerBatch) -> int:
        """Split a batch the broker refused as too large; returns the number of new batches.

        The caller still deallocates ``big_batch``.
        """
        ratio = big_batch.builder.estimated_size / max(
            1, big_batch.builder.uncompressed_size
        )
        self._estimator.set_estimation(
            big_batch.topic, int(self._compression), max(1.0, ratio)
        )
        new_batches = big_batch.split(self._batch_size)
        dq = self._get_or_create_deque(big_batch.topic_partition)
        for batch in reversed(new_batches):
            self._incomplete.add(batch)
            with dq.lock:
                if self._tm is not None:
                    self._tm.add_in_flight_batch(batch)
                    self._insert_in_sequence_order(dq, batch)
                else:
                    dq.appendleft(batch)
        return len(new_batches)

    def _insert_in_sequence_order(
        self, dq: _PartitionDeque, batch: ProducerBatch
    ) -> None:
        """Re-enqueue keeping the deque ordered by sequence (several batches may come back)."""
        if batch.base_sequence == NO_SEQUENCE:
            raise IllegalStateError(
                f"re-enqueueing {batch!r} without a sequence although idempotence is enabled"
            )
        assert self._tm is not None
        if not self._tm.has_inflight_batches(batch.topic_partition):
            raise IllegalStateError(
                f"re-enqueueing {batch!r} (base sequence {batch.base_sequence}) which is not tracked as in flight"
            )
        ahead: list[ProducerBatch] = []
        while dq and dq[0].has_sequence() and dq[0].base_sequence < batch.base_sequence:
            ahead.append(dq.popleft())
        dq.appendleft(batch)
        for earlier in reversed(ahead):
            dq.appendleft(earlier)

    # -- ordering ------------------------------------------------------------------------------

    def mute_partition(self, tp: tuple[str, int]) -> None:
        self._muted.add((tp[0], tp[1]))

    def unmute_partition(self, tp: tuple[str, int]) -> None:
        self._muted.discard((tp[0], tp[1]))

    def is_muted(self, tp: tuple[str, int]) -> bool:
        return (tp[0], tp[1]) in self._muted

    # -- adaptive partitioning input from the Sender ----------------------------------------------

    def update_node_latency_stats(
        self, node_id: int, now_ms: int, can_drain: bool
    ) -> None:
        """Sender: a node had data ready (and could take it if ``can_drain``)."""
        if self._availability_timeout_ms <= 0:
            return
        stats = self._node_stats.get(node_id)
        if stats is None:
            stats = self._node_stats.setdefault(node_id, NodeLatencyStats(now_ms))
        if can_drain:
            stats.drain_time_ms = now_ms
        stats.ready_time_ms = now_ms

    def node_latency_stats(self, node_id: int) -> NodeLatencyStats | None:
        return self._node_stats.get(node_id)

    # -- completion, flush, close ------------------------------------------------------------------

    def deallocate(self, batch: ProducerBatch, wake: bool = True) -> None:
        """Forget a completed batch and return its memory (split batches own none).
        ``wake=False``: a thread waiting for memory is left to :meth:`wake_memory_waiter`
        (the Sender wakes it once per response, not once per batch)."""
        self._incomplete.remove(batch)
        if not batch.is_split_batch:
            self._free.deallocate(None, batch.initial_capacity, wake)

    def wake_memory_waiter(self) -> None:
        self._free.wake_waiter()

    def has_incomplete(self) -> bool:
        return len(self._incomplete) > 0

    def incomplete_count(self) -> int:
        return len(self._incomplete)

    def flush_in_progress(self) -> bool:
        return self._flushes_in_progress > 0

    def begin_flush(self) -> None:
        """Make every batch ready now (until await_flush_completion returns)."""
        with self._flushes_lock:
            self._flushes_in_progress += 1

    def await_flush_completion(self, timeout: float | None = None) -> None:
        """Wait until every batch incomplete at the call completes (``timeout`` in seconds)."""
        try:
            monotonic = self._clock.monotonic
            deadline = None if timeout is None else monotonic() + timeout
            for result in self._incomplete.request_results():
                remaining = None if deadline is None else max(0.0, deadline - monotonic())
                if not result.wait(remaining):
                    raise KafkaTimeoutError(
                        f"flush(): the batch for {result.topic}-{result.partition} and "
                        f"{len(self._incomplete) - 1} other batches to be acknowledged",
                        None if timeout is None else timeout * 1000.0,
                    )
        finally:
            with self._flushes_lock:
                self._flushes_in_progress -= 1

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """No more appends; every remaining batch becomes ready.  Wakes memory waiters."""
        self._closed = True
        self._free.close()

    def abort_incomplete_batches(self, error: BaseException | None = None) -> None:
        """close(timeout=0): fail every incomplete batch, sent or not (Sender thread)."""
        if error is None:
            error = ProducerClosedError(
                "Producer was closed forcefully before the record was acknowledged"
            )
        # Appends racing with close may still add a batch: repeat until none is in progress.
        while True:
            self._abort_batches(error)
            if not self._appends_in_progress:
                break
            time.sleep(0.001)
        self._abort_batches(error)
        with self._topics_lock:
            self._topics = {}

    def _abort_batches(self, error: BaseException) -> None:
        for batch in self._incomplete.copy_all():
            dq = self.get_deque(batch.topic, batch.partition)
            if dq is not None:
                with dq.lock:  # type: ignore[attr-defined]
                    batch.abort_record_appends()
                    try:
                        dq.remove(batch)
                    except ValueError:
                        pass  # in flight, not queued
            else:
                batch.abort_record_appends()
            if not batch.is_done():
                batch.abort(error)
            self.deallocate(batch)

    def abort_undrained_batches(self, error: KafkaError) -> None:
        """Fail the batches never sent (still queued); in-flight ones are left to complete."""
        for batch in self._incomplete.copy_all():
            dq = self.get_deque(batch.topic, batch.partition)
            aborted = False
            if dq is not None:
                with dq.lock:  # type: ignore[attr-defined]
                    undrained = (
                        (not batch.has_sequence())
                        if self._tm is not None
                        else (not batch.is_closed)
                    )
                    if undrained:
                        aborted = True
                        batch.abort_record_appends()
                        try:
                            dq.remove(batch)
                        except ValueError:
                            pass
            if aborted:
                batch.abort(error)
                self.deallocate(batch)
