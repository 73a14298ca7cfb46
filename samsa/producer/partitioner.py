"""Choosing a partition for a record, as Kafka's Java producer (4.x) does.

Placement rules (``KafkaProducer.partition`` in Java; :func:`partition_for_record` here):

1. an explicit partition on the record is used as is;
2. else a custom ``partitioner.class`` (a :class:`Partitioner`) decides;
3. else a record with a key (and ``partitioner.ignore.keys=false``) goes to
   ``to_positive(murmur2(key)) % partition_count`` over *all* partitions of the topic, the
   placement Java, kafka-python and aiokafka share (:func:`partition_for_key`);
4. else :data:`UNKNOWN_PARTITION` (-1) is returned and the RecordAccumulator picks the
   partition with the topic's :class:`BuiltInPartitioner` (KIP-794 uniform sticky with
   adaptive weighting) while it holds the partition's deque lock.

The partitioners need only a small view of the cluster, :class:`ClusterView`: the number of
partitions of a topic and the partitions whose leader is known ("available").  The producer's
implementation is :class:`samsa.net.cluster.ClusterView`.

:class:`BuiltInPartitioner` protocol with the accumulator (one instance per topic):
``sticky_info`` (a plain attribute read: the hot path) or ``peek_current_partition_info(cluster)``
before taking a deque lock, then under that lock ``partition_changed(info, last_batch_full,
cluster)`` (another thread switched, or a postponed switch is now due: retry) and, after
appending, ``update_partition_info(info, appended_bytes, cluster, enable_switch)`` (Java's
BuiltInPartitioner.peekCurrentPartitionInfo / isPartitionChanged / updatePartitionInfo and
RecordAccumulator.partitionChanged).  The Sender's
``ready()`` feeds ``update_partition_load_stats(queue_sizes, partition_ids, length)``.
"""

from __future__ import annotations

import bisect
import itertools
import random
import threading
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

__all__ = [
    "UNKNOWN_PARTITION",
    "BuiltInPartitioner",
    "ClusterView",
    "Partitioner",
    "RoundRobinPartitioner",
    "StickyPartitionInfo",
    "murmur2",
    "partition_for_key",
    "partition_for_record",
    "to_positive",
]

UNKNOWN_PARTITION = -1
"""Java's RecordMetadata.UNKNOWN_PARTITION: let the accumulator's sticky partitioner choose."""

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's ``Utils.murmur2``: MurmurHash2, seed 0x9747b28c, as a signed 32-bit int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    tail = length & ~3
    if tail:
        # One C-level call instead of 4 byte reads per group.
        for k in (
            memoryview(data)[:tail].cast("I")
            if _LITTLE_ENDIAN
            else _words_le(data, tail)
        ):
            k = (k * _M) & _MASK32
            k ^= k >> 24
            k = (k * _M) & _MASK32
            h = ((h * _M) & _MASK32) ^ k
    rest = length & 3
    if rest:
        if rest == 3:
            h ^= data[tail + 2] << 16
        if rest >= 2:
            h ^= data[tail + 1] << 8
        h ^= data[tail]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def _words_le(data: bytes | bytearray | memoryview, tail: int) -> list[int]:
    return [int.from_bytes(data[i : i + 4], "little") for i in range(0, tail, 4)]


_LITTLE_ENDIAN = memoryview(b"\x01\x00\x00\x00").cast("I")[0] == 1


def to_positive(number: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not abs()), so -2**31 maps to 0."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition Java's producer picks for a serialized key (over all partitions)."""
    return to_positive(murmur2(key)) % num_partitions


@runtime_checkable
class ClusterView(Protocol):
    """What the partitioners need to know about the cluster (the real Metadata implements it)."""

    def partition_count(self, topic: str) -> int | None:
        """Number of partitions of ``topic`` (leader known or not); None if the topic is unknown."""
        ...

    def available_partitions(self, topic: str) -> Sequence[int]:
        """Partition ids of ``topic`` whose leader is currently known."""
        ...


@runtime_checkable
class Partitioner(Protocol):
    """A custom ``partitioner.class``.  ``partition`` returns a partition id >= 0."""

    def partition(
        self,
        topic: str,
        key_bytes: bytes | None,
        value_bytes: bytes | None,
        cluster: ClusterView,
    ) -> int: ...

    def close(self) -> None: ...


def partition_for_record(
    topic: str,
    partition: int | None,
    key_bytes: bytes | None,
    value_bytes: bytes | None,
    cluster: ClusterView,
    partitioner: Partitioner | None = None,
    ignore_keys: bool = False,
) -> int:
    """The record's partition, or UNKNOWN_PARTITION when the accumulator's sticky logic decides.

    ``cluster`` must already know ``topic`` (the producer waits for its metadata first).
    """
    if partition is not None:
        return partition
    if partitioner is not None:
        chosen = partitioner.partition(topic, key_bytes, value_bytes, cluster)
        if chosen < 0:
            raise ValueError(
                f"partitioner {type(partitioner).__name__} returned partition {chosen} for topic "
                f"{topic!r}; a partitioner must return a partition id >= 0"
            )
        return chosen
    if key_bytes is not None and not ignore_keys:
        count = cluster.partition_count(topic)
        if not count:
            raise ValueError(
                f"no partition count known for topic {topic!r}; wait for its metadata first"
            )
        return to_positive(murmur2(key_bytes)) % count
    return UNKNOWN_PARTITION


class RoundRobinPartitioner:
    """Java's RoundRobinPartitioner: each record to the next available partition, keys ignored.

    A per-topic counter starting at 0 indexes the available partitions (all partitions when
    none is available).
    """

    def __init__(self) -> None:
        self._counters: dict[str, itertools.count[int]] = {}

    def partition(
        self,
        topic: str,
        key_bytes: bytes | None,
        value_bytes: bytes | None,
        cluster: ClusterView,
    ) -> int:
        counter = self._counters.get(topic)
        if counter is None:
            counter = self._counters.setdefault(topic, itertools.count())
        n = to_positive(next(counter))  # next() on itertools.count is atomic
        available = cluster.available_partitions(topic)
        if available:
            return available[n % len(available)]
        count = cluster.partition_count(topic)
        if not count:
            raise ValueError(f"no partition count known for topic {topic!r}")
        return n % count

    def close(self) -> None:
        self._counters.clear()


class StickyPartitionInfo:
    """The current sticky partition of a topic and the bytes produced to it since chosen."""

    __slots__ = ("partition", "produced_bytes")

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.produced_bytes = 0

    def __repr__(self) -> str:
        return f"StickyPartitionInfo(partition={self.partition}, produced_bytes={self.produced_bytes})"


class BuiltInPartitioner:
    """KIP-794 uniform sticky partitioner for one topic's keyless records.

    Records stick to one partition until at least ``sticky_batch_size`` (batch.size) bytes
    were appended to it *and* its last batch is full, or unconditionally at twice that, so
    batches are not cut into fractions at high linger.ms.  The next partition is random over
    the available partitions, or, once load stats exist, weighted towards partitions with
    shorter queues (cumulative frequency table of ``max_queue + 1 - queue_len``).
    """

    def __init__(self, topic: str, sticky_batch_size: int) -> None:
        if sticky_batch_size < 1:
            raise ValueError(f"sticky_batch_size must be >= 1, got {sticky_batch_size}")
        self.topic = topic
        self.sticky_batch_size = sticky_batch_size
        # (cumulative frequency table, partition ids, logical length) or None for uniform.
        self._load_stats: tuple[list[int], list[int], int] | None = None
        # The current sticky partition (Java's stickyPartitionInfo), None until the first peek.
        # Replaced, never mutated in place, so readers need no lock: the accumulator reads it
        # directly on the hot path and checks it again under the deque lock.
        self.sticky_info: StickyPartitionInfo | None = None
        self._create_lock = threading.Lock()

    def random_partition(self) -> int:
        """A uniform non-negative 31-bit random int (Java: toPositive(nextInt()))."""
        return random.getrandbits(31)

    def next_partition(self, cluster: ClusterView) -> int:
        rnd = self.random_partition()
        stats = self._load_stats
        if stats is None:
            available = cluster.available_partitions(self.topic)
            if available:
                return available[rnd % len(available)]
            count = cluster.partition_count(self.topic)
            if not count:
                raise ValueError(f"no partition count known for topic {self.topic!r}")
            return rnd % count
        table, ids, length = stats
        weighted = rnd % table[length - 1]
        # First entry strictly greater than `weighted`.
        return ids[bisect.bisect_right(table, weighted, 0, length)]

    def load_stats_range_end(self) -> int | None:
        """End of the weighted random range (None when uniform); for tests."""
        stats = self._load_stats
        return None if stats is None else stats[0][stats[2] - 1]

    def peek_current_partition_info(self, cluster: ClusterView) -> StickyPartitionInfo:
        """The current sticky partition, choosing one first if there is none yet."""
        info = self.sticky_info
        if info is not None:
            return info
        with self._create_lock:
            if self.sticky_info is None:
                self.sticky_info = StickyPartitionInfo(self.next_partition(cluster))
            return self.sticky_info

    def is_partition_changed(self, info: StickyPartitionInfo | None) -> bool:
        """True if another thread switched the partition since ``info`` was peeked.

        Call under the partition's deque lock.  ``info`` None means an explicit partition.
        """
        return info is not None and self.sticky_info is not info

    def partition_changed(
        self, info: StickyPartitionInfo, last_batch_full: bool, cluster: ClusterView
    ) -> bool:
        """Under the partition's deque lock: must the appender pick the partition again?

        True if another thread switched since ``info`` was peeked.  A switch postponed while
        the partition's last batch was not full happens here once it is (Java's
        RecordAccumulator.partitionChanged).
        """
        if self.sticky_info is not info:
            return True
        if last_batch_full:
            self.update_partition_info(info, 0, cluster, True)
            return self.sticky_info is not info
        return False

    def update_partition_info(
        self,
        info: StickyPartitionInfo | None,
        appended_bytes: int,
        cluster: ClusterView,
        enable_switch: bool = True,
    ) -> None:
        """Count ``appended_bytes`` and switch partition when enough was produced.

        Call under the partition's deque lock.  ``enable_switch`` is False while the
        partition's last batch is not full; the switch then waits (up to 2x batch size).
        """
        if info is None:
            return
        info.produced_bytes += appended_bytes
        produced = info.produced_bytes
        if (
            produced >= self.sticky_batch_size and enable_switch
        ) or produced >= 2 * self.sticky_batch_size:
            self.sticky_info = StickyPartitionInfo(self.next_partition(cluster))

    def update_partition_load_stats(
        self,
        queue_sizes: list[int] | None,
        partition_ids: list[int] | None,
        length: int,
    ) -> None:
        """Rebuild the weighted table from queue sizes (modified in place), as Java does.

        ``queue_sizes``/``partition_ids`` cover the partitions with a known leader, in the
        same order; ``length`` may be shorter when partitions were excluded for latency
        (partitioner.availability.timeout.ms).  None disables adaptive weighting.
        """
        if queue_sizes is None or partition_ids is None:
            self._load_stats = None
            return
        # One partition in the topic: nothing to weigh.  (Excluded partitions still count
        # through length < len(queue_sizes), which keeps the weighting on.)
        if length < 1 or len(queue_sizes) < 2:
            self._load_stats = None
            return
        max_plus_1 = queue_sizes[0]
        all_equal = True
        for i in range(1, length):
            size = queue_sizes[i]
            if size != max_plus_1:
                all_equal = False
            max_plus_1 = max(max_plus_1, size)
        max_plus_1 += 1
        if all_equal and length == len(queue_sizes):
            self._load_stats = None
            return
        # Invert (fewer queued batches -> larger weight) and accumulate into a running sum.
        queue_sizes[0] = max_plus_1 - queue_sizes[0]
        for i in range(1, length):
            queue_sizes[i] = max_plus_1 - queue_sizes[i] + queue_sizes[i - 1]
        self._load_stats = (queue_sizes, partition_ids, length)
